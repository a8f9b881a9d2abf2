"""Progress, log lines and rich content over MCP, both ways (private).

**Serving.** While a served ``tools/call`` runs, what its tool reports
(``ctx.report_progress``, ``ctx.log``: the ``tool_progress`` and ``tool_log``
signals, sent from the thread that runs the call) goes to the client that asked:
progress as ``notifications/progress`` when the request carried a
``progressToken`` (only increasing values, as the spec requires), log lines as
``notifications/message`` at or above the level the client set with
``logging/setLevel`` (everything until it sets one; on the 2026-07-28 protocol,
the level the request opted in to). The call is found through a context
variable set around it, so nested calls and batches a tool makes report under it.

**Calling.** A remote server's ``notifications/progress`` for a call become the
``ctx.report_progress`` of the calling tool (so progress passes through a chain
of servers), and its ``notifications/message`` the ``ctx.log`` of the call they
belong to.

**Content.** :mod:`nous_tools.content` values become MCP content blocks (bytes in
base64), and MCP blocks become those values again, byte for byte.
"""

from __future__ import annotations

import base64
import binascii
import collections.abc as c
import contextvars
import logging
import threading
import typing as t
import weakref

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp_types as types

from nous_tools import content as _content
from nous_tools import signals as _signals
from nous_tools._engine._reporting import LEVELS, wire_data

__all__ = [
    "MCP_LEVELS",
    "ServedCall",
    "blocks_of",
    "content_of",
    "served",
    "set_level",
]

_log = logging.getLogger("nous_tools")

#: MCP's log levels, least severe first.
MCP_LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


# -- serving: the call being served in this context ------------------------------------


class ServedCall:
    """One served ``tools/call``: where its progress and log lines go."""

    __slots__ = ("_last", "_lock", "levels", "request_id", "session", "token")

    def __init__(self, session: t.Any, request_id: t.Any, levels: c.Container[str]) -> None:
        self.session = session
        self.request_id = request_id
        self.levels = levels  # the levels the client wants
        self.token = anyio.lowlevel.current_token()  # back to the event loop from a thread
        self._last: float | None = None
        self._lock = threading.Lock()

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        with self._lock:  # MCP progress must increase: a value that does not is dropped
            if self._last is not None and progress <= self._last:
                return
            self._last = progress
        self._send(self.session.report_progress, progress, total, message)

    def log(self, tool_name: str, level: str, message: str, data: c.Mapping[str, t.Any]) -> None:
        if level not in self.levels:
            return
        extra = wire_data(data)
        payload: t.Any = {"message": message, **extra} if extra else message
        self._send(self._send_log, level, payload, tool_name)

    async def _send_log(self, level: str, payload: t.Any, logger: str) -> None:
        import warnings

        with warnings.catch_warnings():  # logging is deprecated as of 2026-07-28
            warnings.simplefilter("ignore")
            await self.session.send_log_message(
                level, payload, logger=logger, related_request_id=self.request_id
            )

    def _send(self, fn: c.Callable[..., c.Coroutine[t.Any, t.Any, t.Any]], *args: t.Any) -> None:
        try:
            anyio.from_thread.run(fn, *args, token=self.token)
        except Exception as exc:  # the client went away, the loop ended: nothing to tell
            _log.debug("Could not send an MCP notification: %s", exc)


_served: contextvars.ContextVar[ServedCall | None] = contextvars.ContextVar(
    "nous_tools_mcp_served_call", default=None
)
_active = 0  # calls being served now: the receivers are connected while there are any
_connect_lock = threading.Lock()


def served(call: ServedCall) -> contextvars.Token[ServedCall | None]:
    """Make ``call`` the call being served in this context (end it with :func:`reset`).

    The receivers that forward reports are connected while at least one call is
    served, and only then: a process that serves nothing at the moment pays nothing
    for the reports of its other calls."""
    global _active
    with _connect_lock:
        if _active == 0:
            _signals.tool_progress.connect(_on_progress, weak=False)
            _signals.tool_log.connect(_on_log, weak=False)
        _active += 1
    return _served.set(call)


def reset(token: contextvars.Token[ServedCall | None]) -> None:
    """The call of ``token`` is no longer served."""
    global _active
    _served.reset(token)
    with _connect_lock:
        _active -= 1
        if _active == 0:
            _signals.tool_progress.disconnect(_on_progress)
            _signals.tool_log.disconnect(_on_log)


