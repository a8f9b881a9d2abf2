"""OpenAI's strict mode for a tool's parameters schema, and the way back (private).

Strict mode (``"strict": true`` in an OpenAI tool definition) makes the model's
arguments always match the schema, but it accepts only a subset of JSON Schema:

- every object lists **all** its properties in ``required`` and has
  ``"additionalProperties": false``;
- an optional parameter is expressed as a union with ``null`` (the model sends
  ``null`` when it has nothing to say);
- a number of keywords are refused (:data:`UNSUPPORTED`), ``format`` takes only
  :data:`FORMATS`, and every value needs a type;
- only the keywords of :data:`KEPT` may appear: annotations that constrain nothing
  (``$schema``, ``$id``, ``$comment``, ``default``, ``examples``, ``deprecated``,
  ``readOnly``, ``writeOnly``, the ``content*`` keywords) and keywords JSON Schema
  does not define (``x-...`` extensions, OpenAPI's ``nullable``...) are left out.

:func:`strict_schema` rewrites a schema into that form, or raises ``ValueError``
naming the keyword that cannot be expressed. :func:`nulls_to_defaults` is the way
back for the arguments: a ``None`` sent for a parameter that was optional (and
whose own schema does not accept ``null``) is dropped, so the parameter's default
applies as if the model had left it out.

>>> schema = {"type": "object", "properties": {"city": {"type": "string"},
...           "days": {"type": "integer", "default": 1}}, "required": ["city"]}
>>> strict = strict_schema(schema)
>>> strict["required"], strict["properties"]["days"], strict["additionalProperties"]
(['city', 'days'], {'type': ['integer', 'null']}, False)
>>> nulls_to_defaults(schema, {"city": "Oslo", "days": None})
{'city': 'Oslo'}
>>> strict_schema({"type": "object", "properties": {"tags": {"type": "array",
...                "items": {"type": "string"}, "uniqueItems": True}}})
Traceback (most recent call last):
...
ValueError: 'uniqueItems' (at tags) is not supported by OpenAI's strict mode
"""

from __future__ import annotations

import collections.abc as c
import copy
import typing as t

__all__ = [
    "FORMATS",
    "KEPT",
    "UNSUPPORTED",
    "NullPlan",
    "apply_null_plan",
    "null_plan",
    "nulls_to_defaults",
    "strict_schema",
]

Schema = dict[str, t.Any]

#: Keywords OpenAI's strict mode refuses (Structured Outputs, "supported schemas").
UNSUPPORTED: tuple[str, ...] = (
    "allOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "prefixItems",
    "minLength",
    "maxLength",
    # the same constraints in older drafts, and references strict mode cannot follow
    "dependencies",
    "additionalItems",
    "$dynamicRef",
    "$recursiveRef",
)

#: Keywords strict mode takes, kept as they are: the structure (``type``,
#: ``properties``, ``required``, ``additionalProperties``, ``items``, ``anyOf``,
#: ``enum``, ``const``, local ``$ref`` and ``$defs``/``definitions``), the words a model
#: reads (``description``, ``title``) and the constraints OpenAI lists as supported.
#: Any other keyword is left out (it constrains nothing) or refused (:data:`UNSUPPORTED`).
KEPT = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "enum",
        "const",
        "$ref",
        "$defs",
        "definitions",
        "description",
        "title",
        "format",
        "pattern",
        "multipleOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
    }
)

#: The string formats strict mode accepts.
FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)

#: How deep ``$ref``s with sibling keywords are inlined before giving up.
_MAX_INLINE = 32


def _where(path: tuple[str, ...]) -> str:
    return (
        "".join(
            (f"[{part}]" if part.isdigit() else (f".{part}" if i else part))
            for i, part in enumerate(path)
        )
        or "(root)"
    )


def _refuse(keyword: str, path: tuple[str, ...], why: str = "") -> ValueError:
    detail = f": {why}" if why else ""
    return ValueError(
        f"'{keyword}' (at {_where(path)}) is not supported by OpenAI's strict mode{detail}"
    )


