"""What the layers above use of a registry: its public face for integrations."""

from __future__ import annotations

import pathlib

from nous_tools import (
    Registry,
    SQLiteJournal,
    ToolExecutor,
)


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
