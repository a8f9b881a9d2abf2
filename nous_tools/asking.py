"""Tools that ask: ``ctx.sample`` (a model's answer) and ``ctx.elicit`` (a person's).

A tool asks through its :class:`~nous_tools.RunContext`:

* ``ctx.sample(prompt_or_messages, *, max_tokens, system=None, temperature=None)``
  returns the text a language model wrote;
* ``ctx.elicit(message, schema)`` returns an :class:`Elicitation`: what the person
  chose (``"accept"``, ``"decline"`` or ``"cancel"``) and, on accept, the
  ``content`` of the form ``schema`` describes.

Served over MCP (``nous-tools serve``) both go to the MCP client
(``sampling/createMessage`` and ``elicitation/create``, or the 2026-07-28
multi-round-trip form). Anywhere else they call the context's ``sampler`` and
``elicitor`` (plain callables), and without one they raise
:class:`~nous_tools.SamplingUnavailable` / :class:`~nous_tools.ElicitationUnavailable`:

>>> from nous_tools import Elicitation, RunContext, SamplingUnavailable
>>> def sampler(messages, *, max_tokens, system=None, temperature=None):
...     return f"{len(messages)} message(s), at most {max_tokens} tokens"
>>> RunContext.new(sampler=sampler).sample("Summarise this.", max_tokens=50)
'1 message(s), at most 50 tokens'
>>> try:
...     RunContext.new().sample("Summarise this.", max_tokens=50)
... except SamplingUnavailable as exc:
...     print(type(exc).__name__)
SamplingUnavailable
>>> form = {"type": "object", "properties": {
...     "city": {"type": "string", "default": "Paris"},
...     "nights": {"type": "integer", "minimum": 1}}, "required": ["nights"]}
>>> person = lambda message, schema: Elicitation("accept", {"nights": 2})
>>> RunContext.new(elicitor=person).elicit("Where to?", form).content
{'nights': 2, 'city': 'Paris'}

An elicitation schema is the flat form MCP allows (2025-11-25): an object whose
properties are strings (``minLength``, ``maxLength``, ``format``), numbers or
integers (``minimum``, ``maximum``), booleans, and enums: untitled (``enum``),
titled (``oneOf`` of ``{"const", "title"}``), the legacy ``enumNames``, and
multi-select arrays of either (``items.enum`` / ``items.anyOf``, ``minItems``,
``maxItems``). ``default`` is kept (SEP-1034) and fills an accepted answer's
omitted fields. An answer is checked against the schema: an accepted content
that does not fit is a ``ValueError``, never passed on.
"""

from __future__ import annotations

import collections.abc as c
import math
import pickle
import typing as t

import attrs

from nous_tools.errors import ElicitationUnavailable, RootsUnavailable, SamplingUnavailable

if t.TYPE_CHECKING:
    from nous_tools.run_context import RunContext

__all__ = [
    "Elicitation",
    "Elicitor",
    "Question",
    "Root",
    "Sampler",
    "check_elicitation_schema",
    "elicitation_content_errors",
    "with_defaults",
]

ACTIONS = ("accept", "decline", "cancel")

#: A sampler: ``sampler(messages, *, max_tokens, system, temperature) -> str``, where
#: ``messages`` is a list of ``{"role": "user" | "assistant", "content": str}``.
Sampler = c.Callable[..., str]

#: An elicitor: ``elicitor(message, schema) -> Elicitation``.
Elicitor = c.Callable[[str, c.Mapping[str, t.Any]], "Elicitation"]

_ROLES = ("user", "assistant")
_STRING_FORMATS = ("email", "uri", "date", "date-time")


def _check_action(instance: object, attribute: object, value: object) -> None:
    if type(value) is not str or value not in ACTIONS:
        raise ValueError(
            f"Elicitation action must be one of {', '.join(map(repr, ACTIONS))}, got {value!r}"
        )


def _to_content(value: object) -> dict[str, t.Any] | None:
    if value is None:
        return None
    if not isinstance(value, c.Mapping):
        raise TypeError(
            f"Elicitation content must be a mapping of field names to values, "
            f"got {type(value).__name__}"
        )
    return dict(value)


