"""Approve later, end to end: a model's turn, a person's decision, the answer.

The Flask app of ``examples/flask_app.py`` driven by its test client, as a browser
and your agent loop would drive it (``pip install flask``)::

    python examples/approve_later.py

1. The model answered with two tool calls: the weather (runs at once) and a file
   deletion (``approval="ask"``). ``POST /tool-calls`` runs them: 202, with what to
   show the person and the paused batch, signed.
2. The person approves. ``POST /tool-calls/resolve`` with the batch, untouched, and
   the decision: 200, with one result per call of the model, in the shape its calls
   came in — here one Anthropic ``user`` message to append to the conversation.
3. The same decision sent again (a double click, a replay): 409, nothing runs.
"""

from __future__ import annotations

import json
import typing as t

from flask_app import create_app

#: The model's turn (an Anthropic Message, as JSON): two tool calls.
MODEL_TURN: dict[str, t.Any] = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "Checking the weather, and cleaning up."},
        {"type": "tool_use", "id": "toolu_w", "name": "get_weather", "input": {"city": "Oslo"}},
        {"type": "tool_use", "id": "toolu_d", "name": "delete_file", "input": {"path": "/tmp/x"}},
    ],
}


def main(show: t.Callable[[str], object] = print) -> None:
    """Run the exchange and show each step."""
    app = create_app(config={"NOUS_TOOLS_APPROVAL_SECRET": "a secret kept on the server"})
    browser = app.test_client()

    paused = browser.post("/tool-calls", json=MODEL_TURN, headers={"X-Request-Id": "turn-1"})
    body = paused.get_json()
    show(f"1. {paused.status_code}: waiting for a person")
    for call in body["pending"]:
        show(f"   {call['call_id']}: {call['tool']} {json.dumps(call['arguments'])}")
        show(f"   ({call['description']})")

    decision = {"batch": body["batch"], "decisions": {"toolu_d": "approve"}}
    answered = browser.post("/tool-calls/resolve", json=decision, headers={"X-Request-Id": "r-2"})
    show(f"2. {answered.status_code}: the messages for the model")
    for message in answered.get_json()["messages"]:
        for block in message["content"]:
            show(f"   {message['role']}: {block['tool_use_id']} -> {block['content']}")

    again = browser.post("/tool-calls/resolve", json=decision)
    show(f"3. {again.status_code}: {again.get_json()['error']}")


if __name__ == "__main__":
    main()
