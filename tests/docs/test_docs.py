"""The documentation keeps up with the code.

The ``>>>`` examples of every page run as doctests (``--doctest-glob=*.md``); these
tests pin what doctests cannot: that the site's navigation holds every page, that
the tables of ``Tool`` options and of signals list everything there is, that the
README stays a README, and that the code blocks that are not doctests still parse.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import threading
import types
import typing as t
from pathlib import Path

import attrs
import pytest

from nous_tools import Tool, ToolExecutor, signals

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _nav_pages() -> list[str]:
    """The pages ``mkdocs.yml`` names in its ``nav`` (``Title: path.md`` entries)."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:") :]
    return re.findall(r":\s+(\S+\.md)\s*$", nav, flags=re.MULTILINE)


def _table(page: Path, first_header: str) -> dict[str, list[str]]:
    """The rows of the Markdown table whose first header is ``first_header``,
    keyed by the text of their first cell (without backticks)."""
    rows: dict[str, list[str]] = {}
    inside = False
    for line in page.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_header:
            inside = True
            continue
        if inside and not line.startswith("|"):
            break
        if inside and not set(cells[0]) <= set("-: "):
            rows[cells[0].strip("`")] = cells
    return rows


# -- the site -----------------------------------------------------------------------


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    nav = _nav_pages()
    pages = sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md"))
    assert sorted(nav) == pages
    assert len(nav) == len(set(nav)), "a page is in the nav twice"


def test_the_api_reference_names_every_public_name_of_the_package() -> None:
    import nous_tools

    reference = "\n".join(
        path.read_text(encoding="utf-8") for path in (DOCS / "reference" / "api").glob("*.md")
    )
    documented = set(re.findall(r"\w+", reference))
    missing = [
        name
        for name in nous_tools.__all__
        if name not in documented and name not in {"__version__", "signals"}
    ]
    assert missing == []


# -- the tables ---------------------------------------------------------------------


def _shown(default: object) -> str:
    """How the options table writes a default: strings in double quotes, else repr."""
    return f'`"{default}"`' if isinstance(default, str) else f"`{default!r}`"


def test_the_tool_options_table_lists_every_option_with_its_default() -> None:
    rows = _table(DOCS / "reference" / "tool-options.md", "option")
    options = {field.alias for field in attrs.fields(Tool) if field.init}
    assert set(rows) == options
    for field in attrs.fields(Tool):
        if not field.init or field.default is attrs.NOTHING or field.name == "takes_ctx":
            continue  # required, or detected from the function (the table says how)
        if field.alias == "requires_approval":
            continue  # a constructor keyword read back as a property
        if field.alias == "retries":  # not given (None): 1, or 0 for ask/destructive tools
            assert rows["retries"][1] == (
                '`1`; `0` for a tool that is `approval="ask"` or `destructive=True`'
            )
            continue
        assert rows[field.alias][1].startswith(_shown(field.default)), (field.alias, rows)


def test_the_tool_options_table_states_the_two_defaults_that_matter() -> None:
    page = (DOCS / "reference" / "tool-options.md").read_text(encoding="utf-8")
    assert "**A tool is retried once by default**" in page
    assert "**Every tool with the default 30 s timeout runs in a worker thread**" in page
    defaults = Tool(name="t", function=lambda: None)
    assert (defaults.retries, defaults.timeout) == (1, 30.0)
    assert '**but a tool that is `approval="ask"` or `destructive=True` is not retried' in page