@attrs.frozen(slots=True)
class Elicitation:
    """A person's answer to ``ctx.elicit``: ``action`` is ``"accept"`` (``content``
    holds the form's fields), ``"decline"`` (they said no) or ``"cancel"`` (they
    dismissed the question without choosing); ``content`` is None unless accepted."""

    action: t.Literal["accept", "decline", "cancel"] = attrs.field(validator=_check_action)
    content: dict[str, t.Any] | None = attrs.field(default=None, converter=_to_content)

    def __attrs_post_init__(self) -> None:
        if self.action != "accept" and self.content is not None:
            raise ValueError(f"an Elicitation with action {self.action!r} has no content")

    @property
    def accepted(self) -> bool:
        """True when the person accepted (``action == "accept"``)."""
        return self.action == "accept"


# -- sampling ---------------------------------------------------------------------------


def sample_messages(prompt_or_messages: object) -> list[dict[str, str]]:
    """The messages of a ``ctx.sample`` call: a prompt string is one user message; a
    sequence of ``{"role", "content"}`` mappings (roles ``user``/``assistant``, text
    content) is copied. Anything else is a ``TypeError``/``ValueError`` naming it."""
    if isinstance(prompt_or_messages, str):
        if not prompt_or_messages:
            raise ValueError("ctx.sample needs a prompt: got an empty string")
        return [{"role": "user", "content": prompt_or_messages}]
    if not isinstance(prompt_or_messages, c.Sequence) or isinstance(
        prompt_or_messages, (bytes, bytearray)
    ):
        raise TypeError(
            "ctx.sample takes a prompt (str) or a list of {'role', 'content'} messages, "
            f"got {type(prompt_or_messages).__name__}"
        )
    messages: list[dict[str, str]] = []
    for index, message in enumerate(prompt_or_messages):
        if not isinstance(message, c.Mapping):
            raise TypeError(
                f"ctx.sample message {index} must be a mapping with 'role' and 'content', "
                f"got {type(message).__name__}"
            )
        role, content = message.get("role"), message.get("content")
        if type(role) is not str or role not in _ROLES:
            raise ValueError(
                f"ctx.sample message {index} has role {role!r}; expected 'user' or 'assistant'"
            )
        if type(content) is not str:
            raise TypeError(
                f"ctx.sample message {index} has {type(content).__name__} content; "
                "expected text (str)"
            )
        messages.append({"role": role, "content": content})
    if not messages:
        raise ValueError("ctx.sample needs at least one message")
    return messages


def sample(
    ctx: RunContext[t.Any],
    prompt_or_messages: object,
    *,
    max_tokens: int,
    system: str | None = None,
    temperature: float | None = None,
) -> str:
    """``ctx.sample``: check the request, ask ``ctx.sampler``, check its answer."""
    question = Question.sample(
        prompt_or_messages, max_tokens=max_tokens, system=system, temperature=temperature
    )
    answer: str = ask(ctx, [(None, question)])[0]
    return answer


# -- elicitation ------------------------------------------------------------------------


def elicit(ctx: RunContext[t.Any], message: object, schema: object) -> Elicitation:
    """``ctx.elicit``: check the question, ask ``ctx.elicitor``, check its answer
    against ``schema`` (defaults filling omitted fields of an accepted answer)."""
    answer: Elicitation = ask(ctx, [(None, Question.elicit(message, schema))])[0]
    return answer


# -- questions --------------------------------------------------------------------------


@attrs.frozen(slots=True)
class Root:
    """One of the client's roots (``ctx.roots()``): a ``file://`` ``uri`` the client
    lets the server work in, and its ``name`` for people (None when it gave none)."""

    #: The root's ``file://`` URI.
    uri: str
    #: Its name for people, or None.
    name: str | None = None


