"""The sandbox the kernel enforces (issue 35): Landlock, a network namespace,
rlimits, a pids cgroup and the parent-death signal, on this machine's real kernel.

No mocks: each test runs real confined child processes. A mechanism this kernel
lacks skips its tests, saying which and why (``nous_tools.sandbox.probe()``).
Tools talk back through files; every wait is a bounded poll for a state.
"""

from __future__ import annotations

import collections.abc as c
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import typing as t

import pytest
import sandbox_tools as st

from nous_tools import (
    Err,
    Ok,
    RunContext,
    SandboxLimitReached,
    SandboxPolicy,
    SandboxUnavailable,
    SandboxViolation,
    Tool,
    ToolExecutor,
)
from nous_tools import sandbox as sandbox_module
from nous_tools._util import _confine

PATIENCE = 30.0
SUPPORT = pathlib.Path(__file__).parents[1] / "support"


def requires(*mechanisms: str) -> pytest.MarkDecorator:
    """Skip, saying why, where this kernel lacks one of ``mechanisms``."""
    found = _confine.probe()
    lacking = [f"{m}: {found[m]}" for m in mechanisms if found.get(m) is not None]
    return pytest.mark.skipif(bool(lacking), reason=f"this host lacks {'; '.join(lacking)}")


def wait_for(condition: c.Callable[[], bool], within: float = PATIENCE) -> bool:
    end = time.monotonic() + within
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as dead)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stopped_growing(path: pathlib.Path, quiet: float) -> bool:
    """Whether ``path`` did not change for ``quiet`` seconds (checked now)."""
    before = path.read_text()
    time.sleep(quiet)
    return path.read_text() == before


def violation(result: object) -> str:
    """The message of the SandboxViolation behind an Err (fails if there is none)."""
    assert isinstance(result, Err), result
    error = result.reason.original_error
    assert isinstance(error, SandboxViolation), result
    assert str(error) in result.reason.message
    return str(error)


def limit_reached(result: object) -> SandboxLimitReached:
    assert isinstance(result, Err), result
    error = result.reason.original_error
    assert isinstance(error, SandboxLimitReached), result
    assert str(error) in result.reason.message
    return error


@pytest.fixture(scope="module")
def executor() -> c.Iterator[ToolExecutor]:
    with ToolExecutor(max_workers=4, process_workers=2) as ex:
        yield ex


@pytest.fixture
def root(tmp_path: pathlib.Path) -> pathlib.Path:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return workspace


@pytest.fixture
def outside(tmp_path: pathlib.Path) -> pathlib.Path:
    elsewhere = tmp_path / "outside"
    elsewhere.mkdir()
    return elsewhere


def context(mode: str, root: pathlib.Path, **options: t.Any) -> RunContext[None]:
    return RunContext.new(sandbox=SandboxPolicy.new(mode, workspace_root=root, **options))


# -- bad input, at construction --------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"memory_mb": -1}, "'memory_mb' must be an int >= 1"),
        ({"cpu_seconds": 0}, "'cpu_seconds' must be an int >= 1"),
        ({"max_processes": 2.5}, "'max_processes' must be an int >= 1"),
        ({"max_open_files": True}, "'max_open_files' must be an int >= 1"),
        ({"max_file_mb": "10"}, "'max_file_mb' must be an int >= 1"),
        ({"memroy_mb": 10}, "Unknown sandbox keyword argument(s) 'memroy_mb'"),
        ({"workspace_root": "/"}, "resolves to the file-system root"),
    ],
)
def test_bad_policy_options_are_a_value_error_naming_the_option(
    options: dict[str, t.Any], says: str, tmp_path: pathlib.Path
) -> None:
    options.setdefault("workspace_root", tmp_path)
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        SandboxPolicy.new("workspace_write", **options)


def test_a_thread_tool_cannot_carry_a_sandbox() -> None:
    with pytest.raises(ValueError, match="'sandbox' needs isolation='process'"):
        Tool.from_function(st.write_file.function, sandbox="read_only", timeout=5)


