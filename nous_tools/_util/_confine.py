"""Confinement the kernel enforces (private): the mechanics behind :class:`SandboxPolicy`.

A :class:`Fence` is one policy written as plain data: the paths that may be
written and read (``None``: not fenced), whether the host network stays, and the
resource limits. :func:`enter` puts the calling process behind fences, for good;
:func:`for_subprocess` prepares the same for a program about to be started
(``preexec_fn``), so the work that allocates or opens files happens in the parent.
:func:`probe` proves, by trying each in a throw-away process, which mechanisms
this host has.

The mechanisms, by the name the probe reports them under:

* ``landlock``: Landlock file-system rules (Linux 5.13+; rights the kernel does
  not know are left out, best effort within an ABI). Rules bind inodes, so a
  symlink, ``..``, a hard link or a ``/proc/self/root`` path reaches nothing a
  direct path would not;
* ``landlock-net``: Landlock TCP rules (ABI 4+): no TCP ``bind`` or ``connect``;
* ``netns``: a new, empty network namespace (its loopback is down): nothing
  connects anywhere, loopback included. ``CAP_SYS_ADMIN`` or an unprivileged user
  namespace;
* ``rlimits``: ``setrlimit`` for memory (``RLIMIT_DATA``), CPU (``RLIMIT_CPU``),
  file size (``RLIMIT_FSIZE``) and open files (``RLIMIT_NOFILE``);
* ``pids``: a process count the kernel enforces: a ``pids`` cgroup where one can
  be made (root), else ``RLIMIT_NPROC`` (which root ignores, and which counts
  every process of the user);
* ``pdeathsig``: ``PR_SET_PDEATHSIG``, the kernel's kill when the parent dies.

Everything here is Linux; elsewhere every mechanism is missing and :func:`probe`
says why. The module imports nothing of ``nous_tools``: the sandbox (a value)
turns a policy into a :class:`Fence`, and gives names to what fails.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import typing as t

import attrs

__all__ = [
    "MECHANISMS",
    "Fence",
    "Prepared",
    "enter",
    "for_subprocess",
    "probe",
    "set_parent_death_signal",
]

#: Every mechanism :func:`probe` reports on, in the order it reports them.
MECHANISMS: tuple[str, ...] = ("landlock", "landlock-net", "netns", "rlimits", "pids", "pdeathsig")

#: The documented test hook: mechanisms named here (comma-separated) are reported
#: missing by :func:`probe`, as on a host that lacks them.
DISABLE_VAR = "NOUS_TOOLS_SANDBOX_DISABLE"

_LINUX = sys.platform.startswith("linux")
_PR_SET_PDEATHSIG = 1
_PR_GET_PDEATHSIG = 2
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_MB = 1024 * 1024


@attrs.frozen(slots=True)
class Fence:
    """One policy as the kernel will hold it. Paths are absolute and canonical."""

    #: What may be written (directories cover what is under them); None: writes free.
    writable: tuple[str, ...] | None = None
    #: What may be read and run; None: reads free.
    readable: tuple[str, ...] | None = None
    #: False: no connection in or out, loopback included.
    network: bool = True
    memory_mb: int | None = None
    cpu_seconds: int | None = None
    max_processes: int | None = None
    max_file_mb: int | None = None
    max_open_files: int | None = None


# -- the calls the kernel offers, through libc ---------------------------------------


@functools.cache
def _libc() -> t.Any:
    """libc, loaded once (a forked child's ``preexec_fn`` uses the parent's)."""
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result == -1:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def set_parent_death_signal(parent: int | None, sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent ends, then
    check that the parent is still ``parent`` (it may have ended before the ask):
    if not, end now. ``None``: no check (a process whose parent is outside its PID
    namespace sees its parent's pid as 0). Does nothing off Linux."""
    if not _LINUX:
        return
    _check(_libc().prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def _new_network_namespace() -> None:
    """Leave the host network for a new, empty namespace (its loopback down)."""
    libc = _libc()
    if os.geteuid() == 0:
        _check(libc.unshare(_CLONE_NEWNET), "unshare(CLONE_NEWNET)")
        return
    uid, gid = os.geteuid(), os.getegid()
    _check(libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET), "unshare(CLONE_NEWUSER|CLONE_NEWNET)")
    # Keep our own ids (files we create must have a mapped owner).
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{uid} {uid} 1"),
        ("gid_map", f"{gid} {gid} 1"),
    ):
        with contextlib.suppress(FileNotFoundError), open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _set_limits(fence: Fence) -> None:
    import resource

    def lower(which: int, soft: int, hard: int | None = None) -> None:
        _old_soft, old_hard = resource.getrlimit(which)
        new_hard = soft if hard is None else hard
        if old_hard != resource.RLIM_INFINITY and old_hard < new_hard:
            new_hard = old_hard
        resource.setrlimit(which, (min(soft, new_hard), new_hard))

    if fence.memory_mb is not None:
        lower(resource.RLIMIT_DATA, fence.memory_mb * _MB)
    if fence.cpu_seconds is not None:
        # SIGXCPU at the soft limit (a handler turns it into an error), SIGKILL 2 s later.
        lower(resource.RLIMIT_CPU, fence.cpu_seconds, fence.cpu_seconds + 2)
    if fence.max_file_mb is not None:
        lower(resource.RLIMIT_FSIZE, fence.max_file_mb * _MB)
    if fence.max_open_files is not None:
        lower(resource.RLIMIT_NOFILE, fence.max_open_files)
    if fence.max_processes is not None and os.geteuid() != 0:
        lower(resource.RLIMIT_NPROC, fence.max_processes)


