"""The public API does not move when the code behind it does.

``nous_tools/__init__.py`` exports exactly the names listed here. Each is importable
from the public module its users import it from, as the very same object, and from
the place its ``__module__`` names (pickle finds a class by that path, so a pickle
written by one version loads in the next). Every documented module path stays
importable, and ``python -m nous_tools`` and the ``nous-tools`` entry point still run.
"""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys
import types
from pathlib import Path

import pytest

import nous_tools

ROOT = Path(__file__).resolve().parents[2]

#: Each public name and the public module its users import it from (besides
#: ``nous_tools`` itself).
PUBLIC: dict[str, str] = {
    "Advice": "nous_tools.advice",
    "ApprovalAlreadyUsed": "nous_tools.errors",
    "ApprovalRequest": "nous_tools.approval",
    "ApprovalStore": "nous_tools.approval",
    "Backend": "nous_tools.backend",
    "BatchAlreadyResolved": "nous_tools.errors",
    "CallInProgress": "nous_tools.errors",
    "ChildProcessDied": "nous_tools.errors",
    "ContextUpdate": "nous_tools.context_update",
    "Edit": "nous_tools.approval",
    "Elicitation": "nous_tools.asking",
    "ElicitationUnavailable": "nous_tools.errors",
    "Err": "nous_tools.results",
    "ExecutorSaturated": "nous_tools.errors",
    "ExecutorShutdown": "nous_tools.errors",
    "InMemoryApprovalStore": "nous_tools.approval",
    "Journal": "nous_tools.journal",
    "JournalApprovalStore": "nous_tools.journal",
    "JournalConflict": "nous_tools.errors",
    "JournalRecord": "nous_tools.journal",
    "JournalUnavailable": "nous_tools.errors",
    "NeedsApproval": "nous_tools.approval",
    "Ok": "nous_tools.results",
    "OutcomeUnknown": "nous_tools.errors",
    "PostgresJournal": "nous_tools.journal",
    "ProcessBackend": "nous_tools.backend",
    "ProgramDiverged": "nous_tools.errors",
    "ProgramOutput": "nous_tools.program",
    "ProgramPaused": "nous_tools.program",
    "Question": "nous_tools.asking",
    "RateLimited": "nous_tools.errors",
    "Registry": "nous_tools.registry",
    "Result": "nous_tools.results",
    "ResultTooLarge": "nous_tools.errors",
    "Root": "nous_tools.asking",
    "RootsUnavailable": "nous_tools.errors",
    "RunContext": "nous_tools.run_context",
    "SQLiteJournal": "nous_tools.journal",
    "SamplingUnavailable": "nous_tools.errors",
    "SandboxLimitReached": "nous_tools.errors",
    "SandboxPolicy": "nous_tools.sandbox",
    "SandboxProbe": "nous_tools.sandbox",
    "SandboxUnavailable": "nous_tools.errors",
    "SandboxViolation": "nous_tools.errors",
    "ThreadBackend": "nous_tools.backend",
    "Tool": "nous_tools.tool",
    "ToolCall": "nous_tools.executor",
    "ToolCallEndpoints": "nous_tools.web",
    "ToolCallResults": "nous_tools.tool_calls",
    "ToolCancelled": "nous_tools.errors",
    "ToolDenied": "nous_tools.errors",
    "ToolError": "nous_tools.errors",
    "ToolExecutor": "nous_tools.executor",
    "ToolNotFound": "nous_tools.errors",
    "ToolOptions": "nous_tools.tool",
    "ToolTimeout": "nous_tools.errors",
    "Usage": "nous_tools.usage",
    "__version__": "nous_tools",
    "check_approval": "nous_tools.approval",
    "default_executor": "nous_tools.executor",
    "execute": "nous_tools.executor",
    "execute_many": "nous_tools.executor",
    "execute_tool_calls": "nous_tools.tool_calls",
    "format_tool_result": "nous_tools.tool_calls",
    "parse_decisions": "nous_tools.web",
    "set_default_executor": "nous_tools.executor",
    "signals": "nous_tools",
    "tool": "nous_tools.tool",
}

