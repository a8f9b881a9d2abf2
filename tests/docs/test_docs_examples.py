"""The documentation's examples are code you can copy: typed, tested as printed.

- Every ``>>>`` session of the README and the docs passes ``mypy --strict``, and so
  do the example apps whose code the pages include.
- Code a page includes (``--8<-- "examples/flask_app.py:views"``, pymdownx.snippets)
  names a file and a section that exist, and the Flask and Django views on the
  pages are included from the tested apps, not copied.
- ``examples/approve_later.py`` prints what its page shows.
- The site shows each ``>>>`` session as a Python console session (``pycon``) and
  copies it without prompts and output (``mkdocs_ext/pycon_fences.py``,
  ``docs/assets/copy.css``).
- Words of the Elixir projects are explained where they first appear; words of
  the implementation ("lanes") stay out.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import importlib.util
import io
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]

#: A line that includes code from a file (pymdownx.snippets): ``--8<-- "path:section"``.
_SNIPPET = re.compile(r'^(?P<indent>[ \t]*)-{1,}8<-{1,}[ \t]+"(?P<target>[^"]+)"[ \t]*$', re.M)
#: A section marker in an included file.
_MARKER = re.compile(r"-{1,}8<-{1,}[ \t]+\[[ \t]*(start|end)[ \t]*:[ \t]*([\w-]+)[ \t]*\]")


def _section(path: Path, name: str | None) -> str:
    """What ``--8<-- "path:name"`` includes: the lines between the section's markers,
    dedented (the whole file without markers when ``name`` is None)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if name is None:
        return "\n".join(line for line in lines if not _MARKER.search(line))
    inside, found, kept = False, False, []
    for line in lines:
        marker = _MARKER.search(line)
        if marker and marker.group(2) == name:
            if marker.group(1) == "start":
                inside = found = True
                continue
            break
        if inside and not marker:
            kept.append(line)
    assert found, f"{path.name} has no section {name!r}"
    import textwrap

    return textwrap.dedent("\n".join(kept))


def _snippets(page: Path) -> list[tuple[Path, str | None]]:
    targets = []
    for match in _SNIPPET.finditer(page.read_text(encoding="utf-8")):
        path, _, section = match.group("target").partition(":")
        targets.append((ROOT / path, section or None))
    return targets


def _page_module_name(page: Path) -> str:
    return "page_" + re.sub(r"\W", "_", str(page.relative_to(ROOT).with_suffix("")))


# -- mypy --strict over the examples --------------------------------------------------


def test_the_readme_and_every_docs_example_pass_mypy_strict(tmp_path: Path) -> None:
    """Each page's ``>>>`` examples, in order, are one module; the example apps the
    pages include are checked as they are. Run with the project's mypy settings."""
    files: list[Path] = []
    for page in PAGES:
        examples = doctest.DocTestParser().get_examples(page.read_text(encoding="utf-8"))
        if not examples:
            continue
        module = tmp_path / f"{_page_module_name(page)}.py"
        module.write_text("".join(example.source for example in examples), encoding="utf-8")
        files.append(module)
    included = sorted({path for page in PAGES for path, _ in _snippets(page)})
    assert files and included
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / ".mypy_cache"), "--no-error-summary",
         *map(str, files), *map(str, included)],
        capture_output=True, text=True, cwd=str(ROOT), timeout=600,
    )  # fmt: skip
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert errors == [], "\n".join(errors)
    assert done.returncode == 0, done.stdout + done.stderr


# -- code included from the tested files ---------------------------------------------


def test_every_included_file_and_section_exists_and_parses() -> None:
    seen = 0
    for page in PAGES:
        for path, section in _snippets(page):
            assert path.is_file(), (page.name, path)
            code = _section(path, section)
            assert code.strip(), (page.name, path, section)
            if path.suffix == ".py":
                ast.parse(code)
            seen += 1
    assert seen >= 10


@pytest.mark.parametrize(
    ("page", "included"),
    [
        (
            "how-to/approve-later.md",
            {"examples/flask_app.py:views", "examples/django_app.py:views"},
        ),
        (
            "how-to/django.md",
            {
                "examples/django_app.py:settings",
                "examples/django_app.py:tools",
                "examples/django_app.py:views",
            },
        ),
        ("examples/flask.md", {"examples/flask_app.py"}),
        ("examples/django.md", {"examples/django_app.py"}),
        ("examples/approve-later.md", {"examples/approve_later.py"}),
    ],
)
def test_the_pages_show_the_views_of_the_tested_apps(page: str, included: set[str]) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    targets = {match.group("target") for match in _SNIPPET.finditer(text)}
    assert included <= targets
    assert "def resolve(" not in text  # a view is never copied into a page by hand


