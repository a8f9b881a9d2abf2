"""SandboxPolicy: the value, its checks, and programs run behind its fence (private;
the public face is :mod:`nous_tools.sandbox`)."""

from __future__ import annotations

import collections.abc as c
import contextlib
import errno
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import threading
import typing as t

import attrs

from nous_tools._util import _confine
from nous_tools._util._log import log as _safe_log
from nous_tools._util._scope import here
from nous_tools.errors import SandboxUnavailable, SandboxViolation

__all__ = ["SandboxPolicy"]


_log = _safe_log

#: Anything :func:`os.fspath` turns into a ``str``.
StrPath: t.TypeAlias = "str | os.PathLike[str]"

_MODES: tuple[str, ...] = ("read_only", "workspace_write", "danger_full_access")
_ENV_VAR = "NOUS_TOOLS_SANDBOX_MODE"
_FALLBACK_MODE = "danger_full_access"
_LIMITS: tuple[str, ...] = (
    "memory_mb",
    "cpu_seconds",
    "max_processes",
    "max_file_mb",
    "max_open_files",
)
_KEYS = frozenset({"mode", "workspace_root", "session_id", "confine_reads", "network", *_LIMITS})

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


def _check_limit(instance: object, attribute: attrs.Attribute[int | None], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"Sandbox option {attribute.name!r} must be an int >= 1 or None (no limit), "
            f"got {value!r}"
        )


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
    #: When True, :meth:`check_read` also confines reads to the workspace root; a
    #: fenced process may read only the root, the Python installation and the
    #: system libraries.
    confine_reads: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    #: Whether a fenced process keeps the host network. None (the default) is the
    #: mode's: False in ``read_only`` and ``workspace_write`` (no connection in or
    #: out, loopback included), True in ``danger_full_access``. See :attr:`allows_network`.
    network: bool | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(bool))
    )
    #: The most memory a fenced process may allocate, in MB (None: no limit).
    memory_mb: int | None = attrs.field(default=None, validator=_check_limit)
    #: The CPU time one call may use, in seconds (None: no limit).
    cpu_seconds: int | None = attrs.field(default=None, validator=_check_limit)
    #: The most processes a fenced call may run at once, itself included (None: no limit).
    max_processes: int | None = attrs.field(default=None, validator=_check_limit)
    #: The largest file a fenced process may write, in MB (None: no limit).
    max_file_mb: int | None = attrs.field(default=None, validator=_check_limit)
    #: The most files a fenced process may hold open at once (None: no limit).
    max_open_files: int | None = attrs.field(default=None, validator=_check_limit)

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
        ctx: _ContextLike | None = None,
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

        ``confine_reads``, ``network`` and the limits come from ``ctx.sandbox``. ``ctx`` may be None. With no
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
        if base is not None:  # the rest (confine_reads, network, limits) as the context's
            return attrs.evolve(
                base, mode=mode, workspace_root=workspace_root, session_id=session_id
            )
        return cls(mode=mode, workspace_root=workspace_root, session_id=session_id)

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
        # Canonical means resolving again changes nothing. After a loop that the OS
        # never reached (``missing/../loop/../link``), realpath leaves the rest
        # unresolved: a link there would still point elsewhere.
        if os.path.realpath(resolved) != resolved:
            raise SandboxViolation(
                f"Sandbox ({self.mode}) refuses path {raw!r}: it does not resolve to one "
                "place (a symlink loop on the way, or a link that changed meanwhile)"
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

    # -- enforcement ---------------------------------------------------------------

    @property
    def allows_network(self) -> bool:
        """Whether a fenced process keeps the host network: :attr:`network`, or the
        mode's default when it is None (True only in ``danger_full_access``)."""
        if self.network is None:
            return self.mode == "danger_full_access"
        return self.network

    @property
    def enforced(self) -> bool:
        """Whether a process under this policy needs the kernel's fence: any mode
        but ``danger_full_access``, or reads, network or a limit confined in it.
        A ``danger_full_access`` policy that sets none of those runs unconfined."""
        return (
            self.mode != "danger_full_access"
            or self.confine_reads
            or not self.allows_network
            or any(getattr(self, name) is not None for name in _LIMITS)
        )

    def _fence(self, temp_dir: str | None = None) -> _confine.Fence:
        """This policy as the kernel holds it; ``temp_dir`` is the private temp
        directory a ``workspace_write`` process may also write."""
        root = str(self.workspace_root)
        writable: tuple[str, ...] | None
        if self.mode == "read_only":
            writable = ()
        elif self.mode == "workspace_write":
            writable = (root,) if temp_dir is None else (root, temp_dir)
        else:
            writable = None
        readable = None
        if self.confine_reads:
            readable = (root, *((temp_dir,) if temp_dir else ()), *_confine.system_paths())
        return _confine.Fence(
            writable=writable,
            readable=readable,
            network=self.allows_network,
            memory_mb=self.memory_mb,
            cpu_seconds=self.cpu_seconds,
            max_processes=self.max_processes,
            max_file_mb=self.max_file_mb,
            max_open_files=self.max_open_files,
        )

    def missing(self) -> tuple[str, ...]:
        """The mechanisms this policy needs that :func:`probe` could not prove on
        this host (empty: it can be enforced here)."""
        if not self.enforced:
            return ()
        needs = []
        if self.mode != "danger_full_access" or self.confine_reads:
            needs.append("landlock")
        if not self.allows_network:
            needs.append("netns")
        if any(getattr(self, n) is not None for n in _LIMITS if n != "max_processes"):
            needs.append("rlimits")
        if self.max_processes is not None:
            needs.append("pids")
        found = _confine.probe()
        return tuple(name for name in needs if found.get(name) is not None)

    def run(
        self,
        args: t.Any,
        *,
        input: t.Any = None,
        capture_output: bool = False,
        timeout: float | None = None,
        check: bool = False,
        **kwargs: t.Any,
    ) -> subprocess.CompletedProcess[t.Any]:
        """:func:`subprocess.run` behind this policy's fence, with its limits.

        The program (and what it starts) is confined by the kernel before it runs:
        writes, reads and the network as the policy says, the resource limits
        set, and killed when the process that started it dies. It is killed, with
        its process group, at ``timeout`` or at the deadline of the tool call it
        runs in, whichever comes first (then :class:`subprocess.TimeoutExpired`).
        A fence this host cannot prove raises :class:`SandboxUnavailable`, and the
        program never starts. The other arguments are :func:`subprocess.run`'s; a
        ``workspace_write`` program starts in the workspace unless ``cwd`` says
        otherwise, with ``TMPDIR`` a private temp directory (the policy's, or one
        removed after the program).
        """
        if input is not None:
            kwargs["stdin"] = subprocess.PIPE
        if capture_output:
            kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
        process, cleanup = self._start(args, kwargs)
        try:
            with process:
                try:
                    out, err = process.communicate(input, timeout=_until_deadline(timeout))
                except subprocess.TimeoutExpired as exc:
                    _kill_group(process)
                    exc.output, exc.stderr = process.communicate()
                    raise
                except BaseException:
                    _kill_group(process)
                    raise
                code = process.wait()
        finally:
            cleanup()
        if check and code:
            raise subprocess.CalledProcessError(code, process.args, out, err)
        return subprocess.CompletedProcess(process.args, code, out, err)

    def popen(self, args: t.Any, **kwargs: t.Any) -> subprocess.Popen[t.Any]:
        """:class:`subprocess.Popen` behind this policy's fence (see :meth:`run`).

        The program leads a new session (its process group is what :meth:`run`
        kills at a deadline) and dies when the *thread* that started it ends (the
        kernel's parent-death signal): start it from the thread that waits for it.
        The fence's leftovers (its temp directory) go when the program ends.
        """
        process, cleanup = self._start(args, kwargs)
        if cleanup is not _nothing:  # something to remove once the program has ended
            threading.Thread(
                target=_after_exit, args=(process, cleanup), daemon=True, name="nous-tools-sandbox"
            ).start()
        return process

    def _start(
        self, args: t.Any, kwargs: dict[str, t.Any]
    ) -> tuple[subprocess.Popen[t.Any], c.Callable[[], None]]:
        for taken in ("preexec_fn", "start_new_session", "process_group"):
            if taken in kwargs:
                raise TypeError(f"SandboxPolicy sets {taken} itself; do not pass it")
        missing = self.missing()
        if missing:
            from nous_tools.sandbox._refusals import unavailable

            raise SandboxUnavailable(unavailable(self, missing), missing=missing)
        from nous_tools.sandbox import _launcher

        found = _launcher.launcher(self) if _launcher.usable(self) else None
        if found is not None:  # no code to run in the child: a plain, quick start
            self._in_workspace(kwargs, found.temp_dir)
            return found.launch(args, kwargs), _nothing
        if not self.enforced:
            process = subprocess.Popen(
                args, preexec_fn=_die_with(os.getpid()), start_new_session=True, **kwargs
            )
            return process, _nothing
        temp_dir = None
        if self.mode == "workspace_write":
            temp_dir = tempfile.mkdtemp(prefix="nous-tools-sandbox-")
        self._in_workspace(kwargs, temp_dir)

        def cleanup() -> None:
            prepared.close()
            if temp_dir is not None:
                shutil.rmtree(temp_dir, ignore_errors=True)

        prepared = _confine.for_subprocess([self._fence(temp_dir)])
        try:
            process = subprocess.Popen(
                args, preexec_fn=prepared.preexec, start_new_session=True, **kwargs
            )
        except BaseException:
            cleanup()
            raise
        for ruleset in prepared.rulesets:  # the child has its own copy now
            ruleset.close()
        prepared.rulesets = []
        return process, cleanup

    def _in_workspace(self, kwargs: dict[str, t.Any], temp_dir: str | None) -> None:
        """A ``workspace_write`` program starts in the workspace (unless ``cwd`` says
        otherwise), with ``TMPDIR`` its private temp directory."""
        if self.mode != "workspace_write":
            return
        if temp_dir is not None:
            env = dict(os.environ if kwargs.get("env") is None else kwargs["env"])
            env["TMPDIR"] = temp_dir
            kwargs["env"] = env
        if kwargs.get("cwd") is None:
            kwargs["cwd"] = self.workspace_root

    def _contains(self, resolved: pathlib.Path) -> bool:
        # Component-wise, on canonical paths: "/work/rootX" is not under "/work/root".
        return resolved.is_relative_to(self.workspace_root)

    def __repr__(self) -> str:
        parts = [f"mode={self.mode!r}", f"workspace_root={str(self.workspace_root)!r}"]
        if self.session_id is not None:
            parts.append(f"session_id={self.session_id!r}")
        if self.confine_reads:
            parts.append("confine_reads=True")
        if self.network is not None:
            parts.append(f"network={self.network!r}")
        parts.extend(f"{n}={getattr(self, n)!r}" for n in _LIMITS if getattr(self, n) is not None)
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


# -- enforcement's helpers -----------------------------------------------------------------


def _nothing() -> None:
    pass


def _die_with(parent: int) -> c.Callable[[], None]:
    def preexec() -> None:
        _confine.set_parent_death_signal(parent)

    return preexec


def _after_exit(process: subprocess.Popen[t.Any], cleanup: c.Callable[[], None]) -> None:
    try:
        process.wait()
    finally:
        cleanup()


def _until_deadline(timeout: float | None) -> float | None:
    """``timeout``, or less: what is left of the deadline of the call this thread runs."""
    scope = here.scope
    deadline = scope.deadline if scope is not None else None
    if deadline is None:
        return timeout
    from nous_tools._util._clock import monotonic

    left = max(0.0, deadline - monotonic())
    return left if timeout is None else min(timeout, left)


def _kill_group(process: subprocess.Popen[t.Any]) -> None:
    """Kill the program's process group (it leads it), or the program alone."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        with contextlib.suppress(OSError):
            process.kill()
