"""Example tools for ``tests/cli/test_cli.py``; the CLI imports this module as ``cli_tools``.

Each run of the command line is a fresh process, so module-level state (the
flaky tool's attempt counter) starts afresh every time.
"""

from __future__ import annotations

import dataclasses
import time
import typing as t
from textwrap import dedent  # imported, not defined here: `list` leaves it out

from nous_tools import Ok, Registry, RunContext, Tool, tool


@tool(timeout=5, retries=0)
def greet(name: str, punctuation: str = "!") -> str:
    """Greet someone by name.

    Args:
        name: Who to greet.
        punctuation: What ends the greeting.
    """
    return f"hello {name}{punctuation}"


def add(a: int, b: int) -> int:
    """Add two integers (a plain function: the CLI makes it a Tool)."""
    return a + b


@tool(timeout=5, retries=1)
def fail(reason: str = "boom") -> str:
    """Always raise ValueError."""
    raise ValueError(reason)


_flaky_attempts: list[int] = []


@tool(timeout=5, retries=1)
def flaky() -> str:
    """Raise ConnectionError on the first attempt, succeed on the second."""
    _flaky_attempts.append(1)
    if len(_flaky_attempts) == 1:
        raise ConnectionError("connection reset by peer (secret-token-123)")
    return f"ok on attempt {len(_flaky_attempts)}"


@tool(timeout=0.2, retries=2)
def hang() -> str:
    """Sleep far past the 0.2 s deadline (a blocking call the deadline cannot interrupt)."""
    time.sleep(60)
    return "too late"


@tool(timeout=5)
def slow(seconds: float = 0.9) -> str:
    """Sleep a little, long enough for the live line to appear."""
    time.sleep(seconds)
    return f"slept {seconds} s"


@tool(timeout=5, approval="ask")
def delete_file(path: str) -> str:
    """Delete a file (pretend); every call needs approval.

    A second line of description that ``list`` does not show.
    """
    return f"deleted {path}"


@tool(timeout=None, approval="deny")
def format_disk() -> str:
    """Never runs."""
    raise AssertionError("a deny tool ran")


@tool(timeout=5)
def whoami(ctx: RunContext[t.Any]) -> dict[str, t.Any]:
    """Report what the tool sees of its RunContext."""
    return {
        "retry": ctx.retry,
        "deps": ctx.deps,
        "has_deadline": ctx.deadline is not None,
        "gated": ctx.approval_gated,
    }


@tool(timeout=5, retries=2)
def note_down(ctx: RunContext[dict[str, t.Any]], note: str) -> list[str]:
    """Add a note to the notes kept in the deps (run it with --deps)."""
    notes: list[str] = ctx.deps.setdefault("notes", [])
    notes.append(note)
    return notes


@dataclasses.dataclass
class Point:
    x: int
    y: int


@tool(timeout=None)
def where() -> Point:
    """Return a value that JSON cannot hold."""
    return Point(1, 2)


@tool(timeout=None)
def mixed() -> dict[str, t.Any]:
    """Return JSON with a value inside that JSON cannot hold."""
    return {"n": 1, "point": Point(3, 4), "text": "caf\u00e9"}


not_a_tool = 42

_ = dedent  # keep the import used


class Opaque:
    """A type with no JSON Schema."""


def takes_opaque(thing: Opaque) -> str:
    """A public function that cannot be made a tool: ``list`` skips it with a note."""
    return repr(thing)


def _private_helper() -> None:
    """Private: not listed."""


def _shout(text: str) -> str:
    return text.upper()


#: A registry whose tool is no module attribute: it runs as ``cli_tools:registry.shout``,
#: through the registry and its advice.
registry = Registry(
    [Tool.from_function(_shout, name="shout", description="Upper-case a text.", timeout=5)],
    name="cli",
)
registry.advice.register("after", "shout", lambda result: Ok(f"{result.value}!"))
