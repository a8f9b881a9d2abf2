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

* child -> parent, **replies** (:data:`REPLY_KINDS`): a reply ends the call it
  answers.

  - :data:`RESULT` -- payload: what the tool returned or raised
    (:func:`nous_tools._engine._isolation.reply`).

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
    "NO_DEADLINE",
    "PROGRESS_EVENT",
    "READY",
    "REPLY_KINDS",
    "REQUEST_KINDS",
    "RESULT",
    "call_frame",
    "call_parts",
    "describe",
    "frame",
    "set_deadline",
    "unframe",
]

CALL = 1  #: parent -> child: run one attempt
READY = 2  #: child -> parent, seq 0: the child is ready (payload: its process group id)
RESULT = 3  #: child -> parent, a reply: what the tool returned or raised

PROGRESS_EVENT = 16  #: child -> parent, an event: the tool reported progress
LOG_EVENT = 17  #: child -> parent, an event: the tool logged a line
ASK = 64  #: child -> parent, a request: ctx.sample or ctx.elicit (payload: pickled)
ANSWER = 65  #: parent -> child: the answer to the call's request (payload: pickled)

#: Kinds that answer a call and end it.
REPLY_KINDS: frozenset[int] = frozenset({RESULT})
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


def call_parts(payload: memoryview) -> tuple[float | None, memoryview]:
    """A :data:`CALL` payload's deadline (None: the context's own) and request."""
    (deadline,) = _DEADLINE.unpack_from(payload)
    return (None if math.isnan(deadline) else deadline), payload[_DEADLINE.size :]


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
