"""The call journal's cost (issue 22), and DBOS side by side.

Run it with ``.venv/bin/python benchmarks/journal.py [--runs 3] [--quick]`` (DBOS:
``pip install -e '.[bench]'``; PostgreSQL: the server binaries, started here on a
Unix socket in a temporary directory, as the slow tests do). Every figure is a ratio
or a difference of cases measured in the same run, their rounds interleaved, so they
hold on a noisy machine when the absolute times move; with several runs, each figure
is given as min, median and max over the runs, with the load average. It is not a test
and always exits 0 (unless it crashes).

The tool is ``charge(amount) -> dict``, inline (no timeout: no worker thread hides
the journal's own cost), on a ``ToolExecutor``. Cases, per call:

- ``plain``: the call unjournaled (an executor without a journal);
- ``sqlite``: journaled on ``SQLiteJournal`` (WAL, ``synchronous="NORMAL"``, the
  default: durable against any process crash), a new call id each call: one read,
  two writes;
- ``sqlite-full``: the same with ``synchronous="FULL"`` (``started`` synced to
  disk before the tool runs: durable against a power cut too);
- ``postgres``: journaled on ``PostgresJournal``, a local server on a Unix socket
  with PostgreSQL's default durability (fsync on, ``synchronous_commit`` on: the
  ``started`` record waits for the disk);
- ``postgres-async``: the same server, the session's ``synchronous_commit`` off
  (durable against a crash of the application, not of the server);
- ``fsync``: one ``os.fsync`` of a small write to a file, for scale (what a
  synced commit costs on this disk at least);
- ``replay``: a completed call repeated (SQLite): one indexed read and the stored
  outcome; against ``plain`` plus ``read`` (the same ``journal.get`` alone).
- DBOS (SQLite default, ``sqlite:///...``): a workflow of K calls of the function
  as a ``@DBOS.step()``, against the same workflow calling it plainly; its per-step
  overhead is the difference over K.

Targets: the journal's overhead over ``plain`` at p50 ≤ 1 ms (SQLite) and ≤ 2 ms
(PostgreSQL); ours ≤ 0.5x DBOS's per-step overhead; a replay ≤ 2x (an inline call
plus one indexed read).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import pathlib
import statistics
import sys
import tempfile
import time
import typing as t

HERE = pathlib.Path(__file__).resolve().parent
# servers.py: PostgreSQL on a Unix socket
sys.path.insert(0, str(HERE.parent / "tests" / "support"))
try:
    from nous_tools import PostgresJournal, RunContext, SQLiteJournal, Tool, ToolExecutor
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(HERE.parent))
    from nous_tools import PostgresJournal, RunContext, SQLiteJournal, Tool, ToolExecutor

MS = 1e3

import _results  # noqa: E402  (beside this file: --json's format)


def charge(amount: int) -> dict[str, t.Any]:
    return {"charged": amount, "currency": "EUR"}


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class Case:
    """A case: a function of the call number that makes one call; its samples (s)."""

    def __init__(self, name: str, call: t.Callable[[int], object]) -> None:
        self.name = name
        self.call = call
        self.samples: list[float] = []
        self.counter = 0

    def round(self, n: int) -> None:
        clock = time.perf_counter
        for _ in range(n):
            self.counter += 1
            start = clock()
            self.call(self.counter)
            self.samples.append(clock() - start)


def dbos_cases(
    directory: str, k: int
) -> tuple[t.Callable[[], None], t.Callable[[], None], t.Callable[[], None]] | None:
    """DBOS on its SQLite default: (a workflow of K steps, the same calling the
    function plainly, shutdown); None when DBOS is not installed."""
    try:
        from dbos import DBOS
    except ImportError:
        return None
    for name in ("dbos", "dbos._logger"):
        logging.getLogger(name).setLevel(logging.WARNING)

    @DBOS.step()
    def dbos_charge(amount: int) -> dict[str, t.Any]:
        return charge(amount)

    @DBOS.workflow()
    def with_steps(n: int) -> None:
        for amount in range(n):
            dbos_charge(amount)

    @DBOS.workflow()
    def plainly(n: int) -> None:
        for amount in range(n):
            charge(amount)

    DBOS(
        config={
            "name": "nous-tools-bench",
            "system_database_url": f"sqlite:///{os.path.join(directory, 'dbos.sqlite')}",
            "log_level": "WARNING",
        }
    )
    DBOS.launch()

    def destroy() -> None:
        DBOS.destroy(destroy_registry=True)

    return (lambda: with_steps(k)), (lambda: plainly(k)), destroy


def one_run(options: argparse.Namespace, postgres_dsn: str | None) -> dict[str, float]:
    """One run: every case in interleaved rounds; the figures of this run."""
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="nous-tools-journal-bench-") as directory:
        tool = Tool.from_function(charge, timeout=None, retries=0)
        normal = SQLiteJournal(os.path.join(directory, "normal.db"))
        full = SQLiteJournal(os.path.join(directory, "full.db"), synchronous="FULL")
        plain_ex = ToolExecutor(max_workers=2)
        executors = {
            "sqlite": ToolExecutor(max_workers=2, journal=normal),
            "sqlite-full": ToolExecutor(max_workers=2, journal=full),
        }
        pgs: list[PostgresJournal] = []
        if postgres_dsn is not None:
            table = f"bench_{os.getpid()}_{int(time.time())}"
            for name, dsn in (
                ("postgres", postgres_dsn),
                ("postgres-async", postgres_dsn + " options='-c synchronous_commit=off'"),
            ):
                pgs.append(PostgresJournal(dsn, table=table))
                executors[name] = ToolExecutor(max_workers=2, journal=pgs[-1])
        synced = os.open(os.path.join(directory, "fsync"), os.O_WRONLY | os.O_CREAT, 0o644)

        def fsync(i: int) -> None:
            os.write(synced, b"x" * 100)
            os.fsync(synced)

        ctx = RunContext.new(run_id=f"bench-{time.time_ns()}")
        arguments = {"amount": 5}

        def journaled(executor: ToolExecutor) -> t.Callable[[int], object]:
            return lambda i: executor.execute(tool, arguments, ctx, call_id=f"call-{i}")

        cases = [Case("plain", lambda i: plain_ex.execute(tool, arguments, ctx))]
        cases += [Case(name, journaled(executor)) for name, executor in executors.items()]
        replayer = executors["sqlite"]
        replayer.execute(tool, arguments, ctx, call_id="completed")
        cases.append(
            Case("replay", lambda i: replayer.execute(tool, arguments, ctx, call_id="completed"))
        )
        cases.append(Case("read", lambda i: normal.get(ctx.run_id or "", "completed")))
        cases.append(Case("fsync", fsync))
        dbos = dbos_cases(directory, options.k) if not options.no_dbos else None
        dbos_steps: list[float] = []
        dbos_plain: list[float] = []
        try:
            for case in cases:  # warm up: connections, prepared statements
                case.round(20)
                case.samples.clear()
            for _ in range(options.rounds):
                for case in cases:
                    case.round(options.calls)
                if dbos is not None:
                    with_steps, plainly, _ = dbos
                    for _ in range(options.workflows):
                        start = time.perf_counter()
                        with_steps()
                        dbos_steps.append(time.perf_counter() - start)
                        start = time.perf_counter()
                        plainly()
                        dbos_plain.append(time.perf_counter() - start)
        finally:
            if dbos is not None:
                dbos[2]()
            for executor in (plain_ex, *executors.values()):
                executor.shutdown()
            full.close()
            normal.close()
            os.close(synced)
            for pg in pgs:
                with contextlib.suppress(Exception), pg._connection() as connection:
                    connection.execute(f"DROP TABLE IF EXISTS {pg.table}")
                pg.close()
        by = {case.name: case for case in cases}
        for case in cases:
            figures[f"{case.name} p50"] = percentile(case.samples, 50) * MS
            figures[f"{case.name} p99"] = percentile(case.samples, 99) * MS
        for name in executors:  # the journal's cost: the call's time less the plain call's
            figures[f"{name} overhead p50"] = figures[f"{name} p50"] - figures["plain p50"]
            figures[f"{name} overhead p99"] = figures[f"{name} p99"] - figures["plain p99"]
        for name in ("sqlite-full", "postgres"):  # what a synced commit leaves beside the disk
            if f"{name} overhead p50" in figures:
                figures[f"{name} overhead p50 less one fsync p50"] = (
                    figures[f"{name} overhead p50"] - figures["fsync p50"]
                )
        figures["replay / (plain + read)"] = statistics.median(by["replay"].samples) / (
            statistics.median(by["plain"].samples) + statistics.median(by["read"].samples)
        )
        if dbos_steps:
            per_step = (statistics.median(dbos_steps) - statistics.median(dbos_plain)) / options.k
            figures["dbos step overhead"] = per_step * MS
            figures["dbos workflow of K plain calls"] = statistics.median(dbos_plain) * MS
            figures["sqlite overhead / dbos step overhead"] = (
                figures["sqlite overhead p50"] / figures["dbos step overhead"]
            )
            figures["sqlite-full overhead / dbos step overhead"] = (
                figures["sqlite-full overhead p50"] / figures["dbos step overhead"]
            )
    return figures


#: The figures with a target: (key, what it is and the target).
TARGETS: list[tuple[str, str]] = [
    ("sqlite overhead p50", "SQLite journaled call overhead p50, ms (target ≤ 1 ms)"),
    ("postgres overhead p50", "PostgreSQL journaled call overhead p50, ms (target ≤ 2 ms)"),
    (
        "sqlite overhead / dbos step overhead",
        "our per-call overhead / DBOS's per-step overhead, both SQLite (target ≤ 0.5x)",
    ),
    ("replay / (plain + read)", "a replay / an inline call plus one indexed read (target ≤ 2x)"),
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="whole runs (default 3)")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds per run")
    parser.add_argument("--calls", type=int, default=40, help="calls per case per round")
    parser.add_argument("--workflows", type=int, default=3, help="DBOS workflows per round")
    parser.add_argument("--k", type=int, default=20, help="steps per DBOS workflow")
    parser.add_argument("--quick", action="store_true", help="one short run")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-dbos", action="store_true")
    parser.add_argument("--json", metavar="PATH", help="also write each run's figures there")
    options = parser.parse_args(argv)
    if options.quick:
        options.runs, options.rounds, options.calls, options.workflows = 1, 3, 20, 1
    began = time.time()
    runs: list[dict[str, float]] = []
    kept: list[dict[str, t.Any]] = []  # --json: each run's figures and load average
    with contextlib.ExitStack() as stack:
        dsn = None
        if not options.no_postgres:
            try:
                from servers import postgres_server

                server = stack.enter_context(postgres_server(durable=True))
                dsn = f"host={server['host']} user={server['user']} dbname={server['name']}"
            except Exception as exc:  # no PostgreSQL here
                print(f"PostgreSQL not measured: {exc}")
        for number in range(options.runs):
            runs.append(one_run(options, dsn))
            kept.append(_results.run(runs[-1]))
            print(f"run {number + 1}/{options.runs} done (load average {os.getloadavg()})")
    if options.json:
        _results.dump(options.json, "journal", kept)
    names = list(runs[0])
    print()
    print(f"# benchmarks/journal.py — {options.runs} run(s), {options.rounds} rounds of "
          f"{options.calls} calls per case per run; DBOS: {options.workflows} workflow(s) "
          f"of K={options.k} per round")  # fmt: skip
    print(f"load average at the end: {os.getloadavg()}; took {time.time() - began:.0f} s")
    print()
    print("| figure | min | median | max |")
    print("|---|---:|---:|---:|")
    for name in names:
        values = sorted(run[name] for run in runs if name in run)
        unit = "x" if "/" in name else " ms"
        print(
            f"| {name} | {values[0]:.3f}{unit} | {statistics.median(values):.3f}{unit} "
            f"| {values[-1]:.3f}{unit} |"
        )
    print()
    for key, text in TARGETS:
        values = [run[key] for run in runs if key in run]
        if not values:
            print(f"- not measured: {text}")
            continue
        median = statistics.median(values)
        print(
            f"- {text}: median {median:.3f}, {min(values):.3f} to {max(values):.3f} over "
            f"{len(values)} run(s)"
        )


if __name__ == "__main__":
    main()