def strict_schema(schema: c.Mapping[str, t.Any]) -> Schema:
    """A new schema in OpenAI's strict form (``schema`` is left as it is).

    Raises ``ValueError`` naming the keyword (and where it is) when the schema uses
    something strict mode cannot express: a keyword of :data:`UNSUPPORTED`, a
    ``format`` outside :data:`FORMATS`, an object whose extra keys are typed
    (``additionalProperties`` other than false, e.g. a ``dict[str, int]``
    parameter) or free-form (no ``properties``), an array without ``items``, a
    value of any type (no ``type``), a ``$ref`` that is not a local JSON pointer,
    or a root that is not an object. Keywords outside :data:`KEPT` that constrain
    nothing (``$schema``, ``default``, ``examples``...) are left out.
    """
    if not isinstance(schema, c.Mapping):
        raise ValueError(f"a parameters schema must be a mapping, got {type(schema).__name__}")
    if schema.get("type") != "object":
        keyword = "anyOf" if "anyOf" in schema else "type"
        raise _refuse(keyword, (), "the parameters schema must be an object")
    root = copy.deepcopy(dict(schema))
    return _strict(root, (), root, 0)


def _strict(schema: t.Any, path: tuple[str, ...], root: Schema, inlined: int) -> Schema:
    if not isinstance(schema, c.Mapping):
        raise ValueError(f"the schema at {_where(path)} is not an object: {schema!r}")
    for keyword in UNSUPPORTED:
        if keyword in schema:
            raise _refuse(keyword, path)
    # Only the keywords strict mode takes: the others constrain nothing ($schema,
    # default, examples, x-... extensions) and are left out.
    out: Schema = {key: value for key, value in schema.items() if key in KEPT}
    fmt = out.get("format")
    if fmt is not None and fmt not in FORMATS:
        raise _refuse(
            "format", path, f"format {fmt!r} (strict mode takes {', '.join(sorted(FORMATS))})"
        )

    ref = out.get("$ref")
    if ref is not None:
        if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
            why = f"only local references (JSON pointers: '#/...') are, not {ref!r}"
            raise _refuse("$ref", path, why)
        if len(out) > 1:  # strict mode wants a $ref alone: inline its target
            if inlined >= _MAX_INLINE:
                raise _refuse("$ref", path, "references nest too deeply to inline")
            target = _resolve(root, ref, path)
            merged = {**target, **{k: v for k, v in out.items() if k != "$ref"}}
            return _strict(merged, path, root, inlined + 1)
        return out

    for key in ("$defs", "definitions"):
        defs = out.get(key)
        if isinstance(defs, c.Mapping):
            out[key] = {
                name: _strict(sub, (*path, key, str(name)), root, inlined)
                for name, sub in defs.items()
            }

    kind = out.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind} if isinstance(kind, str) else set()
    if not kinds and not any(k in out for k in ("anyOf", "enum", "const")):
        raise _refuse("type", path, "a value of any type cannot be described; give it a type")

    if "object" in kinds:
        _strict_object(out, path, root, inlined)
    if "array" in kinds:
        items = out.get("items")
        if not isinstance(items, c.Mapping):
            why = "an array needs one schema for its items"
            raise _refuse("items", path, why)
        out["items"] = _strict(items, (*path, "items"), root, inlined)

    any_of = out.get("anyOf")
    if any_of is not None:
        if not isinstance(any_of, list) or not any_of:
            raise _refuse("anyOf", path, "it must be a non-empty list")
        out["anyOf"] = [
            _strict(branch, (*path, "anyOf", str(i)), root, inlined)
            for i, branch in enumerate(any_of)
        ]
    return out


def _strict_object(out: Schema, path: tuple[str, ...], root: Schema, inlined: int) -> None:
    properties = out.get("properties")
    extra = out.get("additionalProperties", False)
    if extra is not False:
        why = "an object's extra keys cannot be typed or allowed (a dict parameter)"
        raise _refuse("additionalProperties", path, why)
    if properties is None:
        if path:  # a free-form nested object
            raise _refuse("additionalProperties", path, "an object without properties is free-form")
        properties = {}
    if not isinstance(properties, c.Mapping):
        raise _refuse("properties", path, "it must be a mapping")
    required = out.get("required") or []
    new: dict[str, t.Any] = {}
    for name, sub in properties.items():
        converted = _strict(sub, (*path, str(name)), root, inlined)
        new[name] = converted if name in required else _nullable(converted, root)
    out["properties"] = new
    out["required"] = list(new)
    out["additionalProperties"] = False


def _nullable(schema: Schema, root: c.Mapping[str, t.Any]) -> Schema:
    """``schema`` that also accepts ``null`` (unchanged when it already does)."""
    if _accepts_null(schema, root):
        return schema
    kind = schema.get("type")
    if "enum" in schema:
        out = dict(schema)
        out["enum"] = [*schema["enum"], None]
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list):
            out["type"] = [*kind, "null"]
        return out
    if "anyOf" in schema and kind is None:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    if isinstance(kind, str) and "const" not in schema:
        return {**schema, "type": [kind, "null"]}
    if isinstance(kind, list) and "const" not in schema:
        return {**schema, "type": [*kind, "null"]}
    inner = {k: v for k, v in schema.items() if k not in ("description", "title")}
    wrapped: Schema = {"anyOf": [inner, {"type": "null"}]}
    for key in ("description", "title"):
        if key in schema:
            wrapped[key] = schema[key]
    return wrapped