def _on_progress(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
    call = _served.get()
    if call is not None:
        call.progress(metadata["progress"], metadata["total"], metadata["message"])


def _on_log(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
    call = _served.get()
    if call is not None:
        call.log(metadata["tool_name"], metadata["level"], metadata["message"], metadata["data"])


# -- serving: logging/setLevel ----------------------------------------------------------

# The level each connection asked for (handshake-era protocols), by connection.
_levels: weakref.WeakKeyDictionary[t.Any, str] = weakref.WeakKeyDictionary()
_fallback: dict[int, str] = {}


def _connection_of(session: t.Any) -> t.Any:
    return getattr(session, "_connection", session)


def set_level(session: t.Any, level: str) -> None:
    """Remember the level a client set with ``logging/setLevel``."""
    connection = _connection_of(session)
    try:
        _levels[connection] = level
    except TypeError:
        _fallback[id(connection)] = level


def levels_for(session: t.Any) -> frozenset[str]:
    """The levels a served call may send its client: those at or above the level the
    client set, every level until it sets one."""
    connection = _connection_of(session)
    try:
        level = _levels.get(connection)
    except TypeError:
        level = _fallback.get(id(connection))
    if level is None or level not in MCP_LEVELS:
        return frozenset(MCP_LEVELS)
    return frozenset(MCP_LEVELS[MCP_LEVELS.index(level) :])


# -- content both ways ----------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def blocks_of(parts: c.Sequence[_content.Content]) -> list[types.ContentBlock]:
    """MCP content blocks of content values: bytes in base64."""
    blocks: list[types.ContentBlock] = []
    for part in parts:
        if isinstance(part, _content.Text):
            blocks.append(types.TextContent(text=part.text))
        elif isinstance(part, _content.Image):
            blocks.append(types.ImageContent(data=_b64(part.data), mime_type=part.mime_type))
        elif isinstance(part, _content.Audio):
            blocks.append(types.AudioContent(data=_b64(part.data), mime_type=part.mime_type))
        elif isinstance(part, _content.ResourceLink):
            blocks.append(
                types.ResourceLink(
                    uri=part.uri,
                    name=part.name,
                    mime_type=part.mime_type,
                    title=part.title,
                    description=part.description,
                    size=part.size,
                )
            )
        elif part.text is not None:
            blocks.append(
                types.EmbeddedResource(
                    resource=types.TextResourceContents(
                        uri=part.uri, mime_type=part.mime_type, text=part.text
                    )
                )
            )
        else:
            blocks.append(
                types.EmbeddedResource(
                    resource=types.BlobResourceContents(
                        uri=part.uri,
                        mime_type=part.mime_type,
                        blob=_b64(t.cast(bytes, part.blob)),
                    )
                )
            )
    return blocks


def _decoded(data: str, what: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"the server sent {what} that is not valid base64: {exc}") from None


def content_of(block: object) -> _content.Content | None:
    """The content value of an MCP content block: text, image, audio, embedded
    resources (bytes decoded) and resource links; None for a block of another kind.
    Raises ``ValueError`` for data that is not base64, or content that has no valid
    MIME type."""
    if isinstance(block, types.TextContent):
        return _content.Text(block.text)
    if isinstance(block, types.ImageContent):
        return _content.Image(_decoded(block.data, "an image"), block.mime_type)
    if isinstance(block, types.AudioContent):
        return _content.Audio(_decoded(block.data, "audio"), block.mime_type)
    if isinstance(block, types.ResourceLink):
        return _content.ResourceLink(
            str(block.uri),
            block.name,
            mime_type=block.mime_type,
            title=block.title,
            description=block.description,
            size=block.size,
        )
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return _content.Resource(resource.uri, resource.mime_type, text=resource.text)
        if isinstance(resource, types.BlobResourceContents):
            return _content.Resource(
                resource.uri, resource.mime_type, blob=_decoded(resource.blob, "a resource")
            )
    return None


def level_of(mcp_level: str) -> str:
    """One of ``ctx.log``'s levels for an MCP level (critical and above: ``error``)."""
    return mcp_level if mcp_level in LEVELS else "error"