@attrs.frozen(slots=True)
class Question:
    """One question a tool asks whoever answers for its call, as a value: made with
    :meth:`elicit` (a person fills a form), :meth:`sample` (a model writes a text) or
    :meth:`roots` (the MCP client lists its roots), and checked when made.

    ``ctx.ask_all({key: question, ...})`` asks several at once and returns their
    answers by key: an :class:`Elicitation`, a ``str`` and a tuple of :class:`Root`
    respectively. ``ctx.elicit``, ``ctx.sample`` and ``ctx.roots`` ask one. The key
    names the question to the MCP client (the key of its ``inputRequests`` at
    2026-07-28, so a client that knows the tool may answer it by name); elsewhere it
    only labels the answer.

    >>> from nous_tools import Elicitation, Question, RunContext
    >>> def sampler(messages, *, max_tokens, system=None, temperature=None):
    ...     return "Hello there!"
    >>> person = lambda message, schema: Elicitation("accept", {"name": "Ann"})
    >>> ctx = RunContext.new(sampler=sampler, elicitor=person)
    >>> form = {"type": "object", "properties": {"name": {"type": "string"}}}
    >>> answers = ctx.ask_all({
    ...     "user_name": Question.elicit("What is your name?", form),
    ...     "greeting": Question.sample("Write a greeting", max_tokens=50),
    ... })
    >>> answers["user_name"].content, answers["greeting"]
    ({'name': 'Ann'}, 'Hello there!')
    """

    #: What is asked: ``"elicit"`` (a person), ``"sample"`` (a model) or ``"roots"``.
    kind: t.Literal["elicit", "sample", "roots"]
    #: An elicitation's message to the person.
    message: str = ""
    schema: dict[str, t.Any] = attrs.field(
        factory=dict, metadata={"description": "An elicitation's form (MCP's flat form)."}
    )
    #: A sampling's messages (``{"role", "content"}``).
    messages: tuple[dict[str, str], ...] = ()
    #: A sampling's most tokens.
    max_tokens: int = 0
    #: A sampling's system prompt.
    system: str | None = None
    #: A sampling's temperature.
    temperature: float | None = None

    @classmethod
    def elicit(cls, message: object, schema: object) -> Question:
        """Ask a person to fill the form ``schema`` (MCP's flat form; see the module
        docstring), with ``message`` saying why. ``ValueError``/``TypeError`` for an
        empty message or a form MCP does not allow."""
        if type(message) is not str or not message:
            raise ValueError(f"ctx.elicit needs a message (a non-empty str), got {message!r}")
        return cls("elicit", message=message, schema=check_elicitation_schema(schema))

    @classmethod
    def sample(
        cls,
        prompt_or_messages: object,
        *,
        max_tokens: int,
        system: str | None = None,
        temperature: float | None = None,
    ) -> Question:
        """Ask a language model: a prompt or a list of messages, as ``ctx.sample``
        takes them."""
        messages = sample_messages(prompt_or_messages)
        if type(max_tokens) is not int or max_tokens < 1:
            raise ValueError(f"ctx.sample max_tokens must be an int >= 1, got {max_tokens!r}")
        if system is not None and type(system) is not str:
            raise TypeError(f"ctx.sample system must be a str or None, got {type(system).__name__}")
        if temperature is not None and (
            isinstance(temperature, bool)
            or not isinstance(temperature, (int, float))
            or not math.isfinite(temperature)
            or temperature < 0
        ):
            raise ValueError(
                f"ctx.sample temperature must be a finite number >= 0 or None, got {temperature!r}"
            )
        return cls(
            "sample",
            messages=tuple(messages),
            max_tokens=max_tokens,
            system=system,
            temperature=temperature,
        )

    @classmethod
    def roots(cls) -> Question:
        """Ask the MCP client for its roots (``roots/list``)."""
        return cls("roots")


#: Key prefix reserved for the questions nous-tools names itself.
_RESERVED = "nous_tools."


def ask(ctx: RunContext[t.Any], questions: c.Sequence[tuple[str | None, Question]]) -> list[t.Any]:
    """Put ``questions`` (``(key or None, question)`` pairs) to whoever answers for
    ``ctx`` at once; their answers in the same order, each checked (an accepted
    form against its schema, with defaults filled in)."""
    seen: set[str] = set()
    for key, question in questions:
        if type(question) is not Question:
            raise TypeError(f"ctx.ask_all takes Question values, got {type(question).__name__}")
        if key is None:
            continue
        if type(key) is not str or not key or key.startswith(_RESERVED):
            raise ValueError(
                f"a question's key must be a non-empty str not starting with "
                f"{_RESERVED!r}, got {key!r}"
            )
        if key in seen:
            raise ValueError(f"two questions have the key {key!r}")
        seen.add(key)
    answers = ctx._pose(list(questions))
    return [_checked(q, a) for (_, q), a in zip(questions, answers, strict=True)]