_paths_cache: dict[tuple[t.Any, ...], tuple[str, ...]] = {}


def system_paths() -> tuple[str, ...]:
    """What a process that reads only its workspace still needs: the Python
    installation (its prefixes, ``sys.path`` and the packages imported from
    elsewhere, as an editable install is) and the system libraries."""
    key = (tuple(sys.path), len(sys.modules))
    found = _paths_cache.get(key)
    if found is None:
        found = _paths_cache[key] = _find_system_paths()
    return found


def _find_system_paths() -> tuple[str, ...]:
    found: list[str] = []
    imported = []
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if "." in name or not isinstance(where, str):
            continue
        is_package = os.path.basename(where).startswith("__init__.")
        imported.append(os.path.dirname(where) if is_package else where)
    candidates = [
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        *sysconfig.get_paths().values(),
        *sys.path,
        os.path.dirname(sys.executable),
        *imported,
        *_SYSTEM,
    ]
    for path in candidates:
        if not path:
            continue
        real = os.path.realpath(path)
        if os.path.dirname(real) == real or real in found or not os.path.exists(real):
            continue
        found.append(real)
    return tuple(found)


_SYSTEM = (
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
)


# -- Landlock -------------------------------------------------------------------------


def _landlock() -> t.Any:
    """The ``landlockpy`` module (the ``sandbox`` extra), or an ImportError that says so."""
    try:
        import landlockpy
    except ImportError as exc:
        raise ImportError(
            "Landlock needs the landlockpy package: pip install 'nous-tools[sandbox]'"
        ) from exc
    return landlockpy


def _ruleset(fence: Fence, network: bool) -> t.Any:
    """A Landlock ruleset for ``fence``, ready to enforce (``network``: TCP too)."""
    ll = _landlock()
    abi = ll.abi_version()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available in this kernel")
    access = ll.AccessFS
    handled = ll.fs_for_abi(abi) & ~(access.IOCTL_DEV | access.RESOLVE_UNIX)
    read = access.READ_FILE | access.READ_DIR | access.EXECUTE
    if fence.writable is None and fence.readable is None:
        handled = access.NONE
    elif fence.writable is None:  # reads only fenced
        handled &= read
    elif fence.readable is None:  # writes only fenced
        handled &= ~read
    net = ll.net_for_abi(abi) if network else ll.AccessNet.NONE
    scoped = ll.scope_for_abi(abi)
    ruleset = ll.Ruleset(handled_fs=handled, handled_net=net, scoped=scoped)
    try:
        file_rights = access.READ_FILE | access.WRITE_FILE | access.EXECUTE | access.TRUNCATE
        if fence.readable is not None:
            for path in fence.readable:
                if os.path.exists(path):
                    rights = read if os.path.isdir(path) else read & file_rights
                    ruleset.allow_path(path, rights)
        for path in fence.writable or ():
            if os.path.exists(path):
                rights = handled if os.path.isdir(path) else handled & file_rights
                ruleset.allow_path(path, rights)
        for path in _DEVICES:  # /dev/null and friends: read and written by everyone
            if os.path.exists(path):
                ruleset.allow_path(path, handled & (access.READ_FILE | access.WRITE_FILE))
    except BaseException:
        ruleset.close()
        raise
    return ruleset


_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")

# -- the pids cgroup --------------------------------------------------------------------


