"""SandboxPolicy: which paths a tool may read and write.

A policy is a frozen value with a ``mode`` and a ``workspace_root``. Tools ask it
before they touch the file system: :meth:`SandboxPolicy.check_write` and
:meth:`SandboxPolicy.check_read` return the canonical path to use, or raise
:class:`~nous_tools.errors.SandboxViolation` (a ``PermissionError``).

The three modes follow the Codex-style names:

* ``"read_only"``: no writes anywhere;
* ``"workspace_write"``: writes only to the workspace root and below;
* ``"danger_full_access"``: writes anywhere.

Reads pass in every mode unless the policy has ``confine_reads=True``, which
confines them to the root as well. Relative paths are taken against the root,
and every path is canonicalised first (symlinks followed, ``..`` folded), so
neither ``sub/../../x`` nor a symlink pointing out of the root gets past it:

>>> import tempfile
>>> workspace = tempfile.TemporaryDirectory()
>>> policy = SandboxPolicy.new("workspace_write", workspace_root=workspace.name)
>>> target = policy.check_write("notes/todo.txt")  # need not exist yet
>>> target.relative_to(policy.workspace_root).as_posix()
'notes/todo.txt'
>>> policy.allows_write("notes/../../escape.txt")
False
>>> policy.check_write("/etc/passwd")  # doctest: +ELLIPSIS
Traceback (most recent call last):
    ...
nous_tools.errors.SandboxViolation: Sandbox (workspace_write) refuses to write '/etc/passwd'...
>>> policy.check_read("/etc/hosts").name  # reads are free unless confine_reads=True
'hosts'
>>> SandboxPolicy.new("read_only", workspace_root=workspace.name).allows_write("notes/todo.txt")
False
>>> workspace.cleanup()

Inside a tool, :meth:`SandboxPolicy.resolve` finds the policy that applies to a
:class:`~nous_tools.run_context.RunContext`: explicit arguments first, then
``ctx.sandbox``, then ``ctx.deps["workspace_root"]`` / ``ctx.deps["session_id"]``,
then the ``NOUS_TOOLS_SANDBOX_MODE`` environment variable and the current
directory. With no mode configured anywhere the mode is ``"danger_full_access"``
and the ``nous_tools`` logger warns once per process.

A check is a statement about the file system at the moment it runs. A process
that can change symlinks inside the root between the check and the write can
still race it; the policy guards against a tool's arguments, not against a
concurrent attacker on the same machine.
"""

from __future__ import annotations

import collections.abc as c
import errno
import os
import pathlib
import threading
import typing as t

import attrs

from nous_tools._util._log import log as _safe_log
from nous_tools.errors import SandboxViolation

if t.TYPE_CHECKING:
    from nous_tools.run_context import RunContext

__all__ = ["SandboxPolicy"]

_log = _safe_log

#: Anything :func:`os.fspath` turns into a ``str``.
StrPath: t.TypeAlias = "str | os.PathLike[str]"

_MODES: tuple[str, ...] = ("read_only", "workspace_write", "danger_full_access")
_ENV_VAR = "NOUS_TOOLS_SANDBOX_MODE"
_FALLBACK_MODE = "danger_full_access"
_KEYS = frozenset({"mode", "workspace_root", "session_id", "confine_reads"})

#: Set once the "no sandbox mode is configured" warning has been logged.
_warned_no_mode = False
_warn_lock = threading.Lock()


def _valid_modes() -> str:
    return ", ".join(repr(m) for m in _MODES)


