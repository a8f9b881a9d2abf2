"""The layout keeps the architecture readable (``docs/concepts/architecture.md``).

``make lint`` runs the import-linter contracts of ``pyproject.toml``; these tests pin
what the contracts cannot say: every module is in a layer, no file is too long to
read in one sitting, and a value wired by the package's ``__init__`` works however
it is first imported.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "nous_tools"

#: The longest a module may be (lines): one concept, small enough to read at once.
MAX_LINES = 800


def _contracts() -> list[dict[str, object]]:
    tomllib = pytest.importorskip("tomllib")
    with open(ROOT / "pyproject.toml", "rb") as file:
        config = tomllib.load(file)
    return list(config["tool"]["importlinter"]["contracts"])


def _layer_names() -> set[str]:
    (layers,) = [c for c in _contracts() if c["id"] == "layers"]
    names: set[str] = set()
    for layer in layers["layers"]:  # type: ignore[attr-defined]
        for name in str(layer).replace("|", ":").split(":"):
            names.add(name.strip())
    return names


def test_every_module_of_the_package_is_in_a_layer() -> None:
    tops = {
        path.stem if path.is_file() else path.name
        for path in PACKAGE.iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py")
        or (path.is_dir() and (path / "__init__.py").exists())
    }
    missing = sorted(tops - _layer_names())
    assert not missing, f"add to the layers contract in pyproject.toml: {missing}"


def test_the_layers_contract_names_only_modules_that_exist() -> None:
    gone = sorted(
        name
        for name in _layer_names()
        if not (PACKAGE / f"{name}.py").exists() and not (PACKAGE / name).is_dir()
    )
    assert not gone, f"remove from the layers contract in pyproject.toml: {gone}"


def test_no_file_in_the_package_is_over_800_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted(PACKAGE.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"split these (lines): {long}"


@pytest.mark.parametrize(
    "code",
    [
        "from nous_tools.tool import Tool; Tool(name='x', function=len, parameters={})",
        "from nous_tools.tool import tool; assert tool(lambda a: a).parameters",
        "from nous_tools.content import Text, as_content; "
        "assert as_content([Text('a'), {'b': 1}])[1].text == '{\"b\": 1}'",
    ],
)
def test_a_value_imported_by_its_own_path_is_wired(code: str) -> None:
    # Importing any module of the package runs nous_tools/__init__.py first, which
    # hands the values what they need of the layers above them (nous_tools._wiring).
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


def test_the_architecture_picture_is_drawn_from_the_contracts() -> None:
    pytest.importorskip("tomllib")
    import runpy

    script = runpy.run_path(str(ROOT / "docs" / "architecture.py"))
    drawn = script["draw"](script["load"]())
    on_disk = (ROOT / "docs" / "assets" / "architecture.svg").read_text(encoding="utf-8")
    assert drawn == on_disk, "run: .venv/bin/python docs/architecture.py"
