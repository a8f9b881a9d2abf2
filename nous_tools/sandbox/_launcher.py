"""Launchers: a thread behind one policy's fence that starts its programs (private).

``subprocess.Popen`` with a ``preexec_fn`` must ``fork`` the whole parent (no
``vfork``), and runs Python in the copy: about 2 ms for a program like ``true``,
where a plain ``subprocess.run`` takes under 1 ms. Where the process may make
namespaces itself (root, ``CAP_SYS_ADMIN``), a policy without resource limits
is kept another way, with nothing to run in the child:

* a **thread** of this process enters the fence for good: a network namespace
  of its own (``unshare(CLONE_NEWNET)`` is per thread), Landlock (per thread),
  and ``unshare(CLONE_NEWPID)``, so that what it starts lands in a new PID
  namespace;
* the first process it starts there is that namespace's **init** (PID 1), a
  small reaper that the kernel kills when the thread ends
  (``PR_SET_PDEATHSIG``), and with it every process in the namespace: the
  programs die with this process without a parent-death signal of their own;
* every program is then started by that thread with a plain ``Popen`` (``vfork``):
  it inherits the thread's fence and namespaces.

A program so started sees its own PID namespace (``os.getpid()`` inside is not
the ``Popen.pid`` outside; ``/proc`` is still the host's). A launcher lives as
long as the process; at most :data:`MOST` are kept, and one whose programs all
ended makes room for a new one.
"""

from __future__ import annotations

import atexit
import functools
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import typing as t
import weakref

from nous_tools._util import _confine
from nous_tools.sandbox._policy import _LIMITS

if t.TYPE_CHECKING:
    from nous_tools.sandbox._policy import SandboxPolicy

__all__ = ["Launcher", "launcher", "usable"]

#: The most launchers (policies) kept at once.
MOST = 8
_CLONE_NEWPID = 0x20000000

# The init of a launcher's PID namespace: reap orphans until killed.
_INIT = (
    "import os, signal\n"
    "signal.signal(signal.SIGCHLD, lambda *a: None)\n"
    "while True:\n"
    "    try:\n"
    "        os.waitpid(-1, 0)\n"
    "    except ChildProcessError:\n"
    "        signal.pause()\n"
)


class _Request:
    __slots__ = ("args", "done", "error", "kwargs", "process")

    def __init__(self, args: t.Any, kwargs: dict[str, t.Any]) -> None:
        self.args = args
        self.kwargs = kwargs
        self.done = threading.Event()
        self.process: subprocess.Popen[t.Any] | None = None
        self.error: BaseException | None = None


class Launcher:
    """One policy's thread (see the module's doc). Raises ``OSError`` at
    construction when the fence cannot be entered this way."""

    def __init__(self, policy: SandboxPolicy) -> None:
        self.temp_dir = (
            tempfile.mkdtemp(prefix="nous-tools-sandbox-")
            if policy.mode == "workspace_write"
            else None
        )
        self._fence = policy._fence(self.temp_dir) if policy.enforced else None
        self._requests: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._programs: weakref.WeakSet[subprocess.Popen[t.Any]] = weakref.WeakSet()
        self.broken = False
        started = _Request(None, {})
        self._thread = threading.Thread(
            target=self._serve, args=(started,), name="nous-tools-sandbox-launcher", daemon=True
        )
        self._thread.start()
        started.done.wait()
        if started.error is not None:
            self.remove()
            raise started.error

    def launch(self, args: t.Any, kwargs: dict[str, t.Any]) -> subprocess.Popen[t.Any]:
        """``Popen(args, start_new_session=True, **kwargs)`` from behind the fence."""
        request = _Request(args, kwargs)
        self._requests.put(request)
        request.done.wait()
        if request.error is not None:
            raise request.error
        process = t.cast("subprocess.Popen[t.Any]", request.process)
        self._programs.add(process)
        return process

    def idle(self) -> bool:
        """Whether none of its programs runs (it may then end)."""
        return all(p.poll() is not None for p in list(self._programs))

    def end(self) -> None:
        """End the thread: its namespace's init dies, and whatever is left in it."""
        self._requests.put(None)

    def remove(self) -> None:
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def _serve(self, started: _Request) -> None:
        try:
            self._enter()
        except BaseException as exc:
            started.error = exc
            started.done.set()
            return
        started.done.set()
        while True:
            request = self._requests.get()
            if request is None:
                return
            try:
                request.process = subprocess.Popen(
                    request.args, start_new_session=True, **request.kwargs
                )
            except BaseException as exc:
                if isinstance(exc, OSError) and exc.errno == 12:  # ENOMEM: the PID ns is dead
                    self.broken = True
                request.error = exc
            request.done.set()

    def _enter(self) -> None:
        """In the thread: its namespaces, Landlock, then the init (inside the fence:
        Landlock's signal scope would refuse it the parent-death signal from
        a thread behind the fence if it were outside)."""
        fence = self._fence
        ruleset = None
        if fence is not None and (
            fence.writable is not None or fence.readable is not None or not fence.network
        ):
            # Made first: loading Landlock's library may start a helper process,
            # which must not become the new PID namespace's init.
            ruleset = _confine._ruleset(fence, network=not fence.network)
        try:
            if fence is not None and not fence.network:
                _confine._new_network_namespace()  # this thread's (root: usable() says)
            _confine._check(_confine._libc().unshare(_CLONE_NEWPID), "unshare(CLONE_NEWPID)")
            if ruleset is not None:
                ruleset.restrict()
        finally:
            if ruleset is not None:
                ruleset.close()

        self._init = subprocess.Popen(
            [sys.executable, "-S", "-c", _INIT],
            # Dies when this thread ends (alive now: it waits in Popen); from inside
            # its namespace it sees its parent as pid 0: nothing to check.
            preexec_fn=functools.partial(_confine.set_parent_death_signal, None),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )


_lock = threading.Lock()
_launchers: dict[SandboxPolicy, Launcher] = {}
_refused: set[SandboxPolicy] = set()


def usable(policy: SandboxPolicy) -> bool:
    """Whether ``policy``'s programs may start from a launcher: Linux, namespaces
    allowed (root), and no resource limit (those need code in the child)."""
    return (
        sys.platform.startswith("linux")
        and os.geteuid() == 0
        and all(getattr(policy, name) is None for name in _LIMITS)
        and policy not in _refused
    )


def launcher(policy: SandboxPolicy) -> Launcher | None:
    """The launcher of ``policy``, made on first use; None when it cannot be made
    (the caller then starts the program the slow way)."""
    with _lock:
        found = _launchers.get(policy)
        if found is not None and not found.broken:
            return found
    try:
        made = Launcher(policy)
    except OSError:
        with _lock:
            _refused.add(policy)
        return None
    ended: list[Launcher] = []
    with _lock:
        old = _launchers.get(policy)
        if old is not None and not old.broken:
            ended.append(made)
            made = old
        else:
            if old is not None:
                ended.append(old)
            _launchers[policy] = made
            for key, other in list(_launchers.items()):
                if len(_launchers) <= MOST:
                    break
                if other is not made and other.idle():
                    del _launchers[key]
                    ended.append(other)
    for other in ended:
        other.end()
    return made


def _forget() -> None:
    """In a forked copy of this process: the launchers' threads are not there."""
    global _lock
    _lock = threading.Lock()
    _launchers.clear()


def _end_all() -> None:
    with _lock:
        every = list(_launchers.values())
        _launchers.clear()
    for each in every:
        each.end()
        each.remove()


atexit.register(_end_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
