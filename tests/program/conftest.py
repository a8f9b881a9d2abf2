"""Fixtures of the code-mode tests: a registry of tools that leave marker files, so a
test counts how many times each really ran (across processes too)."""

from __future__ import annotations

import os
import pathlib
import typing as t

import pytest

from nous_tools import Registry, Tool
from nous_tools.sandbox import probe


def lacking(*mechanisms: str) -> pytest.MarkDecorator:
    """Skip where ``probe()`` says the kernel lacks one of ``mechanisms``."""
    found = probe().mechanisms
    missing = [f"{name}: {found.get(name)}" for name in mechanisms if found.get(name) is not None]
    return pytest.mark.skipif(bool(missing), reason=f"this host lacks {'; '.join(missing)}")


#: A program runs in a confined child: the host must have the default policy's fence.
confined = lacking("landlock", "netns", "rlimits")


def count(markers: pathlib.Path, name: str) -> int:
    """How many times the tool that marks ``name`` ran."""
    path = markers / name
    return len(path.read_text().splitlines()) if path.exists() else 0


def marking_registry(markers: pathlib.Path, **options: t.Any) -> Registry:
    """``lookup(item)``, ``score(item)`` (auto) and ``publish(text)`` (ask), each
    appending a line to ``markers/<tool>-<argument>`` when it runs."""

    folder = str(markers)  # (a str: an approval token can represent what a tool captures)

    def mark(name: str) -> None:
        with open(os.path.join(folder, name), "a") as f:
            f.write("ran\n")

    def lookup(item: str) -> str:
        """Find an item."""
        mark(f"lookup-{item}")
        return f"found {item}"

    def score(item: str) -> int:
        """Score an item."""
        mark(f"score-{item}")
        return len(item)

    def publish(text: str) -> str:
        """Publish a text (asks a person first)."""
        mark(f"publish-{text}")
        return f"published {text}"

    return Registry(
        [
            Tool.from_function(lookup, timeout=30),
            Tool.from_function(score, timeout=30),
            Tool.from_function(publish, timeout=30, approval="ask"),
        ],
        **options,
    )


@pytest.fixture
def markers(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "markers"
    path.mkdir()
    return path
