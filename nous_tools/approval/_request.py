"""What an approval handler is asked, and the edit it may answer.

A tool whose approval level is ``"ask"`` runs only when the context's
``approval_handler``, called with an :class:`ApprovalRequest`, answers
``"approve"`` or an :class:`Edit` (see :func:`~nous_tools.approval.check_approval`):

>>> from nous_tools import Edit, RunContext, Tool, execute
>>> write = Tool.from_function(lambda path: f"wrote {path}", name="write",
...                            approval="ask", timeout=None)
>>> def only_tmp(request):
...     if request.arguments["path"].startswith("/tmp/"):
...         return "approve"
...     return Edit({"path": "/tmp/" + request.arguments["path"].rsplit("/", 1)[-1]})
>>> ctx = RunContext.new(approval_handler=only_tmp)
>>> execute(write, {"path": "/etc/hosts"}, ctx).value
'wrote /tmp/hosts'
"""

from __future__ import annotations

import collections.abc as c
import typing as t

import attrs

if t.TYPE_CHECKING:
    from nous_tools.tool import Tool

__all__ = ["ApprovalRequest", "Edit"]


@attrs.frozen(slots=True)
class Edit:
    """An approval handler's answer: run the tool with these ``arguments`` instead.

    The edited arguments are validated against the tool's schema like any other;
    an edit never changes which tool runs.
    """

    arguments: c.Mapping[str, t.Any]


@attrs.frozen(slots=True)
class ApprovalRequest:
    """What an approval handler receives: the tool's ``name``, the call's ``id``
    (the model's tool-call id, or None outside a batch of model tool calls), the
    ``arguments`` and the ``tool`` itself."""

    name: str
    id: str | None
    arguments: c.Mapping[str, t.Any]
    tool: Tool = attrs.field(repr=False)
