"""The probe: which of the kernel's mechanisms this host has, proven by trying
(private; the public face is :mod:`nous_tools.sandbox`)."""

from __future__ import annotations

import collections.abc as c
import typing as t

import attrs

from nous_tools._util import _confine

__all__ = ["SandboxProbe", "probe"]


@attrs.frozen(slots=True)
class SandboxProbe:
    """What :func:`probe` found: each mechanism, and the grade.

    ``grade`` is ``"full"`` (every mechanism proven), ``"none"`` (no file fence,
    no network fence and no limits) or ``"partial"``; ``mechanisms`` maps each
    mechanism's name to None (proven) or why it is missing; ``missing`` lists the
    missing ones.
    """

    grade: str
    mechanisms: c.Mapping[str, str | None]

    @property
    def missing(self) -> tuple[str, ...]:
        """The mechanisms not proven here, in the probe's order."""
        return tuple(name for name, why in self.mechanisms.items() if why is not None)

    def to_dict(self) -> dict[str, t.Any]:
        """The probe as JSON-ready data (``nous-tools sandbox probe --json``)."""
        return {
            "grade": self.grade,
            "mechanisms": dict(self.mechanisms),
            "missing": list(self.missing),
        }

    def __str__(self) -> str:
        lines = [f"sandbox: {self.grade}"]
        for name, why in self.mechanisms.items():
            lines.append(f"  {name:<13} {'ok' if why is None else 'missing: ' + why}")
        return "\n".join(lines)


def probe(*, refresh: bool = False) -> SandboxProbe:
    """Prove, by trying each, which kernel mechanisms this host has for the sandbox.

    Each is tried in a throw-away process: a write outside a fence refused
    (``landlock``), a TCP connect refused (``landlock-net``), a loopback connect
    from a new network namespace refused (``netns``), an open-files limit hit
    (``rlimits``), a fork past a process limit refused (``pids``), the
    parent-death signal set (``pdeathsig``). The answer is kept for the process;
    ``refresh=True`` tries again. Mechanisms named in the environment variable
    ``NOUS_TOOLS_SANDBOX_DISABLE`` (comma-separated) are reported missing: the
    test hook for a host without them.
    """
    found = _confine.probe(refresh)
    missing = [name for name, why in found.items() if why is not None]
    if not missing:
        grade = "full"
    elif all(found[n] is not None for n in ("landlock", "netns", "rlimits")):
        grade = "none"
    else:
        grade = "partial"
    return SandboxProbe(grade, found)