def test_the_django_page_opens_with_the_transaction_rule() -> None:
    text = (DOCS / "how-to" / "django.md").read_text(encoding="utf-8")
    first = text.split("\n\n")[1]  # the first paragraph after the title
    for words in (
        "worker thread",
        "does not see the request's open",
        "`ATOMIC_REQUESTS`",
        "`TestCase`",
        "`transaction.atomic()`",
        "pass it the data",
        "`timeout=None` *and*",
        "outside a batch",
    ):
        assert words in first, words


def _load_example(name: str) -> types.ModuleType:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "examples"))


def test_approve_later_end_to_end_prints_what_its_page_shows() -> None:
    pytest.importorskip("flask")
    shown: list[str] = []
    _load_example("approve_later").main(shown.append)
    page = (DOCS / "examples" / "approve-later.md").read_text(encoding="utf-8")
    block = page.split("Its output:\n\n```text\n", 1)[1].split("```", 1)[0]
    assert "\n".join(shown) + "\n" == block
    with contextlib.redirect_stdout(io.StringIO()) as out:
        _load_example("approve_later").main()
    assert out.getvalue() == block


# -- copying from the site -----------------------------------------------------------


def _hook() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        "pycon_fences", ROOT / "mkdocs_ext" / "pycon_fences.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_doctest_on_the_site_is_a_pycon_block_copied_without_prompts() -> None:
    hook = _hook()
    assert doctest.testmod(hook).failed == 0
    convert = hook.pycon_fences
    python_block = re.compile(r"^[ \t]*```python\n(.*?)^[ \t]*```", re.M | re.S)
    for page in sorted(DOCS.rglob("*.md")):
        shown = convert(page.read_text(encoding="utf-8"))
        sessions = [block for block in python_block.findall(shown) if ">>>" in block]
        assert sessions == [], page  # every >>> session is fenced pycon on the site
    assert convert("  ```python\n  >>> 1\n  1\n  ```") == "  ```pycon\n  >>> 1\n  1\n  ```"
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "- mkdocs_ext/pycon_fences.py" in config and "- assets/copy.css" in config
    css = (DOCS / "assets" / "copy.css").read_text(encoding="utf-8")
    assert re.search(r"\[data-md-copying\] \.gp,\s*\.highlight code\[data-md-copying\] \.go", css)
    assert "white-space: pre-wrap" in css


def test_the_readme_and_home_page_sessions_are_pycon_and_fit_a_line() -> None:
    for page in (ROOT / "README.md", DOCS / "index.md", DOCS / "getting-started.md"):
        text = page.read_text(encoding="utf-8")
        for example in doctest.DocTestParser().get_examples(text):
            for line in example.source.splitlines():
                assert len(line) + 4 <= 88, (page.name, line)  # ">>> " and the code


# -- words ---------------------------------------------------------------------------


def test_advice_is_explained_where_it_first_appears_and_lanes_are_gone() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = readme.index("advice")
    assert "hooks around a tool call" in readme[first : first + 200]
    advice = (DOCS / "concepts" / "advice.md").read_text(encoding="utf-8")
    assert "hooks" in advice.split("\n\n")[1]
    for page in PAGES:
        assert not re.search(r"\blanes?\b", page.read_text(encoding="utf-8")), page


def test_the_coming_from_page_maps_the_elixir_names() -> None:
    page = (DOCS / "coming-from-nous-or-minga.md").read_text(encoding="utf-8")
    for name in ("Nous.ToolExecutor", "Nous.RunContext", "advice", "execute_approved"):
        assert name in page
    assert "coming-from-nous-or-minga.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "coming-from-nous-or-minga.md" in (DOCS / "index.md").read_text(encoding="utf-8")


def test_execute_approved_by_name_is_documented_as_the_programs_own_decision() -> None:
    approval = (DOCS / "concepts" / "approval.md").read_text(encoding="utf-8")
    assert '!!! danger "`execute_approved` by name runs anything, `deny` tools included"' in (
        approval
    )
    from nous_tools import Registry

    doc = Registry.execute_approved.__doc__ or ""
    assert "**the program's own decision**" in doc and '**even a ``"deny"`` tool runs**' in doc
