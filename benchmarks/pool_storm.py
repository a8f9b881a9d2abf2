"""A stress run of the pool's books (issue 36): the storm of nested timeouts and
Ctrl-C of ``tests/engine/test_adversity.py``, round after round with new seeds, beside
``--busy N`` CPU busy loops, counting the rounds whose books did not balance
(``stats()["abandoned"]`` above 0 once every worker is idle, or any other check of
the storm failing), and apart from them the storms too small for the test's own bar
(its books are checked all the same). Not a test: it prints what it found and exits 0.

    .venv/bin/python benchmarks/pool_storm.py --rounds 100 --busy 2
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import time
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "engine"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=2.0, help="each round's storm")
    parser.add_argument("--busy", type=int, default=2, help="CPU busy loops beside it")
    options = parser.parse_args()
    from test_adversity import _judged, _storm

    loops = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(options.busy)
    ]
    failed: list[tuple[int, str]] = []
    small: list[tuple[int, tuple[int, int, int]]] = []
    began = time.monotonic()
    try:
        for seed in range(options.rounds):
            try:
                counts = _storm(seconds=options.seconds, seed=1000 + seed)
                if not _judged(counts):
                    small.append((1000 + seed, counts))
            except AssertionError as exc:
                where = traceback.extract_tb(exc.__traceback__)[-1]
                why = (str(exc) or "(no message)").splitlines()[0][:600]
                failed.append((1000 + seed, f"line {where.lineno}: {why}"))
                print(f"round {seed}: FAILED {failed[-1][1]}", flush=True)
            except Exception:
                failed.append((1000 + seed, traceback.format_exc().splitlines()[-1]))
                print(f"round {seed}: ERROR {failed[-1][1]}", flush=True)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    took = time.monotonic() - began
    print(
        f"{options.rounds} rounds of {options.seconds:g} s beside {options.busy} busy loops "
        f"in {took:.0f} s: {len(failed)} unbalanced; load {os.getloadavg()[0]:.2f}"
    )
    if small:
        print(
            f"{len(small)} storm(s) smaller than the test's bar (calls, Ctrl-C, answers), "
            f"their books balanced all the same: {small[:10]}"
        )
    for seed, why in failed:
        print(f"  seed {seed}: {why}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
