"""Kill a script and resume it: one model response's tool calls, journaled.

Run it, kill it with ``kill -9`` while the bank is slow to answer, run it again
(``docs/how-to/resume-a-script.md``)::

    python examples/resume_script.py jobs/2026-12-03
    python examples/resume_script.py jobs/2026-12-04 --idempotent

The argument is the job's directory: its name is the run id, the same on every run
of the job, and it keeps the model's response (``response.json``, saved the first
time and read back after), the call journal (``journal.db``) and the outside world
(``ledger.txt``: what was reserved, charged and sent). The model asked for three
calls; they run one after another. Calls that completed are replayed, the call that
was running when the script was killed answers ``OutcomeUnknown`` (or, with
``--idempotent``, runs again under the same idempotency key), and calls that never
started run now. The messages for the model are printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import typing as t
from pathlib import Path

from nous_tools import Registry, RunContext, SQLiteJournal, Tool, execute_tool_calls

#: How long the bank takes to answer a new charge: time enough to kill the script.
BANK_DELAY = 20.0


def say(line: str) -> None:
    print(line, flush=True)  # flushed: a killed script keeps what it printed


# --8<-- [start:response]
def ask_model() -> dict[str, t.Any]:
    """The model's answer: an OpenAI Chat Completions message with three tool calls.
    Yours comes from the API, e.g.
    ``client.chat.completions.create(...).choices[0].message.model_dump(mode="json")``."""
    calls = [
        ("call_stock", "reserve_stock", {"order": 42}),
        ("call_charge", "charge_card", {"order": 42, "cents": 4200}),
        ("call_mail", "send_receipt", {"order": 42}),
    ]
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for call_id, name, args in calls
        ],
    }


def model_response(job: Path) -> dict[str, t.Any]:
    """The model's response for this job: asked once and saved, then read back, so
    that every run of the job has the same tool calls, with the same ids."""
    saved = job / "response.json"
    if saved.exists():
        say(f"read the model's response from {saved}")
        response: dict[str, t.Any] = json.loads(saved.read_text(encoding="utf-8"))
        return response
    response = ask_model()
    partial = job / "response.json.partial"
    partial.write_text(json.dumps(response), encoding="utf-8")
    os.replace(partial, saved)  # all of it or nothing, even if killed right here
    say(f"asked the model: {len(response['tool_calls'])} tool calls, saved to {saved}")
    return response


# --8<-- [end:response]


# --8<-- [start:tools]
def make_tools(job: Path, *, idempotent: bool) -> list[Tool]:
    """The job's three tools. Each writes what it does to the ledger, which stands
    for the outside world (a warehouse, a bank, a mail server)."""
    ledger = job / "ledger.txt"

    def record(line: str) -> None:
        with ledger.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def reserve_stock(order: int) -> str:
        """Reserve the items of an order."""
        say(f"reserving stock for order {order}")
        record(f"reserved order {order}")
        return f"reserved order {order}"

    def charge_card(ctx: RunContext[t.Any], order: int, cents: int) -> str:
        """Charge the card of an order."""
        say(f"charging order {order}")
        # The bank takes the idempotency key (Stripe: the Idempotency-Key header)
        # and charges once per key; this one keeps the key's first 16 characters.
        key = (ctx.idempotency_key or "")[:16]
        charged = ledger.exists() and f"key {key}" in ledger.read_text(encoding="utf-8")
        if not charged:
            record(f"charged order {order}: {cents} cents, key {key}")
            time.sleep(BANK_DELAY)  # the bank is slow to answer a new charge
        return f"charged order {order}"

    def send_receipt(order: int) -> str:
        """Email the receipt of an order."""
        say(f"sending the receipt of order {order}")
        record(f"sent the receipt of order {order}")
        return f"sent the receipt of order {order}"

    return [
        Tool.from_function(reserve_stock, timeout=10),
        # idempotent=True: after a crash, run it again (with the same key) rather
        # than park it as unknown. Say so only of a tool whose downstream dedupes.
        Tool.from_function(charge_card, timeout=60, idempotent=idempotent),
        Tool.from_function(send_receipt, timeout=10),
    ]


# --8<-- [end:tools]


# --8<-- [start:main]
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run a model's tool calls; resume if killed.")
    parser.add_argument("job", type=Path, help="the job's directory; its name is the run id")
    parser.add_argument("--idempotent", action="store_true", help="charge_card is idempotent")
    options = parser.parse_args(argv)
    job: Path = options.job
    job.mkdir(parents=True, exist_ok=True)

    response = model_response(job)  # the same calls, with the same ids, every run
    journal = SQLiteJournal(job / "journal.db")
    registry = Registry(make_tools(job, idempotent=options.idempotent), journal=journal)
    ctx = RunContext.new(run_id=job.name)  # the same run id every run: never uuid4()
    result = execute_tool_calls(registry, response, ctx, max_concurrency=1)

    say("the model gets:")
    for message in result.to_openai_messages():
        say(f"  {message['tool_call_id']}: {message['content']}")
    journal.close()


# --8<-- [end:main]


if __name__ == "__main__":
    main()
