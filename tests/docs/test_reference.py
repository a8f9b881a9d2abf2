"""The API reference says what each name is, in its own words, and agrees with the code.

The reference (``make docs``) is generated from the docstrings, so these tests fail
on the drift it would show: a public name, method, property or field with no
docstring of its own (or one borrowed, as a field whose default factory is ``dict``
shows ``dict``'s), a public docstring that sends the reader to a private helper,
and a table of options whose defaults read differently from the signature.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
import types
import typing as t
from pathlib import Path

import attrs
import pytest

import nous_tools
from nous_tools import Tool, ToolExecutor, ToolOptions
from nous_tools.contrib import django as contrib_django

ROOT = Path(__file__).resolve().parents[2]

#: The public names: the package's, and its public modules' and integrations' own.
PUBLIC: list[tuple[str, object]] = [
    *((name, getattr(nous_tools, name)) for name in nous_tools.__all__ if name != "__version__"),
    *((f"contrib.django.{name}", getattr(contrib_django, name)) for name in contrib_django.__all__),
]


def _own_doc(obj: object) -> str:
    if isinstance(obj, type):
        return str(vars(obj).get("__doc__") or "")
    if isinstance(obj, property):
        return str(obj.fget.__doc__ or "") if obj.fget else ""
    if isinstance(obj, (classmethod, staticmethod)):
        return str(obj.__func__.__doc__ or "")
    return str(getattr(obj, "__doc__", "") or "")


def _module_level_docs(module: types.ModuleType) -> set[str]:
    """Names assigned at module level with a docstring after them or ``#:`` before."""
    source = inspect.getsource(module)
    tree = ast.parse(source)
    lines = source.splitlines()
    documented: set[str] = set()
    body = tree.body
    for node, after in zip(body, [*body[1:], None], strict=True):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = {target.id for target in targets if isinstance(target, ast.Name)}
        string_after = (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        )
        comment_before = lines[node.lineno - 2].lstrip().startswith("#:")
        if string_after or comment_before:
            documented |= names
    return documented


def _documented_fields(cls: type) -> set[str]:
    """Fields of ``cls`` with an attribute docstring after them or ``#:`` above them."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    body = t.cast(ast.ClassDef, ast.parse(source).body[0]).body
    documented: set[str] = set()
    for node, after in zip(body, [*body[1:], None], strict=True):
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        string_after = (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        )
        if string_after or lines[node.lineno - 2].lstrip().startswith("#:"):
            documented.add(node.target.id)
    return documented


def test_every_public_name_has_a_docstring_of_its_own() -> None:
    missing = []
    for name, obj in PUBLIC:
        if isinstance(obj, types.ModuleType):
            ok = bool(obj.__doc__)
        elif isinstance(obj, type) or callable(obj):
            ok = bool(_own_doc(obj).strip())
            if not isinstance(obj, type) and not inspect.isroutine(obj):  # an alias
                module = inspect.getmodule(nous_tools.results)
                ok = module is not None and name in _module_level_docs(module)
        else:
            ok = False
        if not ok:
            missing.append(name)
    assert missing == []


def test_every_public_method_and_property_of_a_public_class_has_a_docstring() -> None:
    missing = []
    for name, obj in PUBLIC:
        if not isinstance(obj, type):
            continue
        for attribute, value in vars(obj).items():
            if attribute.startswith("_"):
                continue
            routine = inspect.isfunction(value) or isinstance(
                value, (property, classmethod, staticmethod)
            )
            if routine and not _own_doc(value).strip():
                missing.append(f"{name}.{attribute}")
    assert missing == []


def test_every_public_field_is_described_and_none_borrows_its_factorys_docstring() -> None:
    """A field is described by its class's docstring (named in it as ``field``), a
    docstring of its own, a ``#:`` comment, or ``metadata={"description": ...}``;
    ``Tool``'s options by the table of reference/tool-options.md (tests/docs/test_docs.py).
    A field whose default factory has a docstring (``dict``, ``list``, a class) must
    say what it is itself: the reference would show the factory's words."""
    undescribed, borrowed = [], []
    for name, obj in PUBLIC:
        if not (isinstance(obj, type) and attrs.has(obj)):
            continue
        doc = _own_doc(obj)
        own = _documented_fields(obj)
        for field in attrs.fields(obj):
            if field.name.startswith("_"):
                continue
            described = field.metadata.get("description")
            factory = field.default.factory if isinstance(field.default, attrs.Factory) else None
            if factory is not None and getattr(factory, "__doc__", None) and not described:
                borrowed.append(f"{name}.{field.name}")
            if obj is Tool:
                continue
            named = re.search(rf"``{field.name}(``|\[|\.)", doc) is not None
            if not (described or named or field.name in own):
                undescribed.append(f"{name}.{field.name}")
    assert borrowed == []
    assert undescribed == []


