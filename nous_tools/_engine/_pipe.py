"""The messages on the pipe between the parent and a process-isolated child (private).

:mod:`nous_tools._engine._process_pool` gives each child one duplex pipe (a
``multiprocessing`` ``Connection``, which delimits messages). Every message on
it, either way, is a *frame*::

    seq (8 bytes, unsigned, big-endian) | kind (1 byte) | payload

``seq`` is the sequence number of the call the message belongs to: the parent
numbers each call it sends (1, 2, ...; unique within a pool), and 0 means no
call. ``kind`` says what the payload is. Whoever reads a frame checks both, so a
message is never taken for another call's: the parent takes as a call's answer
only a *reply* of that call's ``seq``, and treats anything else on the pipe as a
*stray* -- it discards it, logs it (what it was, never its content), and replaces
the child once the call is over (or at once, if the child is idle). Strays come
from a tool that forks and lets both copies return into the child's loop (each
copy answers), or from a helper thread that writes to the pipe itself.

Kinds, by direction and role:

* parent -> child

  - :data:`CALL` -- run one attempt; payload: the attempt's deadline (8 bytes,
    a big-endian double on the monotonic clock, which every process shares; NaN:
    the context's own), then the request
    (:func:`nous_tools._engine._isolation.encode_request`). The deadline is written when
    a child takes the call (:func:`call_frame`, :func:`set_deadline`), since a
    process call's timeout counts from then; the child gives it to the tool as
    ``ctx.deadline`` (:func:`call_parts`). The child answers with exactly one
    reply of the same ``seq``.
  - :data:`QUEUED` -- a call sent *ahead*, while the child still serves the call
    before it (a batch keeps one call waiting in each busy child's pipe, so the
    child goes on without waiting for the parent); payload: the call's cap (the
    latest its attempt may end; inf: none), its budget (seconds), the end of its
    wait for a child, then the request (:func:`queued_frame`). The child takes it
    when the call before has ended: if its wait is over by then it does not start
    it; otherwise its deadline is ``min(cap, now + budget)`` (:func:`take_queued`).
    Either way it tells the parent before anything else of the call: in the reply
    to the call before (:data:`RESULT_NEXT`), or, when that was written already,
    as a :data:`STARTED` or :data:`SKIPPED` notice. A queued call the child never
    read when it was killed or died never started.

* child -> parent, **replies** (:data:`REPLY_KINDS`): a reply ends the call it
  answers.

  - :data:`RESULT` -- payload: what the tool returned or raised
    (:func:`nous_tools._engine._isolation.reply`).
  - :data:`RESULT_NEXT` -- the same, and what became of the :data:`QUEUED` call
    behind it, which the child took meanwhile; payload: that call's ``seq`` and
    its deadline (NaN: not started, its wait was over), then the result
    (:func:`result_next_frame`, :func:`next_parts`).

* child -> parent, **notices** (:data:`NOTICE_KINDS`) of a :data:`QUEUED` call
  the child took after it had answered the call before: :data:`STARTED`
  (payload: the attempt's deadline) or :data:`SKIPPED` (not started: its wait was
  over). The call's reply follows a :data:`STARTED`.

* child -> parent, **events** (:data:`EVENT_KINDS`): sent during a call with
  its ``seq``; the call goes on. The parent hands each to the call's
  ``on_event(kind, payload)`` (see ``ProcessPool.run``).

  - :data:`PROGRESS_EVENT`, :data:`LOG_EVENT` -- what the tool reported
    (``ctx.report_progress``, ``ctx.log``); payload: the event's fields, JSON.

  A new event kind is added to :data:`EVENT_KINDS`. In the child every frame is
  written by :class:`nous_tools._engine._isolation.Events` (``_isolation.events``): note
  the call's ``events.call`` when the call begins (in the tool's thread) and
  send with ``events.event(call, kind, payload)``, from any thread: a frame is
  written whole, under a lock, and an event of a call that has ended is dropped
  in the child, so a helper thread that outlives its call never reaches the
  pipe (nor another call).

* the handshake: :data:`READY` (``seq`` 0), sent once by a new child before any
  call; payload: its process group id in ASCII. During a call it is a stray.

* child -> parent, **requests** (:data:`REQUEST_KINDS`), and parent -> child,
  their **answers**: the child asks, during a call, and waits; the call goes on.

  - :data:`ASK` -- ``ctx.sample`` or ``ctx.elicit`` in a process-isolated tool
    whose caller's context can answer (:mod:`nous_tools.asking`); payload: the
    question, pickled. The parent hands it to the call's
    ``on_request(kind, payload)`` in a thread of its own (an answer may take a
    person's time; the call's deadline still kills the child) and writes the
    answer back as an :data:`ANSWER` frame of the same ``seq``, while the call is
    still on. In the child the thread that asked reads it (during a call nothing
    else reads the child's end: its main loop is running the tool).

Kinds are small integers, in one byte: 1-15 for the core (calls, replies, the
handshake), 16-63 for events, 64-127 for requests and answers.
"""