def _resolve(root: c.Mapping[str, t.Any], ref: str, path: tuple[str, ...]) -> Schema:
    """The target of a local ``$ref`` (a JSON pointer into ``root``)."""
    if ref == "#":
        return dict(root)
    if not ref.startswith("#/"):
        raise _refuse("$ref", path, f"cannot resolve {ref!r}")
    node: t.Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, c.Mapping) or part not in node:
            raise _refuse("$ref", path, f"{ref!r} points nowhere")
        node = node[part]
    if not isinstance(node, c.Mapping):
        raise _refuse("$ref", path, f"{ref!r} does not point to a schema")
    return dict(node)


# -- the way back: None for an optional parameter -> its default -----------------------


def _accepts_null(schema: object, root: c.Mapping[str, t.Any] | None, depth: int = 0) -> bool:
    """True when ``null`` is a valid value under ``schema`` (as far as can be told
    without a full validator: types, enums, consts, unions and local references)."""
    if schema is True or not isinstance(schema, c.Mapping):
        return schema is True
    if depth > _MAX_INLINE:
        return True  # cannot tell: leave the value alone
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return "enum" not in schema or None in schema["enum"]
    if "enum" in schema:
        return None in schema["enum"] and kind is None
    if "const" in schema:
        return schema["const"] is None
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            return any(_accepts_null(b, root, depth + 1) for b in branches)
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if root is None:
            return True
        try:
            target = _resolve(root, ref, ())
        except ValueError:
            return True  # cannot tell: leave the value alone
        return _accepts_null(target, root, depth + 1)
    return kind is None  # no type at all: any value, null included


def nulls_to_defaults(
    schema: c.Mapping[str, t.Any], arguments: c.Mapping[str, t.Any]
) -> c.Mapping[str, t.Any]:
    """``arguments`` without the ``None`` values sent for optional properties whose
    schema does not accept ``null`` — at the top level and in nested objects (also
    inside arrays), as deep as the schema describes them. Returns ``arguments``
    itself when nothing changes, else a new dict (the input is never mutated)."""
    return _fill(schema, arguments, schema, 0)


def _fill(
    schema: c.Mapping[str, t.Any],
    value: c.Mapping[str, t.Any],
    root: c.Mapping[str, t.Any],
    depth: int,
) -> c.Mapping[str, t.Any]:
    if depth > _MAX_INLINE:
        return value
    ref = schema.get("$ref")
    if isinstance(ref, str):
        try:
            schema = {**_resolve(root, ref, ()), **{k: v for k, v in schema.items() if k != "$ref"}}
        except ValueError:
            return value
    properties = schema.get("properties")
    if not isinstance(properties, c.Mapping):
        # An optional nested object is a union with null: use its one object branch.
        branches = [
            b
            for b in schema.get("anyOf") or schema.get("oneOf") or ()
            if isinstance(b, c.Mapping) and ("properties" in b or "$ref" in b)
        ]
        if len(branches) == 1:
            return _fill(branches[0], value, root, depth + 1)
        return value
    required = schema.get("required")
    required = required if isinstance(required, list) else []
    changed: dict[str, t.Any] | None = None
    for key, item in value.items():
        sub = properties.get(key) if isinstance(key, str) else None
        if not isinstance(sub, c.Mapping):
            continue
        if item is None:
            if key not in required and not _accepts_null(sub, root):
                if changed is None:
                    changed = dict(value)
                del changed[key]
            continue
        new = _fill_value(sub, item, root, depth + 1)
        if new is not item:
            if changed is None:
                changed = dict(value)
            changed[key] = new
    return value if changed is None else changed


def _fill_value(
    schema: c.Mapping[str, t.Any], item: t.Any, root: c.Mapping[str, t.Any], depth: int
) -> t.Any:
    if isinstance(item, c.Mapping):
        return _fill(schema, item, root, depth)
    if isinstance(item, list):
        items = schema.get("items")
        if not isinstance(items, c.Mapping):
            return item
        new = [_fill_value(items, element, root, depth + 1) for element in item]
        if all(a is b for a, b in zip(new, item, strict=True)):
            return item
        return new
    return item


# -- the same walk, planned once per schema -------------------------------------------


