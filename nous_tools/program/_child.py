"""The child runner: what a confined ``python -c`` runs to execute one program (private).

This file is read as text and handed to the interpreter (``python -I -S -c``), so it
imports the standard library only and nothing of ``nous_tools``. It talks to the
parent in JSON lines over two file descriptors it takes from its stdin and stdout
at start, before any of the program runs; the program's own ``print`` goes to a
buffer (``sys.stdout``) and fd 1 to where stderr goes, never to the channel.

Protocol (one JSON object a line):

* parent → child: ``{"source", "functions"}`` once (the program and the names
  of the functions it may call);
* child → parent: ``{"call": name, "arguments": {...}}`` for each nested call,
  answered by ``{"ok": value}`` or ``{"error": {"type", "message", "tool"}}``;
* child → parent, last: ``{"done": {"result", "stdout"}}`` or
  ``{"failed": {"type", "message", "line", "name", "stdout"}}``.
"""

import ast
import io
import json
import os
import sys
import traceback
import typing as t

_FILENAME = "<program>"


class ToolError(Exception):
    """A nested call that answered an ``Err``: its ``message``, and the ``tool``."""

    def __init__(self, message: str, tool: str | None = None, kind: str = "ToolError") -> None:
        super().__init__(message)
        self.message = message
        self.tool = tool
        self.kind = kind


def _main() -> None:
    channel_in = os.fdopen(os.dup(0), "rb", buffering=0)
    channel_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # what the program writes to fd 1 goes where stderr goes
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    reader = io.BufferedReader(channel_in)

    def send(message: object) -> None:
        channel_out.write(json.dumps(message, default=repr).encode() + b"\n")

    def receive() -> t.Any:
        line = reader.readline()
        if not line:
            os._exit(0)  # the parent went away
        return json.loads(line)

    job = receive()
    source = job["source"]
    functions = job["functions"]
    buffer = io.StringIO()

    def function_of(name: str) -> t.Callable[..., t.Any]:
        def call(*args: object, **arguments: object) -> t.Any:
            if args:
                raise TypeError(
                    f"{name}() takes keyword arguments only (its parameters by name), "
                    f"got {len(args)} positional"
                )
            send({"call": name, "arguments": arguments})
            answer = receive()
            if "ok" in answer:
                return answer["ok"]
            error = answer["error"]
            raise ToolError(error["message"], error.get("tool"), error.get("type", "ToolError"))

        call.__name__ = call.__qualname__ = name
        return call

    class Tools:
        """The registry's tools: ``tools.<name>(...)``."""

        def __getattr__(self, name: str) -> t.Any:
            raise NameError(f"name {name!r} is not defined")

        def __dir__(self) -> list[str]:
            return sorted(functions)

    tools = Tools()
    namespace: dict[str, t.Any] = {"__name__": "__program__", "__builtins__": __builtins__}
    for name in functions:
        function = function_of(name)
        setattr(tools, name, function)
        namespace[name] = function
    namespace["tools"] = tools
    namespace["ToolError"] = ToolError

    sys.stdout = buffer
    try:
        tree = ast.parse(source, _FILENAME)
        last = "__nous_tools_last__"
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            final = tree.body[-1]
            tree.body[-1] = ast.copy_location(
                ast.Assign(targets=[ast.Name(last, ast.Store())], value=final.value), final
            )
            ast.fix_missing_locations(tree)
        exec(compile(tree, _FILENAME, "exec"), namespace)
        result = namespace["result"] if "result" in namespace else namespace.get(last)
    except BaseException as exc:  # the program's failure, whatever it is: reported
        sys.stdout = sys.__stdout__
        line = None
        for frame in traceback.extract_tb(exc.__traceback__):
            if frame.filename == _FILENAME:
                line = frame.lineno
        if isinstance(exc, SyntaxError) and exc.filename == _FILENAME:
            line = exc.lineno
        send(
            {
                "failed": {
                    "type": getattr(exc, "kind", None) or type(exc).__name__,
                    "message": str(exc),
                    "line": line,
                    "name": getattr(exc, "name", None) if isinstance(exc, NameError) else None,
                    "tool": getattr(exc, "tool", None),
                    "stdout": buffer.getvalue(),
                }
            }
        )
        return
    sys.stdout = sys.__stdout__
    try:
        encoded = json.dumps(result)
    except (TypeError, ValueError):
        encoded = json.dumps(repr(result))
    channel_out.write(
        b'{"done": {"result": '
        + encoded.encode()
        + b', "stdout": '
        + json.dumps(buffer.getvalue()).encode()
        + b"}}\n"
    )


# Run as ``python -c`` (``__name__ == "__main__"``), never on import (a doctest
# collector, say, imports every module of the package).
if __name__ == "__main__":
    _main()
