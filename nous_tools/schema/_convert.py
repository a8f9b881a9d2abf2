"""Arguments structured into their annotated types; results unstructured into JSON data.

A model sends JSON: strings for dates, objects for dataclasses, values for enums.
A tool's function is annotated with Python types. After validation and before the
first attempt (once per call, never per retry), each argument whose annotation
needs it is *structured* into that type with `cattrs`_:

>>> import dataclasses, datetime, enum
>>> class Priority(enum.Enum):
...     LOW = "low"
...     HIGH = "high"
>>> @dataclasses.dataclass
... class Room:
...     name: str
...     floor: int = 0
>>> def book(when: datetime.datetime, room: Room, level: Priority = Priority.LOW) -> str:
...     return f"{room.name} at {when:%H:%M}, {level.name}"
>>> converter = compile_converter(book, takes_ctx=False)
>>> arguments = converter.convert("book", {
...     "when": "2024-05-01T09:30:00Z", "room": {"name": "Ada"}, "level": "high"})
>>> arguments["when"], arguments["room"], arguments["level"]
(datetime.datetime(2024, 5, 1, 9, 30, tzinfo=datetime.timezone.utc), Room(name='Ada', floor=0), <Priority.HIGH: 'high'>)
>>> book(**arguments)
'Ada at 09:30, HIGH'

What the conversion cannot do is an ``Err`` worded as validation words it, and a
tool whose annotations are all JSON scalars gets no converter at all (no cost):

>>> converter.convert("book", {"when": "tomorrow", "room": {"name": "Ada"}}).reason.message
"Invalid arguments for 'book': Type mismatch: when: expected date-time, got string"
>>> compile_converter(lambda a, b: a, takes_ctx=False) is None
True

Values a tool returns go the other way (:func:`unstructure`), into JSON data:

>>> unstructure({"room": Room("Ada"), "level": Priority.HIGH, "on": datetime.date(2024, 5, 1)})
{'room': {'name': 'Ada', 'floor': 0}, 'level': 'high', 'on': '2024-05-01'}

The rules:

- JSON scalars (``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``) pass through
  as the JSON gave them; an integer given for a ``float`` stays an ``int`` (an ``int``
  is a ``float`` to type checkers, PEP 484), at any depth. ``list[X]`` and
  ``dict[str, X]`` of such types are passed as they are, too.
- ``Enum`` by value (by name when its values are not JSON data, as the schema says),
  ``Literal`` (its ``Enum`` members too), dataclasses, attrs classes (by alias),
  ``TypedDict`` and ``NamedTuple`` (from an array), ``list``/``tuple``/``set``/
  ``frozenset``/``dict`` and the ``collections.abc`` kinds of them, ``Optional`` and
  unions (the first member that accepts the value as it is, else the first that
  converts it), ``datetime``/``date``/``time`` (ISO 8601, see ``_iso``),
  ``timedelta`` (ISO 8601 duration, or a number of seconds), ``UUID``, ``Decimal``
  (a string, or a number), ``Path``, ``IPv4Address``/``IPv6Address``, ``bytes``
  (a string, UTF-8 encoded), and pydantic models and types through pydantic's
  ``TypeAdapter`` (pydantic is only imported for them).
- A value already of the annotated type (a Python caller's) is kept as it is.
- Checks are strict: ``"3"`` is not an ``int`` and ``1.5`` is not truncated; an
  object with an unknown key for a dataclass is refused.
- An annotation conversion does not know (an arbitrary class, a string that cannot
  be resolved) is passed through unconverted.

.. _cattrs: https://catt.rs
"""

from __future__ import annotations

import collections.abc as c
import enum
import functools
import inspect
import types
import typing as t

import attrs

from nous_tools._util._log import log as _safe_log
from nous_tools.errors import ToolError
from nous_tools.results import Err
from nous_tools.schema import _type_schemas as _types
from nous_tools.schema._annotations import POSITIONAL, resolved_annotations, signature_of

if t.TYPE_CHECKING:
    import cattrs

__all__ = ["ArgumentConverter", "compile_converter", "structure", "unstructure"]

_log = _safe_log

_EMPTY = inspect.Parameter.empty