from __future__ import annotations

import math
import struct

__all__ = [
    "ANSWER",
    "ASK",
    "CALL",
    "EVENT_KINDS",
    "LOG_EVENT",
    "NOTICE_KINDS",
    "NO_DEADLINE",
    "PROGRESS_EVENT",
    "QUEUED",
    "READY",
    "REPLY_KINDS",
    "REQUEST_KINDS",
    "RESULT",
    "RESULT_NEXT",
    "SKIPPED",
    "STARTED",
    "call_frame",
    "call_parts",
    "deadline_of",
    "describe",
    "frame",
    "next_parts",
    "pack_deadline",
    "queued_frame",
    "result_next_frame",
    "set_deadline",
    "take_queued",
    "unframe",
]

CALL = 1  #: parent -> child: run one attempt
READY = 2  #: child -> parent, seq 0: the child is ready (payload: its process group id)
RESULT = 3  #: child -> parent, a reply: what the tool returned or raised
QUEUED = 4  #: parent -> child: a call sent ahead, taken when the call before has ended
STARTED = 5  #: child -> parent, a notice: the queued call started (payload: its deadline)
SKIPPED = 6  #: child -> parent, a notice: the queued call was not started (its wait was over)
RESULT_NEXT = 7  #: child -> parent, a reply, and what became of the queued call behind it

PROGRESS_EVENT = 16  #: child -> parent, an event: the tool reported progress
LOG_EVENT = 17  #: child -> parent, an event: the tool logged a line
ASK = 64  #: child -> parent, a request: ctx.sample or ctx.elicit (payload: pickled)
ANSWER = 65  #: parent -> child: the answer to the call's request (payload: pickled)

#: Kinds that answer a call and end it.
REPLY_KINDS: frozenset[int] = frozenset({RESULT, RESULT_NEXT})
#: Kinds that say what became of a queued call the child took after its reply.
NOTICE_KINDS: frozenset[int] = frozenset({STARTED, SKIPPED})
#: Kinds a child sends during a call without ending it.
EVENT_KINDS: frozenset[int] = frozenset({PROGRESS_EVENT, LOG_EVENT})
#: Kinds a child sends during a call to ask the parent something, and waits.
REQUEST_KINDS: frozenset[int] = frozenset({ASK})

#: A call's deadline that says "the context's own" (see :data:`CALL`).
NO_DEADLINE = math.nan

_HEADER = struct.Struct("!QB")
_pack = _HEADER.pack
_unpack = _HEADER.unpack_from
_SIZE = _HEADER.size
_DEADLINE = struct.Struct("!d")
_CALL_HEADER = struct.Struct("!QBd")
_QUEUED_HEADER = struct.Struct("!QBddd")
_QUEUED_PARTS = struct.Struct("!ddd")
_NEXT_HEADER = struct.Struct("!QBQd")
_NEXT = struct.Struct("!Qd")


def frame(seq: int, kind: int, payload: bytes) -> bytes:
    """A message: ``payload`` for call ``seq``, of ``kind``."""
    return _pack(seq, kind) + payload


