"""Real servers for the slow tests and the backend benchmark: Redis, PostgreSQL, a
Celery worker, ``nous-tools serve`` over Streamable HTTP. Each runs on this machine only (127.0.0.1 or a Unix socket in a
temporary directory) and is stopped, and its directory removed, when its context
manager exits.
"""

from __future__ import annotations

import collections.abc as c
import contextlib
import getpass
import glob
import os
import pathlib
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import typing as t

HERE = pathlib.Path(__file__).resolve().parent

#: The unprivileged account PostgreSQL runs as when the tests run as root.
PG_USER_AS_ROOT = "nobody"


class ServerError(RuntimeError):
    """A server could not be started; the message says why."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(process: subprocess.Popen[t.Any], sig: int = signal.SIGTERM, grace: float = 10.0) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(grace)


@contextlib.contextmanager
def served_http(
    target: str, *, env: c.Mapping[str, str] | None = None, wait: float = 30.0
) -> c.Iterator[tuple[subprocess.Popen[str], str]]:
    """``nous-tools serve TARGET --http PORT`` run from this folder (``env`` added to
    the environment), once it accepts connections on 127.0.0.1: the process and its
    MCP endpoint's URL. Its standard error is in the failure when it exits before
    (or ``wait`` seconds pass); stopped (SIGTERM) on exit unless it has ended."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "nous_tools", "serve", target, "--http", str(port)],
        cwd=HERE,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + wait
        while True:
            if process.poll() is not None:
                raise ServerError(
                    f"nous-tools serve {target} exited: "
                    + (process.stderr.read() if process.stderr else "")
                )
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if time.monotonic() > deadline:
                raise ServerError(f"nous-tools serve {target} did not start in {wait} s")
            time.sleep(0.05)
        yield process, f"http://127.0.0.1:{port}/mcp"
    finally:
        if process.poll() is None:
            process.terminate()
        process.communicate(timeout=wait)


def _redis_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextlib.contextmanager
def redis_server() -> c.Iterator[str]:
    """A fresh ``redis-server`` on 127.0.0.1 and an ephemeral port, in a temporary
    directory, persisting nothing; yields its URL (``redis://127.0.0.1:PORT``)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise ServerError("redis-server is not installed (apt-get install -y redis-server)")
    with tempfile.TemporaryDirectory(prefix="nous-tools-redis-") as directory:
        for _ in range(5):  # the port may be taken between choosing and binding it
            port = _free_port()
            log = open(os.path.join(directory, "redis.log"), "wb")  # noqa: SIM115
            process = subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", directory,
                 "--save", "", "--appendonly", "no", "--protected-mode", "yes",
                 "--daemonize", "no", "--loglevel", "warning"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and process.poll() is None:
                if _redis_ping(port):
                    break
                time.sleep(0.05)
            if process.poll() is None and _redis_ping(port):
                break
            _stop(process)
            log.close()
        else:
            text = pathlib.Path(directory, "redis.log").read_text(errors="replace")
            raise ServerError(f"redis-server did not start:\n{text}")
        try:
            yield f"redis://127.0.0.1:{port}"
        finally:
            _stop(process)
            log.close()


def _pg_bin() -> pathlib.Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if found:
        return pathlib.Path(found[-1]).parent
    on_path = shutil.which("postgres")
    if on_path:
        return pathlib.Path(on_path).parent
    raise ServerError("PostgreSQL is not installed (apt-get install -y postgresql)")


@contextlib.contextmanager
def postgres_server(*, durable: bool = False) -> c.Iterator[dict[str, str]]:
    """A fresh PostgreSQL cluster (``initdb``, then ``postgres``) listening only on
    a Unix socket in a temporary directory, run as an unprivileged user
    (:data:`PG_USER_AS_ROOT` when the tests run as root); yields
    ``{"host": socket directory, "user": ..., "name": "postgres"}``. Commits are not
    synced to disk unless ``durable`` (the benchmarks' setting: PostgreSQL's defaults)."""
    bin_dir = _pg_bin()
    as_root = os.geteuid() == 0
    user = PG_USER_AS_ROOT if as_root else getpass.getuser()
    record = pwd.getpwnam(user)
    run_as: dict[str, t.Any] = {"user": record.pw_uid, "group": record.pw_gid} if as_root else {}
    directory = tempfile.mkdtemp(prefix="nous-tools-pg-")
    try:
        if as_root:
            os.chown(directory, record.pw_uid, record.pw_gid)
        os.chmod(directory, 0o700)
        data = os.path.join(directory, "data")
        env = {**os.environ, "LC_ALL": "C", "HOME": directory}
        subprocess.run(
            [str(bin_dir / "initdb"), "-D", data, "-U", user, "--auth=trust", "--no-sync",
             "-E", "UTF8", "--locale=C"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=directory,
            **run_as,
        )  # fmt: skip
        log = open(os.path.join(directory, "postgres.log"), "wb")  # noqa: SIM115
        if as_root:
            os.chown(log.name, record.pw_uid, record.pw_gid)
        process = subprocess.Popen(
            [str(bin_dir / "postgres"), "-D", data, "-k", directory, "-c", "listen_addresses=",
             *([] if durable else ["-c", "fsync=off", "-c", "synchronous_commit=off",
                                   "-c", "full_page_writes=off"]),
             "-c", "max_connections=200"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=directory, **run_as,
        )  # fmt: skip
        try:
            ready = bin_dir / "pg_isready"
            deadline = time.monotonic() + 60
            while True:
                if process.poll() is not None:
                    raise ServerError(
                        "postgres exited:\n" + pathlib.Path(log.name).read_text(errors="replace")
                    )
                probe = subprocess.run([str(ready), "-h", directory, "-U", user, "-q"], check=False)
                if probe.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise ServerError("postgres was not ready after 60 s")
                time.sleep(0.1)
            yield {"host": directory, "user": user, "name": "postgres"}
        finally:
            _stop(process, signal.SIGINT, grace=30)  # fast shutdown
            log.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def celery_worker(
    app_module: str, broker_url: str, *, concurrency: int = 2, cwd: pathlib.Path = HERE
) -> c.Iterator[subprocess.Popen[bytes]]:
    """``celery -A app_module worker -P prefork -c concurrency`` as a subprocess,
    with ``NOUS_TOOLS_TEST_BROKER=broker_url``; yields once the worker answers a
    ping, and stops it (a warm shutdown, then SIGKILL) after."""
    env = {**os.environ, "NOUS_TOOLS_TEST_BROKER": broker_url}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(cwd), str(HERE.parents[1]), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    log_file = tempfile.NamedTemporaryFile(prefix="nous-tools-celery-", suffix=".log", delete=False)  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", app_module, "worker", "-P", "prefork",
         "-c", str(concurrency), "--loglevel", "warning", "--without-gossip",
         "--without-mingle", "--without-heartbeat", "-n", f"nous-tools-test-{os.getpid()}@%h"],
        stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=str(cwd),
        start_new_session=True,
    )  # fmt: skip
    try:
        sys.path.insert(0, str(cwd))
        module = __import__(app_module)
        app = module.app
        deadline = time.monotonic() + 90
        while not app.control.ping(timeout=0.5):
            if process.poll() is not None or time.monotonic() > deadline:
                text = pathlib.Path(log_file.name).read_text(errors="replace")
                raise ServerError(f"the Celery worker did not start:\n{text}")
        yield process
    finally:
        _stop(process, signal.SIGTERM, grace=15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # pool processes left behind, if any
        log_file.close()
        os.unlink(log_file.name)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie counts as dead)."""
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def wait_dead(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``pid`` to end; True when it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.001)
    return not alive(pid)