#: Where each class and function says it lives (``__module__.__qualname__``): what a
#: pickle of it names.
PICKLED_AS: dict[str, str] = {
    "Advice": "nous_tools.advice.Advice",
    "ApprovalAlreadyUsed": "nous_tools.errors.ApprovalAlreadyUsed",
    "ApprovalRequest": "nous_tools.approval._request.ApprovalRequest",
    "ApprovalStore": "nous_tools.approval._store.ApprovalStore",
    "Backend": "nous_tools.backend.Backend",
    "BatchAlreadyResolved": "nous_tools.errors.BatchAlreadyResolved",
    "CallInProgress": "nous_tools.errors.CallInProgress",
    "ChildProcessDied": "nous_tools.errors.ChildProcessDied",
    "ContextUpdate": "nous_tools.context_update.ContextUpdate",
    "Edit": "nous_tools.approval._request.Edit",
    "Elicitation": "nous_tools.asking.Elicitation",
    "ElicitationUnavailable": "nous_tools.errors.ElicitationUnavailable",
    "Err": "nous_tools.results.Err",
    "ExecutorSaturated": "nous_tools.errors.ExecutorSaturated",
    "ExecutorShutdown": "nous_tools.errors.ExecutorShutdown",
    "InMemoryApprovalStore": "nous_tools.approval._store.InMemoryApprovalStore",
    "Journal": "nous_tools.journal._record.Journal",
    "JournalApprovalStore": "nous_tools.journal._approvals.JournalApprovalStore",
    "JournalConflict": "nous_tools.errors.JournalConflict",
    "JournalRecord": "nous_tools.journal._record.JournalRecord",
    "JournalUnavailable": "nous_tools.errors.JournalUnavailable",
    "NeedsApproval": "nous_tools.approval._token.NeedsApproval",
    "Ok": "nous_tools.results.Ok",
    "OutcomeUnknown": "nous_tools.errors.OutcomeUnknown",
    "PostgresJournal": "nous_tools.journal._postgres.PostgresJournal",
    "ProcessBackend": "nous_tools.backend.ProcessBackend",
    "ProgramDiverged": "nous_tools.errors.ProgramDiverged",
    "ProgramOutput": "nous_tools.program._values.ProgramOutput",
    "ProgramPaused": "nous_tools.program._values.ProgramPaused",
    "Question": "nous_tools.asking.Question",
    "RateLimited": "nous_tools.errors.RateLimited",
    "Registry": "nous_tools.registry.Registry",
    "ResultTooLarge": "nous_tools.errors.ResultTooLarge",
    "Root": "nous_tools.asking.Root",
    "RootsUnavailable": "nous_tools.errors.RootsUnavailable",
    "RunContext": "nous_tools.run_context.RunContext",
    "SQLiteJournal": "nous_tools.journal._sqlite.SQLiteJournal",
    "SamplingUnavailable": "nous_tools.errors.SamplingUnavailable",
    "SandboxLimitReached": "nous_tools.errors.SandboxLimitReached",
    "SandboxPolicy": "nous_tools.sandbox._policy.SandboxPolicy",
    "SandboxProbe": "nous_tools.sandbox._probe.SandboxProbe",
    "SandboxUnavailable": "nous_tools.errors.SandboxUnavailable",
    "SandboxViolation": "nous_tools.errors.SandboxViolation",
    "ThreadBackend": "nous_tools.backend.ThreadBackend",
    "Tool": "nous_tools.tool.Tool",
    "ToolCall": "nous_tools.executor.ToolCall",
    "ToolCallEndpoints": "nous_tools.providers._endpoints.ToolCallEndpoints",
    "ToolCallResults": "nous_tools.tool_calls.ToolCallResults",
    "ToolCancelled": "nous_tools.errors.ToolCancelled",
    "ToolDenied": "nous_tools.errors.ToolDenied",
    "ToolError": "nous_tools.errors.ToolError",
    "ToolExecutor": "nous_tools.executor.ToolExecutor",
    "ToolNotFound": "nous_tools.errors.ToolNotFound",
    "ToolOptions": "nous_tools.tool.ToolOptions",
    "ToolTimeout": "nous_tools.errors.ToolTimeout",
    "Usage": "nous_tools.usage.Usage",
    "check_approval": "nous_tools.approval.check_approval",
    "default_executor": "nous_tools.executor.default_executor",
    "execute": "nous_tools.executor.execute",
    "execute_many": "nous_tools.executor.execute_many",
    "execute_tool_calls": "nous_tools.tool_calls.execute_tool_calls",
    "format_tool_result": "nous_tools.tool_calls.format_tool_result",
    "parse_decisions": "nous_tools.web.parse_decisions",
    "set_default_executor": "nous_tools.executor.set_default_executor",
    "tool": "nous_tools.tool.tool",
}