def _check_mode(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if isinstance(value, str) and value in _MODES:
        return
    hint = ""
    if isinstance(value, str):
        guess = value.strip().lower().replace("-", "_")
        if guess in _MODES:
            hint = f" (did you mean {guess!r}?)"
    raise ValueError(f"Unknown sandbox mode {value!r}{hint}; valid modes are {_valid_modes()}")


def _fspath(value: object, what: str) -> str:
    """``os.fspath`` restricted to text paths, with a TypeError that says what was wrong."""
    if isinstance(value, str | os.PathLike):
        path = os.fspath(value)
        if isinstance(path, str):
            return path
    raise TypeError(f"{what} must be a str or os.PathLike[str], got {type(value).__name__}")


def _to_root(value: StrPath | None) -> pathlib.Path:
    """Converter for ``workspace_root``: absolute, symlinks resolved, never ``/``."""
    from_cwd = value is None
    raw = os.getcwd() if value is None else _fspath(value, "workspace_root")
    if "\x00" in raw:
        raise ValueError(f"workspace_root {raw!r} contains a NUL byte")
    resolved = os.path.realpath(raw)
    if os.path.dirname(resolved) == resolved:
        source = " (taken from the current directory)" if from_cwd else ""
        raise ValueError(
            f"workspace_root {raw!r}{source} resolves to the file-system root {resolved!r}; "
            "a workspace must be a directory below it (pass workspace_root explicitly)"
        )
    if os.path.exists(resolved) and not os.path.isdir(resolved):
        raise ValueError(f"workspace_root {raw!r} exists but is not a directory")
    return pathlib.Path(resolved)


def _warn_no_mode_once() -> None:
    global _warned_no_mode
    with _warn_lock:
        if _warned_no_mode:
            return
        _warned_no_mode = True
    _log.warning(
        "No sandbox mode is configured, so tools run with %r (writes allowed anywhere). "
        "Set the %s environment variable to one of %s, or pass sandbox=... to "
        "RunContext.new(). This warning is logged once per process.",
        _FALLBACK_MODE,
        _ENV_VAR,
        _valid_modes(),
    )


class _ContextLike(t.Protocol):
    """What :meth:`SandboxPolicy.resolve` reads of a context (a :class:`RunContext` fits)."""

    @property
    def sandbox(self) -> SandboxPolicy | None: ...

    @property
    def deps(self) -> t.Any: ...


@attrs.frozen(slots=True, repr=False)
class SandboxPolicy:
    """Which paths a tool may read and write. Frozen: use :func:`attrs.evolve` to change it.

    Build one with :meth:`new` (which also takes a mode string or a mapping), or
    directly: ``SandboxPolicy("workspace_write", "/srv/project")``. Bad options
    fail here, at construction, not when a tool first checks a path.
    """

    #: The valid modes, from most to least restrictive.
    MODES: t.ClassVar[tuple[str, ...]] = _MODES
    #: The environment variable :meth:`default_mode` reads.
    ENV_VAR: t.ClassVar[str] = _ENV_VAR

    #: One of :attr:`MODES`; anything else is a ``ValueError``.
    mode: str = attrs.field(validator=_check_mode)
    #: The workspace: absolute, symlinks resolved at construction. ``None`` means the
    #: current directory (at construction). The file-system root is refused.
    workspace_root: pathlib.Path = attrs.field(default=None, converter=_to_root)
    #: An opaque id of the agent session, for tools that keep per-session state.
    session_id: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )
    #: When True, :meth:`check_read` also confines reads to the workspace root.
    confine_reads: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))

    # -- construction ---------------------------------------------------------------

    @classmethod
    def new(
        cls,
        spec: SandboxPolicy | str | c.Mapping[str, t.Any] | None = None,
        /,
        **kw: t.Any,
    ) -> SandboxPolicy:
        """Coerce ``spec`` into a policy.

        ``spec`` may be a policy (returned as is), a mode string, a mapping with the
        keys ``mode``, ``workspace_root``, ``session_id`` and ``confine_reads``, or
        None. Keyword arguments take the same keys and override what ``spec`` says
        (on a policy they act like :func:`attrs.evolve`). A missing or None mode is
        :meth:`default_mode`. Unknown keys are a ``ValueError``; a ``spec`` of any
        other type is a ``TypeError``.
        """
        if isinstance(spec, SandboxPolicy):
            if not kw:
                return spec
            _check_keys(kw, "keyword argument")
            return attrs.evolve(spec, **kw)
        settings: dict[str, t.Any]
        if spec is None:
            settings = {}
        elif isinstance(spec, str):
            settings = {"mode": spec}
        elif isinstance(spec, c.Mapping):
            settings = dict(spec)
            _check_keys(settings, "key")
        else:
            raise TypeError(
                "A sandbox must be a SandboxPolicy, a mode string, a mapping or None, "
                f"got {type(spec).__name__}"
            )
        _check_keys(kw, "keyword argument")
        settings.update(kw)
        if settings.get("mode") is None:
            settings["mode"] = cls.default_mode()
        return cls(**settings)

    @staticmethod
    def default_mode() -> str:
        """The mode used when none is given: ``$NOUS_TOOLS_SANDBOX_MODE``, else
        ``"danger_full_access"``.

        The variable is read on every call; an empty value counts as unset, and
        an invalid one is a ``ValueError``. Falling back to ``"danger_full_access"``
        logs one warning per process on the ``nous_tools`` logger.
        """
        raw = os.environ.get(_ENV_VAR, "")
        value = raw.strip()
        if value:
            if value not in _MODES:
                raise ValueError(
                    f"Environment variable {_ENV_VAR}={raw!r} is not a sandbox mode; "
                    f"valid modes are {_valid_modes()}"
                )
            return value
        _warn_no_mode_once()
        return _FALLBACK_MODE

    @classmethod
    def resolve(
        cls,
        ctx: RunContext[t.Any] | _ContextLike | None = None,
        *,
        mode: str | None = None,
        workspace_root: StrPath | None = None,
        session_id: str | None = None,
    ) -> SandboxPolicy:
        """The policy that applies to a call made with ``ctx``.

        Each setting comes from the first place that has it:

        * mode: the argument, ``ctx.sandbox.mode``, :meth:`default_mode`;
        * root: the argument, ``ctx.sandbox.workspace_root``,
          ``ctx.deps["workspace_root"]`` (when deps is a mapping), the current
          directory;
        * session id: the argument, ``ctx.sandbox.session_id``,
          ``ctx.deps["session_id"]``, None.

        ``confine_reads`` comes from ``ctx.sandbox``. ``ctx`` may be None. With no
        arguments and a policy in ``ctx.sandbox``, that policy is returned as is.
        Note that a policy's root is always set, so once ``ctx.sandbox`` is a policy,
        ``deps["workspace_root"]`` is never consulted.
        """
        base = getattr(ctx, "sandbox", None)
        if base is not None and not isinstance(base, SandboxPolicy):
            base = cls.new(base)
        if base is not None and mode is None and workspace_root is None and session_id is None:
            return base
        deps = getattr(ctx, "deps", None)
        if not isinstance(deps, c.Mapping):
            deps = {}
        if mode is None:
            mode = base.mode if base is not None else cls.default_mode()
        if workspace_root is None:
            workspace_root = base.workspace_root if base is not None else deps.get("workspace_root")
        if session_id is None:
            session_id = base.session_id if base is not None else deps.get("session_id")
        return cls(
            mode=mode,
            workspace_root=workspace_root,
            session_id=session_id,
            confine_reads=base.confine_reads if base is not None else False,
        )

    # -- checks -----------------------------------------------------------------------

    def resolve_path(self, path: StrPath) -> pathlib.Path:
        """The canonical absolute form of ``path``, as the OS would reach it.

        A relative path is taken against :attr:`workspace_root`. Symlinks are
        followed and ``..`` folded with :func:`os.path.realpath` semantics, so the
        path need not exist (the existing part is resolved, the rest normalised).
        ``~`` is not expanded. A NUL byte or a symlink loop is a
        :class:`SandboxViolation`.
        """
        raw = _fspath(path, "A sandboxed path")
        if "\x00" in raw:
            raise SandboxViolation(
                f"Sandbox ({self.mode}) refuses path {raw!r}: it contains a NUL byte"
            )
        joined = os.path.join(self.workspace_root, raw)
        try:
            resolved = os.path.realpath(joined)
        except (OSError, ValueError) as exc:
            raise SandboxViolation(
                f"Sandbox ({self.mode}) cannot resolve path {raw!r}: {exc}"
            ) from exc
        # On a symlink loop os.path.realpath stops resolving: depending on the Python
        # version it returns the rest unresolved (".." and all) or folds the ".."
        # lexically, where the OS would fail with ELOOP. Ask the OS about the path as
        # given and about the result (``missing/../loop`` reaches the loop only once
        # folded), so a loop is refused the same way everywhere.
        looped = os.path.normpath(resolved) != resolved or _loops(joined) or _loops(resolved)
        if looped:
            raise SandboxViolation(
                f"Sandbox ({self.mode}) refuses path {raw!r}: it runs into a symlink loop"
            )
        return pathlib.Path(resolved)

    def check_write(self, path: StrPath) -> pathlib.Path:
        """Return the canonical path if this policy allows writing it, else raise
        :class:`SandboxViolation` naming the path and the mode.

        ``read_only`` allows no writes; ``workspace_write`` allows the root and
        anything under it; ``danger_full_access`` allows any path.
        """
        resolved = self.resolve_path(path)
        if self.mode == "read_only":
            raise SandboxViolation(
                f"Sandbox ({self.mode}) refuses to write {_describe(path, resolved)}: "
                "this mode allows no writes"
            )
        if self.mode == "workspace_write" and not self._contains(resolved):
            raise SandboxViolation(
                f"Sandbox ({self.mode}) refuses to write {_describe(path, resolved)}: "
                f"it is outside the workspace root '{self.workspace_root}'"
            )
        return resolved

    def check_read(self, path: StrPath) -> pathlib.Path:
        """Return the canonical path if this policy allows reading it, else raise
        :class:`SandboxViolation`.

        Reads pass in every mode, unless ``confine_reads`` is set: then only the
        root and what is under it may be read.
        """
        resolved = self.resolve_path(path)
        if self.confine_reads and not self._contains(resolved):
            raise SandboxViolation(
                f"Sandbox ({self.mode}, confine_reads) refuses to read "
                f"{_describe(path, resolved)}: it is outside the workspace root "
                f"'{self.workspace_root}'"
            )
        return resolved

    def allows_write(self, path: object) -> bool:
        """True if :meth:`check_write` would pass for ``path``; False for anything
        else, including a value that is not a text path (bytes, None, a number)."""
        try:
            self.check_write(t.cast(StrPath, path))
        except (SandboxViolation, TypeError):
            return False
        return True

    def allows_read(self, path: object) -> bool:
        """True if :meth:`check_read` would pass for ``path``; False for anything
        else, including a value that is not a text path (bytes, None, a number)."""
        try:
            self.check_read(t.cast(StrPath, path))
        except (SandboxViolation, TypeError):
            return False
        return True

    def _contains(self, resolved: pathlib.Path) -> bool:
        # Component-wise, on canonical paths: "/work/rootX" is not under "/work/root".
        return resolved.is_relative_to(self.workspace_root)

    def __repr__(self) -> str:
        parts = [f"mode={self.mode!r}", f"workspace_root={str(self.workspace_root)!r}"]
        if self.session_id is not None:
            parts.append(f"session_id={self.session_id!r}")
        if self.confine_reads:
            parts.append("confine_reads=True")
        return f"{type(self).__name__}({', '.join(parts)})"


def _check_keys(settings: c.Mapping[t.Any, t.Any], what: str) -> None:
    unknown = set(settings) - _KEYS
    if unknown:
        names = ", ".join(sorted(repr(k) for k in unknown))
        raise ValueError(
            f"Unknown sandbox {what}(s) {names}; valid keys are "
            f"{', '.join(repr(k) for k in sorted(_KEYS))}"
        )


def _loops(path: str) -> bool:
    """True if the OS cannot reach ``path`` because of a symlink loop."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _describe(path: StrPath, resolved: pathlib.Path) -> str:
    given = os.fspath(path)
    if given == str(resolved):
        return repr(given)
    return f"{given!r} (resolves to '{resolved}')"
