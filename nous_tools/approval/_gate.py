"""The approval gate: step 1 of every call, and fail-closed.

A tool's ``approval`` level decides: ``"auto"`` runs without asking anyone,
``"deny"`` never runs, ``"ask"`` runs only when

* the context is ``approval_gated`` (the caller already ran its own approval), or
* the context's ``approval_handler`` answers ``"approve"`` or an :class:`Edit`.

Any other answer, a handler that raises, or no handler at all is a rejection:
the tool does not run. Answers are checked by exact type: a ``str`` subclass that
claims to equal ``"approve"``, or a subclass of ``Edit``, is a rejection too.

>>> from nous_tools import Edit, RunContext, Tool, execute
>>> delete = Tool.from_function(lambda path: f"deleted {path}", name="delete",
...                             approval="ask", timeout=None)
>>> execute(delete, {"path": "/tmp/x"}).reason.message
"Tool 'delete' requires approval, but the context has no approval_handler"
>>> ctx = RunContext.new(approval_handler=lambda req: Edit({"path": "/tmp/y"}))
>>> execute(delete, {"path": "/tmp/x"}, ctx).value
'deleted /tmp/y'
"""

from __future__ import annotations

import collections.abc as c
import typing as t

from nous_tools._util._log import log as _safe_log
from nous_tools._util._scope import interrupts
from nous_tools.approval._request import ApprovalRequest, Edit
from nous_tools.errors import ToolDenied, ToolError
from nous_tools.results import Err

if t.TYPE_CHECKING:
    from nous_tools.run_context import RunContext
    from nous_tools.tool import Tool

__all__ = ["check_approval"]

_log = _safe_log


def _rejected(tool: Tool, why: str, original_error: object = None) -> Err:
    return Err(
        ToolError(
            f"Tool '{tool.name}' was {why}",
            tool_name=tool.name,
            original_error=original_error,
        )
    )


def check_approval(
    tool: Tool,
    arguments: c.Mapping[str, t.Any],
    ctx: RunContext[t.Any],
    call_id: str | None = None,
) -> c.Mapping[str, t.Any] | Err:
    """Return the arguments to run with, or the ``Err`` that stops the call."""
    level = tool.approval
    if level == "auto":
        return arguments
    if level == "deny":
        return Err(ToolDenied(tool.name))
    if ctx.approval_gated:
        return arguments
    handler = ctx.approval_handler
    if handler is None:
        _log.warning(
            "Tool '%s' requires approval, but the context has no approval_handler; rejected",
            tool.name,
        )
        return Err(
            ToolError(
                f"Tool '{tool.name}' requires approval, but the context has no approval_handler",
                tool_name=tool.name,
            )
        )
    request = ApprovalRequest(name=tool.name, id=call_id, arguments=arguments, tool=tool)
    try:
        decision = handler(request)
    except BaseException as exc:  # fail closed, whatever the handler raised
        if interrupts(exc):
            raise  # the user's Ctrl-C, or this thread's attempt was cancelled
        _log.warning(
            "Approval handler raised %s for tool '%s'; treated as a rejection",
            type(exc).__name__,
            tool.name,
        )
        return _rejected(tool, "rejected by the approval handler (it raised)", exc)
    # Exact types: a str subclass whose __eq__ always says yes, or an Edit subclass
    # with its own ``arguments``, is not an answer.
    if type(decision) is str:
        if decision == "approve":
            return arguments
        if decision == "reject":
            return _rejected(tool, "rejected by the approval handler")
    elif type(decision) is Edit:
        edited = decision.arguments
        # A snapshot: the arguments validated are the ones that run.
        return dict(edited) if isinstance(edited, c.Mapping) else edited
    _log.warning(
        "Approval handler for tool '%s' returned %s; expected 'approve', 'reject' or an Edit. "
        "Treated as a rejection",
        tool.name,
        type(decision).__name__,
    )
    return _rejected(
        tool,
        f"rejected by the approval handler (unexpected answer of type "
        f"{type(decision).__name__}; expected 'approve', 'reject' or an Edit)",
    )