def test_network_defaults_to_off_in_the_confined_modes_only(tmp_path: pathlib.Path) -> None:
    assert not SandboxPolicy.new("read_only", workspace_root=tmp_path).allows_network
    assert not SandboxPolicy.new("workspace_write", workspace_root=tmp_path).allows_network
    assert SandboxPolicy.new("danger_full_access", workspace_root=tmp_path).allows_network
    assert SandboxPolicy.new(
        "workspace_write", workspace_root=tmp_path, network=True
    ).allows_network
    assert not SandboxPolicy.new("danger_full_access", workspace_root=tmp_path).enforced


# -- the probe ------------------------------------------------------------------------------


@requires(*_confine.MECHANISMS)
def test_the_probe_proves_every_mechanism_on_this_host() -> None:
    found = sandbox_module.probe()
    assert found.grade == "full", str(found)
    assert found.missing == ()
    assert set(found.mechanisms) == set(_confine.MECHANISMS)


def test_a_mechanism_disabled_by_the_test_hook_is_reported_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(_confine.DISABLE_VAR, "landlock,netns")
    found = sandbox_module.probe()
    assert found.grade in ("partial", "none")
    assert found.mechanisms["landlock"] == f"disabled by {_confine.DISABLE_VAR}"
    assert {"landlock", "netns"} <= set(found.missing)


def test_the_cli_prints_the_probe_as_json() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nous_tools", "sandbox", "probe", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, _confine.DISABLE_VAR: "pids"},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["grade"] in ("full", "partial", "none")
    assert "pids" in report["missing"]
    assert report["mechanisms"]["pids"] == f"disabled by {_confine.DISABLE_VAR}"


# -- fail closed ------------------------------------------------------------------------------


def test_a_call_whose_fence_cannot_be_proven_is_never_run(
    monkeypatch: pytest.MonkeyPatch, root: pathlib.Path
) -> None:
    monkeypatch.setenv(_confine.DISABLE_VAR, "landlock")
    target = root / "written.txt"
    with ToolExecutor(process_workers=1) as executor:
        result = executor.execute(
            st.write_file, {"path": str(target)}, context("workspace_write", root)
        )
        assert isinstance(result, Err)
        error = result.reason.original_error
        assert isinstance(error, SandboxUnavailable)
        assert error.missing == ("landlock",)
        assert "missing landlock" in result.reason.message
        assert executor.stats()["process_started"] == 0  # no child: the tool never ran
    assert not target.exists()


def test_policy_run_fails_closed_without_the_mechanism(
    monkeypatch: pytest.MonkeyPatch, root: pathlib.Path
) -> None:
    monkeypatch.setenv(_confine.DISABLE_VAR, "netns")
    policy = SandboxPolicy.new("workspace_write", workspace_root=root)
    with pytest.raises(SandboxUnavailable, match="missing netns"):
        policy.run(["sh", "-c", f"touch {root / 'ran'}"])
    assert not (root / "ran").exists()


def test_danger_full_access_runs_unconfined_even_without_any_mechanism(
    monkeypatch: pytest.MonkeyPatch, root: pathlib.Path, outside: pathlib.Path
) -> None:
    monkeypatch.setenv(_confine.DISABLE_VAR, ",".join(_confine.MECHANISMS))
    policy = SandboxPolicy.new("danger_full_access", workspace_root=root)
    assert policy.run(["sh", "-c", f"touch {outside / 'free'}"]).returncode == 0
    assert (outside / "free").exists()


# -- files ------------------------------------------------------------------------------------


@requires("landlock", "netns")
def test_workspace_write_writes_inside_the_root(executor: ToolExecutor, root: pathlib.Path) -> None:
    result = executor.execute(
        st.write_file, {"path": str(root / "in.txt")}, context("workspace_write", root)
    )
    assert isinstance(result, Ok), result
    assert (root / "in.txt").read_text() == "x"