#: Module paths the documentation, the examples or the tests import, or the API
#: reference renders: each stays importable.
DOCUMENTED_MODULES = [
    "nous_tools",
    "nous_tools.__main__",
    "nous_tools.advice",
    "nous_tools.approval",
    "nous_tools.asking",
    "nous_tools.backend",
    "nous_tools.cli",
    "nous_tools.content",
    "nous_tools.context_update",
    "nous_tools.contrib",
    "nous_tools.contrib.celery",
    "nous_tools.contrib.django",
    "nous_tools.contrib.mcp",
    "nous_tools.contrib.opentelemetry",
    "nous_tools.contrib.ray",
    "nous_tools.demo",
    "nous_tools.errors",
    "nous_tools.executor",
    "nous_tools.journal",
    "nous_tools.registry",
    "nous_tools.results",
    "nous_tools.run_context",
    "nous_tools.sandbox",
    "nous_tools.signals",
    "nous_tools.testing",
    "nous_tools.tool",
    "nous_tools.tool_calls",
    "nous_tools.usage",
    "nous_tools.validation",
    "nous_tools.web",
]

#: Each public module's ``__all__``: its names stay importable from it, as the same
#: objects as everywhere else.
MODULE_ALL: dict[str, list[str]] = {
    "nous_tools.advice": ["Advice", "PHASES"],
    "nous_tools.approval": [
        "ApprovalRequest",
        "ApprovalStore",
        "Edit",
        "InMemoryApprovalStore",
        "NeedsApproval",
        "check_approval",
        "tool_digest",
    ],
    "nous_tools.asking": [
        "Elicitation",
        "Elicitor",
        "Question",
        "Root",
        "Sampler",
        "check_elicitation_schema",
        "elicitation_content_errors",
        "with_defaults",
    ],
    "nous_tools.backend": [
        "Backend",
        "NOT_SENT",
        "Outcome",
        "ProcessBackend",
        "RAISED",
        "RETURNED",
        "SATURATED",
        "SHUT_DOWN",
        "TIMED_OUT",
        "ThreadBackend",
        "not_sent",
        "raised",
        "returned",
        "shut_down",
        "timed_out",
    ],
    "nous_tools.content": [
        "Audio",
        "Content",
        "Image",
        "Resource",
        "ResourceLink",
        "Text",
        "as_content",
        "to_anthropic",
        "to_json",
        "to_responses",
        "to_text",
    ],
    "nous_tools.context_update": ["ContextUpdate", "Operation", "OperationKind", "PROTECTED_KEYS"],
    "nous_tools.contrib.celery": [
        "CeleryBackend",
        "KEY_SETTING",
        "KEY_VARIABLE",
        "TASK_NAME",
        "install",
        "visibility_timeout",
    ],
    "nous_tools.contrib.django": [
        "CacheApprovalStore",
        "DjangoJournal",
        "close_all_connections",
        "close_connections",
        "django_executor",
        "install_default_executor",
        "urls",
    ],
    "nous_tools.contrib.flask": ["blueprint"],
    "nous_tools.contrib.mcp": [
        "DPoPKey",
        "DefinitionChange",
        "FileTokenStorage",
        "InMemoryTokenStorage",
        "MCPElicitation",
        "MCPServer",
        "OAuth",
        "RunningServer",
        "TaskHandle",
        "TaskStatus",
        "TokenStorage",
        "build_server",
        "close_sse_stream",
        "definition_change",
        "describe_tool",
        "register_mcp",
        "serve",
        "serve_http_in_thread",
        "tool_title",
    ],
    "nous_tools.contrib.opentelemetry": [
        "DURATION_BUCKETS",
        "ERROR_TYPES",
        "error_type",
        "instrument",
        "is_instrumented",
        "uninstrument",
    ],
    "nous_tools.contrib.ray": ["RayBackend"],
    "nous_tools.errors": [
        "ApprovalAlreadyUsed",
        "BatchAlreadyResolved",
        "CallInProgress",
        "ChildProcessDied",
        "ElicitationUnavailable",
        "ExecutorSaturated",
        "ExecutorShutdown",
        "JournalConflict",
        "JournalUnavailable",
        "OutcomeUnknown",
        "ProgramDiverged",
        "RateLimited",
        "ResultTooLarge",
        "RootsUnavailable",
        "SamplingUnavailable",
        "SandboxLimitReached",
        "SandboxUnavailable",
        "SandboxViolation",
        "ToolCancelled",
        "ToolDenied",
        "ToolError",
        "ToolNotFound",
        "ToolTimeout",
    ],
    "nous_tools.executor": [
        "ToolCall",
        "ToolExecutor",
        "default_executor",
        "execute",
        "execute_many",
        "set_default_executor",
    ],
    "nous_tools.journal": [
        "Journal",
        "JournalApprovalStore",
        "JournalRecord",
        "PostgresJournal",
        "SQLiteJournal",
        "decode_outcome",
        "encode_outcome",
        "idempotency_key",
    ],
    "nous_tools.registry": ["Registry"],
    "nous_tools.results": ["Err", "Ok", "Result"],
    "nous_tools.run_context": ["ApprovalHandler", "RunContext"],
    "nous_tools.program": ["ProgramOutput", "ProgramPaused"],
    "nous_tools.sandbox": ["SandboxPolicy", "SandboxProbe", "probe"],
    "nous_tools.signals": [
        "scrub",
        "send",
        "tool_execute_exception",
        "tool_execute_replayed",
        "tool_execute_start",
        "tool_execute_stop",
        "tool_execute_timeout",
        "tool_log",
        "tool_progress",
        "tool_rate_limited",
        "tool_timeout",
    ],
    "nous_tools.testing": ["Cassette", "CassetteMiss"],
    "nous_tools.tool": [
        "APPROVAL_LEVELS",
        "ISOLATION_MODES",
        "ON_RESULT_OVERFLOW_MODES",
        "ON_TIMEOUT_MODES",
        "TASK_MODES",
        "TASK_THRESHOLD",
        "Tool",
        "ToolOptions",
        "tool",
    ],
    "nous_tools.tool_calls": [
        "ToolCall",
        "ToolCallResults",
        "current_tool_call",
        "execute_tool_calls",
        "format_tool_result",
    ],
    "nous_tools.usage": ["Usage"],
    "nous_tools.validation": [
        "ArgumentValidator",
        "BACKTRACK_LIMIT",
        "CHECKED_FORMATS",
        "MAX_RECURSIVE_DEPTH",
        "ValidationFailure",
        "check_registry",
        "check_schema",
        "compile_validator",
        "failure_message",
        "shared_validator",
    ],
    "nous_tools.web": [
        "ToolCallEndpoints",
        "parse_decisions",
        "pending_summary",
        "response_messages",
    ],
}


