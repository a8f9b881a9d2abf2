"""What crosses the process boundary for ``isolation="process"`` (private).

The process pool (:mod:`nous_tools._engine._process_pool`) moves bytes; this module
decides what those bytes are, and names whatever cannot make the trip:

* :func:`encode_request` (in the parent) pickles the tool's function, the
  arguments and the context's fields, each on its own, so a failure names the
  part that did not pickle (and, for arguments, which argument);
* :func:`run_request` (in the child) unpickles them, calls the tool, and pickles
  what it returned or raised, naming what could not be unpickled there or could
  not be pickled back;
* :func:`decode_reply` (in the parent) unpickles the outcome, naming a result or
  an exception that pickled in the child but cannot be unpickled in the parent
  (a class the parent cannot import, an exception whose ``__init__`` takes other
  arguments than the ones it passes to ``Exception``).

What must pickle: the tool's function (a module-level function, or a
module-level ``@tool``, which is sent by its import path), the arguments, and
the context's ``deps``, ``usage`` and ``sandbox``. The approval handler does
not cross (approval already ran in the parent). Pickling and unpickling run the
classes' own code (``__reduce__``, ``__setstate__``): in the caller's thread for
the arguments and the outcome, in the child for the rest.
"""

from __future__ import annotations

import collections.abc as c
import contextlib
import importlib
import json
import math
import pickle
import threading
import traceback
import typing as t

from nous_tools._engine import _pipe
from nous_tools._engine._pipe import LOG_EVENT, PROGRESS_EVENT
from nous_tools._engine._pool import RAISED, RETURNED
from nous_tools._util._text import safe_str

if t.TYPE_CHECKING:
    from nous_tools.run_context import RunContext
    from nous_tools.tool import Tool

__all__ = ["UNPICKLABLE", "Unpicklable", "decode_reply", "encode_request", "reply", "run_request"]

#: Outcome kind: something that had to cross the process boundary could not
#: (value: a message naming what, and why).
UNPICKLABLE = "unpicklable"

_PROTOCOL = pickle.HIGHEST_PROTOCOL


#: In a child behind a sandbox's fence: what the fence made of an exception a
#: tool raised (an error naming the rule or limit it hit), or None.
explain: c.Callable[[BaseException], BaseException | None] | None = None


class Unpicklable(Exception):
    """Part of a request that cannot be pickled; the message names it."""


class _ToolRef:
    """A module-level ``@tool``, pickled by its import path."""

    def __init__(self, module: str, qualname: str) -> None:
        self.module = module
        self.qualname = qualname

    def resolve(self) -> c.Callable[..., t.Any]:
        target: t.Any = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            target = getattr(target, part)
        return t.cast(c.Callable[..., t.Any], getattr(target, "function", target))