def _pids_base() -> str | None:
    """Where a pids cgroup of ours can be made (root, a pids hierarchy), or None."""
    if not _LINUX or os.geteuid() != 0:
        return None
    try:
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split() for line in f]
        with open("/proc/self/cgroup") as f:
            groups = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return None
    for fields in mounts:
        sep = fields.index("-")
        kind, options = fields[sep + 1], fields[sep + 3].split(",")
        point = fields[4]
        if kind == "cgroup" and "pids" in options:
            own = next((g[2] for g in groups if "pids" in g[1].split(",")), None)
        elif kind == "cgroup2":
            own = next((g[2] for g in groups if g[0] == "0"), None)
            if own is not None:
                try:
                    with open(os.path.join(point, own.lstrip("/"), "cgroup.subtree_control")) as f:
                        if "pids" not in f.read().split():
                            continue
                except OSError:
                    continue
        else:
            continue
        if own is None:
            continue
        base = os.path.join(point, own.lstrip("/"))
        if os.access(base, os.W_OK):
            return base
    return None


_names = itertools.count(1)


def make_pids_group(limit: int, name: str | None = None) -> str:
    """Make a pids cgroup holding at most ``limit`` processes; its path."""
    base = _pids_base()
    if base is None:
        raise OSError(errno.ENOTSUP, "no pids cgroup can be made here")
    path = os.path.join(base, name or f"nous-tools-{os.getpid()}-{next(_names)}")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "pids.max"), "w") as f:
        f.write(str(limit))
    return path


def join_pids_group(path: str) -> None:
    """Move the calling process into the cgroup at ``path``."""
    fd = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY)
    try:
        os.write(fd, b"0")
    finally:
        os.close(fd)


def remove_pids_group(path: str) -> None:
    """Kill what is left in the cgroup at ``path`` and remove it (best effort)."""
    for _ in range(20):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            pass
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        threading.Event().wait(0.01)


def worker_group_name(pid: int) -> str:
    return f"nous-tools-worker-{pid}"


def worker_group_path(pid: int) -> str | None:
    base = _pids_base()
    return None if base is None else os.path.join(base, worker_group_name(pid))


# -- entering fences ----------------------------------------------------------------------


def enter(fences: t.Sequence[Fence]) -> None:
    """Put the calling process behind ``fences`` (stacked: each must allow), for good.

    Call it while the process has one thread (a user namespace needs that), before
    any code the fences are meant for. Raises OSError (or ImportError) if a mechanism fails; the process must then
    not go on to run that code.
    """
    processes = [f.max_processes for f in fences if f.max_processes is not None]
    if processes and os.geteuid() == 0:
        join_pids_group(make_pids_group(min(processes), worker_group_name(os.getpid())))
    if any(not f.network for f in fences):
        _new_network_namespace()
    for fence in fences:
        _set_limits(fence)
    rulesets = [
        _ruleset(f, network=not f.network)
        for f in fences
        if f.writable is not None or f.readable is not None or not f.network
    ]
    for ruleset in rulesets:
        try:
            ruleset.restrict()
        finally:
            ruleset.close()


@attrs.define
class Prepared:
    """What :func:`for_subprocess` made in the parent: the ``preexec_fn`` to pass,
    and :meth:`close` for after the program ended."""

    rulesets: list[t.Any]
    group: str | None
    fences: tuple[Fence, ...]
    parent: int

    def preexec(self) -> None:
        """In the forked child, before ``exec``: the kernel's fences, in order."""
        set_parent_death_signal(self.parent)
        if self.group is not None:
            join_pids_group(self.group)
        if any(not f.network for f in self.fences):
            _new_network_namespace()
        for fence in self.fences:
            _set_limits(fence)
        for ruleset in self.rulesets:
            ruleset.restrict()

    def close(self) -> None:
        for ruleset in self.rulesets:
            ruleset.close()
        self.rulesets = []
        if self.group is not None:
            remove_pids_group(self.group)
            self.group = None


def for_subprocess(fences: t.Sequence[Fence]) -> Prepared:
    """Prepare ``fences`` for a program about to start: rulesets and the pids group
    made here, the rest done by :meth:`Prepared.preexec` in the child."""
    processes = [f.max_processes for f in fences if f.max_processes is not None]
    group = make_pids_group(min(processes)) if processes and os.geteuid() == 0 else None
    rulesets: list[t.Any] = []
    try:
        for fence in fences:
            if fence.writable is not None or fence.readable is not None or not fence.network:
                rulesets.append(_ruleset(fence, network=not fence.network))
    except BaseException:
        for ruleset in rulesets:
            ruleset.close()
        if group is not None:
            remove_pids_group(group)
        raise
    return Prepared(rulesets, group, tuple(fences), os.getpid())


# -- the probe ------------------------------------------------------------------------------

_probe_lock = threading.Lock()
_probed: dict[str, str | None] | None = None