def _emitted_keys() -> dict[str, set[str]]:
    """Every measurement and metadata key each signal is sent with, from real calls."""
    every = (*signals.ALL_SIGNALS, *signals.REPORT_SIGNALS)
    keys: dict[str, set[str]] = {signal.name: set() for signal in every}

    receivers = []
    for signal in every:

        def on(sender: t.Any, *, measurements: t.Any, metadata: t.Any, _s: t.Any = signal) -> None:
            keys[_s.name] |= set(measurements) | set(metadata)

        signal.connect(on)
        receivers.append((signal, on))

    def flaky(ctx: t.Any) -> str:
        ctx.report_progress(ctx.retry, 2, "trying")
        ctx.log("info", "attempt", retry=ctx.retry)
        if ctx.retry == 0:
            raise ConnectionError("reset")
        return "ok"

    release = threading.Event()
    try:
        with ToolExecutor(max_workers=2) as executor:
            executor.execute(Tool.from_function(flaky, timeout=None), {}, call_id="call_1")
            executor.execute(
                Tool.from_function(lambda: release.wait(5), name="hang", timeout=0.05), {}
            )
    finally:
        release.set()
        for signal, on in receivers:
            signal.disconnect(on)
    return keys


def test_the_signals_table_lists_every_signal_with_every_key_it_is_sent_with() -> None:
    rows = _table(DOCS / "reference" / "signals.md", "signal")
    names = {name for name in signals.__all__ if name.startswith("tool_")}
    assert set(rows) == names
    emitted = _emitted_keys()
    for signal in (*signals.ALL_SIGNALS, *signals.REPORT_SIGNALS):
        short = next(
            name
            for name in sorted(names, key=lambda name: "execute" not in name)
            if getattr(signals, name) is signal
        )
        row = " ".join(rows[short])
        assert emitted[signal.name], signal.name
        for key in emitted[signal.name]:
            assert f"`{key}`" in row, (short, key)
    assert "same signal object" in " ".join(rows["tool_timeout"])
    assert "weak=False" in (DOCS / "reference" / "signals.md").read_text(encoding="utf-8")


# -- the README ---------------------------------------------------------------------


def test_the_readme_is_short_has_the_two_commands_and_puts_tool_calls_before_the_cli() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.split()) <= 1200
    assert "make demo" in readme and "make test" in readme
    assert readme.index("execute_tool_calls(") < readme.index("## The command line")
    assert "pip install ." in readme and "pip install nous-tools" in readme


def test_every_relative_link_of_the_readme_points_to_a_file() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((?!https?://)([^)#]+)", readme)
    assert links
    assert [link for link in links if not (ROOT / link).exists()] == []


# -- code blocks --------------------------------------------------------------------

_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize(
    "page",
    [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))],
    ids=lambda path: str(path.relative_to(ROOT)),
)
def test_python_blocks_that_are_not_doctests_still_parse(page: Path) -> None:
    for block in _PYTHON_BLOCK.findall(page.read_text(encoding="utf-8")):
        if ">>>" in block:
            continue  # a doctest: run by --doctest-glob
        ast.parse(block)


# -- the docstring converter of the site (mkdocs_ext) -------------------------------


def _load_converter() -> types.ModuleType:
    """``mkdocs_ext/griffe_docstrings.py``; griffe itself is needed only by ``make docs``,
    so a stand-in is used when it is not installed."""
    if importlib.util.find_spec("griffe") is None:
        sys.modules.setdefault(
            "griffe",
            types.SimpleNamespace(Extension=object, Object=object),  # type: ignore[arg-type]
        )
    spec = importlib.util.spec_from_file_location(
        "griffe_docstrings", ROOT / "mkdocs_ext" / "griffe_docstrings.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docstrings_are_rendered_with_fenced_doctests_literal_blocks_and_plain_roles() -> None:
    convert = _load_converter().markdown_docstring
    text = (
        "Run a :class:`~nous_tools.Tool` with :func:`execute`, once::\n"
        "\n"
        "    execute(tool)\n"
        "\n"
        ">>> 1 + 1\n"
        "2\n"
        ">>> print('a')\n"
        "a\n"
        "\n"
        "Indented, in a section:\n"
        "    >>> 3\n"
        "    3\n"
    )
    assert convert(text).splitlines() == [
        "Run a `Tool` with `execute`, once:",
        "",
        "```text",
        "execute(tool)",
        "```",
        "",
        "```pycon",
        ">>> 1 + 1",
        "2",
        ">>> print('a')",
        "a",
        "```",
        "",
        "Indented, in a section:",
        "    ```pycon",
        "    >>> 3",
        "    3",
        "    ```",
    ]