def test_tool_call_arguments_says_what_it_is_not_what_dict_is() -> None:
    (arguments,) = [f for f in attrs.fields(nous_tools.ToolCall) if f.name == "arguments"]
    assert arguments.metadata["description"].startswith("The arguments")


_PRIVATE_ROLE = re.compile(r":(?:meth|func|class|attr|data|obj|mod):`~?(?:[\w.]*\.)?_[a-z]\w*`")


def test_no_public_docstring_sends_the_reader_to_a_private_helper() -> None:
    offending = []
    for name, obj in PUBLIC:
        docs = [(name, _own_doc(obj))]
        if isinstance(obj, type):
            docs += [
                (f"{name}.{attribute}", _own_doc(value))
                for attribute, value in vars(obj).items()
                if not attribute.startswith("_")
            ]
        offending += [where for where, doc in docs if _PRIVATE_ROLE.search(doc)]
    assert offending == []


def _executor_rows() -> dict[str, str]:
    page = (ROOT / "docs" / "reference" / "tool-options.md").read_text(encoding="utf-8")
    section = page[page.index("## Executor options") :]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3 or cells[0] in ("option", "---"):
            if rows and not line.startswith("|"):
                break
            continue
        for option in re.findall(r"`(\w+)`", cells[0]):
            rows[option] = cells[1]
    return rows


def test_the_executor_options_table_lists_every_option_with_its_signature_default() -> None:
    rows = _executor_rows()
    parameters = inspect.signature(ToolExecutor.__init__).parameters
    options = {name for name in parameters if name != "self"}
    assert set(rows) == options
    computed = {"max_workers", "process_workers"}  # None: a default worked out at start
    for name in options - computed:
        default = parameters[name].default
        shown = f'`"{default}"`' if isinstance(default, str) else f"`{default!r}`"
        cell = re.sub(r"(?<=\d)_(?=\d)", "", rows[name])  # `100_000` is 100000
        assert cell.startswith(shown), (name, rows[name], shown)


def test_tool_options_name_every_option_a_tool_takes() -> None:
    """``@tool(...)`` and ``Tool.from_function(...)`` are typed by ToolOptions: an
    option missing there is refused by a type checker (``retry_on`` was)."""
    taken = {field.alias for field in attrs.fields(Tool) if field.init} - {"function"}
    assert set(ToolOptions.__annotations__) == taken


@pytest.mark.parametrize(
    "page", sorted((ROOT / "docs" / "reference" / "api").glob("*.md")), ids=lambda p: p.name
)
def test_the_reference_pages_name_only_what_exists(page: Path) -> None:
    import importlib

    text = page.read_text(encoding="utf-8")
    for module_name, members in re.findall(
        r"^::: ([\w.]+)\n(?:.*\n)*?\s+members: \[([^\]]*)\]", text, flags=re.M
    ):
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # an integration whose extra is not installed here
            continue
        for member in (m.strip() for m in members.split(",")):
            assert hasattr(module, member), (page.name, module_name, member)
