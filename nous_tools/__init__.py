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

# The layers above the values register what the values ask of them as they are
# imported (a value imports no layer above it): schema the code a Tool compiles,
# _rendering the writer of a value as text, and the registry (with Registry below)
# its re-decoration of a tool it made. All are here before anything makes a tool.
from nous_tools import _rendering, schema, signals  # noqa: F401  (_rendering, schema)
from nous_tools.advice import Advice
from nous_tools.approval import ApprovalRequest, Edit, NeedsApproval, check_approval
from nous_tools.approval._store import ApprovalStore, InMemoryApprovalStore
from nous_tools.backend import Backend, ProcessBackend, ThreadBackend
from nous_tools.errors import (
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
    ProgramDiverged,
    RateLimited,
    ResultTooLarge,
    RootsUnavailable,
    SamplingUnavailable,
    SandboxLimitReached,
    SandboxUnavailable,
    SandboxViolation,
    ToolCancelled,
    ToolDenied,
    ToolError,
    ToolNotFound,
    ToolTimeout,
)
from nous_tools.executor import (
    ToolCall,
    ToolExecutor,
    default_executor,
    execute,
    execute_many,
    set_default_executor,
)
from nous_tools.registry import Registry
from nous_tools.results import Err, Ok, Result
from nous_tools.run_context import RunContext
from nous_tools.tool import Tool, ToolOptions, tool
from nous_tools.usage import Usage

if t.TYPE_CHECKING:
    from nous_tools.asking import Elicitation, Question, Root
    from nous_tools.context_update import ContextUpdate
    from nous_tools.journal import (
        Journal,
        JournalApprovalStore,
        JournalRecord,
        PostgresJournal,
        SQLiteJournal,
    )
    from nous_tools.program import ProgramOutput, ProgramPaused
    from nous_tools.providers._endpoints import ToolCallEndpoints
    from nous_tools.providers._tool_calls import (
        ToolCallResults,
        execute_tool_calls,
        format_tool_result,
    )
    from nous_tools.providers._web import parse_decisions
    from nous_tools.sandbox import SandboxPolicy, SandboxProbe

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
    "JournalApprovalStore",
    "JournalConflict",
    "JournalRecord",
    "JournalUnavailable",
    "NeedsApproval",
    "Ok",
    "OutcomeUnknown",
    "PostgresJournal",
    "ProcessBackend",
    "ProgramDiverged",
    "ProgramOutput",
    "ProgramPaused",
    "Question",
    "RateLimited",
    "Registry",
    "Result",
    "ResultTooLarge",
    "Root",
    "RootsUnavailable",
    "RunContext",
    "SQLiteJournal",
    "SamplingUnavailable",
    "SandboxLimitReached",
    "SandboxPolicy",
    "SandboxProbe",
    "SandboxUnavailable",
    "SandboxViolation",
    "ThreadBackend",
    "Tool",
    "ToolCall",
    "ToolCallEndpoints",
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


#: The names imported on first use, by module: what only some programs use (the
#: call journal, provider tool calls, elicitation, context updates, the sandbox),
#: so that ``import nous_tools`` stays quick for a program that makes tools.
_LAZY = {
    "Elicitation": "nous_tools.asking",
    "Question": "nous_tools.asking",
    "Root": "nous_tools.asking",
    "ContextUpdate": "nous_tools.context_update",
    "Journal": "nous_tools.journal",
    "JournalApprovalStore": "nous_tools.journal",
    "JournalRecord": "nous_tools.journal",
    "PostgresJournal": "nous_tools.journal",
    "SQLiteJournal": "nous_tools.journal",
    "ProgramOutput": "nous_tools.program",
    "ProgramPaused": "nous_tools.program",
    "ToolCallResults": "nous_tools.providers._tool_calls",
    "ToolCallEndpoints": "nous_tools.providers._endpoints",
    "execute_tool_calls": "nous_tools.providers._tool_calls",
    "format_tool_result": "nous_tools.providers._tool_calls",
    "parse_decisions": "nous_tools.providers._web",
    "SandboxPolicy": "nous_tools.sandbox",
    "SandboxProbe": "nous_tools.sandbox",
}


def __getattr__(name: str) -> t.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
