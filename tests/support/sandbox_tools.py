"""Tools the sandbox tests run in confined child processes (module level, so they pickle)."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import time
import typing as t

from nous_tools import RunContext, tool


@tool(timeout=30, isolation="process", retries=0)
def write_file(path: str, text: str = "x") -> str:
    """Write ``text`` to ``path``."""
    pathlib.Path(path).write_text(text)
    return path


@tool(timeout=30, isolation="process", retries=0)
def read_file(path: str) -> str:
    """Read ``path``."""
    return pathlib.Path(path).read_text()


@tool(timeout=30, isolation="process", retries=0)
def hard_link(source: str, target: str) -> str:
    """Make ``target`` a hard link to ``source``."""
    os.link(source, target)
    return target


@tool(timeout=30, isolation="process", retries=0)
def shell(command: str) -> dict[str, t.Any]:
    """Run a shell command of the tool's own (not through the sandbox)."""
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False)
    return {"code": done.returncode, "stderr": done.stderr}


@tool(timeout=30, isolation="process", retries=0)
def connect(port: int) -> str:
    """Connect to 127.0.0.1:``port``."""
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        return "connected"


@tool(timeout=30, isolation="process", retries=0)
def allocate(mb: int) -> int:
    """Allocate ``mb`` megabytes."""
    return len(bytearray(mb * 1024 * 1024))


@tool(timeout=60, isolation="process", retries=0)
def spin() -> None:
    """Spin on the CPU for good."""
    while True:
        pass


@tool(timeout=60, isolation="process", retries=0)
def fork_bomb(record: str, most: int = 64) -> int:
    """Fork (at most ``most``) sleeping children, writing each pid to ``record``."""
    for _ in range(most):
        pid = os.fork()
        if pid == 0:  # the copy sleeps, and never returns into the worker's loop
            time.sleep(60)
            os._exit(0)
        with open(record, "a") as f:
            f.write(f"{pid}\n")
    return most


@tool(timeout=30, isolation="process", retries=0)
def imports_json() -> str:
    """Import a module of the standard library and one of the package."""
    import decimal
    import json

    import nous_tools.content

    return json.dumps([str(decimal.Decimal("1.5")), nous_tools.content.__name__])


@tool(timeout=30, isolation="process", retries=0)
def my_pid() -> int:
    return os.getpid()


@tool(timeout=30, isolation="process", retries=0)
def confined_run(ctx: RunContext[t.Any], command: str) -> dict[str, t.Any]:
    """Run ``command`` through the context's sandbox."""
    assert ctx.sandbox is not None
    done = ctx.sandbox.run(["sh", "-c", command], capture_output=True, text=True)
    return {"code": done.returncode, "stderr": done.stderr}


@tool(timeout=4, isolation="process", retries=0)
def tick(marker: str) -> None:
    """Append a line to ``marker`` every 0.05 s, for far longer than the timeout."""
    for _ in range(2000):
        with open(marker, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(0.05)


@tool(timeout=4, retries=0)
def tick_through_sandbox(ctx: RunContext[t.Any], marker: str) -> int:
    """A thread tool whose ``ctx.sandbox.run`` program ticks into ``marker``."""
    assert ctx.sandbox is not None
    loop = f"while true; do echo tick >> {marker}; sleep 0.05; done"
    return ctx.sandbox.run(["sh", "-c", loop]).returncode


def main() -> None:  # pragma: no cover - run as a script by the parent-death tests
    """``python sandbox_tools.py process|thread|thread-with-limits MARKER ROOT``: run
    one ticking call."""
    from nous_tools import SandboxPolicy, ToolExecutor

    which, marker, root = sys.argv[1:4]
    # A limit needs code in the program's own process: the preexec_fn way.
    limits = {"max_open_files": 512} if which == "thread-with-limits" else {}
    policy = SandboxPolicy.new("workspace_write", workspace_root=root, **limits)
    ctx = RunContext.new(sandbox=policy)
    with ToolExecutor() as executor:
        target = tick if which == "process" else tick_through_sandbox
        print(executor.execute(target, {"marker": marker}, ctx), flush=True)


if __name__ == "__main__":
    main()
