"""What reading back an approval costs (issue 26): a signed token or a paused batch
of model tool calls, read with ``from_dict`` and run with ``resolve``, against the
floor of the same bytes — ``json.loads``, the canonical JSON re-serialisation, one
HMAC-SHA256 and its constant-time comparison, and (for a batch) calling the tool
function itself.

Run it with ``.venv/bin/python benchmarks/approval.py [--runs N] [--rounds N]``.
Every case is a loop of N iterations (N calibrated so a round takes about 50 ms),
warmed up, and the cases are timed round by round, interleaved, so a slow moment of
the machine hits all of them; a run's figure is the median over its rounds, its
ratio the median of the per-round ratios. Each run prints its figures and ratios;
the summary gives min-median-max of each ratio over the runs, with the load
average before and after. The approval store is one that always says yes (so the
same batch can be resolved again and again): what a real store costs is its own.

Cases (per call of the batch):

- ``token``: ``NeedsApproval.from_dict(json.loads(text), registry, secret)``;
- ``batch1``: ``ToolCallResults.from_dict`` + ``resolve({id: "approve"})`` of a
  batch with one pending call (the call runs inline, validated, as the registry
  runs it) — the target: at most 2x its floor;
- ``batch10 read``: ``ToolCallResults.from_dict`` of a batch of ten pending calls.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import hmac
import json
import os
import pathlib
import statistics
import sys
import time
import typing as t

try:
    import nous_tools  # noqa: F401
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from nous_tools import NeedsApproval, Ok, Registry, Tool, ToolCallResults, execute_tool_calls

SECRET = b"benchmark secret, 32 bytes long!"
ARGUMENTS = {"order": 42, "note": "the customer asked twice", "items": [1, 2, 3]}
TARGET = 2.0


def refund(order: int, note: str = "", items: list[int] | None = None) -> str:
    """Refund an order."""
    return f"refunded {order}"


class YesStore:
    """An approval store that claims everything: the library's cost alone."""

    def claim(self, approval_id: str, expires_at: float | None = None) -> bool:
        return True


def _floor(text: str, calls: int) -> t.Callable[[], object]:
    """json.loads, the canonical re-serialisation without the signature, HMAC,
    compare_digest — and each approved call's function called directly."""
    key = SECRET

    def floor() -> object:
        data = json.loads(text)
        signature = data.pop("signature")
        payload = json.dumps(
            data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
        ).encode("ascii")
        expected = "hmac-sha256:" + hmac.new(key, payload, hashlib.sha256).hexdigest()
        hmac.compare_digest(expected.encode(), signature.encode())
        for _ in range(calls):
            refund(**ARGUMENTS)
        return data

    return floor


def _model_calls(n: int) -> list[dict[str, t.Any]]:
    return [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "refund", "arguments": json.dumps(ARGUMENTS)},
        }
        for i in range(n)
    ]


def _cases(registry: Registry) -> dict[str, tuple[t.Callable[[], object], t.Callable[[], object]]]:
    """name -> (the library's path, its floor), each returning something."""
    pending = registry.execute("refund", ARGUMENTS, call_id="call_0")
    assert isinstance(pending, NeedsApproval)
    token_text = json.dumps(pending.to_dict(SECRET))

    def token() -> object:
        return NeedsApproval.from_dict(json.loads(token_text), registry, SECRET)

    one = json.dumps(execute_tool_calls(registry, _model_calls(1)).to_dict(SECRET))
    ten = json.dumps(execute_tool_calls(registry, _model_calls(10)).to_dict(SECRET))

    def batch1() -> object:
        batch = ToolCallResults.from_dict(json.loads(one), registry, SECRET)
        return batch.resolve({"call_0": "approve"})

    def batch10_read() -> object:
        return ToolCallResults.from_dict(json.loads(ten), registry, SECRET)

    resolved = batch1()
    assert isinstance(resolved, ToolCallResults)
    assert resolved.results[0] == Ok("refunded 42"), resolved.results
    assert len(t.cast(ToolCallResults, batch10_read()).pending) == 10
    return {
        "token": (token, _floor(token_text, 0)),
        "batch1": (batch1, _floor(one, 1)),
        "batch10 read": (batch10_read, _floor(ten, 0)),
    }


PER_CALL = {"token": 1, "batch1": 1, "batch10 read": 10}


def _calibrate(function: t.Callable[[], object], seconds: float = 0.05) -> int:
    n = 1
    while True:
        began = time.perf_counter()
        for _ in range(n):
            function()
        if time.perf_counter() - began >= seconds / 4 or n >= 1 << 20:
            return max(1, int(n * seconds / max(time.perf_counter() - began, 1e-9)))
        n *= 2


def _time(function: t.Callable[[], object], n: int) -> float:
    """Seconds per iteration over ``n`` iterations, the collector off."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        began = time.perf_counter()
        for _ in range(n):
            function()
        return (time.perf_counter() - began) / n
    finally:
        if enabled:
            gc.enable()


def one_run(rounds: int) -> dict[str, tuple[float, float, float]]:
    """case -> (library µs per call, floor µs per call, ratio), medians over rounds."""
    registry = Registry(
        [Tool.from_function(refund, approval="ask", timeout=None)],
        name="shop",
        approval_store=YesStore(),
    )
    cases = _cases(registry)
    sizes = {name: (_calibrate(path), _calibrate(floor)) for name, (path, floor) in cases.items()}
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, (path, floor) in cases.items():
            n_path, n_floor = sizes[name]
            samples[name].append((_time(path, n_path), _time(floor, n_floor)))
    figures = {}
    for name, pairs in samples.items():
        per = PER_CALL[name]
        library = statistics.median(p for p, _ in pairs) / per * 1e6
        floor = statistics.median(f for _, f in pairs) / per * 1e6
        ratio = statistics.median(p / f for p, f in pairs)
        figures[name] = (library, floor, ratio)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs (default 3)")
    parser.add_argument("--rounds", type=int, default=15, help="rounds per run (default 15)")
    parser.add_argument("--json", metavar="PATH", help="also write each run's figures there")
    options = parser.parse_args(argv)
    import _results  # beside this file: --json's format

    kept = []

    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")
    ratios: dict[str, list[float]] = {}
    for run in range(1, options.runs + 1):
        figures = one_run(options.rounds)
        print(f"run {run} (load {os.getloadavg()[0]:.2f}):")
        for name, (library, floor, ratio) in figures.items():
            print(
                f"  {name:<13} {library:8.1f} µs/call   floor {floor:7.1f} µs/call   "
                f"ratio {ratio:5.2f}x"
            )
            ratios.setdefault(name, []).append(ratio)
        kept.append(
            _results.run(
                {
                    f"{name.replace(' ', '_')}.{what}": value
                    for name, (library, floor, ratio) in figures.items()
                    for what, value in (("us", library), ("floor_us", floor), ("ratio", ratio))
                }
            )
        )
    if options.json:
        _results.dump(options.json, "approval", kept)
    load_after = os.getloadavg()
    print(f"load average after:  {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    print(f"ratio to the floor over {options.runs} runs (min - median - max):")
    for name, values in ratios.items():
        target = f"   (target ≤ {TARGET:.1f}x)" if name == "batch1" else ""
        print(
            f"  {name:<13} {min(values):5.2f}x - {statistics.median(values):5.2f}x - "
            f"{max(values):5.2f}x{target}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