def probe(refresh: bool = False) -> dict[str, str | None]:
    """Each of :data:`MECHANISMS` and None where it was proven here, else why not.

    Proven by trying, in a throw-away process (once per process; ``refresh``
    tries again): a write outside the fence refused, a connect refused, a limit
    hit. Mechanisms named in ``$NOUS_TOOLS_SANDBOX_DISABLE`` are reported missing.
    """
    global _probed
    with _probe_lock:
        if _probed is None or refresh:
            _probed = _run_probe()
        found = dict(_probed)
    disabled = {n.strip() for n in os.environ.get(DISABLE_VAR, "").split(",") if n.strip()}
    for name in disabled & set(MECHANISMS):
        found[name] = f"disabled by {DISABLE_VAR}"
    return found


def _run_probe() -> dict[str, str | None]:
    if not _LINUX:
        return dict.fromkeys(MECHANISMS, f"not available on {sys.platform} (Linux only)")
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "from nous_tools._util._confine import _probe_main; _probe_main()",
            ],
            capture_output=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
            check=False,
        )
        found = json.loads(done.stdout.decode().strip().splitlines()[-1])
    except Exception as exc:
        return dict.fromkeys(MECHANISMS, f"the probe could not run: {type(exc).__name__}: {exc}")
    return {name: found.get(name, "the probe did not report it") for name in MECHANISMS}


def _probe_main() -> None:
    """The probe's own process: try each mechanism in a forked child, print JSON."""
    found = {
        name: _try_in_child(globals()[f"_prove_{name.replace('-', '_')}"]) for name in MECHANISMS
    }
    print(json.dumps(found))


def _try_in_child(prove: t.Callable[[], None]) -> str | None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            prove()
            message = b""
        except BaseException as exc:
            message = f"{type(exc).__name__}: {exc}".encode()[:1000] or b"failed"
        os.write(write, message or b"\0")
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        answer = f.read()
    _, status = os.waitpid(pid, 0)
    if answer == b"\0":
        return None
    if answer:
        return answer.decode(errors="replace")
    return f"the probe's child ended without an answer (status {status})"


def _listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    return server


def _refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except OSError:
        return True


def _prove_landlock() -> None:
    inside = tempfile.mkdtemp(prefix="nous-tools-probe-")
    outside = tempfile.mkdtemp(prefix="nous-tools-probe-")
    ruleset = _ruleset(Fence(writable=(inside,)), network=False)
    ruleset.restrict()
    with open(os.path.join(inside, "ok"), "w") as f:
        f.write("inside")
    try:
        open(os.path.join(outside, "refused"), "w").close()
    except PermissionError:
        return
    raise RuntimeError("a write outside the fence was not refused")


def _prove_landlock_net() -> None:
    ll = _landlock()
    if ll.abi_version() < 4:
        raise OSError(errno.ENOTSUP, f"Landlock ABI {ll.abi_version()} has no TCP rules (4+)")
    server = _listener()
    port = server.getsockname()[1]
    if _refused(port):
        raise RuntimeError("loopback connects fail even without a fence")
    ruleset = _ruleset(Fence(network=False), network=True)
    ruleset.restrict()
    if not _refused(port):
        raise RuntimeError("a TCP connect was not refused")


def _prove_netns() -> None:
    server = _listener()
    port = server.getsockname()[1]
    if _refused(port):
        raise RuntimeError("loopback connects fail even without a fence")
    _new_network_namespace()
    if not _refused(port):
        raise RuntimeError("a connect to loopback was not refused")


def _prove_rlimits() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (8, 8))
    try:
        [os.open("/dev/null", os.O_RDONLY) for _ in range(16)]
    except OSError as exc:
        if exc.errno == errno.EMFILE:
            return
        raise
    raise RuntimeError("an open-files limit of 8 was not enforced")


def _prove_pids() -> None:
    if os.geteuid() == 0:
        group = make_pids_group(1)
        try:
            join_pids_group(group)
            if not _fork_refused():
                raise RuntimeError("a pids.max of 1 did not stop a fork")
        finally:
            with contextlib.suppress(OSError):
                join_pids_group(os.path.dirname(group))
            remove_pids_group(group)
        return
    import resource

    resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))
    if not _fork_refused():
        raise RuntimeError("RLIMIT_NPROC did not stop a fork")


def _fork_refused() -> bool:
    """Whether a fork fails now (a copy that was made ends at once)."""
    try:
        pid = os.fork()
    except OSError:
        return True
    if pid == 0:  # pragma: no cover - the copy
        os._exit(0)
    os.waitpid(pid, 0)
    return False


def _prove_pdeathsig() -> None:
    set_parent_death_signal(os.getppid(), signal.SIGTERM)
    value = ctypes.c_int(0)
    _check(_libc().prctl(_PR_GET_PDEATHSIG, ctypes.byref(value), 0, 0, 0), "prctl")
    if value.value != signal.SIGTERM:
        raise RuntimeError("PR_SET_PDEATHSIG did not hold")
