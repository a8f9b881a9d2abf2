"""Warm children: confined interpreters started ahead, waiting for a program (private).

A program runs in a child of its own (``python -I -S -c`` the runner of
:mod:`nous_tools.program._child`), started behind its policy's fence with
:meth:`SandboxPolicy.popen <nous_tools.sandbox.SandboxPolicy.popen>`. Starting
one costs tens of milliseconds (an interpreter, the runner's imports), so each
policy keeps :data:`WARM` children started and idle: a program takes one and its
start costs a pipe write. A child runs one program and is killed after it; a
fresh one is started in its place, in the background.

The kernel kills a child when the *thread* that started it ends (its
parent-death signal), so every child of a policy is started by that policy's
own long-lived thread, never by the caller's.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import pathlib
import queue
import signal
import subprocess
import sys
import threading
import typing as t

if t.TYPE_CHECKING:
    from nous_tools.sandbox import SandboxPolicy

__all__ = ["WARM", "kill", "take"]

#: How many started, idle children each policy keeps.
WARM = 2
#: The most policies whose children are kept warm at once (the oldest goes first).
MOST_POLICIES = 8

_RUNNER = (pathlib.Path(__file__).with_name("_child.py")).read_text(encoding="utf-8")


def _start(policy: SandboxPolicy) -> subprocess.Popen[bytes]:
    return policy.popen(
        [sys.executable, "-I", "-S", "-c", _RUNNER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        cwd=str(policy.workspace_root) if policy.workspace_root.is_dir() else None,
    )


class _Request:
    __slots__ = ("done", "error", "process")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.process: subprocess.Popen[bytes] | None = None
        self.error: BaseException | None = None


class _Warm:
    """One policy's idle children and the thread that starts them."""

    def __init__(self, policy: SandboxPolicy, size: int) -> None:
        self.policy = policy
        self.size = size
        self.idle: collections.deque[subprocess.Popen[bytes]] = collections.deque()
        self.lock = threading.Lock()
        self.requests: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self.thread = threading.Thread(
            target=self._serve, name="nous-tools-program-children", daemon=True
        )
        self.thread.start()

    def take(self) -> subprocess.Popen[bytes]:
        """An idle child (its start already paid), else one started now."""
        with self.lock:
            while self.idle:
                process = self.idle.popleft()
                if process.poll() is None:
                    self.requests.put(_REFILL)
                    return process
                _reap(process)
        request = _Request()
        self.requests.put(request)
        request.done.wait()
        self.requests.put(_REFILL)
        if request.error is not None:
            raise request.error
        return t.cast("subprocess.Popen[bytes]", request.process)

    def end(self) -> None:
        self.requests.put(None)

    def _serve(self) -> None:
        while True:
            request = self.requests.get()
            if request is None:
                with self.lock:
                    leftovers, self.idle = list(self.idle), collections.deque()
                for process in leftovers:
                    kill(process)
                return
            if request is _REFILL:
                self._refill()
                continue
            try:
                request.process = _start(self.policy)
            except BaseException as exc:
                request.error = exc
            request.done.set()

    def _refill(self) -> None:
        while True:
            with self.lock:
                if len(self.idle) >= self.size:
                    return
            try:
                process = _start(self.policy)
            except BaseException:  # a refusal is the next take's to report
                return
            with self.lock:
                self.idle.append(process)


_REFILL = _Request()
_lock = threading.Lock()
_pools: collections.OrderedDict[SandboxPolicy, _Warm] = collections.OrderedDict()


def take(policy: SandboxPolicy) -> subprocess.Popen[bytes]:
    """A started child behind ``policy``'s fence, waiting for its program; raises
    what :meth:`SandboxPolicy.popen` raises (``SandboxUnavailable``)."""
    with _lock:
        pool = _pools.get(policy)
        if pool is None:
            pool = _pools[policy] = _Warm(policy, WARM)
            while len(_pools) > MOST_POLICIES:
                _, oldest = _pools.popitem(last=False)
                oldest.end()
        else:
            _pools.move_to_end(policy)
    return pool.take()


def warm(policy: SandboxPolicy) -> None:
    """Start ``policy``'s idle children now (in the background), before a program."""
    with _lock:
        if policy not in _pools:
            _pools[policy] = _Warm(policy, WARM)
            _pools[policy].requests.put(_REFILL)


def kill(process: subprocess.Popen[bytes]) -> None:
    """Kill ``process`` and its process group (it leads one), and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        with contextlib.suppress(OSError):
            process.kill()
    _reap(process)


def _reap(process: subprocess.Popen[bytes]) -> None:
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    with contextlib.suppress(subprocess.TimeoutExpired):  # a child the kernel keeps
        process.wait(timeout=30)


def _end_all() -> None:
    with _lock:
        every = list(_pools.values())
        _pools.clear()
    for pool in every:
        pool.end()


def _forget() -> None:
    """In a forked copy of this process: the pools' threads are not there."""
    global _lock
    _lock = threading.Lock()
    _pools.clear()


atexit.register(_end_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