def call_frame(seq: int, request: bytes, deadline: float = NO_DEADLINE) -> bytearray:
    """The :data:`CALL` message of call ``seq``: ``deadline``, then ``request``. A
    bytearray, so :func:`set_deadline` can write the deadline once it is known
    without copying the request again."""
    message = bytearray(_CALL_HEADER.size + len(request))
    _CALL_HEADER.pack_into(message, 0, seq, CALL, deadline)
    message[_CALL_HEADER.size :] = request
    return message


def set_deadline(message: bytearray, deadline: float) -> None:
    """Write the attempt's deadline into a :func:`call_frame` message."""
    _DEADLINE.pack_into(message, _SIZE, deadline)


def pack_deadline(deadline: float) -> bytes:
    """A deadline as a notice's payload (:data:`STARTED`)."""
    return _DEADLINE.pack(deadline)


def call_parts(payload: memoryview) -> tuple[float | None, memoryview]:
    """A :data:`CALL` payload's deadline (None: the context's own) and request."""
    (deadline,) = _DEADLINE.unpack_from(payload)
    return (None if math.isnan(deadline) else deadline), payload[_DEADLINE.size :]


def queued_frame(seq: int, request: bytes, cap: float, budget: float, until: float) -> bytearray:
    """The :data:`QUEUED` message of call ``seq``: taken by the child when the call
    before has ended, unless ``until`` (the end of its wait) has passed; its attempt
    runs ``budget`` seconds from then, never past ``cap``."""
    message = bytearray(_QUEUED_HEADER.size + len(request))
    _QUEUED_HEADER.pack_into(message, 0, seq, QUEUED, cap, budget, until)
    message[_QUEUED_HEADER.size :] = request
    return message


def take_queued(payload: memoryview, now: float) -> tuple[float, memoryview] | None:
    """In the child, a :data:`QUEUED` payload taken at ``now``: the attempt's
    deadline and the request, or None when its wait was over (it does not start)."""
    cap, budget, until = _QUEUED_PARTS.unpack_from(payload)
    if now >= until:
        return None
    deadline = now + budget
    return (cap if cap < deadline else deadline), payload[_QUEUED_PARTS.size :]


def result_next_frame(seq: int, result: bytes, following: int, deadline: float) -> bytearray:
    """The :data:`RESULT_NEXT` reply of call ``seq``: ``result``, and that call
    ``following`` started with ``deadline`` (NaN: it did not start)."""
    message = bytearray(_NEXT_HEADER.size + len(result))
    _NEXT_HEADER.pack_into(message, 0, seq, RESULT_NEXT, following, deadline)
    message[_NEXT_HEADER.size :] = result
    return message


def next_parts(kind: int, payload: memoryview) -> tuple[int, float, memoryview]:
    """A reply's payload: the queued call it speaks of (0: none), that call's
    deadline (NaN: not started), and the result."""
    if kind != RESULT_NEXT:
        return 0, NO_DEADLINE, payload
    following, deadline = _NEXT.unpack_from(payload)
    return following, deadline, payload[_NEXT.size :]


def deadline_of(kind: int, payload: memoryview) -> float:
    """A notice's deadline: the queued call's (:data:`STARTED`), NaN (:data:`SKIPPED`)."""
    if kind != STARTED:
        return NO_DEADLINE
    (deadline,) = _DEADLINE.unpack_from(payload)
    return float(deadline)


def unframe(message: bytes) -> tuple[int, int, memoryview] | None:
    """``(seq, kind, payload)`` of a message, or None when it is not a frame."""
    if len(message) < _SIZE:
        return None
    seq, kind = _unpack(message)
    return seq, kind, memoryview(message)[_SIZE:]


def describe(message: bytes | None) -> str:
    """What a stray message was, for the log: its kind, call and size, never its content."""
    if message is None:
        return "a message cut short"
    parsed = unframe(message)
    if parsed is None:
        return f"a message that is not a frame ({len(message)} bytes)"
    seq, kind, payload = parsed
    role = (
        "a reply"
        if kind in REPLY_KINDS
        else "an event"
        if kind in EVENT_KINDS
        else "a request"
        if kind in REQUEST_KINDS
        else f"a message of kind {kind}"
    )
    return f"{role} for call {seq} ({len(payload)} bytes)"
