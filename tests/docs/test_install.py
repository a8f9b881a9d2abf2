"""What installing nous-tools pulls in (issue 27, item 9): a light core, extras for the rest.

The core is what every user needs; a schema registry, the integrations and the
tooling are extras. ``import nous_tools`` never imports an extra, and making and
running tools works with every extra's modules out of reach.
"""

from __future__ import annotations

import configparser
import importlib.metadata
import pathlib
import re
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: The core's requirements, by (normalized) distribution name.
CORE = {"attrs", "tenacity", "blinker", "jsonschema-rs", "cattrs", "typing-extensions"}

#: Modules that only an extra (or a test, a benchmark, a peer) brings: none may be
#: needed to import nous_tools, make tools and run them.
EXTRA_MODULES = (
    "anthropic",
    "annotated_types",
    "celery",
    "django",
    "fastjsonschema",
    "flask",
    "jsonschema",
    "jsonschema_specifications",
    "langchain_core",
    "limits",
    "mcp",
    "openai",
    "opentelemetry",
    "pebble",
    "psycopg",
    "pydantic",
    "pydantic_ai",
    "ray",
    "redis",
    "referencing",
    "regex",
    "rfc3986_validator",
    "rpds",
    "smolagents",
)


def names(requirements: list[str]) -> set[str]:
    """Distribution names of requirement lines, normalized (PEP 503)."""
    found = set()
    for line in requirements:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
        if match:
            found.add(re.sub(r"[-_.]+", "-", match.group(1)).lower())
    return found


def setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    return config


def test_the_core_installs_only_what_every_user_needs() -> None:
    declared = setup_cfg()["options"]["install_requires"].strip().splitlines()
    assert names(declared) == CORE
    installed = [
        line for line in importlib.metadata.requires("nous-tools") or [] if "extra ==" not in line
    ]
    assert names(installed) == CORE


def test_what_left_the_core_is_an_extra_and_make_test_installs_it() -> None:
    extras = setup_cfg()["options.extras_require"]
    assert names(extras["schema-registry"].strip().splitlines()) == {"referencing"}
    assert names(extras["rate-limits"].strip().splitlines()) == {"limits"}
    assert "limits" in names(extras["redis"].strip().splitlines())
    testing = names(extras["test"].strip().splitlines())
    assert {"referencing", "limits", "jsonschema"} <= testing
    for gone in ("fastjsonschema", "regex", "rfc3986-validator", "jsonschema-specifications"):
        assert all(gone not in names(extras[extra].splitlines()) for extra in extras)


def test_nous_tools_makes_and_runs_tools_with_every_extra_out_of_reach() -> None:
    program = textwrap.dedent(
        f"""
        import dataclasses, datetime, enum, importlib.abc, sys

        BLOCKED = {EXTRA_MODULES!r}

        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ModuleNotFoundError(f"{{name}} is an extra's", name=name)
                return None

        sys.meta_path.insert(0, Block())
        import nous_tools
        from nous_tools import (Ok, Registry, Tool, ToolCall, execute, execute_tool_calls,
                                tool)
        from nous_tools.schema._validation import check_schema

        class Level(enum.Enum):
            LOW = "low"
            HIGH = "high"

        @dataclasses.dataclass
        class Room:
            name: str
            floor: int = 0

        @tool(timeout=5)
        def book(room: Room, when: datetime.date, level: Level = Level.LOW) -> dict:
            '''Book a room.'''
            return {{"room": room, "when": when, "level": level}}

        result = execute(book, {{"room": {{"name": "Ada"}}, "when": "2024-05-01",
                                 "level": "high"}})
        assert isinstance(result, Ok), result
        assert result.value["room"] == Room("Ada") and result.value["level"] is Level.HIGH
        wrong = execute(book, {{"room": {{"floor": "2"}}, "when": "May"}}).reason.message
        assert wrong.startswith("Invalid arguments for 'book': Missing required fields: "
                                "room.name; Type mismatch: "), wrong

        schema = {{
            "type": "object",
            "$defs": {{"code": {{"type": "string", "pattern": "^\\\\p{{Lu}}{{3}}$"}}}},
            "properties": {{"code": {{"$ref": "#/$defs/code"}},
                            "mail": {{"type": "string", "format": "email"}}}},
            "patternProperties": {{"^x-": {{"type": "integer"}}}},
            "required": ["code"],
        }}
        hand = Tool(name="hand", function=lambda **kw: sorted(kw), parameters=schema,
                    timeout=None, trusted_schema=False)
        assert execute(hand, {{"code": "ÄBC", "x-n": 1}}) == Ok(["code", "x-n"])
        assert "does not match" in execute(hand, {{"code": "abc"}}).reason.message
        def refused(make, kind, words):
            try:
                make()
            except kind as e:
                assert words in str(e), e
            else:
                raise AssertionError(f"not refused: {{words}}")

        refused(lambda: check_schema({{"type": "objekt"}}), ValueError, "unknown type 'objekt'")
        refused(lambda: Tool(name="t", function=len, parameters={{"type": "object"}},
                             schema_registry={{"https://x": {{}}}}),
                TypeError, "nous-tools[schema-registry]")
        refused(lambda: Tool(name="t", function=len, rate_limit="10/minute"),
                ImportError, "pip install limits, or from a clone of nous-tools: "
                "pip install '.[rate-limits]'")
        capped = Tool(name="capped", function=lambda: 1, timeout=None, max_calls_per_run=1,
                      max_concurrency=2)
        assert execute(capped) == Ok(1)

        batch = execute_tool_calls(Registry([book]), [ToolCall("c1", "book", {{
            "room": {{"name": "B2", "floor": None}}, "when": "2024-05-02", "level": None}})])
        assert isinstance(batch.results[0], Ok), batch.results
        assert batch.to_openai_messages()[0]["content"].startswith('{{"room": ')
        print(sorted(name for name in sys.modules if name.split(".")[0] in BLOCKED))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_importing_nous_tools_imports_no_extra() -> None:
    code = (
        "import sys, nous_tools, nous_tools.cli\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {EXTRA_MODULES!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"
