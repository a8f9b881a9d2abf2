"""What a sandbox's fence made of an error: the rule or the limit it hit, in words
(private; used by a confined child and by the process backend)."""

from __future__ import annotations

import collections.abc as c
import errno
import os
import typing as t

from nous_tools._util import _confine
from nous_tools.errors import SandboxLimitReached, SandboxViolation

if t.TYPE_CHECKING:
    from nous_tools.sandbox._policy import SandboxPolicy

__all__ = ["explain", "unavailable"]


def unavailable(policy: SandboxPolicy, missing: c.Sequence[str]) -> str:
    found = _confine.probe()
    reasons = "; ".join(f"{name}: {found.get(name)}" for name in missing)
    return (
        f"Sandbox ({policy.mode}) cannot be enforced on this host, so nothing was run: "
        f"missing {', '.join(missing)} ({reasons}); see `nous-tools sandbox probe`"
    )


def explain(policies: c.Sequence[SandboxPolicy], exc: BaseException) -> BaseException | None:
    """What a fence made of ``exc`` (raised by code behind ``policies``): a
    :class:`SandboxViolation` naming the rule, a :class:`SandboxLimitReached`
    naming the limit, or None when the fence had no part in it."""
    for policy in policies:
        found = _explain_one(policy, exc)
        if found is not None:
            return found
    return None


def _explain_one(policy: SandboxPolicy, exc: BaseException) -> BaseException | None:
    if isinstance(exc, MemoryError) and policy.memory_mb is not None:
        return SandboxLimitReached(f"memory limit {policy.memory_mb} MB reached", limit="memory_mb")
    if not isinstance(exc, OSError):
        return None
    code = exc.errno
    if code == errno.EFBIG and policy.max_file_mb is not None:
        return SandboxLimitReached(
            f"file size limit {policy.max_file_mb} MB reached", limit="max_file_mb"
        )
    if code == errno.EMFILE and policy.max_open_files is not None:
        return SandboxLimitReached(
            f"open files limit {policy.max_open_files} reached", limit="max_open_files"
        )
    if code == errno.EAGAIN and policy.max_processes is not None and exc.filename is None:
        return SandboxLimitReached(
            f"process limit {policy.max_processes} reached", limit="max_processes"
        )
    if code in (errno.EACCES, errno.EPERM) and exc.filename is not None:
        for name in (exc.filename, exc.filename2):
            if isinstance(name, str | os.PathLike):
                found = _path_rule(policy, os.fspath(name))
                if found is not None:
                    return SandboxViolation(found)
        return None
    if not policy.allows_network and (
        (code in (errno.EACCES, errno.EPERM, errno.ENETUNREACH) and exc.filename is None)
        or isinstance(exc, _gaierror())
    ):
        return SandboxViolation(
            f"network access refused: this sandbox ({policy.mode}) allows no connections, "
            "loopback included (network=False)"
        )
    return None


def _gaierror() -> type[BaseException]:
    import socket

    return socket.gaierror


def _path_rule(policy: SandboxPolicy, name: str) -> str | None:
    """The rule that refuses ``name``, in words, or None if the policy allows it."""
    if isinstance(name, bytes):
        return None
    write = policy.allows_write(name) or policy.mode == "danger_full_access"
    where = os.path.join(policy.workspace_root, name)  # (an absolute name stays itself)
    read = not policy.confine_reads or policy.allows_read(name)
    if not read:  # the system paths a fence also lets it read
        real = os.path.realpath(where)
        read = any(
            real == p or real.startswith(p.rstrip("/") + "/") for p in _confine.system_paths()
        )
    if not write and not read:
        return f"read or write outside the workspace refused: {where}"
    if not read:
        return f"read outside the workspace refused: {where}"
    if not write:
        if policy.mode == "read_only":
            return f"write refused (read_only allows no writes): {where}"
        return f"write outside the workspace refused: {where}"
    return None
