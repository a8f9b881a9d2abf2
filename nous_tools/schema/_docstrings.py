"""Reading docstrings: a function's cleaned docstring, where its argument section
starts, and the description of each parameter from a Google (``Args:``), NumPy
(``Parameters``) or Sphinx (``:param name:``) argument section.
"""

from __future__ import annotations

import inspect
import re

from nous_tools.schema._annotations import unwrap_partial

_GOOGLE_HEADER = re.compile(
    r"^(?P<indent>\s*)(?:Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments"
    r"|Other Parameters|Attributes)\s*:\s*$",
    re.IGNORECASE,
)
_GOOGLE_ENTRY = re.compile(
    r"^\*{0,2}(?P<name>[A-Za-z_]\w*)\s*(?:\(.*?\))?\s*:(?:\s+(?P<text>.*))?$"
)
_NUMPY_HEADER = re.compile(
    r"^(?P<indent>\s*)(?:Parameters|Other Parameters|Keyword Arguments|Attributes)\s*$",
    re.IGNORECASE,
)
_NUMPY_ANY_HEADER = re.compile(r"^\s*\w[\w ]*$")
_NUMPY_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_NUMPY_ENTRY = re.compile(
    r"^(?P<names>\*{0,2}[A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)\s*(?::.*)?$"
)
_SPHINX_FIELD = re.compile(
    r"^(?P<indent>\s*):(?:param|parameter|arg|argument|key|keyword|ivar)\s+"
    r"(?:[^:]*?\s+)?\*{0,2}(?P<name>[A-Za-z_]\w*)\s*:(?P<text>.*)$"
)
_ANY_FIELD = re.compile(r"^\s*:\w+")


def docstring(fn: object) -> str:
    """The cleaned docstring of ``fn``: a class's own (not a base class's), a routine's
    (inherited from the method it overrides when it has none), or for a callable
    instance its class's, else its ``__call__``'s."""
    target = unwrap_partial(fn)
    if inspect.isclass(target):
        doc = vars(target).get("__doc__")
    elif inspect.isroutine(target):
        doc = inspect.getdoc(target)
    else:
        doc = vars(type(target)).get("__doc__")
        call = inspect.getattr_static(type(target), "__call__", None)
        if not doc and call is not None:
            doc = inspect.getdoc(call)
    return inspect.cleandoc(doc) if isinstance(doc, str) else ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_numpy_header(lines: list[str], index: int, pattern: re.Pattern[str]) -> bool:
    return (
        pattern.match(lines[index]) is not None
        and index + 1 < len(lines)
        and _NUMPY_UNDERLINE.match(lines[index + 1]) is not None
    )


def starts_section(lines: list[str], index: int) -> bool:
    line = lines[index]
    return (
        _GOOGLE_HEADER.match(line) is not None
        or _is_numpy_header(lines, index, _NUMPY_ANY_HEADER)
        or _ANY_FIELD.match(line) is not None
    )


def parameter_docs(doc: str) -> dict[str, str]:
    """Per-parameter descriptions from Google, NumPy and Sphinx argument sections."""
    lines = doc.splitlines()
    found: dict[str, list[str]] = {}
    for parse in (_google_docs, _numpy_docs, _sphinx_docs):
        for name, parts in parse(lines).items():
            found.setdefault(name, parts)
    docs = {name: " ".join(part for part in parts if part) for name, parts in found.items()}
    return {name: text for name, text in docs.items() if text}


def _google_docs(lines: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    index = 0
    while index < len(lines):
        header = _GOOGLE_HEADER.match(lines[index])
        index += 1
        if header is None:
            continue
        header_indent = len(header["indent"])
        entry_indent: int | None = None
        current: list[str] | None = None
        while index < len(lines):
            line = lines[index]
            if line.strip():
                indent = _indent(line)
                if indent <= header_indent:
                    break
                if entry_indent is None:
                    entry_indent = indent
                if indent <= entry_indent:
                    entry = _GOOGLE_ENTRY.match(line.strip())
                    current = None
                    if entry is not None:
                        current = found.setdefault(entry["name"], [])
                        current.append(entry["text"] or "")
                elif current is not None:
                    current.append(line.strip())
            index += 1
    return found


def _numpy_docs(lines: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    index = 0
    while index < len(lines):
        if not _is_numpy_header(lines, index, _NUMPY_HEADER):
            index += 1
            continue
        header_indent = _indent(lines[index])
        index += 2
        current: list[list[str]] = []
        while index < len(lines):
            line = lines[index]
            if line.strip():
                if _indent(line) <= header_indent:
                    entry = _NUMPY_ENTRY.match(line.strip())
                    if entry is None or _is_numpy_header(lines, index, _NUMPY_ANY_HEADER):
                        break
                    names = [name.strip().lstrip("*") for name in entry["names"].split(",")]
                    current = [found.setdefault(name, []) for name in names]
                else:
                    for parts in current:
                        parts.append(line.strip())
            index += 1
    return found


def _sphinx_docs(lines: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    field_indent = 0
    for line in lines:
        field = _SPHINX_FIELD.match(line)
        if field is not None:
            current = found.setdefault(field["name"], [])
            current.append(field["text"].strip())
            field_indent = len(field["indent"])
        elif not line.strip():
            continue
        elif current is not None and _indent(line) > field_indent and not _ANY_FIELD.match(line):
            current.append(line.strip())
        else:
            current = None
    return found
