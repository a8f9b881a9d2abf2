"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``, pinned
in ``tests/conformance/package.json``) against ``nous-tools serve`` and the synchronous
client, in ``make slow``.

The suite is installed with ``npm ci`` (from the committed lock file) into a cache
directory, once per lock file. It imports ``globSync`` from ``fs``, which Node 20 lacks:
``tests/conformance/fs-globsync.mjs`` (``node --import``) provides it from the ``glob``
npm package installed beside it. Scenarios outside a tool runner, and those waiting on
other work, are listed with their reasons in ``tests/conformance/baseline.yml``; the
suite fails a run when a listed scenario passes, so the list cannot go stale.

Run by hand, from ``tests/support/``::

    nous-tools serve mcp_conformance_tools:registry --http 8765 &
    node --import CACHE/fs-globsync.mjs CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js \\
        server --url http://127.0.0.1:8765/mcp --suite all --expected-failures ../conformance/baseline.yml
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]
HERE = TESTS / "conformance"
SUPPORT = TESTS / "support"  # mcp_conformance_tools, mcp_conformance_client
BASELINE = HERE / "baseline.yml"
#: The files of the installation: npm's manifest and lock, and the Node 20 preload.
FILES = (
    "package.json",
    "package-lock.json",
    "fs-globsync.mjs",
    "fs-globsync-hooks.mjs",
    "fs-globsync-shim.mjs",
)
#: Scenarios whose checks measure wall-clock timing (the client's reconnection delay
#: against the server's ``retry`` field): run with 25 others in parallel on a small
#: machine they can be late; such a failure is judged by a run of its own.
TIMED = {"sse-retry"}
WAIT = 60.0


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nous-tools"


@pytest.fixture(scope="module")
def suite() -> Path:
    """The installed suite's directory (installed now when it is not yet)."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.fail("the MCP conformance suite needs node and npm (.ci/run installs them)")
    digest = hashlib.sha256(b"".join((HERE / name).read_bytes() for name in FILES)).hexdigest()
    root = _cache_root()
    target = root / f"mcp-conformance-{digest[:16]}"
    marker = target / ".installed"
    if marker.exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(root / "mcp-conformance.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run may be installing it
        if marker.exists():
            return target
        staging = root / f".mcp-conformance-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        for name in FILES:
            shutil.copy(HERE / name, staging / name)
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
            cwd=staging,
            check=True,
            timeout=600,
        )
        (staging / ".installed").write_text("ok\n")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return target


def _conformance(
    suite: Path, *args: str, timeout: float = 900.0
) -> subprocess.CompletedProcess[str]:
    entry = suite / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    return subprocess.run(
        ["node", "--import", str(suite / "fs-globsync.mjs"), str(entry), *args],
        cwd=suite,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"},
    )


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _served(target: str):
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "nous_tools", "serve", target, "--http", str(port)],
        cwd=SUPPORT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + WAIT
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert time.monotonic() < deadline, "nous-tools serve did not start"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.communicate(timeout=WAIT)


def _results(out: Path) -> dict[str, list[dict[str, object]]]:
    """Each scenario's checks, from the suite's results directory."""
    found: dict[str, list[dict[str, object]]] = {}
    for checks in sorted(out.rglob("checks.json")):
        name = re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", checks.parent.name)
        if checks.parent.parent.name == "auth":
            name = "auth/" + name
        found[name.removeprefix("server-")] = json.loads(checks.read_text())
    return found


def _summary(results: dict[str, list[dict[str, object]]], expected: set[str]) -> str:
    passed = [name for name in results if name not in expected]
    counted = {
        status: sum(c["status"] == status for name in passed for c in results[name])
        for status in ("SUCCESS", "FAILURE", "WARNING")
    }
    return (
        f"{len(passed)} scenario(s) outside the baseline, {counted['SUCCESS']} checks passed, "
        f"{counted['FAILURE']} failed, {counted['WARNING']} warning(s)"
    )


def _baseline(side: str) -> set[str]:
    names: set[str] = set()
    current = None
    for line in BASELINE.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            current = line.split(":")[0].strip()
        elif current == side and line.strip().startswith("- "):
            names.add(line.strip()[2:].strip())
    return names


def test_the_served_registry_passes_the_official_server_scenarios(suite, tmp_path):
    expected = _baseline("server")
    with _served("mcp_conformance_tools:registry") as url:
        run = _conformance(
            suite,
            "server",
            "--url",
            url,
            "--suite",
            "all",
            "--expected-failures",
            str(BASELINE),
            "-o",
            str(tmp_path),
        )
    output = _plain(run.stdout + run.stderr)
    assert run.returncode == 0, output[-4000:]
    results = _results(tmp_path)
    warnings = [
        f"{name}: {check['id']}"
        for name, checks in results.items()
        if name not in expected
        for check in checks
        if check["status"] in ("WARNING", "FAILURE")
    ]
    assert warnings == []
    assert len(results) == 32  # every server scenario of the suite ran
    assert len([name for name in results if name not in expected]) == 20  # the tool ones
    print("\nMCP conformance, server:", _summary(results, expected))


def test_the_synchronous_client_passes_the_official_client_scenarios(suite, tmp_path):
    expected = _baseline("client")
    command = f"{sys.executable} {SUPPORT / 'mcp_conformance_client.py'}"
    args = ["client", "--command", command, "--expected-failures", str(BASELINE)]
    run = _conformance(suite, *args, "--suite", "all", "-o", str(tmp_path / "all"))
    output = _plain(run.stdout + run.stderr)
    if run.returncode != 0:
        block = output.split("Unexpected failures (not in baseline):", 1)
        assert len(block) == 2, output[-4000:]
        unexpected = set(re.findall(r"^\s+✗ (\S+)$", block[1].split("\n\n")[0], re.MULTILINE))
        assert unexpected and unexpected <= TIMED, output[-4000:]
        for name in sorted(unexpected):  # judged alone, on a quieter machine
            alone = _conformance(suite, *args, "--scenario", name, "-o", str(tmp_path / name))
            assert alone.returncode == 0, _plain(alone.stdout + alone.stderr)[-4000:]
            print(f"\nMCP conformance: {name} was late in the parallel run and passed alone")
    results = _results(tmp_path / "all")
    for name, checks in _results(tmp_path).items():
        if name in TIMED:  # the run of its own counts
            results[name] = checks
    assert len(results) == 26
    print("\nMCP conformance, client:", _summary(results, expected))
