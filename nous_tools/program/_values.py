"""What a program gives back: its output, or the nested calls it waits on (private;
the public face is :mod:`nous_tools.program`)."""

from __future__ import annotations

import collections.abc as c
import typing as t

import attrs

from nous_tools.approval import Edit, NeedsApproval
from nous_tools.sandbox import SandboxPolicy

if t.TYPE_CHECKING:
    from nous_tools.program._registry import RegistryLike
    from nous_tools.results import Result
    from nous_tools.run_context import RunContext

__all__ = ["EditedCall", "ProgramOutput", "ProgramPaused"]


@attrs.frozen(slots=True)
class ProgramOutput:
    """The value of a program that ran to its end (``Ok(ProgramOutput)``).

    ``result`` is the value of its ``result = ...`` assignment, else of its final
    expression (None when it has neither), as JSON carries it (a value JSON cannot
    hold comes back as its ``repr``); ``stdout`` is what it printed; ``calls`` is
    how many nested calls it made (replayed ones included).
    """

    result: t.Any
    stdout: str = ""
    calls: int = 0

    def to_dict(self) -> dict[str, t.Any]:
        """``{"result", "stdout"}``: what a model is shown of it (``code_tool``)."""
        return {"result": self.result, "stdout": self.stdout}


@attrs.frozen(slots=True)
class EditedCall:
    """A nested call a person approved with changed arguments (an
    :class:`~nous_tools.Edit`): the program asked ``tool`` with arguments whose
    digest is ``asked``, and the call ran (under ``call_id``) with ``arguments``.

    Every later re-run of the program accepts the asked call at that position as
    the approved one, and answers it with the edited call's outcome (from the
    journal, which holds it under ``call_id``, or this process's record).
    """

    #: The nested call's id, ``"<program_id>/<position>"``.
    call_id: str
    #: The tool the program asked there.
    tool: str
    #: The digest of the arguments the program asked there.
    asked: str
    #: The arguments the call ran with (JSON-safe).
    arguments: c.Mapping[str, t.Any] = attrs.field(eq=False)


@attrs.frozen(slots=True, eq=False)
class ProgramPaused:
    """A program stopped at a nested call that waits for a person (no approval
    handler in its context): what :meth:`Registry.run_program` returns in place of
    a ``NeedsApproval``.

    ``waiting`` holds the nested calls' own :class:`NeedsApproval` (each signed and
    single-use as any; its ``call_id`` is the nested call's id,
    ``"<program_id>/<position>"``). :meth:`resolve` applies a person's decisions and
    runs the program again from its start: every nested call that completed before
    is answered by the journal (or, without one, by this process's record of the
    program), not run again.
    """

    #: The program's source, run again by :meth:`resolve`.
    source: str
    #: The program's id: its nested calls' ids are ``"<program_id>/<position>"``.
    program_id: str
    #: The run its nested calls are journaled in.
    run_id: str
    #: The nested calls waiting for a person, each a signed, single-use ``NeedsApproval``.
    waiting: tuple[NeedsApproval, ...]
    #: The nested calls rejected by earlier decisions (their ids): rejected again on
    #: every re-run, never asked twice.
    rejected: tuple[str, ...] = ()
    #: The nested calls approved with changed arguments by earlier decisions: the
    #: asked call is accepted at each one's position on every re-run.
    edited: tuple[EditedCall, ...] = ()
    #: The program's deadline in seconds on each run (None: none).
    timeout: float | None = None
    #: The most nested calls it may make on each run.
    max_calls: int = 100
    #: The policy its child runs behind.
    sandbox: SandboxPolicy | None = None
    #: The names of the functions it may call.
    functions: tuple[str, ...] | None = None
    #: The registry that runs it again (what :meth:`resolve` uses).
    registry: RegistryLike | None = attrs.field(default=None, repr=False)

    def is_ok(self) -> t.Literal[False]:
        """Always False: the program has not finished."""
        return False

    @property
    def ids(self) -> list[str]:
        """The ids of the nested calls waiting (``resolve``'s keys)."""
        return [t.cast(str, na.call_id) for na in self.waiting]

    def pending_summary(self) -> list[dict[str, t.Any]]:
        """What a page shows a person about each waiting nested call: ``{"id",
        "tool", "description", "arguments", "program_id"}``."""
        from nous_tools._util._canonical import thaw

        return [
            {
                "id": na.call_id,
                "tool": na.tool.name,
                "description": na.tool.description,
                "arguments": thaw(na.arguments),
                "program_id": self.program_id,
            }
            for na in self.waiting
        ]

    def to_dict(self, secret: str | bytes | None = None) -> dict[str, t.Any]:
        """The paused program as a JSON-safe dict, to carry it to a later request and
        read it back with :meth:`from_dict`: its source, ids, limits, policy and
        each waiting nested call's own approval token, with ``signature`` — with
        ``secret`` an HMAC over everything else (a client can read it and change
        nothing), without one a plain checksum, for trusted storage only."""
        from nous_tools.program._wire import write

        return write(self, secret)

    @classmethod
    def from_dict(
        cls,
        data: object,
        registry: RegistryLike,
        secret: str | bytes | None = None,
        *,
        max_age: float | None = None,
        allow_unsigned: bool = False,
        max_clock_skew: float | None = None,
    ) -> ProgramPaused:
        """Read back what :meth:`to_dict` wrote, for ``registry``: each refusal is a
        ``ValueError`` starting ``"paused program refused: "`` (malformed, a
        signature that does not match, made for another registry), and each waiting
        call's token is checked as :meth:`NeedsApproval.from_dict` checks it (its
        tool, age and audience; ``max_age``, ``allow_unsigned`` and
        ``max_clock_skew`` as there). A program already resolved is still read;
        :meth:`resolve` is what refuses it."""
        from nous_tools.program._wire import read

        return read(cls, data, registry, secret, max_age, allow_unsigned, max_clock_skew)

    def resolve(
        self,
        decisions: c.Mapping[str, str | Edit],
        ctx: RunContext[t.Any] | None = None,
    ) -> Result | ProgramPaused:
        """Apply a person's decisions (``{nested_id: "approve" | "reject" |
        Edit(arguments)}``) and run the program again from its start; returns what
        :meth:`Registry.run_program` returns. An approved call runs once (its
        approval is claimed); an edited one runs once with the edited arguments,
        validated against the tool's schema (a bad edit is that call's validation
        error inside the program), and every re-run accepts the call the program
        asks there as the one approved (:class:`EditedCall`); a rejected one is an
        exception inside the program (:class:`ToolError`, which it may catch).
        Checked before anything runs, each a ``ValueError``: an id that is not
        waiting, a decision that is none of those, an edit whose arguments are not a
        mapping. A paused program resolves once: again is
        :class:`~nous_tools.errors.BatchAlreadyResolved` and runs nothing."""
        from nous_tools.program._run import resume

        return resume(self, decisions, ctx)
