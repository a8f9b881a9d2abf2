"""What the layers above use of a registry: its public face for integrations
(``effective_journal``, ``claim_approval``, ``dispatch``, ``straight_through``,
``run_approval``), and no module outside ``registry/`` reaching past it."""

from __future__ import annotations

import ast
import logging
import pathlib
import typing as t

import pytest

from nous_tools import (
    ApprovalAlreadyUsed,
    Err,
    NeedsApproval,
    Ok,
    Registry,
    RunContext,
    SQLiteJournal,
    Tool,
    ToolDenied,
    ToolExecutor,
)

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "nous_tools"


def echo(text: str) -> str:
    """Say it back."""
    return text


def make(name: str, approval: t.Literal["auto", "ask", "deny"] = "auto") -> Tool:
    return Tool.from_function(echo, name=name, approval=approval, timeout=None)


class OldStore:
    """An approval store whose ``claim`` takes no expiry."""

    def __init__(self) -> None:
        self.claimed: set[str] = set()

    def claim(self, approval_id: str) -> bool:
        if approval_id in self.claimed:
            return False
        self.claimed.add(approval_id)
        return True


def test_effective_journal_is_the_registrys_own_else_its_executors(
    tmp_path: pathlib.Path,
) -> None:
    own = SQLiteJournal(tmp_path / "own.db")
    executors = SQLiteJournal(tmp_path / "executor.db")
    with (
        ToolExecutor(max_workers=2, journal=executors) as journaled,
        ToolExecutor(max_workers=2) as plain,
    ):
        assert Registry(executor=plain).effective_journal() is None
        assert Registry(executor=journaled).effective_journal() is executors
        assert Registry(executor=plain, journal=own).effective_journal() is own
        assert Registry(executor=plain).effective_journal(journaled) is executors
        assert Registry(executor=journaled, journal=own).effective_journal(plain) is own


def test_claim_approval_is_true_for_the_first_claim_only() -> None:
    registry = Registry()
    assert registry.claim_approval("a1", expires_at=None) is True
    assert registry.claim_approval("a1") is False
    assert registry.claim_approval("a2", 4_000_000_000.0) is True


def test_claim_approval_speaks_to_a_store_whose_claim_takes_no_expiry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = OldStore()
    registry = Registry(approval_store=t.cast(t.Any, store))
    with caplog.at_level(logging.WARNING):
        assert registry.claim_approval("a1", 4_000_000_000.0) is True
        assert registry.claim_approval("a1", 4_000_000_000.0) is False
    assert store.claimed == {"a1"}
    assert sum("without expires_at" in message for message in caplog.messages) == 1


def test_dispatch_runs_a_tool_already_looked_up_on_the_executor_given(
    executor: ToolExecutor,
) -> None:
    registry = Registry([make("echo"), make("rm", "ask"), make("nuke", "deny")])
    registry.advice.register("after", "echo", lambda result: Ok(result.value + "!"))
    tool = t.cast(Tool, registry.lookup("echo"))
    assert registry.dispatch(tool, {"text": "hi"}, executor=executor) == Ok("hi!")
    pending = registry.dispatch(t.cast(Tool, registry.lookup("rm")), {"text": "x"}, None, "c1")
    assert isinstance(pending, NeedsApproval)
    assert pending.call_id == "c1" and pending.arguments == {"text": "x"}
    denied = registry.dispatch(t.cast(Tool, registry.lookup("nuke")), {"text": "x"})
    assert isinstance(denied, Err) and isinstance(denied.reason, ToolDenied)


def test_dispatch_never_raises() -> None:
    class Broken(ToolExecutor):
        def execute(self, *args: t.Any, **kwargs: t.Any) -> t.Any:
            raise RuntimeError("executor broke")

    registry = Registry([make("echo")])
    with Broken(max_workers=1) as broken:
        result = registry.dispatch(t.cast(Tool, registry.lookup("echo")), {}, executor=broken)
    assert isinstance(result, Err)
    assert "internal error RuntimeError: executor broke" in result.reason.message


def test_straight_through_lets_only_unadvised_auto_tools_go_straight(
    tmp_path: pathlib.Path,
) -> None:
    registry = Registry([make("echo"), make("told"), make("rm", "ask")])
    registry.advice.register("before", "told", lambda arguments: arguments)
    straight = registry.straight_through()
    assert straight is not None
    assert [straight(tool) for tool in registry.all()] == [True, False, False]
    assert Registry(journal=SQLiteJournal(tmp_path / "j.db")).straight_through() is None


def test_run_approval_runs_an_approval_once() -> None:
    registry = Registry([make("rm", "ask")])
    pending = registry.execute("rm", {"text": "x"})
    assert isinstance(pending, NeedsApproval)
    assert registry.run_approval(pending, RunContext.new()) == Ok("x")
    again = registry.run_approval(pending)
    assert isinstance(again, Err) and isinstance(again.reason, ApprovalAlreadyUsed)


def test_run_approval_never_raises() -> None:
    class Broken:
        def claim(self, approval_id: str, expires_at: float | None = None) -> bool:
            raise OSError("store down")

    registry = Registry([make("rm", "ask")], approval_store=Broken())
    pending = registry.execute("rm", {"text": "x"})
    assert isinstance(pending, NeedsApproval)
    refused = registry.run_approval(pending)
    assert isinstance(refused, Err) and "approval store failed" in refused.reason.message


def _private_registry_uses(path: pathlib.Path) -> list[str]:
    """``<something>registry._name`` in the code of ``path`` (comments and imports
    are not attribute uses)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")):
            continue
        if node.attr.startswith("__"):
            continue
        owner = node.value
        name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
        if name.endswith("registry"):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: .{node.attr}")
    return found


def test_no_module_outside_the_registry_uses_a_registrys_private_names() -> None:
    outside = [
        path for path in sorted(PACKAGE.rglob("*.py")) if (PACKAGE / "registry") not in path.parents
    ]
    assert [use for path in outside for use in _private_registry_uses(path)] == []
