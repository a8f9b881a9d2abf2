"""A tiny stdio MCP server (protocol 2025-11-25 tasks, flat answers of the
2026-07-28 extension) for what ``tests/contrib/test_mcp_task_client_more.py`` pins of
the client and no real server provokes on demand. Every tool requires a task:

* ``slow_create``: the ``tools/call`` that creates its task is answered
  ``$FAKE_CREATE_DELAY`` seconds late (1 s by default); the task then stays
  ``working`` until ``tasks/cancel``;
* ``progress``: each ``tasks/get`` moves it on a step, with a ``statusMessage``
  per step (one of them said twice), then it completes with ``"done"``;
* ``patient``: ``working`` for ``polls`` ``tasks/get`` (its argument), with the
  ``pollIntervalMs`` of its argument ``interval_ms``, then completes.

Every request is written to ``$FAKE_LOG`` (one JSON line each, with ``at``: the
``time.time()`` it was read).
"""

from __future__ import annotations

import json
import os
import sys
import time

TOOLS = [
    {"name": name, "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}
    for name in ("slow_create", "progress", "patient")
]
#: ``progress``'s status message after each ``tasks/get`` (None: completed).
STEPS = ["30 % done", "30 % done", "60 % done", "90 % done", None]


def main() -> None:
    tasks: dict[str, dict[str, object]] = {}
    delay = float(os.environ.get("FAKE_CREATE_DELAY", "1.0"))
    log = open(os.environ["FAKE_LOG"], "a")  # noqa: SIM115 - open for the process's life
    for line in sys.stdin:
        message = json.loads(line)
        log.write(json.dumps({**message, "at": time.time()}) + "\n")
        log.flush()
        if "id" not in message or "method" not in message:
            continue  # a notification, or an answer
        method, params = message["method"], message.get("params") or {}
        result: dict[str, object] = {}
        error = None
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}},
                "serverInfo": {"name": "task-client-fake", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            name, arguments = params["name"], params.get("arguments") or {}
            task_id = f"t{len(tasks) + 1}"
            task = {"tool": name, "polls": 0, "status": "working", "arguments": arguments}
            tasks[task_id] = task
            interval = int(arguments.get("interval_ms", 50))
            task["interval"] = interval
            result = {"resultType": "task", "taskId": task_id, "status": "working"}
            result.update(ttlMs=60000, pollIntervalMs=interval)
            if name == "progress":
                result["statusMessage"] = "starting"
            if name == "slow_create":
                time.sleep(delay)
        elif method == "tasks/get":
            task_id = params["taskId"]
            task = tasks[task_id]
            task["polls"] = int(task["polls"]) + 1  # type: ignore[call-overload]
            result = {"resultType": "complete", "taskId": task_id, "ttlMs": 60000}
            result.update(status=task["status"], pollIntervalMs=task["interval"])
            done = False
            if task["tool"] == "progress" and task["status"] == "working":
                step = STEPS[min(int(task["polls"]), len(STEPS)) - 1]  # type: ignore[call-overload]
                done = step is None
                if not done:
                    result["statusMessage"] = step
            elif task["tool"] == "patient" and task["status"] == "working":
                done = task["polls"] >= task["arguments"].get("polls", 1)  # type: ignore[attr-defined]
            if done:
                task["status"] = "completed"
                result.update(
                    status="completed", result={"content": [{"type": "text", "text": "done"}]}
                )
        elif method == "tasks/cancel":
            task = tasks.get(params["taskId"], {})
            if task.get("status") == "working":
                task["status"] = "cancelled"
            result = {"resultType": "complete"}
        else:
            error = {"code": -32601, "message": f"no method {method}"}
        reply = {"jsonrpc": "2.0", "id": message["id"]}
        reply.update({"error": error} if error is not None else {"result": result})
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