class NullPlan(t.NamedTuple):
    """Where in an object :func:`nulls_to_defaults` can change anything: the optional
    properties whose schema refuses ``null`` (a ``None`` there is dropped), and the
    properties whose values may hold such properties in turn."""

    drop: tuple[str, ...]
    nested: tuple[tuple[str, _ValuePlan], ...]


class _ValuePlan(t.NamedTuple):
    """The plan for a value: for it as an object, and for each item as an array."""

    as_object: NullPlan | None
    as_array: _ValuePlan | None


def null_plan(schema: c.Mapping[str, t.Any]) -> NullPlan | None:
    """What :func:`nulls_to_defaults` would look at for ``schema``, worked out once:
    None when it can change nothing (no optional property that refuses ``null``,
    at any depth), so that arguments need no walk at all."""
    return _object_plan(schema, schema, 0, {})


def apply_null_plan(plan: NullPlan, arguments: c.Mapping[str, t.Any]) -> c.Mapping[str, t.Any]:
    """:func:`nulls_to_defaults` of the schema ``plan`` was made from, visiting only
    the places the plan names."""
    return _apply_object(plan, arguments)


_Memo = dict[tuple[int, int], t.Any]


def _object_plan(
    schema: c.Mapping[str, t.Any], root: c.Mapping[str, t.Any], depth: int, memo: _Memo
) -> NullPlan | None:
    """The plan of :func:`_fill` for ``schema`` at ``depth`` (None: no change)."""
    if depth > _MAX_INLINE:
        return None
    key = (id(schema), depth)
    if key in memo:
        return t.cast("NullPlan | None", memo[key])
    memo[key] = None  # a cycle within one depth cannot happen; this ends any other
    plan = _make_object_plan(schema, root, depth, memo)
    memo[key] = plan
    return plan


def _make_object_plan(
    schema: c.Mapping[str, t.Any], root: c.Mapping[str, t.Any], depth: int, memo: _Memo
) -> NullPlan | None:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        try:
            schema = {**_resolve(root, ref, ()), **{k: v for k, v in schema.items() if k != "$ref"}}
        except ValueError:
            return None
    properties = schema.get("properties")
    if not isinstance(properties, c.Mapping):
        branches = [
            b
            for b in schema.get("anyOf") or schema.get("oneOf") or ()
            if isinstance(b, c.Mapping) and ("properties" in b or "$ref" in b)
        ]
        if len(branches) == 1:
            return _object_plan(branches[0], root, depth + 1, memo)
        return None
    required = schema.get("required")
    required = required if isinstance(required, list) else []
    drop: list[str] = []
    nested: list[tuple[str, _ValuePlan]] = []
    for name, sub in properties.items():
        if not isinstance(name, str) or not isinstance(sub, c.Mapping):
            continue
        if name not in required and not _accepts_null(sub, root):
            drop.append(name)
        inner = _value_plan(sub, root, depth + 1, memo)
        if inner is not None:
            nested.append((name, inner))
    if not drop and not nested:
        return None
    return NullPlan(tuple(drop), tuple(nested))


def _value_plan(
    schema: c.Mapping[str, t.Any], root: c.Mapping[str, t.Any], depth: int, memo: _Memo
) -> _ValuePlan | None:
    """The plan of :func:`_fill_value` for ``schema`` at ``depth``."""
    as_object = _object_plan(schema, root, depth, memo)
    items = schema.get("items")
    as_array = _value_plan(items, root, depth + 1, memo) if isinstance(items, c.Mapping) else None
    if as_object is None and as_array is None:
        return None
    return _ValuePlan(as_object, as_array)


def _apply_object(plan: NullPlan, value: c.Mapping[str, t.Any]) -> c.Mapping[str, t.Any]:
    changed: dict[str, t.Any] | None = None
    for name in plan.drop:
        if name in value and value[name] is None:
            if changed is None:
                changed = dict(value)
            del changed[name]
    for name, inner in plan.nested:
        item = value.get(name)
        if item is None:
            continue
        new = _apply_value(inner, item)
        if new is not item:
            if changed is None:
                changed = dict(value)
            changed[name] = new
    return value if changed is None else changed


def _apply_value(plan: _ValuePlan, item: t.Any) -> t.Any:
    if isinstance(item, c.Mapping):
        return item if plan.as_object is None else _apply_object(plan.as_object, item)
    if isinstance(item, list) and plan.as_array is not None:
        inner = plan.as_array
        new = [_apply_value(inner, element) for element in item]
        if all(a is b for a, b in zip(new, item, strict=True)):
            return item
        return new
    return item
