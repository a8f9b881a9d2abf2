"""nous_tools: run the tools an LLM agent calls — safely, synchronously, and fast.

>>> from nous_tools import Err, Ok, RunContext, execute, tool
>>> @tool(timeout=1.0)
... def shout(text: str) -> str:
...     '''Upper-case a text.'''
...     return text.upper()
>>> execute(shout, {"text": "hi"}, RunContext.new())
Ok(value='HI', update=None)
>>> execute(shout, {"text": 3}).reason.message
"Invalid arguments for 'shout': Type mismatch: text: expected string, got integer"
"""

from __future__ import annotations

import logging
import typing as t

from . import signals
from .advice import Advice
from .approval import check_approval
from .approval_store import ApprovalStore, InMemoryApprovalStore
from .asking import Elicitation
from .backend import Backend, ProcessBackend, ThreadBackend
from .context_update import ContextUpdate
from .errors import (
    ApprovalAlreadyUsed,
    BatchAlreadyResolved,
    CallInProgress,
    ChildProcessDied,
    ElicitationUnavailable,
    ExecutorSaturated,
    ExecutorShutdown,
    JournalConflict,
    JournalUnavailable,
    OutcomeUnknown,
    RateLimited,
    ResultTooLarge,
    SamplingUnavailable,
    SandboxViolation,
    ToolCancelled,
    ToolDenied,
    ToolError,
    ToolNotFound,
    ToolTimeout,
)
from .executor import (
    ToolCall,
    ToolExecutor,
    default_executor,
    execute,
    execute_many,
    set_default_executor,
)
from .registry import Registry
from .results import ApprovalRequest, Edit, Err, NeedsApproval, Ok, Result
from .run_context import RunContext
from .sandbox import SandboxPolicy
from .tool import Tool, ToolOptions, tool
from .tool_calls import ToolCallResults, execute_tool_calls, format_tool_result
from .usage import Usage
from .web import parse_decisions

if t.TYPE_CHECKING:
    from .journal import Journal, JournalRecord, PostgresJournal, SQLiteJournal

__version__ = "0.1.0.dev0"

# A library adds no handler of its own, but a NullHandler keeps Python's
# last-resort handler from printing our warnings where logging is not set up.
logging.getLogger("nous_tools").addHandler(logging.NullHandler())

__all__ = [
    "Advice",
    "ApprovalAlreadyUsed",
    "ApprovalRequest",
    "ApprovalStore",
    "Backend",
    "BatchAlreadyResolved",
    "CallInProgress",
    "ChildProcessDied",
    "ContextUpdate",
    "Edit",
    "Elicitation",
    "ElicitationUnavailable",
    "Err",
    "ExecutorSaturated",
    "ExecutorShutdown",
    "InMemoryApprovalStore",
    "Journal",
    "JournalConflict",
    "JournalRecord",
    "JournalUnavailable",
    "NeedsApproval",
    "Ok",
    "OutcomeUnknown",
    "PostgresJournal",
    "ProcessBackend",
    "RateLimited",
    "Registry",
    "Result",
    "ResultTooLarge",
    "RunContext",
    "SQLiteJournal",
    "SamplingUnavailable",
    "SandboxPolicy",
    "SandboxViolation",
    "ThreadBackend",
    "Tool",
    "ToolCall",
    "ToolCallResults",
    "ToolCancelled",
    "ToolDenied",
    "ToolError",
    "ToolExecutor",
    "ToolNotFound",
    "ToolOptions",
    "ToolTimeout",
    "Usage",
    "__version__",
    "check_approval",
    "default_executor",
    "execute",
    "execute_many",
    "execute_tool_calls",
    "format_tool_result",
    "parse_decisions",
    "set_default_executor",
    "signals",
    "tool",
]


def __getattr__(name: str) -> t.Any:
    # The call journal's classes, imported on first use (see nous_tools.journal).
    if name in ("Journal", "JournalRecord", "PostgresJournal", "SQLiteJournal"):
        from . import journal

        value = getattr(journal, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