@requires("landlock", "netns")
@pytest.mark.parametrize("how", ["direct", "dotdot", "symlink", "proc-root"])
def test_workspace_write_refuses_a_write_outside_the_root_however_it_is_named(
    how: str, executor: ToolExecutor, root: pathlib.Path, outside: pathlib.Path
) -> None:
    target = outside / "escaped.txt"
    if how == "direct":
        path = str(target)
    elif how == "dotdot":
        path = str(root / ".." / "outside" / "escaped.txt")
    elif how == "symlink":
        (root / "door").symlink_to(outside)
        path = str(root / "door" / "escaped.txt")
    else:
        path = f"/proc/self/root{target}"
    result = executor.execute(st.write_file, {"path": path}, context("workspace_write", root))
    message = violation(result)
    assert message.startswith("write outside the workspace refused: ")
    assert not target.exists()


@requires("landlock", "netns")
def test_a_tools_own_sandbox_fences_it_without_a_context_sandbox(
    executor: ToolExecutor, root: pathlib.Path
) -> None:
    policy = SandboxPolicy.new("read_only", workspace_root=root)
    fenced = Tool.from_function(
        st.write_file.function, isolation="process", sandbox=policy, timeout=30, retries=0
    )
    result = executor.execute(fenced, {"path": str(root / "no.txt")})
    assert violation(result).startswith("write refused (read_only allows no writes)")
    assert not (root / "no.txt").exists()


