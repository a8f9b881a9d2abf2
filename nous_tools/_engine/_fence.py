"""A process-pool child behind the sandbox's fence, and its own deadline (private).

What :mod:`nous_tools._engine._process_child` does besides serving calls:

* :func:`die_with_parent`: the kernel kills the child when its parent ends
  (``PR_SET_PDEATHSIG``, checked again after it is set);
* :class:`Watchdog`: a timer of the child's own that kills the child's whole
  process group (the child, and what its tool started) when the call it runs
  passes its deadline by :data:`GRACE` seconds. The parent kills at the
  deadline itself; the watchdog is for a parent that cannot (stopped, hung);
* :func:`enter`: the fence of a :class:`Confinement` (the policies a pool's
  children are confined to, made in the parent), entered before any tool code
  runs, with what turns the kernel's refusals into errors that name the rule.

A :class:`Confinement` is made in the parent (:func:`confinement`) and handed
to each child of the pool it belongs to: one pool a set of policies, so a
confined child only ever serves calls under the policies it was confined to.
"""

from __future__ import annotations

import contextlib
import os
import signal
import typing as t

from nous_tools._util._clock import monotonic
from nous_tools._util._scope import Scope, here

if t.TYPE_CHECKING:
    from nous_tools._util._confine import Fence
    from nous_tools.sandbox import SandboxPolicy

__all__ = ["GRACE", "Confinement", "Watchdog", "confinement", "die_with_parent", "enter"]

#: Seconds past a call's deadline after which the child kills its own group.
GRACE = 0.5
_setitimer: t.Callable[[int, float], object] | None = getattr(signal, "setitimer", None)
_REAL: int = getattr(signal, "ITIMER_REAL", 0)


def die_with_parent() -> None:
    """Have the kernel kill this process when its parent ends (Linux).

    A forkserver child's parent is the forkserver, which ends when the process
    that started it does, once nothing else holds the pipe it watches for that:
    each child inherits that pipe's write end, so it is closed here first (a
    forkserver the tool itself wants is started anew)."""
    import sys

    forkserver = sys.modules.get("multiprocessing.forkserver")
    server = getattr(forkserver, "_forkserver", None)
    alive = getattr(server, "_forkserver_alive_fd", None)
    if isinstance(alive, int):
        with contextlib.suppress(OSError):
            os.close(alive)
        for name in ("_forkserver_alive_fd", "_forkserver_address", "_forkserver_pid"):
            with contextlib.suppress(AttributeError):
                setattr(server, name, None)
    if not sys.platform.startswith("linux"):
        return
    from nous_tools._util import _confine

    parent = os.getppid()
    if parent == 1:  # already orphaned
        os._exit(1)
    _confine.set_parent_death_signal(parent)


def _kill_own_group() -> None:
    with contextlib.suppress(OSError):
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


class Watchdog:
    """Kills this process's group when the armed call passes its deadline by
    :data:`GRACE` seconds: a ``SIGALRM`` timer (``setitimer``), whose handler runs
    in the main thread at the next bytecode or interrupted system call. The
    parent kills at the deadline itself; this is for a parent that cannot. A tool
    that sets its own ``SIGALRM`` handler replaces it."""

    def __init__(self) -> None:
        self._on = False
        try:
            signal.signal(signal.SIGALRM, _on_alarm)
            self._on = _setitimer is not None
        except (ValueError, OSError, AttributeError):  # not the main thread, no SIGALRM
            pass

    def arm(self, deadline: float | None) -> None:
        """Watch a call ending at ``deadline`` (monotonic; None or NaN: none)."""
        if deadline is None or deadline != deadline:  # None or NaN: no deadline
            here.scope = None
            if _setitimer is not None and self._on:
                _setitimer(_REAL, 0.0)
            return
        # What the call's tool starts through its sandbox ends with it too.
        here.scope = Scope(deadline)
        if _setitimer is not None and self._on:
            _setitimer(_REAL, max(0.001, deadline + GRACE - monotonic()))


def _on_alarm(signum: int, frame: object) -> None:
    _kill_own_group()


class Confinement:
    """The fence a pool's children enter: the ``policies`` (stacked), as the kernel
    holds them (``fences``), the private temp directory they may write, and what the
    parent's probe found (``probed``: a child need not probe again for the programs
    its tools start). A plain class, not attrs: this module is imported with the
    package."""

    __slots__ = ("fences", "policies", "probed", "temp_dir")

    def __init__(
        self,
        policies: tuple[SandboxPolicy, ...],
        fences: tuple[Fence, ...],
        temp_dir: str | None,
        probed: dict[str, str | None] | None = None,
    ) -> None:
        self.policies = policies
        self.fences = fences
        self.temp_dir = temp_dir
        self.probed = probed

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (Confinement, (self.policies, self.fences, self.temp_dir, self.probed))

    def remove(self) -> None:
        """Remove the temp directory (when the pool has ended)."""
        if self.temp_dir is not None:
            import shutil

            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def release(self, pid: int) -> None:
        """What a child that ended (``pid``) leaves behind: its pids cgroup."""
        if any(f.max_processes is not None for f in self.fences):
            from nous_tools._util import _confine

            path = _confine.worker_group_path(pid)
            if path is not None:
                _confine.remove_pids_group(path)


def confinement(policies: tuple[SandboxPolicy, ...]) -> Confinement:
    """A :class:`Confinement` for ``policies``, with a temp directory made for it
    when one of them lets the process write its workspace."""
    temp_dir = None
    if any(p.mode == "workspace_write" for p in policies):
        import tempfile

        temp_dir = tempfile.mkdtemp(prefix="nous-tools-sandbox-")
    from nous_tools._util import _confine

    fences = tuple(p._fence(temp_dir) for p in policies)
    return Confinement(policies, fences, temp_dir, _confine._probed)


class Fenced:
    """A child behind its fence: :meth:`begin` before each call."""

    def __init__(self, confinement: Confinement) -> None:
        self.cpu = min((f.cpu_seconds for f in confinement.fences if f.cpu_seconds), default=None)

    def begin(self) -> None:
        """A call's own CPU budget: the limit counts from what the child used so far."""
        if self.cpu is None:
            return
        import resource

        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = used.ru_utime + used.ru_stime
        soft = int(spent) + 1 + self.cpu
        with contextlib.suppress(ValueError, OSError):  # cannot raise: one call a child
            resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 2))


def enter(confinement: Confinement) -> Fenced:
    """Put this child behind ``confinement``'s fence, for good; the kernel's
    refusals of what its tools do become errors that name the rule."""
    from nous_tools._engine import _isolation
    from nous_tools._util import _confine
    from nous_tools.errors import SandboxLimitReached
    from nous_tools.sandbox._refusals import explain

    if confinement.temp_dir is not None:
        import tempfile

        os.environ["TMPDIR"] = confinement.temp_dir
        tempfile.tempdir = None
    with contextlib.suppress(OSError, ValueError):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead
    fenced = Fenced(confinement)
    if fenced.cpu is not None:
        cpu = fenced.cpu

        def over_cpu(signum: int, frame: object) -> None:
            raise SandboxLimitReached(f"cpu limit {cpu} s reached", limit="cpu_seconds")

        signal.signal(signal.SIGXCPU, over_cpu)
    if confinement.probed is not None and _confine._probed is None:
        _confine._probed = dict(confinement.probed)
    _confine.enter(confinement.fences)
    policies = confinement.policies
    _isolation.explain = lambda exc: explain(policies, exc)
    return fenced