def test_the_package_exports_exactly_the_names_it_exported_before() -> None:
    assert sorted(nous_tools.__all__) == sorted(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_each_public_name_is_the_same_object_from_its_public_module(name: str) -> None:
    module = importlib.import_module(PUBLIC[name])
    assert getattr(module, name) is getattr(nous_tools, name)


@pytest.mark.parametrize("name", sorted(PICKLED_AS))
def test_each_class_and_function_is_still_found_where_a_pickle_names_it(name: str) -> None:
    module_name, _, qualname = PICKLED_AS[name].rpartition(".")
    obj = getattr(nous_tools, name)
    assert getattr(importlib.import_module(module_name), qualname) is obj
    assert pickle.loads(pickle.dumps(obj)) is obj


def test_signals_is_the_signals_module() -> None:
    assert isinstance(nous_tools.signals, types.ModuleType)
    assert nous_tools.signals.__name__ == "nous_tools.signals"


@pytest.mark.parametrize("module_name", DOCUMENTED_MODULES)
def test_each_documented_module_path_is_importable(module_name: str) -> None:
    assert importlib.import_module(module_name).__name__ == module_name


@pytest.mark.parametrize("module_name", sorted(MODULE_ALL))
def test_each_public_module_still_exports_its_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert sorted(module.__all__) == MODULE_ALL[module_name]
    assert [name for name in MODULE_ALL[module_name] if not hasattr(module, name)] == []


def test_a_public_name_is_one_object_whichever_public_module_it_comes_from() -> None:
    seen: dict[str, object] = {name: getattr(nous_tools, name) for name in nous_tools.__all__}
    for module_name, names in MODULE_ALL.items():
        module = importlib.import_module(module_name)
        for name in names:
            if name in seen and not isinstance(seen[name], (str, types.ModuleType)):
                assert getattr(module, name) is seen[name], f"{module_name}.{name}"
            seen.setdefault(name, getattr(module, name))


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "nous_tools", "--help"],
        [str(Path(sys.executable).with_name("nous-tools")), "--help"],
    ],
    ids=["python -m nous_tools", "nous-tools"],
)
def test_the_command_line_still_starts(command: list[str]) -> None:
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=120, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "nous-tools" in done.stdout