class _RemoteTraceback(Exception):
    """The traceback of an exception raised in the child, kept as its ``__cause__``."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


def _describe(exc: BaseException) -> str:
    text = safe_str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _type_name(value: object) -> str:
    cls = type(value)
    module = getattr(cls, "__module__", None)
    if module in (None, "builtins"):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def _function_bytes(tool: Tool) -> bytes:
    function = tool.function
    try:
        return pickle.dumps(function, _PROTOCOL)
    except Exception as exc:
        error: Exception = exc
    # A module-level @tool replaces its function in the module, so the function
    # cannot be pickled by reference; send the import path of the tool instead.
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and "<locals>" not in qualname:
        try:
            target: t.Any = importlib.import_module(module)
            for part in qualname.split("."):
                target = getattr(target, part)
        except Exception:
            target = None
        # ... or a tool made anew of a module-level tool's function (other options).
        if target is tool or target is function or getattr(target, "function", None) is function:
            return pickle.dumps(_ToolRef(module, qualname), _PROTOCOL)
    raise Unpicklable(
        f"the function {safe_str(getattr(function, '__qualname__', function))!r} cannot be "
        f"pickled (a process-isolated tool must be a module-level function): {_describe(error)}"
    )


def _dumps(value: object) -> bytes:
    return pickle.dumps(value, _PROTOCOL)


def _arguments_bytes(
    arguments: dict[str, t.Any], dumps: c.Callable[[t.Any], bytes] = _dumps
) -> bytes:
    try:
        return dumps(arguments)
    except Exception as exc:
        error = exc
    for key, value in arguments.items():  # find the argument that does not pickle
        try:
            dumps(value)
        except Exception as exc:
            raise Unpicklable(
                f"the argument {safe_str(key)!r} ({_type_name(value)}) cannot be pickled: "
                f"{_describe(exc)}"
            ) from None
    raise Unpicklable(f"the arguments cannot be pickled: {_describe(error)}")


def _context_bytes(ctx: RunContext[t.Any], dumps: c.Callable[[t.Any], bytes] = _dumps) -> bytes:
    fields = {
        "deps": ctx.deps,
        "retry": ctx.retry,
        "usage": ctx.usage,
        "approval_gated": ctx.approval_gated,
        "sandbox": ctx.sandbox,
        "deadline": ctx.deadline,
        "run_id": ctx.run_id,
        "idempotency_key": ctx.idempotency_key,
    }
    if ctx._channel is not None:  # someone listens: report what the tool reports
        fields["report"] = True
    if ctx.sampler is not None or ctx.elicitor is not None:  # the parent answers
        fields["ask"] = tuple(
            what for what, f in (("sample", ctx.sampler), ("elicit", ctx.elicitor)) if f
        )
    try:
        return dumps(fields)
    except Exception as exc:
        error = exc
    for name in ("deps", "usage", "sandbox"):
        try:
            dumps(fields[name])
        except Exception as exc:
            raise Unpicklable(
                f"the context's {name} ({_type_name(fields[name])}) cannot be pickled: "
                f"{_describe(exc)}"
            ) from None
    raise Unpicklable(f"the context cannot be pickled: {_describe(error)}")


def encode_request(
    tool: Tool, arguments: c.Mapping[str, t.Any], ctx: RunContext[t.Any] | None
) -> bytes:
    """The bytes a child needs to run one attempt; raises :class:`Unpicklable`
    naming the function, the argument or the context field that does not pickle."""
    function = _function_bytes(tool)
    args = _arguments_bytes(arguments if type(arguments) is dict else dict(arguments))
    context = _context_bytes(ctx) if ctx is not None else None
    return pickle.dumps((tool.name, function, args, context), _PROTOCOL)


def _unpicklable_reply(message: str) -> bytes:
    return pickle.dumps((UNPICKLABLE, message, "", ""), _PROTOCOL)


def run_request(request: bytes | memoryview, deadline: float | None = None) -> bytes:
    """In the child: run one attempt and return the reply's bytes. Never raises
    for anything the tool or its data do. ``deadline`` (when not None) is the
    attempt's, set when a child took the call: the tool's ``ctx.deadline``."""
    name, function, args, context = pickle.loads(request)  # our own framing
    return load_and_reply(
        name,
        function,
        args,
        context,
        "in the child process",
        sink=_to_parent(),
        deadline=deadline,
        asker=_to_parent_asker(),
    )


# -- events: what a tool reports, from the child to the parent during a call ------------


class Events:
    """A child's end of its pipe, for the frames it writes (:mod:`nous_tools._engine._pipe`):
    each is written whole (under a lock, so threads never interleave) with the
    sequence number of the call it belongs to, and an event of a call that has
    ended is dropped, so a helper thread that outlives its call never reaches the
    pipe (nor another call's turn)."""

    __slots__ = ("_asking", "_conn", "_lock", "call")

    def __init__(self, conn: t.Any) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._asking = threading.Lock()  # one question on the pipe at a time
        self.call = 0  # the sequence number of the call being served; 0 between calls

    def ready(self, payload: bytes) -> None:
        """The handshake, before any call: the child is ready to serve."""
        with self._lock:
            self._conn.send_bytes(_pipe.frame(0, _pipe.READY, payload))

    def begin(self, call: int) -> None:
        """Call ``call`` (its sequence number, from the parent's frame) begins."""
        self.call = call

    def reply(
        self, payload: bytes, following: int = 0, deadline: float = _pipe.NO_DEADLINE
    ) -> None:
        """Answer the call being served, which ends it (no event of it is sent after);
        with ``following``, also say what became of the queued call taken meanwhile
        (its ``deadline``; NaN: not started)."""
        with self._lock:
            call, self.call = self.call, 0
            if following:
                self._conn.send_bytes(_pipe.result_next_frame(call, payload, following, deadline))
            else:
                self._conn.send_bytes(_pipe.frame(call, _pipe.RESULT, payload))

    def notice(self, call: int, deadline: float) -> None:
        """Between calls: say that the queued call ``call`` started with ``deadline``
        (NaN: it did not start, its wait was over)."""
        with self._lock:
            if math.isnan(deadline):
                self._conn.send_bytes(_pipe.frame(call, _pipe.SKIPPED, b""))
            else:
                self._conn.send_bytes(
                    _pipe.frame(call, _pipe.STARTED, _pipe.pack_deadline(deadline))
                )

    def event(self, call: int, kind: int, payload: bytes) -> bool:
        """Send an event of ``call`` while it runs; False (nothing sent) once it ended."""
        with self._lock:
            if call != self.call or not call:
                return False
            self._conn.send_bytes(_pipe.frame(call, kind, payload))
        return True

    def ask(self, call: int, payload: bytes) -> bytes:
        """Ask the parent (an :data:`~nous_tools._engine._pipe.ASK` of ``call``) and wait for its
        :data:`~nous_tools._engine._pipe.ANSWER`, read here: while a call runs nothing else
        reads this end. Raises ``RuntimeError`` when the call has ended or the parent
        answered out of turn, ``EOFError`` when the pipe closed."""
        with self._asking:
            if not self.event(call, _pipe.ASK, payload):
                raise RuntimeError("the call has ended: its question cannot be asked")
            parsed = _pipe.unframe(self._conn.recv_bytes())
            if parsed is None or parsed[0] != call or parsed[1] != _pipe.ANSWER:
                raise RuntimeError("the parent answered out of turn")
            return bytes(parsed[2])


#: In a child: its :class:`Events` (set before it serves its first call); None elsewhere.
events: Events | None = None


def _to_parent() -> c.Callable[[list[t.Any]], object] | None:
    """In the child, for the call being served: what sends one of its tool's progress
    or log events to the parent, as an event of that call; None outside a child."""
    sender = events
    if sender is None:  # not serving a parent (the warm-up)
        return None
    call = sender.call

    def send(event: list[t.Any]) -> None:
        kind = PROGRESS_EVENT if event[0] == "progress" else LOG_EVENT
        sender.event(call, kind, json.dumps(event[1:]).encode())

    return send


def _to_parent_asker() -> c.Callable[[str, tuple[t.Any, ...], dict[str, t.Any]], t.Any] | None:
    """In the child, for the call being served: what asks the parent a question of the
    tool's (``ctx.sample``, ``ctx.elicit``) and returns its answer, or raises what the
    parent's side raised; None outside a child."""
    sender = events
    if sender is None:
        return None
    call = sender.call

    def ask(what: str, args: tuple[t.Any, ...], kwargs: dict[str, t.Any]) -> t.Any:
        status, value = pickle.loads(
            sender.ask(call, pickle.dumps((what, args, kwargs), _PROTOCOL))
        )
        if status == "ok":
            return value
        raise value

    return ask


def load_and_reply(
    name: str,
    function: bytes,
    args: bytes,
    context: bytes | None,
    where: str,
    make_context: c.Callable[[dict[str, t.Any]], t.Any] | None = None,
    dumps: c.Callable[[t.Any], bytes] = _dumps,
    sink: c.Callable[[list[t.Any]], object] | None = None,
    deadline: float | None = None,
    asker: c.Callable[[str, tuple[t.Any, ...], dict[str, t.Any]], t.Any] | None = None,
) -> bytes:
    """Unpickle a request's parts where the attempt runs (``where``: "in the child
    process", "on the worker"), then call the tool (see :func:`reply`). A part that
    does not unpickle is an ``UNPICKLABLE`` reply naming it. ``make_context`` builds
    the tool's context from the unpickled fields (default: ``RunContext(**fields)``).

    When the caller listens to what the tool reports and the engine can carry it,
    ``sink(event)`` sends each progress or log event (:func:`nous_tools._engine._reporting.encode`)
    to the caller, coalesced and rate-limited here; what is held is sent before the
    reply. Without a ``sink``, ``ctx.report_progress`` and ``ctx.log`` are no-ops.
    ``deadline``, when not None, replaces the context's (a process call's deadline
    is set when a child takes it)."""
    try:
        loaded = pickle.loads(function)
        fn = loaded.resolve() if isinstance(loaded, _ToolRef) else loaded
    except BaseException as exc:
        return _unpicklable_reply(
            f"the function of tool {name!r} could not be loaded {where}: {_describe(exc)}"
        )
    try:
        arguments = pickle.loads(args)
    except BaseException as exc:
        return _unpicklable_reply(f"the arguments could not be unpickled {where}: {_describe(exc)}")
    call_args: tuple[t.Any, ...] = ()
    channel: t.Any = None
    if context is not None:
        try:
            fields = pickle.loads(context)
            report = fields.pop("report", False)
            if deadline is not None:
                fields["deadline"] = deadline
            asks = fields.pop("ask", ())
            if make_context is None:
                from nous_tools.run_context import RunContext

                ctx = RunContext(**fields)
            else:
                ctx = make_context(fields)
            if report and sink is not None:
                from nous_tools._engine import _reporting
                from nous_tools.run_context import with_channel

                channel = _reporting.Channel(_sending(sink))
                ctx = with_channel(ctx, channel)
            if asks and asker is not None:
                from nous_tools.asking import through_parent

                ctx = through_parent(ctx, asks, asker)
            call_args = (ctx,)
        except BaseException as exc:
            return _unpicklable_reply(
                f"the context (deps, usage, sandbox) could not be unpickled {where}: "
                f"{_describe(exc)}"
            )
    answer = reply(fn, call_args, arguments, dumps)
    if channel is not None:
        channel.finish()  # what is held goes before the reply
    return answer


def _sending(sink: c.Callable[[list[t.Any]], object]) -> c.Callable[[t.Any], None]:
    """A channel's deliver function that sends each event through ``sink``, encoded;
    a sink that fails is the engine's problem, never the tool's."""
    from nous_tools._engine._reporting import encode

    def deliver(event: t.Any) -> None:
        with contextlib.suppress(Exception):
            sink(encode(event))

    return deliver


def reply(
    fn: c.Callable[..., t.Any],
    call_args: tuple[t.Any, ...],
    arguments: dict[str, t.Any],
    dumps: c.Callable[[t.Any], bytes] = _dumps,
) -> bytes:
    """Call the tool and return the reply's bytes: what it returned or raised,
    pickled with ``dumps``, or a message naming what could not be pickled."""
    try:
        value = fn(*call_args, **arguments)
        kind = RETURNED
    except BaseException as exc:  # the tool's, handed to the parent
        value, kind = exc, RAISED
        if explain is not None:  # behind a sandbox's fence: name the rule it hit
            try:
                named = explain(exc)
            except Exception:  # never lose the tool's own exception to our wording
                named = None
            if named is not None:
                named.__cause__ = exc
                value = named
    if kind == RETURNED:
        description = _type_name(value)
        remote_traceback = ""
    else:
        description = _describe(value)
        remote_traceback = "".join(traceback.format_exception(value))
    try:
        payload = dumps(value)
    except BaseException as exc:
        what = (
            f"the tool's result ({description})"
            if kind == RETURNED
            else f"the exception the tool raised ({description})"
        )
        return _unpicklable_reply(f"{what} cannot be pickled: {_describe(exc)}")
    return pickle.dumps((kind, payload, description, remote_traceback), _PROTOCOL)


def _warm(ctx: object, **arguments: t.Any) -> dict[str, t.Any]:
    return arguments


def warm_up() -> None:
    """In a new child: run one request of the usual shape through the usual
    code, so the first real attempt does not pay for first touches (a child
    forked from the forkserver copies each memory page the first time it
    writes to it, reference counts included)."""
    from nous_tools.run_context import RunContext

    fields = {"deps": {"k": [1.0, "v"]}, "retry": 0, "approval_gated": False, "deadline": None}
    request = pickle.dumps(
        (
            "warm-up",
            pickle.dumps(_warm, _PROTOCOL),
            pickle.dumps({"a": "x", "b": 1, "c": True}, _PROTOCOL),
            pickle.dumps(fields, _PROTOCOL),
        ),
        _PROTOCOL,
    )
    decode_reply(run_request(request))
    RunContext()


def decode_reply(reply: bytes | memoryview) -> tuple[str, t.Any]:
    """In the parent: the ``(kind, value)`` a child's reply carries; a value that
    cannot be unpickled here gives :data:`UNPICKLABLE` with a message naming it."""
    kind, payload, description, remote_traceback = pickle.loads(reply)  # our own framing
    if kind == UNPICKLABLE:
        return kind, payload
    try:
        value = pickle.loads(payload)
    except Exception as exc:
        what = (
            f"the tool's result ({description})"
            if kind == RETURNED
            else f"the exception the tool raised ({description})"
        )
        return UNPICKLABLE, (
            f"{what} could not be unpickled in the parent process: {_describe(exc)}"
        )
    if kind == RAISED and isinstance(value, BaseException) and remote_traceback:
        value.__cause__ = _RemoteTraceback(remote_traceback)
    return kind, value
