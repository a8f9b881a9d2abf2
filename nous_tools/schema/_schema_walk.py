"""Walking a JSON Schema: its subschemas and their paths, its ``$ref``\\ s and
where they point, whether they go round in a circle, and the schemas that accept
every mapping. Validation compiles with these and words its failures with them;
a ``$ref`` is never fetched here.
"""

from __future__ import annotations

import collections.abc as c
import typing as t
import urllib.parse

_ONE_SUBSCHEMA = (
    "additionalItems",
    "additionalProperties",
    "contains",
    "contentSchema",
    "else",
    "if",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_LIST_OF_SUBSCHEMAS = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP_OF_SUBSCHEMAS = (
    "$defs",
    "definitions",
    "dependencies",
    "dependentSchemas",
    "patternProperties",
    "properties",
)

#: Keywords that never change whether an instance is valid (``format`` aside).
_ANNOTATIONS = frozenset(
    {
        "$comment",
        "$defs",
        "$schema",
        "$vocabulary",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "default",
        "definitions",
        "deprecated",
        "description",
        "examples",
        "readOnly",
        "title",
        "writeOnly",
    }
)

#: Keywords of a schema that accepts every mapping (``{"type": "object",
#: "properties": {}}`` and the like); see ``accepts_every_mapping``.
_TRIVIAL_OBJECT_KEYWORDS = _ANNOTATIONS | {
    "additionalProperties",
    "format",
    "patternProperties",
    "properties",
    "required",
    "type",
}


def each_ref(plain: dict[str, t.Any]) -> c.Iterator[tuple[str, tuple[object, ...]]]:
    """Every ``$ref`` of ``plain`` and where it is (the path of the ``$ref`` key)."""
    for node, where in each_subschema_at(plain):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref, (*where, "$ref")


def steps(root: object, path: c.Sequence[str | int]) -> c.Iterator[str | int]:
    """``path`` with each step an ``int`` only where it indexes an array (an object
    key that looks like a number may come back from jsonschema-rs as an ``int``)."""
    node: t.Any = root
    for step in path:
        if isinstance(node, list) and type(step) is int:
            yield step
            node = node[step] if 0 <= step < len(node) else None
        else:
            key = str(step)
            yield key
            node = node.get(key) if isinstance(node, dict) else None


def subschemas(node: dict[str, t.Any]) -> c.Iterator[tuple[tuple[object, ...], object]]:
    """``(path steps, subschema)`` for every subschema directly inside ``node``."""
    for keyword in _ONE_SUBSCHEMA:
        if keyword in node:
            yield (keyword,), node[keyword]
    items = node.get("items")
    if isinstance(items, list):
        yield from (((("items", i)), item) for i, item in enumerate(items))
    elif items is not None:
        yield ("items",), items
    for keyword in _LIST_OF_SUBSCHEMAS:
        group = node.get(keyword)
        if isinstance(group, list):
            yield from (((keyword, i), item) for i, item in enumerate(group))
    for keyword in _MAP_OF_SUBSCHEMAS:
        group = node.get(keyword)
        if isinstance(group, dict):
            yield from (((keyword, key), item) for key, item in group.items())


def each_subschema_at(
    schema: dict[str, t.Any],
) -> c.Iterator[tuple[dict[str, t.Any], tuple[object, ...]]]:
    """``schema`` and every subschema in it with its path, each once (a ``$ref``
    is not followed)."""
    seen: set[int] = set()
    stack: list[tuple[object, tuple[object, ...]]] = [(schema, ())]
    while stack:
        node, where = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        yield node, where
        stack.extend((sub, (*where, *steps)) for steps, sub in subschemas(node))


def used_formats(schema: dict[str, t.Any]) -> set[str]:
    return {
        node["format"]
        for node, _ in each_subschema_at(schema)
        if isinstance(node.get("format"), str)
    }


def has_ref_cycle(schema: dict[str, t.Any]) -> bool:
    """True when following subschemas and ``$ref``\\ s from the root can come back
    to a schema on the way (a ``$ref`` that is not a JSON pointer counts as one, and
    so do ``$dynamicRef`` and ``$recursiveRef``)."""
    on_path: set[int] = set()
    done: set[int] = set()
    # An explicit stack of (node, children iterator) instead of recursion.
    stack: list[tuple[dict[str, t.Any], c.Iterator[object]]] = []

    def children(node: dict[str, t.Any]) -> c.Iterator[object]:
        yield from (sub for _, sub in subschemas(node))
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield pointer_target(schema, ref)
        if "$dynamicRef" in node or "$recursiveRef" in node:
            yield UNRESOLVED

    def enter(node: object) -> bool:
        if node is UNRESOLVED:
            return True
        if not isinstance(node, dict) or id(node) in done:
            return False
        if id(node) in on_path:
            return True
        on_path.add(id(node))
        stack.append((node, children(node)))
        return False

    if enter(schema):
        return True
    while stack:
        node, pending = stack[-1]
        child = next(pending, _DONE)
        if child is _DONE:
            stack.pop()
            on_path.discard(id(node))
            done.add(id(node))
        elif enter(child):
            return True
    return False


_DONE = object()
UNRESOLVED = object()


def pointer_target(root: dict[str, t.Any], ref: str) -> object:
    """The subschema a ``#/...`` JSON pointer names, else ``UNRESOLVED``."""
    if not ref.startswith("#"):
        return UNRESOLVED
    target: object = root
    for token in urllib.parse.unquote(ref[1:]).split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and token in target:
            target = target[token]
        elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
            target = target[int(token)]
        else:
            return UNRESOLVED
    return target


def accepts_every_mapping(schema: c.Mapping[str, t.Any]) -> bool:
    """True for ``{"type": "object", "properties": {}}`` and its kin: no keyword
    that could refuse a mapping."""
    if not _TRIVIAL_OBJECT_KEYWORDS.issuperset(schema):
        return False
    kind = schema.get("type", "object")
    return (
        (kind == "object" or (isinstance(kind, list) and "object" in kind))
        and schema.get("properties", {}) == {}
        and schema.get("patternProperties", {}) == {}
        and schema.get("required", []) == []
        and schema.get("additionalProperties", True) in (True, {})
    )


def schema_at(root: dict[str, t.Any], path: c.Sequence[str | int]) -> object:
    """The node at ``path`` (a schema path: keywords, keys and indices, ``$ref``
    steps followed when they point into ``root``), or None."""
    node: object = root
    for step in path:
        if isinstance(node, dict) and step == "$ref" and isinstance(node.get("$ref"), str):
            node = pointer_target(root, node["$ref"])
            if node is UNRESOLVED:
                return None
            continue
        inside = isinstance(node, dict) and step in node
        if inside or (isinstance(node, list) and type(step) is int and 0 <= step < len(node)):
            node = node[step]  # type: ignore[index]
        else:
            return None
    return node