def _leaves(
    error: BaseException, path: tuple[str | int, ...] = ()
) -> c.Iterator[tuple[tuple[str | int, ...], BaseException]]:
    """Every leaf failure inside ``error`` (ours, cattrs' or pydantic's), with its path."""
    import cattrs.errors  # loaded already: a converter made the error

    from nous_tools.schema._structuring import Failures, Missing

    if isinstance(error, Failures):
        for where, leaf in error.failures:
            yield from _leaves(leaf, path + where)
    elif isinstance(error, cattrs.errors.BaseValidationError):
        for inner in error.exceptions:
            step: tuple[str | int, ...] = ()
            for note in getattr(inner, "__notes__", ()):
                if isinstance(note, cattrs.errors.AttributeValidationNote):
                    step = (note.name,)
                elif isinstance(note, cattrs.errors.IterableValidationNote):
                    step = (note.index,)
            if isinstance(inner, KeyError) and step:
                inner = Missing()
            yield from _leaves(inner, path + step)
    elif isinstance(error, cattrs.errors.ForbiddenExtraKeysError):
        names = ", ".join(sorted(str(name) for name in error.extra_fields))
        yield path, ValueError(f"unexpected field(s): {names}")
    else:
        yield path, error


def _path_text(parts: tuple[str | int, ...]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text or "(root)"


def _failure_err(
    tool_name: str, failures: list[tuple[tuple[str | int, ...], BaseException]]
) -> Err:
    from nous_tools.schema._structuring import Mismatch, Missing, shorten

    missing: list[str] = []
    mismatches: list[tuple[str, str, str]] = []
    invalid: list[tuple[str, str]] = []
    for path, leaf in failures:
        where = shorten(_path_text(path))
        if isinstance(leaf, Missing):
            missing.append(where)
        elif isinstance(leaf, Mismatch):
            mismatches.append((where, leaf.expected, leaf.actual))
        else:
            invalid.append((where, shorten(_exception_text(leaf))))
    from nous_tools.schema._validation import failure_message  # imported on the failure path only

    message, original = failure_message(missing, mismatches, invalid)
    _log.debug("Invalid arguments for tool '%s'", tool_name)  # the model's error, answered to it
    return Err(
        ToolError(
            f"Invalid arguments for '{tool_name}': {message}",
            tool_name=tool_name,
            attempt=1,
            original_error=original,
        )
    )


def _exception_text(exc: BaseException) -> str:
    text = str(exc) if exc.args else ""
    return text or type(exc).__name__


@functools.cache
def _converter() -> cattrs.Converter:
    """The one converter, made at first use (importing cattrs costs start-up time
    that tools without conversion should not pay)."""
    from nous_tools.schema._structuring import make_converter  # with the converter only

    return make_converter()


def structure(value: t.Any, annotation: t.Any) -> t.Any:
    """``value`` (JSON data) as an instance of ``annotation``, as a tool receives it.
    Raises when it cannot be converted."""
    return _converter().get_structure_hook(annotation)(value, annotation)


def unstructure(value: t.Any) -> t.Any:
    """``value`` as JSON data: dataclasses, attrs classes and pydantic models become
    objects, enums their values, dates and times ISO 8601 strings, ``UUID``,
    ``Decimal`` and ``Path`` strings, tuples and sets arrays. Anything conversion does
    not know is returned unchanged."""
    return _converter().unstructure(value)


# --------------------------------------------------------------------------- which need it


def needs_conversion(annotation: object, seen: tuple[type, ...] = ()) -> bool:
    """False when JSON data is already what ``annotation`` asks for (JSON scalars,
    ``Any``, lists and string-keyed dicts of them), or when it is a type conversion
    does not know (passed through)."""
    if annotation is _EMPTY or annotation is None or any(annotation is k for k in _AS_GIVEN):
        return False
    if isinstance(annotation, (str, t.ForwardRef)):
        return False
    origin = t.get_origin(annotation)
    args = t.get_args(annotation)
    if origin is t.Annotated:
        return _types.is_pydantic_type(args[0]) or needs_conversion(args[0], seen)
    if origin is t.Literal:
        return any(isinstance(value, (enum.Enum, bytes)) for value in args)
    if origin is t.Union or origin is types.UnionType:
        return any(needs_conversion(arg, seen) for arg in args)
    if isinstance(annotation, t.TypeVar):
        bound = annotation.__bound__
        return bound is not None and needs_conversion(bound, seen)
    if hasattr(annotation, "__supertype__"):
        return needs_conversion(annotation.__supertype__, seen)
    cls = origin if origin is not None else annotation
    if not isinstance(cls, type) or cls is object:
        return False
    if issubclass(cls, enum.Enum):
        return True
    if issubclass(cls, (str, int, float)) and not issubclass(cls, tuple):
        return False
    if _types.is_typeddict(cls):
        if cls in seen:
            return False
        return any(needs_conversion(hint, (*seen, cls)) for _, hint, _ in _types.class_fields(cls))
    if issubclass(cls, c.Mapping):
        if len(args) != 2:
            return False
        key, value = args
        return key not in (str, t.Any) or needs_conversion(value, seen)
    if _types.is_sequence_kind(cls) and not issubclass(cls, c.Set):
        return bool(args) and needs_conversion(args[0], seen)
    return _is_known(cls)


#: Annotations whose JSON values are passed as they are (the commonest ones, at once).
_AS_GIVEN = (t.Any, str, int, float, bool, object, type(None))


def _is_known(cls: type) -> bool:
    """A class conversion builds (everything but the JSON kinds handled above)."""
    return (
        issubclass(cls, (tuple, c.Set, bytes))
        or _types.string_format(cls) is not None  # dates, UUID, Decimal, Path, addresses
        or attrs.has(cls)
        or _types.is_dataclass(cls)
        or _types.is_pydantic_type(cls)
    )


# --------------------------------------------------------------------------- per tool


class ArgumentConverter:
    """The conversion of one tool's arguments, built once (see :func:`compile_converter`).

    Immutable and safe to share between threads.
    """

    __slots__ = ("_extra", "_plan")

    def __init__(
        self,
        plan: tuple[tuple[str, t.Any], ...],
        extra: t.Any | None,
    ) -> None:
        converter = _converter()
        from nous_tools.schema._structuring import Lazy  # loaded by _converter()

        self._plan = tuple((name, Lazy(converter, hint)) for name, hint in plan)
        self._extra = Lazy(converter, extra) if extra is not None else None

    def convert(self, tool_name: str, arguments: c.Mapping[str, t.Any]) -> dict[str, t.Any] | Err:
        """A new dict of ``arguments`` with each converted to its parameter's type, or
        an ``Err(ToolError(attempt=1))`` naming every value that could not be.
        Never raises, and never changes ``arguments``."""
        try:
            converted = dict(arguments)
            failures: list[tuple[tuple[str | int, ...], BaseException]] = []
            for name, hook in self._plan:
                if name in converted:
                    try:
                        converted[name] = hook(converted[name])
                    except RecursionError:
                        raise
                    except Exception as exc:
                        failures.extend(_leaves(exc, (name,)))
            extra = self._extra
            if extra is not None:
                known = {name for name, _ in self._plan}
                for name in list(converted):
                    if name not in known:
                        try:
                            converted[name] = extra(converted[name])
                        except RecursionError:
                            raise
                        except Exception as exc:
                            failures.extend(_leaves(exc, (name,)))
        except RecursionError:
            failures = [((), RecursionError())]
        except Exception as exc:  # never raise: name what went wrong
            failures = [((), ValueError(f"arguments could not be converted: {exc!r}"))]
        if any(isinstance(leaf, RecursionError) for _, leaf in failures):
            failures = [((), ValueError("arguments nested too deeply to convert"))]
        if failures:
            return _failure_err(tool_name, failures)
        return converted


def compile_converter(
    function: c.Callable[..., t.Any], *, takes_ctx: bool
) -> ArgumentConverter | None:
    """The converter for ``function``'s keyword parameters (the context left out
    when ``takes_ctx``), or None when no annotation needs converting."""
    try:
        signature = signature_of(function)
    except (TypeError, ValueError):
        return None
    parameters = list(signature.parameters.values())
    if takes_ctx and parameters and parameters[0].kind in POSITIONAL:
        parameters = parameters[1:]
    if all(parameter.annotation is _EMPTY for parameter in parameters):
        return None  # nothing annotated, nothing to convert (and no hints to resolve)
    hints = resolved_annotations(function)
    plan: list[tuple[str, t.Any]] = []
    extra: t.Any | None = None
    for parameter in parameters:
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            continue
        annotation = hints.get(parameter.name, parameter.annotation)
        if not needs_conversion(annotation):
            continue
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            extra = annotation
        else:
            plan.append((parameter.name, annotation))
    if not plan and extra is None:
        return None
    return ArgumentConverter(tuple(plan), extra)
