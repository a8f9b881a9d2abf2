from __future__ import annotations

import collections.abc as c
import pathlib
import sys
import typing as t

import pytest
from hypothesis import HealthCheck, settings

from nous_tools import ToolExecutor, signals

#: The helpers the tests import, serve or start as programs: tool modules, servers
#: and apps (``tests/support/``). They are top-level modules (``cli_tools``,
#: ``mcp_served_tools``...), as a command line or a server names them, so their
#: folder is on ``sys.path`` here, and a subprocess gets it as its ``cwd`` or in
#: ``PYTHONPATH``.
SUPPORT = pathlib.Path(__file__).resolve().parent / "support"
if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))

# This machine is shared and noisy: no property test may fail because one example
# took long (a deadline) or the data generation was slow. Tests that set their own
# settings inherit these.
settings.register_profile(
    "noisy-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("noisy-machine")


@pytest.fixture
def executor() -> c.Iterator[ToolExecutor]:
    with ToolExecutor(max_workers=4) as ex:
        yield ex


class Recorder:
    """Collects every signal sent, in order, as (signal short name, measurements, metadata)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, t.Any], dict[str, t.Any]]] = []
        self._receivers: list[tuple[t.Any, t.Any]] = []

    def connect(self) -> None:
        for short, sig in (
            ("start", signals.tool_execute_start),
            ("stop", signals.tool_execute_stop),
            ("exception", signals.tool_execute_exception),
            ("timeout", signals.tool_execute_timeout),
        ):

            def receiver(sender: t.Any, *, measurements: t.Any, metadata: t.Any, _s=short) -> None:
                self.events.append((_s, measurements, metadata))

            sig.connect(receiver)
            self._receivers.append((sig, receiver))

    def disconnect(self) -> None:
        for sig, receiver in self._receivers:
            sig.disconnect(receiver)

    @property
    def names(self) -> list[str]:
        return [name for name, _, _ in self.events]


@pytest.fixture
def recorder() -> c.Iterator[Recorder]:
    rec = Recorder()
    rec.connect()
    yield rec
    rec.disconnect()
