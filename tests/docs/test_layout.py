"""The layout keeps the architecture readable (``docs/concepts/architecture.md``).

``make lint`` runs the import-linter contracts of ``pyproject.toml``; these tests pin
what the contracts cannot say: every module is in a layer, no contract ignores an
import, no import cycle spans two folders, each layer above a value registers
what the value asks of it from its own module, and a value works however it is
first imported.
"""

from __future__ import annotations

import re
import subprocess
import sys
import typing as t
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "nous_tools"


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


def _folder(graph: t.Any, module: str) -> str:
    """The folder a module's file is in (a package's own ``__init__`` is in its folder)."""
    return module if graph.find_children(module) else module.rpartition(".")[0]


def _cycles(graph: t.Any) -> list[list[str]]:
    """The import cycles of ``graph`` (its strongly connected components of more than
    one module; TYPE_CHECKING and in-function imports count), by Tarjan's walk."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(graph.find_modules_directly_imported_by(module)):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            cycle = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                cycle.append(other)
                if other == module:
                    break
            if len(cycle) > 1:
                found.append(sorted(cycle))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycle_spans_two_folders() -> None:
    # Modules of one folder may lean on each other; folders stand in layers, so a
    # cycle between two folders is a knot the layers contract would miss.
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the dev extra)")
    graph = grimp.build_graph("nous_tools", cache_dir=None)
    cycles = _cycles(graph)
    assert cycles, "the walk finds the cycles inside folders (a check that it looks at all)"
    spanning = [c for c in cycles if len({_folder(graph, m) for m in c}) > 1]
    assert not spanning, f"import cycles across folders: {spanning}"


#: Each hook by which a value gets code of a layer above it, and the one module that
#: registers that code: the layer that owns it (the import it calls the hook
#: through points down, and the contracts see it).
REGISTERED_BY = {
    "register_schema_code": "nous_tools/schema/__init__.py",
    "register_redecorate": "nous_tools/registry/_registry.py",
    "register_value_text": "nous_tools/_rendering.py",
}


def test_each_hook_of_a_value_is_registered_by_the_layer_that_owns_the_code() -> None:
    calls: dict[str, list[str]] = {hook: [] for hook in REGISTERED_BY}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for hook in REGISTERED_BY:
            if re.search(rf"(?<!def )\b{hook}\(", text):
                calls[hook].append(path.relative_to(ROOT).as_posix())
    assert calls == {hook: [module] for hook, module in REGISTERED_BY.items()}


@pytest.mark.parametrize(
    "code",
    [
        "from nous_tools.tool import Tool; Tool(name='x', function=len, parameters={})",
        "from nous_tools.tool import tool; assert tool(lambda a: a).parameters",
        "from nous_tools.tool import tool\n"
        "from nous_tools.registry import Registry\n"
        "registry = Registry()\n"
        "def f(a: int) -> int:\n"
        "    return a\n"
        "made = tool(timeout=2)(registry.register(f))\n"
        "assert registry.lookup('f') is made and made.timeout == 2.0",
        "from nous_tools.content import Text, as_content; "
        "assert as_content([Text('a'), {'b': 1}])[1].text == '{\"b\": 1}'",
    ],
)
def test_a_value_imported_by_its_own_path_has_what_the_layers_above_register(code: str) -> None:
    # Importing any module of the package runs nous_tools/__init__.py first, which
    # imports the layers that register what the values ask of them.
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


def test_the_architecture_picture_is_drawn_from_the_contracts() -> None:
    pytest.importorskip("tomllib")
    import runpy

    script = runpy.run_path(str(ROOT / "docs" / "architecture.py"))
    drawn = script["draw"](script["load"]())
    on_disk = (ROOT / "docs" / "assets" / "architecture.svg").read_text(encoding="utf-8")
    assert drawn == on_disk, "run: .venv/bin/python docs/architecture.py"


def test_no_contract_ignores_an_import() -> None:
    # Every exception to a layer rule is gone; a new one is a design change, not a line.
    ignored = {c["id"]: c.get("ignore_imports") for c in _contracts() if c.get("ignore_imports")}
    assert not ignored, f"contracts with ignored imports: {ignored}"