def _checked(question: Question, answer: object) -> t.Any:
    if question.kind == "elicit":
        return checked_answer(question.schema, answer, "the elicitor of ctx.elicit")
    if question.kind == "sample":
        if type(answer) is not str:
            raise TypeError(
                f"the sampler of ctx.sample returned {type(answer).__name__}; "
                "expected the text (str)"
            )
        return answer
    if type(answer) is not tuple or not all(type(r) is Root for r in answer):
        raise TypeError("the answer to ctx.roots must be a tuple of Root")
    return answer


def pose_one_by_one(
    ctx: RunContext[t.Any], questions: list[tuple[str | None, Question]]
) -> list[t.Any]:
    """Where questions go outside MCP: each in turn to ``ctx.elicitor`` or
    ``ctx.sampler``; there are no roots to list."""
    answers: list[t.Any] = []
    for _, question in questions:
        if question.kind == "elicit":
            elicitor = ctx.elicitor
            if elicitor is None:
                raise ElicitationUnavailable(
                    "ctx.elicit has no elicitor: the call is not served over MCP and its "
                    "RunContext has no elicitor= (a callable that asks a person)"
                )
            answers.append(elicitor(question.message, question.schema))
        elif question.kind == "sample":
            sampler = ctx.sampler
            if sampler is None:
                raise SamplingUnavailable(
                    "ctx.sample has no sampler: the call is not served over MCP and its "
                    "RunContext has no sampler= (a callable that asks a model)"
                )
            answers.append(
                sampler(
                    [dict(m) for m in question.messages],
                    max_tokens=question.max_tokens,
                    system=question.system,
                    temperature=question.temperature,
                )
            )
        else:
            raise RootsUnavailable(
                "ctx.roots has no client to ask: only a call served over MCP has roots"
            )
    return answers


def checked_answer(schema: c.Mapping[str, t.Any], answer: object, source: str) -> Elicitation:
    """``answer`` as the :class:`Elicitation` it must be (by exact type), its accepted
    content checked against ``schema`` with defaults filled in."""
    if type(answer) is not Elicitation:
        raise TypeError(f"{source} returned {type(answer).__name__}; expected an Elicitation")
    if answer.action != "accept":
        return answer
    content = with_defaults(schema, answer.content or {})
    errors = elicitation_content_errors(schema, content)
    if errors:
        raise ValueError(
            f"{source} accepted with content that does not fit the requested schema: "
            + "; ".join(errors)
        )
    return Elicitation("accept", content)


def check_elicitation_schema(schema: object) -> dict[str, t.Any]:
    """A copy of ``schema`` when it is an elicitation form MCP allows (see the module
    docstring); else a ``ValueError``/``TypeError`` naming the first problem."""
    if not isinstance(schema, c.Mapping):
        raise TypeError(f"an elicitation schema must be a mapping, got {type(schema).__name__}")
    if schema.get("type") != "object":
        raise ValueError('an elicitation schema must have "type": "object"')
    properties = schema.get("properties", {})
    if not isinstance(properties, c.Mapping):
        raise ValueError('an elicitation schema\'s "properties" must be a mapping')
    for name, spec in properties.items():
        if type(name) is not str:
            raise ValueError(f"elicitation field names must be strings, got {name!r}")
        _check_property(name, spec)
    required = schema.get("required", [])
    if not isinstance(required, c.Sequence) or isinstance(required, str):
        raise ValueError('an elicitation schema\'s "required" must be a list of field names')
    for name in required:
        if name not in properties:
            raise ValueError(f"elicitation field {name!r} is required but not in properties")
    form: dict[str, t.Any] = _plain(schema)
    return form


