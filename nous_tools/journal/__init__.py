"""The durable call journal: side effects happen once, or are parked.

A :class:`Journal` remembers each call by ``(ctx.run_id, call_id)``. Give one to
the executor or the registry (``ToolExecutor(journal=...)``,
``Registry(journal=...)``) and a call that has both — the provider's tool-call id
in :func:`~nous_tools.execute_tool_calls`, ``call_id=`` of ``execute`` — is
recorded as ``started`` (durably) right before its first attempt and ``completed``
with its outcome after. A repeat of the same key then never runs the tool again:

- completed → the stored outcome (the same message for the model);
- started elsewhere, its lease live → ``Err(CallInProgress)`` (or ``wait=`` seconds);
- started and never completed, its lease expired (a crash) → ``Err(OutcomeUnknown)``,
  unless the tool is ``idempotent=True``: then it runs again with the same
  ``ctx.idempotency_key``;
- the same key with other arguments → ``Err(JournalConflict)``.

A call without ``run_id`` or ``call_id`` is not journaled. A journal that cannot be
read or written means the call does not run (``Err(JournalUnavailable)``).

>>> import os, tempfile
>>> from nous_tools import Err, RunContext, Tool, ToolExecutor, OutcomeUnknown
>>> journal = SQLiteJournal(os.path.join(tempfile.mkdtemp(), "calls.db"))
>>> sent = []
>>> def send_email(ctx: RunContext, to: str) -> str:
...     sent.append((to, ctx.idempotency_key[:8]))
...     return f"sent to {to}"
>>> email = Tool.from_function(send_email, timeout=None)
>>> ctx = RunContext.new(run_id="conversation-42")
>>> with ToolExecutor(journal=journal) as executor:
...     first = executor.execute(email, {"to": "ada@example.com"}, ctx, call_id="call_1")
...     again = executor.execute(email, {"to": "ada@example.com"}, ctx, call_id="call_1")
...     other = executor.execute(email, {"to": "bob@example.com"}, ctx, call_id="call_1")
>>> first == again, len(sent)
(True, 1)
>>> type(other.reason).__name__
'JournalConflict'

See ``docs/concepts/journal.md``: at-most-once, at-least-once, and where exactly-once
is possible.
"""

from __future__ import annotations

import typing as t

if t.TYPE_CHECKING:
    from nous_tools.journal._approvals import JournalApprovalStore
    from nous_tools.journal._postgres import PostgresJournal
    from nous_tools.journal._record import (
        Journal,
        JournalRecord,
        decode_outcome,
        encode_outcome,
        idempotency_key,
    )
    from nous_tools.journal._sqlite import SQLiteJournal

__all__ = [
    "Journal",
    "JournalApprovalStore",
    "JournalRecord",
    "PostgresJournal",
    "SQLiteJournal",
    "decode_outcome",
    "encode_outcome",
    "idempotency_key",
]

#: Where each public name lives: the journal's modules are imported on first use, so
#: ``import nous_tools`` (whose executor needs only ``_pipeline``) pays nothing for them.
_HOMES = {
    "Journal": "_record",
    "JournalApprovalStore": "_approvals",
    "JournalRecord": "_record",
    "decode_outcome": "_record",
    "encode_outcome": "_record",
    "idempotency_key": "_record",
    "PostgresJournal": "_postgres",
    "SQLiteJournal": "_sqlite",
}


def __getattr__(name: str) -> t.Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
