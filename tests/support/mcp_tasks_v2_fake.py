"""A tiny stdio MCP server speaking only what the official server-everything cannot:
the flat task answers of the ``io.modelcontextprotocol/tasks`` extension (SEP-2663),
whose ``tasks/get`` carries the questions (``inputRequests``) and the result inline
and whose answers come back with ``tasks/update``. Used by tests/contrib/test_mcp_tasks.py.

Its one tool ``ask`` (task required) asks one elicitation, then completes with the
answer; ``fail`` fails with a JSON-RPC error. Every request it gets is written to
the file named by ``$FAKE_LOG`` (one JSON line each).
"""

from __future__ import annotations

import json
import os
import sys

TOOLS = [
    {
        "name": name,
        "inputSchema": {"type": "object"},
        "execution": {"taskSupport": "required"},
    }
    for name in ("ask", "fail")
]
QUESTION = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Which colour?",
        "requestedSchema": {
            "type": "object",
            "properties": {"colour": {"type": "string"}},
            "required": ["colour"],
        },
    },
}


def main() -> None:
    tasks: dict[str, dict[str, object]] = {}
    log = open(os.environ["FAKE_LOG"], "a")  # noqa: SIM115 - open for the process's life
    for line in sys.stdin:
        message = json.loads(line)
        log.write(line if line.endswith("\n") else line + "\n")
        log.flush()
        if "id" not in message or "method" not in message:
            continue  # a notification, or an answer
        method, params = message["method"], message.get("params") or {}
        result: object = None
        error = None
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}},
                "serverInfo": {"name": "tasks-v2-fake", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            task_id = f"t{len(tasks) + 1}"
            tasks[task_id] = {"tool": params["name"], "answer": None}
            result = {
                "resultType": "task",
                "taskId": task_id,
                "status": "working",
                "ttlMs": 60000,
                "pollIntervalMs": 50,
            }
        elif method == "tasks/get":
            task_id = params["taskId"]
            task = tasks[task_id]
            base = {"resultType": "complete", "taskId": task_id, "ttlMs": 60000}
            if task["tool"] == "fail":
                result = {**base, "status": "failed", "error": {"code": -32000, "message": "no"}}
            elif task["answer"] is None:
                result = {**base, "status": "input_required", "inputRequests": {"q": QUESTION}}
            else:
                text = f"colour: {task['answer']}"
                result = {
                    **base,
                    "status": "completed",
                    "result": {"content": [{"type": "text", "text": text}]},
                }
        elif method == "tasks/update":
            answer = params["inputResponses"]["q"]
            tasks[params["taskId"]]["answer"] = (answer.get("content") or {}).get(
                "colour", answer.get("action")
            )
            result = {"resultType": "complete"}
        elif method == "tasks/cancel":
            result = {"resultType": "complete"}
        else:
            error = {"code": -32601, "message": f"no method {method}"}
        reply = {"jsonrpc": "2.0", "id": message["id"]}
        reply.update({"error": error} if error is not None else {"result": result})
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
