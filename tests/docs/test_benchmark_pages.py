"""The benchmark pages are made from the recorded figures (issue 26, "Honest benchmarks").

``benchmarks/record.py`` runs the benchmarks, keeps each run's figures in
``benchmarks/results.json`` and writes its section of ``benchmarks/RESULTS.md`` and
``docs/benchmarks.md`` and the chart from them. These tests time nothing: they pin
that the committed pages say what the committed figures say, three runs a row, in
plain figures beside their targets.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
import statistics
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def record() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_record", BENCHMARKS / "record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def results() -> dict[str, object]:
    return json.loads((BENCHMARKS / "results.json").read_text(encoding="utf-8"))


def section(path: pathlib.Path, name: str) -> str:
    text = path.read_text(encoding="utf-8")
    begin, end = f"<!-- begin {name} -->\n", f"\n<!-- end {name} -->"
    assert begin in text and end in text, f"{path} has no {name} section"
    return text.split(begin, 1)[1].split(end, 1)[0]


def test_the_pages_are_what_record_py_makes_of_results_json() -> None:
    module = record()
    recorded = results()
    results_md = module.results_section(recorded).rstrip()
    assert section(BENCHMARKS / "RESULTS.md", "record.py") == results_md
    assert section(ROOT / "docs" / "benchmarks.md", "record.py") == module.docs_section(recorded)


def test_every_row_is_recorded_over_three_full_runs() -> None:
    module = record()
    recorded = results()
    for name, entry in recorded["benchmarks"].items():  # type: ignore[attr-defined]
        assert not entry["quick"], f"{name}: a smoke run was recorded"
        assert len(entry["runs"]) >= 3, name
        assert all(run["load"] for run in entry["runs"]), f"{name}: a run without its load"
    for part in module.SECTIONS:
        for row in part.rows:
            assert len(module.values(recorded, row)) >= 3, row.text


def test_the_pages_give_figures_and_targets_without_verdicts() -> None:
    for path in (BENCHMARKS / "RESULTS.md", ROOT / "docs" / "benchmarks.md"):
        words = re.findall(r"\b(?:met|missed|MISSED)\b", path.read_text(encoding="utf-8"))
        assert not words, f"{path}: {words}"


def test_the_chart_is_committed_and_shown_on_the_benchmarks_page() -> None:
    chart = ROOT / "docs" / "assets" / "benchmarks.png"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](assets/benchmarks.png)" in (ROOT / "docs" / "benchmarks.md").read_text("utf-8")


def test_a_section_is_replaced_and_the_rest_of_the_page_kept(tmp_path: pathlib.Path) -> None:
    module = record()
    page = tmp_path / "page.md"
    module.replace_section(page, "compare.py", "compare's figures")
    module.replace_section(page, "record.py", "first", at_start=True)
    module.replace_section(page, "record.py", "second", at_start=True)
    module.replace_section(page, "compare.py", "compare's new figures")
    assert page.read_text(encoding="utf-8") == (
        "<!-- begin record.py -->\nsecond\n<!-- end record.py -->\n\n"
        "<!-- begin compare.py -->\ncompare's new figures\n<!-- end compare.py -->\n"
    )


def test_the_chart_is_drawn_from_the_recorded_figures(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("matplotlib")  # the bench extra
    module = record()
    module.chart(results(), tmp_path / "chart.png")
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def fixture_results(tmp_path: pathlib.Path) -> pathlib.Path:
    """A small ``results.json``: one benchmark, three runs, written the way a benchmark
    writes its ``--json`` (``benchmarks/_results.py``)."""
    spec = importlib.util.spec_from_file_location("benchmarks_results", BENCHMARKS / "_results.py")
    assert spec is not None and spec.loader is not None
    results_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(results_module)
    raw = tmp_path / "schema.json"
    runs = [
        results_module.run({"invalid.15": ratio, "tool": 2.0}, load=[load, 1.0, 0.5])
        for ratio, load in ((1.5, 3.0), (1.8, 4.0), (2.5, 5.0))
    ]
    results_module.dump(raw, "schema", runs)
    entry = json.loads(raw.read_text(encoding="utf-8"))
    entry |= {"command": ".venv/bin/python benchmarks/schema.py --runs 3", "quick": False}
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text(json.dumps({"benchmarks": {"schema": entry}}), "utf-8")
    return out


def test_render_writes_the_pages_from_a_results_file(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("matplotlib")  # the bench extra: --render draws the chart too
    module = record()
    out = fixture_results(tmp_path)
    assert module.main(["--render", "--out", str(out)]) == 0
    assert json.loads((out / "results.json").read_text("utf-8"))["benchmarks"]["schema"]
    assert (out / "benchmarks.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    docs = (out / "benchmarks.md").read_text("utf-8")
    row = "| invalid arguments, 15 properties / jsonschema-rs `iter_errors` "
    assert f"{row}| 1.80x | 1.50 to 2.50x | ≤ 3x |" in docs
    assert "over 3 runs" in docs and "`schema` 3.0 to 5.0" in docs  # the runs' load
    assert "not measured" in docs  # the benchmarks the fixture leaves out say so


def test_the_chart_is_a_link_to_itself_at_full_size() -> None:
    page = (ROOT / "docs" / "benchmarks.md").read_text("utf-8")
    assert re.search(r"\[!\[[^]]+\]\(assets/benchmarks\.png\)\]\(assets/benchmarks\.png\)", page)


def test_every_row_beyond_its_target_on_the_page_says_why() -> None:
    module = record()
    recorded = results()
    page = section(ROOT / "docs" / "benchmarks.md", "record.py")
    for part in module.SECTIONS:
        for row in part.rows:
            found = module.values(recorded, row)
            if row.docs and found and module.beyond(row.target, statistics.median(found)):
                assert row.note, f"{row.docs}: beyond {row.target} without a note"
                assert f"- {row.docs}: " in page and row.note in page


def test_beyond_reads_the_targets_as_bounds() -> None:
    beyond = record().beyond
    assert beyond("≤ 2 ms", 3.6) and not beyond("≤ 2 ms", 2.0)
    assert beyond("≥ 100x", 99.0) and not beyond("≥ 100x", 230.0)
    assert beyond("0", 1.0) and not beyond("0", 0.0)
    assert not beyond("≤ 1 s", 0.37) and beyond("≤ 1.05x", 1.06)
    assert not beyond("aim ≤ 1x", 5.0) and not beyond("", 5.0)
