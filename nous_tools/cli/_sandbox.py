"""``nous-tools sandbox probe``: what this host's kernel can enforce (private)."""

from __future__ import annotations

import argparse
import json
import typing as t

from nous_tools.cli._console import EXIT_OK, _write_stdout

__all__: list[str] = []


def _add_sandbox_parser(commands: t.Any, common: argparse.ArgumentParser) -> None:
    sandbox = commands.add_parser(
        "sandbox",
        parents=[common],
        help="what the sandbox can enforce on this host",
        description="The kernel mechanisms behind SandboxPolicy, each proven by trying it.",
    )
    actions = sandbox.add_subparsers(dest="action", metavar="ACTION", required=True)
    probe = actions.add_parser(
        "probe",
        parents=[common],
        help="prove each mechanism and print the grade (full, partial, none)",
        description="Try each mechanism in a throw-away process (a write outside a fence "
        "refused, a connect refused, a limit hit) and print what holds. A call whose policy "
        "needs a missing one is never run unconfined: it gets Err(SandboxUnavailable).",
    )
    probe.add_argument("--json", action="store_true", help="print one JSON object")


def _command_sandbox(options: argparse.Namespace) -> int:
    from nous_tools.sandbox import probe

    found = probe(refresh=True)
    if options.json:
        _write_stdout(json.dumps(found.to_dict(), indent=2))
    else:
        _write_stdout(str(found))
    return EXIT_OK