def _plain(value: t.Any) -> t.Any:
    """A deep copy made of dicts and lists (JSON shapes), so the form is not shared."""
    if isinstance(value, c.Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _options(spec: c.Mapping[str, t.Any], where: str, key: str) -> list[t.Any]:
    """The allowed values of an enum field: ``enum``, or the consts of ``oneOf``/``anyOf``."""
    if "enum" in spec:
        values = spec["enum"]
        if not isinstance(values, (list, tuple)) or not values:
            raise ValueError(f"elicitation field {where}: 'enum' must be a non-empty list")
        if not all(type(v) is str for v in values):
            raise ValueError(f"elicitation field {where}: enum values must be strings")
        names = spec.get("enumNames")
        if names is not None and (
            not isinstance(names, (list, tuple))
            or len(names) != len(values)
            or not all(type(n) is str for n in names)
        ):
            raise ValueError(
                f"elicitation field {where}: 'enumNames' must be one string per enum value"
            )
        return list(values)
    choices = spec.get(key)
    if not isinstance(choices, (list, tuple)) or not choices:
        raise ValueError(f"elicitation field {where}: {key!r} must be a non-empty list")
    values = []
    for choice in choices:
        if (
            not isinstance(choice, c.Mapping)
            or type(choice.get("const")) is not str
            or type(choice.get("title")) is not str
        ):
            raise ValueError(
                f"elicitation field {where}: each {key!r} entry must be "
                '{"const": str, "title": str}'
            )
        values.append(choice["const"])
    return values


def _check_property(name: str, spec: object) -> None:
    where = repr(name)
    if not isinstance(spec, c.Mapping):
        raise ValueError(f"elicitation field {where} must be a schema (a mapping)")
    kind = spec.get("type")
    if kind == "string":
        if "enum" in spec or "oneOf" in spec:
            _options(spec, where, "oneOf")
        elif "format" in spec and spec["format"] not in _STRING_FORMATS:
            raise ValueError(
                f"elicitation field {where}: format must be one of {', '.join(_STRING_FORMATS)}"
            )
    elif kind == "array":
        items = spec.get("items")
        if not isinstance(items, c.Mapping):
            raise ValueError(
                f"elicitation field {where}: a multi-select needs 'items' with 'enum' or 'anyOf'"
            )
        _options(items, where, "anyOf")
    elif kind not in ("number", "integer", "boolean"):
        raise ValueError(
            f"elicitation field {where} has type {kind!r}; MCP forms allow string, number, "
            "integer, boolean, and enums (string, or an array of strings for a multi-select)"
        )
    if "default" in spec:
        errors = _value_errors(name, spec, spec["default"])
        if errors:
            raise ValueError(
                f"elicitation field {where} has a default that does not fit: {errors[0]}"
            )


def with_defaults(
    schema: c.Mapping[str, t.Any], content: c.Mapping[str, t.Any]
) -> dict[str, t.Any]:
    """``content`` with each omitted field that has a ``default`` set to it (SEP-1034)."""
    filled = dict(content)
    properties = schema.get("properties", {})
    if isinstance(properties, c.Mapping):
        for name, spec in properties.items():
            if name not in filled and isinstance(spec, c.Mapping) and "default" in spec:
                filled[name] = _plain(spec["default"])
    return filled


def elicitation_content_errors(schema: c.Mapping[str, t.Any], content: object) -> list[str]:
    """What is wrong with ``content`` as an answer to the form ``schema`` (empty when it
    fits): a field the form does not have, a required one missing, a value of the
    wrong type, out of range or not among the choices. Exact types: a ``str``
    subclass or a ``bool`` given for a number does not count."""
    if type(content) is not dict:
        return [f"the content must be an object of fields, got {type(content).__name__}"]
    properties = schema.get("properties", {})
    if not isinstance(properties, c.Mapping):
        properties = {}
    errors: list[str] = []
    for name in content:
        if type(name) is not str or name not in properties:
            errors.append(f"{name!r} is not a field of the form")
    required = schema.get("required", [])
    for name in required if isinstance(required, (list, tuple)) else ():
        if name not in content:
            errors.append(f"{name!r} is required")
    for name, value in content.items():
        spec = properties.get(name) if type(name) is str else None
        if isinstance(spec, c.Mapping):
            errors.extend(_value_errors(name, spec, value))
    return errors


def _number(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(value)  # type: ignore[arg-type]


def _value_errors(name: str, spec: c.Mapping[str, t.Any], value: object) -> list[str]:
    kind = spec.get("type")
    if kind == "string":
        if type(value) is not str:
            return [f"{name!r} must be a string, got {type(value).__name__}"]
        if "enum" in spec or "oneOf" in spec:
            allowed = _allowed(spec, "oneOf")
            if value not in allowed:
                return [f"{name!r} must be one of {', '.join(map(repr, allowed))}"]
        if type(spec.get("minLength")) is int and len(value) < spec["minLength"]:
            return [f"{name!r} must be at least {spec['minLength']} characters"]
        if type(spec.get("maxLength")) is int and len(value) > spec["maxLength"]:
            return [f"{name!r} must be at most {spec['maxLength']} characters"]
        return []
    if kind in ("number", "integer"):
        if not _number(value) or (kind == "integer" and type(value) is not int):
            return [f"{name!r} must be {'an integer' if kind == 'integer' else 'a number'}"]
        low, high = spec.get("minimum"), spec.get("maximum")
        if _number(low) and value < low:  # type: ignore[operator]
            return [f"{name!r} must be at least {low}"]
        if _number(high) and value > high:  # type: ignore[operator]
            return [f"{name!r} must be at most {high}"]
        return []
    if kind == "boolean":
        return [] if type(value) is bool else [f"{name!r} must be true or false"]
    if kind == "array":
        if type(value) is not list or not all(type(v) is str for v in value):
            return [f"{name!r} must be a list of strings"]
        items = spec.get("items")
        allowed = _allowed(items, "anyOf") if isinstance(items, c.Mapping) else []
        wrong = [v for v in value if v not in allowed]
        if wrong:
            return [f"{name!r} has {wrong[0]!r}, not one of {', '.join(map(repr, allowed))}"]
        if type(spec.get("minItems")) is int and len(value) < spec["minItems"]:
            return [f"{name!r} needs at least {spec['minItems']} choice(s)"]
        if type(spec.get("maxItems")) is int and len(value) > spec["maxItems"]:
            return [f"{name!r} allows at most {spec['maxItems']} choice(s)"]
        return []
    return [f"{name!r} has a type the form does not allow"]


def _allowed(spec: c.Mapping[str, t.Any], key: str) -> list[t.Any]:
    if isinstance(spec.get("enum"), (list, tuple)):
        return list(spec["enum"])
    choices = spec.get(key)
    if isinstance(choices, (list, tuple)):
        return [choice.get("const") for choice in choices if isinstance(choice, c.Mapping)]
    return []


# -- across a child process's pipe --------------------------------------------------------


def through_parent(
    ctx: RunContext[t.Any],
    asks: c.Iterable[str],
    asker: c.Callable[[str, tuple[t.Any, ...], dict[str, t.Any]], t.Any],
) -> RunContext[t.Any]:
    """In a process-isolated attempt's child: ``ctx`` whose ``sampler``/``elicitor``
    (those the caller's context has: ``asks``) ask the parent, which calls its own."""
    import attrs

    changes: dict[str, t.Any] = {}
    if "sample" in asks:

        def sampler(messages: list[dict[str, str]], **options: t.Any) -> t.Any:
            return asker("sample", (messages,), options)

        changes["sampler"] = sampler
    if "elicit" in asks:

        def elicitor(message: str, schema: c.Mapping[str, t.Any]) -> t.Any:
            return asker("elicit", (message, schema), {})

        changes["elicitor"] = elicitor
    return attrs.evolve(ctx, **changes) if changes else ctx


def answer_for(ctx: RunContext[t.Any]) -> c.Callable[[int, bytes], bytes]:
    """In the parent: what answers a process-isolated attempt's questions with
    ``ctx``'s own ``sampler``/``elicitor`` (called with what the child's
    ``ctx.sample``/``ctx.elicit`` checked and passed on; the child checks the answer
    again). The answer, or what was raised, pickled."""

    def on_request(kind: int, payload: bytes) -> bytes:
        try:
            what, args, kwargs = pickle.loads(payload)
            value: object
            if what == "sample" and ctx.sampler is not None:
                value = ctx.sampler(*args, **kwargs)
            elif what == "elicit" and ctx.elicitor is not None:
                value = ctx.elicitor(*args, **kwargs)
            else:
                raise SamplingUnavailable(f"the caller's context cannot answer {what!r}")
            return pickle.dumps(("ok", value))
        except BaseException as exc:  # the tool's to handle, in the child
            try:
                return pickle.dumps(("raise", exc))
            except Exception:
                shown = f"{type(exc).__name__}: {exc}"
                return pickle.dumps(("raise", RuntimeError(f"asking the parent failed: {shown}")))

    return on_request
