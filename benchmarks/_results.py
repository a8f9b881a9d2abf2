"""What a benchmark writes with ``--json PATH``, for ``benchmarks/record.py``.

One file per invocation: the benchmark's name, its command-line arguments, and its
runs, each run the figures it measured (by key: a ratio, a time, a count — as the
script computes it, nothing re-measured) and the load average (1, 5 and 15 minutes)
when the run ended. ``record.py`` reads the runs of every benchmark and gives each
row as min - median - max over them.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import sys
import typing as t


def loadavg() -> list[float]:
    """The load average (1, 5, 15 minutes); empty where the platform has none."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except (AttributeError, OSError):
        return []


def run(figures: t.Mapping[str, float], load: list[float] | None = None) -> dict[str, t.Any]:
    """One run's entry: its figures, and the load average now (or ``load``)."""
    return {
        "load": loadavg() if load is None else load,
        "figures": {key: float(value) for key, value in figures.items()},
    }


def dump(path: str | os.PathLike[str], benchmark: str, runs: list[dict[str, t.Any]]) -> None:
    """Write ``runs`` (made with :func:`run`) of ``benchmark`` to ``path`` as JSON."""
    data = {
        "benchmark": benchmark,
        "argv": sys.argv[1:],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "cpus": os.cpu_count(),
        "runs": runs,
    }
    pathlib.Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