@requires("landlock", "netns")
def test_the_tools_sandbox_and_the_contexts_stack(
    executor: ToolExecutor, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b").mkdir()
    tool_root, ctx_root = tmp_path / "a", tmp_path / "a" / "b"
    policy = SandboxPolicy.new("workspace_write", workspace_root=tool_root)
    fenced = Tool.from_function(
        st.write_file.function, isolation="process", sandbox=policy, timeout=30, retries=0
    )
    ctx = context("workspace_write", ctx_root)
    only_tools = executor.execute(fenced, {"path": str(tool_root / "x.txt")}, ctx)
    assert "write outside the workspace refused" in violation(only_tools)
    assert not (tool_root / "x.txt").exists()
    both = executor.execute(fenced, {"path": str(ctx_root / "y.txt")}, ctx)
    assert isinstance(both, Ok), both


@requires("landlock", "netns")
def test_a_hard_link_out_of_the_root_is_refused(
    executor: ToolExecutor, root: pathlib.Path, outside: pathlib.Path
) -> None:
    (root / "mine.txt").write_text("mine")
    target = outside / "linked.txt"
    result = executor.execute(
        st.hard_link,
        {"source": str(root / "mine.txt"), "target": str(target)},
        context("workspace_write", root),
    )
    assert "outside the workspace refused" in violation(result)
    assert not target.exists()


@requires("landlock", "netns")
def test_a_program_the_tool_starts_itself_is_fenced_too(
    executor: ToolExecutor, root: pathlib.Path, outside: pathlib.Path
) -> None:
    target = outside / "from-shell.txt"
    command = f"echo inside > {root / 'ok.txt'} && echo out > {target}"
    result = executor.execute(st.shell, {"command": command}, context("workspace_write", root))
    assert isinstance(result, Ok), result
    assert result.value["code"] != 0 and "Permission denied" in result.value["stderr"]
    assert (root / "ok.txt").read_text() == "inside\n"
    assert not target.exists()


@requires("landlock", "netns")
def test_workspace_write_may_write_its_private_temp_directory(
    executor: ToolExecutor, root: pathlib.Path
) -> None:
    command = 'f="$TMPDIR/scratch" && echo t > "$f" && cat "$f" && echo "$TMPDIR"'
    result = executor.execute(st.shell, {"command": command}, context("workspace_write", root))
    assert isinstance(result, Ok) and result.value["code"] == 0, result


@requires("landlock", "netns")
def test_read_only_writes_nowhere_not_even_tmp(executor: ToolExecutor, root: pathlib.Path) -> None:
    ctx = context("read_only", root)
    in_root = executor.execute(st.write_file, {"path": str(root / "no.txt")}, ctx)
    assert violation(in_root).startswith("write refused (read_only allows no writes)")
    tmp = pathlib.Path("/tmp") / f"nous-tools-test-{os.getpid()}-{root.parent.name}"
    in_tmp = executor.execute(st.write_file, {"path": str(tmp)}, ctx)
    assert "write refused" in violation(in_tmp)
    assert not (root / "no.txt").exists() and not tmp.exists()
    (root / "readable.txt").write_text("yes")
    assert executor.execute(st.read_file, {"path": str(root / "readable.txt")}, ctx) == Ok("yes")


@requires("landlock", "netns")
def test_confine_reads_refuses_etc_hostname_and_the_tool_still_imports(
    executor: ToolExecutor, root: pathlib.Path
) -> None:
    ctx = context("read_only", root, confine_reads=True)
    refused = executor.execute(st.read_file, {"path": "/etc/hostname"}, ctx)
    assert "outside the workspace refused: /etc/hostname" in violation(refused)
    imported = executor.execute(st.imports_json, {}, ctx)
    assert imported == Ok('["1.5", "nous_tools.content"]')


# -- network ------------------------------------------------------------------------------------


@pytest.fixture
def listener() -> c.Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield server.getsockname()[1]
    server.close()


@requires("landlock", "netns")
def test_network_false_refuses_a_loopback_connect(
    executor: ToolExecutor, root: pathlib.Path, listener: int
) -> None:
    result = executor.execute(st.connect, {"port": listener}, context("workspace_write", root))
    assert violation(result).startswith("network access refused")


@requires("landlock")
def test_network_true_keeps_the_host_network(
    executor: ToolExecutor, root: pathlib.Path, listener: int
) -> None:
    ctx = context("workspace_write", root, network=True)
    assert executor.execute(st.connect, {"port": listener}, ctx) == Ok("connected")


# -- limits ---------------------------------------------------------------------------------------


@requires("landlock", "netns", "rlimits")
def test_a_memory_limit_is_an_err_naming_it_and_the_next_call_runs(
    executor: ToolExecutor, root: pathlib.Path
) -> None:
    ctx = context("workspace_write", root, memory_mb=256)
    error = limit_reached(executor.execute(st.allocate, {"mb": 1024}, ctx))
    assert str(error) == "memory limit 256 MB reached" and error.limit == "memory_mb"
    assert executor.execute(st.allocate, {"mb": 16}, ctx) == Ok(16 * 1024 * 1024)


@requires("landlock", "netns", "rlimits")
def test_a_cpu_limit_stops_a_spin_loop(executor: ToolExecutor, root: pathlib.Path) -> None:
    ctx = context("workspace_write", root, cpu_seconds=1)
    started = time.monotonic()
    error = limit_reached(executor.execute(st.spin, {}, ctx))
    assert str(error) == "cpu limit 1 s reached"
    assert time.monotonic() - started < 30  # the spin's own timeout is 60 s
    assert isinstance(executor.execute(st.my_pid, {}, ctx), Ok)


@requires("landlock", "netns", "pids")
def test_max_processes_stops_a_fork_bomb_and_its_children_are_cleaned_up(
    executor: ToolExecutor, root: pathlib.Path
) -> None:
    record = root / "pids.txt"
    ctx = context("workspace_write", root, max_processes=8)
    error = limit_reached(executor.execute(st.fork_bomb, {"record": str(record)}, ctx))
    assert str(error) == "process limit 8 reached"
    forked = [int(line) for line in record.read_text().split()]
    assert 0 < len(forked) < 8
    assert wait_for(lambda: not any(alive(pid) for pid in forked))
    assert isinstance(executor.execute(st.my_pid, {}, ctx), Ok)


@requires("landlock", "netns", "rlimits")
def test_policy_run_applies_the_limits(root: pathlib.Path) -> None:
    policy = SandboxPolicy.new("workspace_write", workspace_root=root, memory_mb=64)
    done = policy.run([sys.executable, "-c", "bytearray(1 << 30)"], capture_output=True, text=True)
    assert done.returncode != 0 and "MemoryError" in done.stderr


# -- confined subprocesses ----------------------------------------------------------------------


@requires("landlock", "netns")
def test_policy_run_fences_a_program(root: pathlib.Path, outside: pathlib.Path) -> None:
    policy = SandboxPolicy.new("workspace_write", workspace_root=root)
    done = policy.run(
        ["sh", "-c", f"echo in > in.txt; echo out > {outside / 'out.txt'}"],
        capture_output=True,
        text=True,
    )
    assert "Permission denied" in done.stderr
    assert (root / "in.txt").read_text() == "in\n"  # the program started in the workspace
    assert not (outside / "out.txt").exists()


@requires("landlock", "netns", "rlimits")
def test_a_policy_with_limits_fences_its_program_the_slow_way_too(
    root: pathlib.Path, outside: pathlib.Path, listener: int
) -> None:
    policy = SandboxPolicy.new("workspace_write", workspace_root=root, max_open_files=256)
    script = (
        "import socket, sys\n"
        f"open({str(root / 'in.txt')!r}, 'w').write('in')\n"
        f"try:\n    open({str(outside / 'out.txt')!r}, 'w')\n"
        "except PermissionError:\n    print('write refused')\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {listener}), timeout=5)\n"
        "except OSError:\n    print('connect refused')\n"
    )
    done = policy.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.split() == ["write", "refused", "connect", "refused"], done.stderr
    assert (root / "in.txt").read_text() == "in"
    assert not (outside / "out.txt").exists()


@requires("landlock", "netns")
def test_a_thread_tool_confines_its_program_with_ctx_sandbox_run(
    executor: ToolExecutor, root: pathlib.Path, outside: pathlib.Path
) -> None:
    ctx = context("workspace_write", root)
    thread_tool = Tool.from_function(st.confined_run.function, timeout=30, retries=0)
    result = executor.execute(thread_tool, {"command": f"touch {outside / 'x'}"}, ctx)
    assert isinstance(result, Ok) and result.value["code"] != 0, result
    assert not (outside / "x").exists()


def test_policy_run_kills_the_program_and_its_group_at_the_timeout(root: pathlib.Path) -> None:
    policy = SandboxPolicy.new("danger_full_access", workspace_root=root)
    marker = root / "late.txt"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        policy.run(["sh", "-c", f"(sleep 2; touch {marker}) & sleep 30"], timeout=0.5)
    assert time.monotonic() - started < 10
    time.sleep(3)  # the background job would have written by now
    assert not marker.exists()


# -- a killed parent: its child stops -----------------------------------------------------------


@requires("landlock", "netns", "pdeathsig")
@pytest.mark.parametrize("which", ["process", "thread", "thread-with-limits"])
def test_the_childs_side_effects_stop_when_the_parent_is_sigkilled(
    which: str, root: pathlib.Path
) -> None:
    marker = root / "marker.txt"
    parent = subprocess.Popen(
        [sys.executable, str(SUPPORT / "sandbox_tools.py"), which, str(marker), str(root)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), *sys.path])},
    )
    try:
        assert wait_for(lambda: marker.exists() and len(marker.read_text().split()) >= 3)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=PATIENCE)
        killed = time.monotonic()
        # The deadline is 4 s; the kernel ends the child at once, well within it:
        # the marker stops growing, and stays so.
        assert wait_for(lambda: stopped_growing(marker, quiet=0.5), within=3.0)
        assert time.monotonic() - killed < 3.5
        settled = marker.read_text()
        time.sleep(1.0)
        assert marker.read_text() == settled  # no side effect after the child ended
    finally:
        if parent.poll() is None:
            parent.kill()


@requires("landlock", "netns")
def test_a_child_keeps_its_own_deadline_when_its_parent_cannot(root: pathlib.Path) -> None:
    """The parent is stopped (SIGSTOP), not dead: the child kills itself 0.5 s past
    the call's 4 s deadline, so its side effects stop there."""
    marker = root / "marker.txt"
    parent = subprocess.Popen(
        [sys.executable, str(SUPPORT / "sandbox_tools.py"), "process", str(marker), str(root)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), *sys.path])},
    )
    try:
        assert wait_for(lambda: marker.exists() and len(marker.read_text().split()) >= 1)
        started = time.monotonic()  # the call began a little before this
        os.kill(parent.pid, signal.SIGSTOP)
        assert wait_for(lambda: stopped_growing(marker, quiet=0.5), within=4 + 0.5 + 10)
        assert time.monotonic() - started > 3.0  # it ran on (the parent did not stop it)...
        writers = {int(p) for p in marker.read_text().split()}
        assert wait_for(lambda: not any(alive(p) for p in writers), within=5.0)  # ...then ended
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=PATIENCE)
