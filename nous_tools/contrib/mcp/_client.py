"""Call an external MCP server synchronously: :class:`MCPServer` and its tools.

One background thread runs an event loop (an anyio ``BlockingPortal``) that
holds the SDK client session; synchronous callers hand it requests and wait on
``concurrent.futures.Future``s under the tool's deadline.
"""

from __future__ import annotations

import asyncio
import collections.abc as c
import concurrent.futures
import contextlib
import functools
import itertools
import logging
import math
import os
import queue
import threading
import typing as t
import weakref

import anyio
import anyio.to_thread
import attrs
import mcp_types as types
from anyio.from_thread import BlockingPortal
from mcp.shared.exceptions import MCPError

from nous_tools._engine._admission import DEFAULT_MAX_RESULT_CHARS, clip_text, result_limit
from nous_tools._util._clock import monotonic
from nous_tools.contrib.mcp import _pinned, _reports, _task_client
from nous_tools.contrib.mcp._auth import redact
from nous_tools.contrib.mcp._pinned import DefinitionChange
from nous_tools.contrib.mcp._server_requests import (
    PROGRESS,
    InFlight,
    current_call,
    on_elicit,
    on_log,
    on_sample,
    relay,
)
from nous_tools.contrib.mcp._server_requests import (  # where pickles made before the split find it
    MCPElicitation as MCPElicitation,
)
from nous_tools.contrib.mcp._task_client import TaskHandle, TaskStatus
from nous_tools.contrib.mcp._transport import (
    describe_error,
    http_connect,
    is_disconnect,
    start_portal,
    stdio_connect,
)
from nous_tools.errors import OutcomeUnknown, ToolCancelled, ToolError
from nous_tools.results import Err, Ok
from nous_tools.run_context import RunContext
from nous_tools.tool import Tool

if t.TYPE_CHECKING:
    from mcp import Client
    from mcp.client.caching import CacheMode

    from nous_tools.contrib.mcp._auth import OAuth
    from nous_tools.registry import Registry

__all__ = [
    "DefinitionChange",
    "MCPElicitation",
    "MCPServer",
    "TaskHandle",
    "TaskStatus",
    "definition_change",
    "register_mcp",
]

_log = logging.getLogger("nous_tools")

#: How often a waiting call looks at ``ctx.cancelled`` (it wakes at once on a result).
_POLL = 0.05
#: The keyword that binds a remote tool's function to the definition it was made
#: from, so that :func:`~nous_tools.approval.tool_digest` (and every approval token)
#: covers the definition: an approval of one definition never redeems for another.
_PIN = "__nous_definition__"


class _Connection:
    """A connected SDK ``Client``, alive until ``closing`` is set."""

    def __init__(
        self, client: Client, closing: anyio.Event, done: concurrent.futures.Future[t.Any]
    ):
        self.client = client
        self.closing = closing
        self.done = done
        self.broken = False


#: Seconds the SDK's read timeout of a call lags behind the call's deadline.
_SDK_LAG = 1.0
#: Seconds a ``tasks/cancel`` sent at a call's deadline may take, and how long a
#: task's creation may be answered after the call gave up (then it is cancelled).
_CANCEL_WAIT = _task_client.CANCEL_WAIT


class MCPServer:
    """A synchronous handle on an external MCP server.

    Build it with :meth:`stdio` (a command run as a subprocess) or :meth:`http`
    (a Streamable HTTP endpoint). It connects on first use (or on ``with``),
    holds one background event-loop thread (a daemon: it never blocks interpreter
    exit), and reconnects on the next call after the server died or the
    connection broke. :meth:`close` (or leaving ``with``) ends the connection,
    the subprocess and the thread for good.

    :meth:`tools` returns the server's tools as :class:`~nous_tools.Tool` values that
    run through the executor like any other (approval, validation, deadlines,
    signals); ``registry.register_mcp(server)`` registers them.
    """

    def __init__(
        self,
        connect: c.Callable[[contextlib.AsyncExitStack, MCPServer], c.Awaitable[Client]],
        *,
        name: str,
        named: bool = True,
        connect_timeout: float = 30.0,
        list_ttl: float = 0.0,
    ) -> None:
        if (
            not isinstance(list_ttl, (int, float))
            or isinstance(list_ttl, bool)
            or not list_ttl >= 0
        ):
            raise ValueError(f"list_ttl must be a number of seconds >= 0, not {list_ttl!r}")
        self._connect = connect
        #: The server's name in results and errors: the ``name`` given, else the
        #: name the server reports once connected (before that, its command or URL).
        self.name = name
        self._named = named
        self.connect_timeout = connect_timeout
        #: Seconds a ``tools/list`` answer without a ``ttlMs`` hint stands for the
        #: check of a registered tool's definition (0: every call lists again).
        self.list_ttl = float(list_ttl)
        self._lock = threading.Lock()
        self._portal: BlockingPortal | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connection: _Connection | None = None
        self._closed = False
        # The HTTP status of a refused sign-in (401, 403) while connecting, if any.
        self.refused: int | None = None
        self._inflight: dict[int, InFlight] = {}
        self._ids = itertools.count()
        #: Whether each listed tool runs as a task ("required", "optional", "forbidden").
        self._task_support: dict[str, str] = {}
        self._listed = False
        #: The last ``tools/list`` entries, by name.
        self._entries: dict[str, types.Tool] = {}
        #: The registries :func:`register_mcp` put this server's tools in.
        self._registries: list[weakref.ref[Registry]] = []
        #: Changed definitions found by calls and not accepted, by remote name.
        self._changes: dict[str, DefinitionChange] = {}
        self._pin_lock = threading.Lock()
        #: How many ``notifications/tools/list_changed`` (and reconnections) came,
        #: and how many had when the last list was asked for, and when that was.
        self._list_changes = 0
        self._seen_changes = -1
        self._listed_at = 0.0
        #: Whether the connection's subscriptions/listen stream was lost.
        self._deaf = False

    # -- constructors -----------------------------------------------------------------

    @classmethod
    def stdio(
        cls,
        command: str,
        args: c.Sequence[str] = (),
        env: c.Mapping[str, str] | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        connect_timeout: float = 30.0,
        mode: str = "auto",
        list_ttl: float = 0.0,
    ) -> MCPServer:
        """A server run as ``command args...``, spoken to over its stdin/stdout.

        ``env`` is added to the SDK's safe default environment (``PATH``,
        ``HOME``, ...), not to the whole of ``os.environ``. ``mode`` is the SDK
        client's protocol negotiation: ``"auto"`` (the newest both sides speak) or
        ``"legacy"`` (the ``initialize`` handshake of protocol 2025-11-25 and before).

        ``list_ttl`` is how many seconds the server's tool list, once read, stands
        for the check of a registered tool's pinned definition when the server gives
        no ``ttlMs`` hint (see :func:`register_mcp`): ``0`` (the default) reads it
        again before every call; more saves that round trip, and a definition
        changed meanwhile is seen only when the server sends
        ``notifications/tools/list_changed`` (then the next call lists again) or the
        time is up.
        """
        connect = stdio_connect(command, args, env, cwd, mode)
        shown = name or " ".join([os.path.basename(command), *args])
        return cls(
            connect,
            name=shown,
            named=name is not None,
            connect_timeout=connect_timeout,
            list_ttl=list_ttl,
        )

    @classmethod
    def http(
        cls,
        url: str,
        headers: c.Mapping[str, str] | None = None,
        *,
        auth: OAuth | None = None,
        name: str | None = None,
        connect_timeout: float = 30.0,
        mode: str = "auto",
        allow_private_networks: bool = False,
        list_ttl: float = 0.0,
    ) -> MCPServer:
        """A server at a Streamable HTTP endpoint (``https://host/mcp``), with
        ``headers`` sent on every request; ``mode`` and ``list_ttl`` as in :meth:`stdio`.

        Requests to any other origin than the server's (its OAuth discovery, sign-in
        and tokens) never go to a loopback, private, link-local or reserved address
        (``169.254.169.254``, ``10.x``, ``metadata.google.internal``): a server cannot
        send this client into your own network. A server that is itself on such an
        address may, and ``allow_private_networks=True`` lets every server (an
        authorization server inside your network).

        ``auth`` signs in to a server that requires OAuth: :meth:`OAuth.authorization_code`
        (a person, in a browser) or :meth:`OAuth.client_credentials` (a service), on the
        SDK's OAuth client provider; tokens are refreshed and kept in the ``OAuth``'s
        storage. With a person signing in, connecting may take their time too (the
        ``OAuth``'s timeout is added to ``connect_timeout``)."""
        connect = http_connect(url, headers, auth, mode, allow_private_networks)
        waiting = auth.interactive if auth is not None and auth.interactive else 0.0
        return cls(
            connect,
            name=name or url,
            named=name is not None,
            connect_timeout=connect_timeout + waiting,
            list_ttl=list_ttl,
        )

    # -- lifecycle --------------------------------------------------------------------

    def open(self) -> MCPServer:
        """Connect now (otherwise the first use connects). Raises ``ConnectionError``
        naming the server when it cannot be reached."""
        self._ensure()
        return self

    def close(self) -> None:
        """End the connection, the subprocess and the event-loop thread; idempotent.
        Calls after this return ``Err`` saying the server is closed."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            portal, thread, connection = self._portal, self._thread, self._connection
            self._portal = self._thread = self._connection = None
        if portal is None:
            return
        if connection is not None:
            self._end(portal, connection)
        with contextlib.suppress(Exception):
            portal.call(portal.stop, True)
        if thread is not None:
            thread.join(10.0)

    def __enter__(self) -> MCPServer:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "connected" if self._connection else "idle"
        return f"<MCPServer {self.name!r} {state}>"

    # -- the tools --------------------------------------------------------------------

    def tools(
        self,
        *,
        trusted: bool = False,
        prefix: str | None = None,
        timeout: float | None = 30.0,
        on_definition_change: _pinned.OnDefinitionChange = "refuse",
    ) -> list[Tool]:
        """The server's tools as :class:`Tool` values (name = ``prefix`` + remote name).

        Approval follows the MCP rule that annotations from untrusted servers are
        untrusted: with ``trusted=False`` every tool is ``"ask"``; with
        ``trusted=True`` a tool annotated ``readOnlyHint`` is ``"auto"`` and every
        other one (destructive, or not annotated) is ``"ask"``. ``retries`` is 0:
        a remote call is not repeated unless a trusted server annotates the tool
        ``idempotentHint`` (then 1). ``timeout`` is each call's deadline.

        Each tool is pinned to the definition listed now (name, title, description,
        schemas, annotations, task support): before each call the server's list is
        read again (see :func:`register_mcp`) and a changed definition is handled as
        ``on_definition_change`` says (``"refuse"``, ``"ask"`` or ``"accept"``).
        """
        policy = _pinned.check_policy(on_definition_change)
        listed = self._relist(self.connect_timeout)
        made = _Made(trusted, prefix or "", timeout, policy)
        return [self._make_tool(entry, made) for entry in listed]

    def registered_in(self, registry: Registry) -> None:
        """Called by ``registry.register_mcp(server)`` once this server's tools are
        registered in ``registry``: the tools there are those :meth:`accept_definitions`
        and a changed definition (``on_definition_change="ask"`` or ``"accept"``)
        replace."""
        with self._pin_lock:
            if not any(ref() is registry for ref in self._registries):
                self._registries.append(weakref.ref(registry))

    def definition_changes(self) -> list[DefinitionChange]:
        """The changes of remote definitions that calls have found and nobody has
        accepted yet (one per tool, the latest), for a person to review: each
        :class:`DefinitionChange` names the tool and the fields and shows the diff."""
        with self._pin_lock:
            return list(self._changes.values())

    def accept_definitions(self) -> list[str]:
        """Accept the server's current definitions of the registered tools whose
        definition changed since it was pinned (a person reviewed the change): their
        tools, in the registries :func:`register_mcp` (or ``registry.register_mcp``)
        put them in, are replaced by tools made from the new definitions. Returns the
        names of the tools replaced.

        Tools made by :meth:`tools` and registered otherwise are not known here:
        register them again to accept a new definition.
        """
        self._relist(self.connect_timeout)
        accepted: list[str] = []
        with self._pin_lock:
            registries = self._known_registries()
        for registry in registries:
            for tool in registry.all():
                remote = _remote_of(tool)
                if remote is None or remote.server is not self:
                    continue
                entry = self._entries.get(remote.name)
                if entry is None or (
                    remote.waiting is None
                    and _pinned.definition_of(entry).digest == remote.pin.digest
                ):
                    continue
                self._replace(remote, self._make_tool(entry, remote.made))
                accepted.append(tool.name)
        with self._pin_lock:
            self._changes.clear()
        return accepted

    def call(
        self,
        name: str,
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Ok[t.Any] | Err:
        """Call the remote tool ``name`` directly (no approval, no schema check) and
        wait at most ``timeout`` seconds (or until ``ctx.deadline``).

        Returns ``Ok(value)`` or ``Err``; raises ``TimeoutError`` at the deadline and
        ``ConnectionError`` when the server cannot be reached. A server that died or
        a connection that broke after the request was sent is ``Err(OutcomeUnknown)``
        (the tool may have run): never retried, even for tools
        annotated idempotent. The next call reconnects. Tools made by :meth:`tools`
        call this.

        A tool whose definition says it runs as a task (``execution.taskSupport``
        ``"required"``, or ``"optional"`` on a server that creates tasks for
        ``tools/call``) is run as one, transparently: the task is created, watched
        with ``tasks/get`` at the interval the server suggests, and its result
        returned as above; the server's questions meanwhile go to the context's
        elicitor or approval handler. At the deadline (or on ``ctx.cancelled``) the
        task is cancelled (``tasks/cancel``) and the call ends as any other.
        """
        tool = Tool(name=name, function=_unused, timeout=timeout, takes_ctx=False)
        as_task = self._runs_as_task(name)
        return self._call(tool, name, dict(arguments or {}), ctx, timeout, task=as_task)

    @t.overload
    def call_tool(
        self,
        name: str,
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        as_task: t.Literal[True],
        ttl: float = _task_client.DEFAULT_TTL,
        timeout: float | None = None,
    ) -> TaskHandle: ...

    @t.overload
    def call_tool(
        self,
        name: str,
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        as_task: t.Literal[False] = False,
        ttl: float = _task_client.DEFAULT_TTL,
        timeout: float | None = None,
    ) -> Ok[t.Any] | Err: ...

    def call_tool(
        self,
        name: str,
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        as_task: bool = False,
        ttl: float = _task_client.DEFAULT_TTL,
        timeout: float | None = None,
    ) -> TaskHandle | Ok[t.Any] | Err:
        """:meth:`call`, or with ``as_task=True`` start the tool as a task and return
        at once a :class:`TaskHandle` (``.status()``, ``.result(timeout=)``,
        ``.cancel()``) to come back to later, from this process or another one
        (``server.task(handle.id)`` rebuilds it). ``ttl`` is how many seconds the
        server is asked to keep the task after it ends; ``timeout`` bounds the
        creating request only. A server that answers the call at once (no task) is a
        ``ValueError``; one that cannot be reached a ``ConnectionError``."""
        if not as_task:
            return self.call(name, arguments, ctx, timeout=timeout)
        if not isinstance(name, str) or not name:
            raise ValueError("call_tool needs the name of a remote tool")
        if not (isinstance(ttl, (int, float)) and not isinstance(ttl, bool) and ttl > 0):
            raise ValueError(f"ttl must be a positive number of seconds, not {ttl!r}")
        args = dict(arguments or {})
        wait = timeout if timeout is not None else self.connect_timeout
        creation = _task_client.Creation()  # a task created after the timeout is cancelled

        async def start(client: Client) -> _task_client.TaskStatus | types.CallToolResult:
            return await _task_client.create_for(
                client, creation, name, args, ttl=float(ttl), timeout=wait + _CANCEL_WAIT
            )

        try:
            created = self._run(start, timeout=wait)
        except TimeoutError:
            if (task_id := creation.abandon()) is not None:
                _, connection = self._ensure()
                assert self._loop is not None  # set with the portal
                self._cancel_task(task_id, self._loop, connection)
            raise
        except MCPError as exc:
            raise ValueError(
                f"MCP server '{self.name}' refused to run '{name}' as a task: {exc.message}"
            ) from exc
        if not isinstance(created, _task_client.TaskStatus):
            raise ValueError(
                f"MCP server '{self.name}' ran '{name}' at once instead of as a task "
                "(it does not run it as a task); its result is lost to this handle — use "
                "call() for this tool"
            )
        return TaskHandle(server=self, id=created.task_id, tool_name=name)

    def task(self, task_id: str, tool_name: str = "") -> TaskHandle:
        """The :class:`TaskHandle` of a task started earlier (``handle.id``), e.g. in
        another request: nothing is sent until it is used."""
        if not isinstance(task_id, str) or not task_id:
            raise ValueError(f"a task id is a non-empty string, not {task_id!r}")
        return TaskHandle(server=self, id=task_id, tool_name=tool_name)

    # -- internals: making tools ------------------------------------------------------

    def _make_tool(
        self, entry: types.Tool, made: _Made, waiting: _pinned.DefinitionChange | None = None
    ) -> Tool:
        """The :class:`Tool` of a listed ``entry``, pinned to its definition. With
        ``waiting`` (a change a person must approve), a tool that still shows
        ``entry`` (the accepted definition: a model never reads the unapproved text)
        but is ``"ask"``, says so first in its description, and is pinned to the
        new definition, so that approving a call of it approves that definition."""
        trusted, prefix, timeout = made.trusted, made.prefix, made.timeout
        hints = entry.annotations
        read_only = hints.read_only_hint if hints is not None else None
        destructive = hints.destructive_hint if hints is not None else None
        idempotent = hints.idempotent_hint if hints is not None else None
        approval = "auto" if trusted and read_only is True and waiting is None else "ask"
        retries = 1 if trusted and idempotent is True else 0
        pin = _pinned.definition_of(entry) if waiting is None else waiting.new
        remote = _RemoteCall(self, entry, pin, made, waiting)
        description = entry.description or entry.title or ""
        if waiting is not None:
            description = (
                f"[Waiting for a person: the remote definition of '{entry.name}' changed "
                f"since it was registered ({', '.join(waiting.fields)}); approving a call "
                "accepts the new one (nous_tools.contrib.mcp.definition_change(tool) "
                f"shows it).]\n\n{description}"
            )
        options: dict[str, t.Any] = {
            "name": prefix + entry.name,
            # The definition's digest is a keyword of the function: part of the tool's
            # digest, so of every approval token issued for it.
            "function": functools.partial(remote, **{_PIN: pin.digest}),
            "description": description,
            "takes_ctx": True,
            "retries": retries,
            "timeout": timeout,
            "approval": approval,
            "module": f"mcp:{self.name}",
            "read_only": read_only,
            "destructive": destructive,
            "idempotent": idempotent,
            "tags": ("mcp",),
            "trusted_schema": trusted,  # an untrusted server's patterns must not backtrack
        }
        try:
            tool = Tool(parameters=entry.input_schema, **options)
        except (TypeError, ValueError) as exc:
            _log.warning(
                "MCP server '%s': the input schema of tool '%s' is not valid JSON Schema (%s); "
                "its arguments are not validated here",
                self.name,
                entry.name,
                exc,
            )
            tool = Tool(parameters=None, validate_args=False, **options)
        remote.tool = tool
        return tool

    # -- internals: the loop thread and the connection -------------------------------

    def _ensure(self) -> tuple[BlockingPortal, _Connection]:
        portal, connection = self._portal, self._connection
        if (
            portal is not None
            and connection is not None
            and not connection.broken
            and not connection.done.done()
        ):
            return portal, connection  # the common case: connected, no lock
        with self._lock:
            if self._closed:
                raise ConnectionError(f"MCP server '{self.name}' is closed")
            if self._portal is None:
                self._portal, self._thread, self._loop = start_portal(
                    f"nous-tools-mcp-{self.name}"[:60]
                )
            portal = self._portal
            connection = self._connection
            if connection is not None and (connection.broken or connection.done.done()):
                self._connection = None
                self._end(portal, connection)
                connection = None
            if connection is None:
                connection = self._connection = self._connect_now(portal)
                self._listed = False  # another process, perhaps other tools: list again
                self._tools_changed()
            return portal, connection

    def _connect_now(self, portal: BlockingPortal) -> _Connection:
        async def hold(*, task_status: t.Any = anyio.TASK_STATUS_IGNORED) -> None:
            # The scope encloses the whole connection (the SDK's task groups live
            # inside it); its deadline bounds only the connecting.
            with anyio.CancelScope(deadline=anyio.current_time() + self.connect_timeout) as scope:
                async with contextlib.AsyncExitStack() as stack:
                    client = await self._connect(stack, self)
                    self._deaf = False
                    if self.list_ttl > 0:
                        await self._listen_for_changes(stack, client)
                    scope.deadline = math.inf
                    closing = anyio.Event()
                    task_status.started((client, closing))
                    await closing.wait()
            if scope.cancelled_caught:
                raise TimeoutError(f"no answer within {self.connect_timeout} s")

        self.refused = None
        try:
            done, (client, closing) = portal.start_task(hold, name=f"mcp:{self.name}")
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            if self.refused is not None:  # it answered: it did not take our credentials
                raise ConnectionError(
                    f"MCP server '{self.name}' refused the token (HTTP {self.refused}): check "
                    "the bearer token in headers=..., or the OAuth sign-in "
                    f"({redact(describe_error(exc))})"
                ) from None
            raise ConnectionError(
                f"MCP server '{self.name}' could not be reached: {redact(describe_error(exc))}"
            ) from None
        if not self._named:
            info = client.server_info
            if info is not None and info.name:
                self.name = info.name
        return _Connection(client, closing, done)

    async def _listen_for_changes(self, stack: contextlib.AsyncExitStack, client: Client) -> None:
        """On 2026-07-28, where a server says its tool list changed only on a
        ``subscriptions/listen`` stream, open one for as long as the connection (with
        a ``list_ttl``, the only way a call hears of a change before the time is up).
        Each event is noted as it is read (see ``_transport._Watched``); this
        consumes them. Before 2026-07-28 the notification comes by itself."""
        from mcp.client.subscriptions import ListenNotSupportedError

        try:
            subscription = await stack.enter_async_context(client.listen(tools_list_changed=True))
        except ListenNotSupportedError:
            return
        except Exception as exc:
            _log.warning(
                "MCP server '%s' refused to tell of tool list changes (%s): with list_ttl "
                "a changed definition is seen only when the time is up",
                self.name,
                describe_error(exc),
            )
            return
        group = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(group.cancel_scope.cancel)  # first out: the stream ends with us

        async def consume() -> None:
            with contextlib.suppress(Exception):
                async for _ in subscription:
                    self._tools_changed()
            # The stream ended with the connection still up: changes can no longer be
            # heard, so until a reconnection every call lists again.
            self._deaf = True
            self._tools_changed()

        group.start_soon(consume)

    def _end(self, portal: BlockingPortal, connection: _Connection) -> None:
        """Close a connection (best effort, bounded): its subprocess ends with it."""
        with contextlib.suppress(Exception):
            portal.call(connection.closing.set)
        with contextlib.suppress(BaseException):
            connection.done.result(timeout=10.0)

    def _run(self, fn: c.Callable[[Client], c.Awaitable[t.Any]], *, timeout: float | None) -> t.Any:
        portal, connection = self._ensure()
        future = portal.start_task_soon(fn, connection.client)
        finished, _ = concurrent.futures.wait([future], timeout=timeout)
        if not finished:
            future.cancel()
            raise TimeoutError(f"MCP server '{self.name}' did not answer within {timeout} s")
        try:
            return future.result()
        except BaseException as exc:
            if is_disconnect(exc):
                connection.broken = True
                raise ConnectionError(
                    f"MCP server '{self.name}' closed the connection: {describe_error(exc)}"
                ) from exc
            raise

    @staticmethod
    async def _list_tools(client: Client, cache_mode: CacheMode = "use") -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(100):
            page = await client.list_tools(cursor=cursor, cache_mode=cache_mode)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    # -- internals: one call ------------------------------------------------------------

    def _remember(self, listed: c.Sequence[types.Tool]) -> None:
        """Keep what a ``tools/list`` said: each tool's entry and its task support
        (which follows every re-list)."""
        self._entries = {entry.name: entry for entry in listed}
        self._task_support = {entry.name: _task_client.task_support(entry) for entry in listed}
        self._listed = True

    def _tools_changed(self) -> None:
        """The server said its tool list changed (or the connection is a new one):
        the list is read again before the next call of a registered tool. Called
        from the loop thread as the notification is read, before what follows it."""
        self._list_changes += 1

    def _list_fresh(self) -> bool:
        """Whether the last list still stands for a call's check: ``list_ttl`` has
        not passed since it was asked for and no list change came since."""
        return (
            self.list_ttl > 0
            and not self._deaf
            and self._seen_changes == self._list_changes
            and monotonic() - self._listed_at < self.list_ttl
        )

    def _relist(self, timeout: float | None) -> list[types.Tool]:
        """Read the server's list (the SDK's cache answers while the server's
        ``ttlMs`` hint holds, unless a list change came since the last list: the
        SDK's own eviction may not have run yet) and remember it."""
        self._ensure()  # connected first: a new connection counts as a list change
        changes, started = self._list_changes, monotonic()
        mode: CacheMode = "use" if changes == self._seen_changes else "refresh"
        listed: list[types.Tool] = self._run(
            functools.partial(self._list_tools, cache_mode=mode), timeout=timeout
        )
        self._remember(listed)
        self._seen_changes, self._listed_at = changes, started
        return listed

    # -- internals: pinned definitions (_pinned) ----------------------------------------

    def _call_pinned(
        self, remote: _RemoteCall, ctx: RunContext[t.Any], arguments: dict[str, t.Any]
    ) -> Ok[t.Any] | Err:
        """A registered tool's call: the server's list read again (the SDK's cache
        answers while it is fresh), the tool's definition compared with the one it
        was made for, then the call — or the ``Err`` its policy gives."""
        tool = remote.tool
        if tool is None:  # pragma: no cover - set right after the Tool is made
            raise RuntimeError("remote tool used before it was made")
        wait = self.connect_timeout
        if ctx.deadline is not None:  # the list is part of the call: under its deadline
            wait = min(wait, max(0.0, ctx.deadline - monotonic()))
        if not self._list_fresh():
            self._relist(wait)
        entry = self._entries.get(remote.name)
        if entry is None:
            return Err(
                ToolError(
                    f"MCP server '{self.name}' no longer lists tool '{remote.name}': "
                    "it was not run",
                    tool_name=tool.name,
                )
            )
        current = _pinned.definition_of(entry)
        if current.digest != remote.pin.digest:
            return self._changed(remote, tool, entry, current, ctx, arguments)
        if remote.waiting is not None:  # a person approved this call, so the new definition
            self._replace(remote, self._make_tool(entry, remote.made))
            with self._pin_lock:
                self._changes.pop(remote.name, None)
        as_task = self._runs_as_task(remote.name)
        return self._call(tool, remote.name, arguments, ctx, task=as_task)

    def _changed(
        self,
        remote: _RemoteCall,
        tool: Tool,
        entry: types.Tool,
        current: _pinned.Definition,
        ctx: RunContext[t.Any],
        arguments: dict[str, t.Any],
    ) -> Ok[t.Any] | Err:
        """A call whose remote definition changed since its tool was made: what the
        tool's policy says (an ``Err``; a tool waiting for approval; the new
        definition adopted). The ``Err`` names the fields, never quotes the new
        text: it may go back to a model, and the new text may be a poisoned one."""
        accepted = remote.waiting.old if remote.waiting is not None else remote.pin
        change = _pinned.DefinitionChange(self.name, remote.name, accepted, current)
        said = (
            f"MCP server '{self.name}': the definition of tool '{remote.name}' changed "
            f"since it was registered ({', '.join(change.fields)}); it was not run"
        )
        policy = remote.made.policy
        if policy == "accept":
            _log.warning("%s; the new definition is accepted:\n%s", said, change.diff)
            new = self._make_tool(entry, remote.made)
            self._replace(remote, new)
            with self._pin_lock:
                self._changes.pop(remote.name, None)
            if new.approval == "auto" and tool.approval == "auto" and not ctx.approval_gated:
                # Nobody approved anything: the call goes on, under the new definition.
                as_task = self._runs_as_task(remote.name)
                return self._call(new, remote.name, arguments, ctx, task=as_task)
            return Err(
                ToolError(
                    f"{said}. Its new definition is accepted (on_definition_change="
                    f"'accept'): call '{tool.name}' again (an approval given before the "
                    "change does not carry over)",
                    tool_name=tool.name,
                )
            )
        with self._pin_lock:
            self._changes[remote.name] = change
        if policy == "ask":
            self._replace(remote, self._make_tool(remote.entry, remote.made, change))
            return Err(
                ToolError(
                    f"{said}. A person must approve the new definition: the next call of "
                    f"'{tool.name}' asks for approval (NeedsApproval; "
                    "nous_tools.contrib.mcp.definition_change(tool) shows the change)",
                    tool_name=tool.name,
                )
            )
        return Err(
            ToolError(
                f"{said}. server.definition_changes() shows the change to a person; to "
                "accept it: server.accept_definitions(), or register the server's tools "
                "again (registry.register_mcp(server, replace=True))",
                tool_name=tool.name,
            )
        )

    def _replace(self, remote: _RemoteCall, new: Tool) -> None:
        """Put ``new`` in place of ``remote``'s tool in each registry that still holds
        it (those :func:`register_mcp` registered this server's tools in)."""
        old = remote.tool
        with self._pin_lock:
            for registry in self._known_registries():
                if old is not None and registry.lookup(old.name) is old:
                    registry.register(new)

    def _known_registries(self) -> list[Registry]:
        """The registries :func:`register_mcp` put this server's tools in, still
        alive (under ``_pin_lock``)."""
        alive = [registry for ref in self._registries if (registry := ref()) is not None]
        self._registries = [weakref.ref(registry) for registry in alive]
        return alive

    def _runs_as_task(self, name: str) -> bool:
        """Whether ``call(name)`` runs the tool as a task: what its listed definition
        says (the tools are listed once, here, when the server runs tasks and they
        were not listed yet)."""
        _, connection = self._ensure()
        if not _task_client.server_runs_tool_tasks(connection.client):
            return self._task_support.get(name) == "required"
        if not self._listed:
            self._remember(self._run(self._list_tools, timeout=self.connect_timeout))
        return self._task_support.get(name, "forbidden") != "forbidden"

    def _call(
        self,
        tool: Tool,
        remote_name: str,
        arguments: dict[str, t.Any],
        ctx: RunContext[t.Any] | None,
        timeout: float | None = None,
        *,
        task: bool | str = False,
    ) -> Ok[t.Any] | Err:
        """One call: a plain ``tools/call`` (``task=False``), a tool run as a task
        (``True``: cancelled at the deadline), or the end of a task already started
        (its id: left running at the deadline)."""
        deadline = ctx.deadline if ctx is not None else None
        if timeout is not None:
            own = monotonic() + timeout
            deadline = own if deadline is None else min(deadline, own)
        cancelled = ctx.cancelled if ctx is not None else None
        handler = ctx.approval_handler if ctx is not None else None
        # Someone listens to what the calling tool reports: the server's progress and
        # log lines for this call come here, to be reported from this thread.
        inbox: queue.SimpleQueue[t.Any] | None = (
            queue.SimpleQueue() if ctx is not None and ctx._channel is not None else None
        )
        _, connection = self._ensure()
        loop = self._loop
        assert loop is not None  # set with the portal
        waiting = InFlight(tool, handler, inbox, ctx)
        creation = _task_client.Creation()  # the task this call creates, once it has
        key = next(self._ids)
        self._inflight[key] = waiting
        left = None if deadline is None else max(0.0, deadline - monotonic())
        if left is not None:
            # The SDK's own read timeout only behind ours: when it fires first, the
            # request ends without the notifications/cancelled that ours sends (the
            # server went on running the tool: 2 in 12 runs of the test of it).
            left += _SDK_LAG
        try:
            # Straight onto the loop (asyncio's hand-off, not the portal's task group):
            # the call's whole cost over the SDK's own is these two thread hand-offs.
            coroutine: c.Coroutine[t.Any, t.Any, types.CallToolResult]
            if isinstance(task, str):
                coroutine = self._await_task(connection.client, task, deadline, waiting, None)
            elif task:
                coroutine = self._acall_task(
                    connection.client, remote_name, arguments, deadline, waiting, creation
                )
            else:
                coroutine = self._acall(connection.client, remote_name, arguments, left, waiting)
            future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        except BaseException:
            self._inflight.pop(key, None)
            raise
        if inbox is not None:
            future.add_done_callback(inbox.put)
        try:
            self._wait(future, remote_name, deadline, cancelled, inbox, ctx)
        except BaseException:
            # Our own deadline, ctx.cancelled, or the executor interrupting this
            # worker (ToolCancelled): the server is told to stop (the SDK sends
            # notifications/cancelled for a cancelled request; a task this call
            # created is cancelled, now or, still being created, when its id comes).
            future.cancel()
            if task is True and (task_id := creation.abandon()) is not None:
                self._cancel_task(task_id, loop, connection)
            raise
        finally:
            self._inflight.pop(key, None)
        if inbox is not None:
            relay(inbox, t.cast(RunContext[t.Any], ctx), 0.0)  # what came before the end
        return self._answer(tool, remote_name, future, connection)

    def _wait(
        self,
        future: concurrent.futures.Future[t.Any],
        remote_name: str,
        deadline: float | None,
        cancelled: threading.Event | None,
        inbox: queue.SimpleQueue[t.Any] | None,
        ctx: RunContext[t.Any] | None,
    ) -> None:
        """Wait in the caller's thread until the call's ``future`` is done, relaying
        what the server reports into ``inbox`` as it comes; ``TimeoutError`` at
        ``deadline``, ``ToolCancelled`` when ``cancelled`` is set."""
        while not future.done():
            wait = _POLL if cancelled is not None else None
            if deadline is not None:
                left = deadline - monotonic()
                if left <= 0:
                    future.cancel()  # the SDK sends notifications/cancelled
                    raise TimeoutError(
                        f"MCP server '{self.name}' did not answer '{remote_name}' in time"
                    )
                wait = left if wait is None else min(wait, left)
            if inbox is None:
                with contextlib.suppress(concurrent.futures.TimeoutError):
                    future.exception(wait)  # returns when done (whatever the outcome)
            else:
                relay(inbox, t.cast(RunContext[t.Any], ctx), wait)
            if not future.done() and cancelled is not None and cancelled.is_set():
                future.cancel()
                raise ToolCancelled(f"the call to '{remote_name}' was cancelled")

    def _answer(
        self,
        tool: Tool,
        remote_name: str,
        future: concurrent.futures.Future[t.Any],
        connection: _Connection,
    ) -> Ok[t.Any] | Err:
        """The finished call's result, or the ``Err`` (or the exception) its failure
        gives: a connection lost mid-call is an unknown outcome, never retried."""
        try:
            result: types.CallToolResult = future.result()
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                raise TimeoutError(
                    f"MCP server '{self.name}' did not answer '{remote_name}' in time"
                ) from exc
            if exc.code == types.CONNECTION_CLOSED:
                connection.broken = True
                return self._unknown_outcome(tool, remote_name, exc.message, exc)
            return Err(
                ToolError(
                    f"MCP server '{self.name}' refused the call to '{remote_name}': {exc.message}",
                    tool_name=tool.name,
                    original_error=exc,
                )
            )
        except BaseException as exc:
            if is_disconnect(exc):
                connection.broken = True
                return self._unknown_outcome(tool, remote_name, describe_error(exc), exc)
            raise
        return self._to_result(tool, remote_name, result)

    def _unknown_outcome(
        self, tool: Tool, remote_name: str, detail: str, exc: BaseException
    ) -> Err:
        """The request was sent and no answer came back: the remote tool may or may
        not have run. An ``Err`` (a returned value, so the executor never retries
        it, whatever the tool's annotations say)."""
        return Err(
            OutcomeUnknown(
                f"MCP server '{self.name}' went away during the call to '{remote_name}' "
                f"({detail}): the outcome is unknown (the tool may have run), so it is not "
                "retried; the server is restarted on the next call",
                tool_name=tool.name,
                original_error=exc,
            )
        )

    @staticmethod
    async def _acall(
        client: Client,
        name: str,
        arguments: dict[str, t.Any],
        timeout: float | None,
        waiting: InFlight,
    ) -> types.CallToolResult:
        current_call.set(waiting)  # this task's context: the 2026-07-28 input rounds see it
        inbox = waiting.inbox
        if inbox is None:
            return await client.call_tool(name, arguments, read_timeout_seconds=timeout)

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            inbox.put((PROGRESS, progress, total, message))

        # Ask for progress (a progressToken) and, on 2026-07-28+, for log lines.
        return await client.call_tool(
            name,
            arguments,
            read_timeout_seconds=timeout,
            progress_callback=progress,
            meta=t.cast(types.RequestParamsMeta, {types.LOG_LEVEL_META_KEY: "debug"}),
        )

    async def _acall_task(
        self,
        client: Client,
        name: str,
        arguments: dict[str, t.Any],
        deadline: float | None,
        waiting: InFlight,
        creation: _task_client.Creation,
    ) -> types.CallToolResult:
        """Run the tool as a task: create it, then :meth:`_await_task`. The creating
        request outlives the call (shielded, bounded): a task whose id comes after
        the call gave up is cancelled then, never left running unseen."""
        current_call.set(waiting)
        left = None if deadline is None else max(0.0, deadline - monotonic()) + _CANCEL_WAIT
        first = await _task_client.create_for(
            client, creation, name, arguments, ttl=_task_client.DEFAULT_TTL, timeout=left
        )
        if isinstance(first, types.CallToolResult):
            return first  # a tool that may run as a task answered at once
        return await self._await_task(client, first.task_id, deadline, waiting, first)

    async def _await_task(
        self,
        client: Client,
        task_id: str,
        deadline: float | None,
        waiting: InFlight,
        status: _task_client.TaskStatus | None,
    ) -> types.CallToolResult:
        """Watch the task with ``tasks/get`` at the server's interval until it ended
        or asks for input, then fetch its result (``tasks/result``, during which the
        server's questions are answered by the call's handlers)."""
        current_call.set(waiting)

        def left() -> float | None:
            return None if deadline is None else max(0.0, deadline - monotonic())

        def lagged() -> float | None:
            rest = left()
            return None if rest is None else rest + _SDK_LAG

        # Whether ``status`` is a tasks/get answer: a task that ended before its
        # creation was answered is asked once more, as the extension's tasks/get
        # carries its result (the creation's answer never does).
        polled = status is None
        if status is None:
            status = await _task_client.get(client, task_id, timeout=lagged())
        said: list[str] = []  # the status messages reported so far
        while True:
            if waiting.inbox is not None and status.message and status.message not in said[-1:]:
                # what the server says of the task, as the calling tool's progress
                said.append(status.message)
                waiting.inbox.put((PROGRESS, float(len(said)), None, status.message))
            if status.result is not None:
                return status.result
            if status.error is not None:  # a failed task (SEP-2663): the tool failed
                text = f"{status.error.message} (error {status.error.code})"
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text=text)], is_error=True
                )
            if status.status == "input_required" and status.input_requests:
                # SEP-2663: the questions come with the status, the answers go back
                # with tasks/update; the task then goes on.
                answers = await _task_client.answer_inputs(client, status.input_requests)
                await _task_client.update(client, task_id, answers, timeout=lagged())
                status = await _task_client.get(client, task_id, timeout=lagged())
                continue
            if status.done and not polled:
                polled = True
                status = await _task_client.get(client, task_id, timeout=lagged())
                continue
            if status.done or status.status == "input_required":
                return await _task_client.result(client, task_id, timeout=lagged())
            wait = _task_client.poll_interval(status, left())
            if wait is None:  # the deadline comes first: the caller ends the call then
                await anyio.sleep((left() or 0.0) + _SDK_LAG)
                raise TimeoutError(f"MCP server '{self.name}' task {task_id} is still running")
            await anyio.sleep(wait)
            polled = True
            status = await _task_client.get(client, task_id, timeout=lagged())

    def _cancel_task(
        self, task_id: str, loop: asyncio.AbstractEventLoop, connection: _Connection
    ) -> None:
        """``tasks/cancel``, best effort and bounded (the call ends anyway)."""
        future = asyncio.run_coroutine_threadsafe(
            _task_client.cancel(connection.client, task_id, timeout=_CANCEL_WAIT), loop
        )
        try:
            future.result(timeout=_CANCEL_WAIT + _SDK_LAG)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            future.cancel()
            _log.warning(
                "MCP server '%s': task %s could not be cancelled (%s)",
                self.name,
                task_id,
                describe_error(exc),
            )

    # -- internals: a task's handle (_task_client.TaskHandle) -----------------------------------

    def _task_status(self, task_id: str) -> _task_client.TaskStatus:
        async def get(client: Client) -> _task_client.TaskStatus:
            return await _task_client.get(client, task_id, timeout=self.connect_timeout + _SDK_LAG)

        return t.cast(_task_client.TaskStatus, self._run(get, timeout=self.connect_timeout))

    def _task_cancel(self, task_id: str) -> None:
        async def cancel(client: Client) -> None:
            await _task_client.cancel(client, task_id, timeout=self.connect_timeout + _SDK_LAG)

        self._run(cancel, timeout=self.connect_timeout)

    def _task_result(
        self, task_id: str, tool_name: str, timeout: float | None, ctx: RunContext[t.Any] | None
    ) -> Ok[t.Any] | Err:
        name = tool_name or f"task {task_id}"
        tool = Tool(name=name, function=_unused, timeout=timeout, takes_ctx=False)
        return self._call(tool, name, {}, ctx, timeout, task=task_id)

    def _to_result(
        self, tool: Tool, remote_name: str, result: types.CallToolResult
    ) -> Ok[t.Any] | Err:
        # A remote server's text is a model's text: kept to the tool's max_result_chars.
        limit = result_limit(tool, DEFAULT_MAX_RESULT_CHARS)
        texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
        if result.is_error:
            detail = "\n".join(texts) or "no details"
            return Err(
                ToolError(
                    f"MCP server '{self.name}' tool '{remote_name}' failed: {detail}",
                    tool_name=tool.name,
                )
            )
        if result.structured_content is not None:
            return Ok(result.structured_content)
        if len(texts) == len(result.content):
            return Ok(clip_text("\n".join(texts), limit))
        # Images, audio, embedded resources: nous_tools.content values, byte for byte.
        parts: list[t.Any] = []
        try:
            for block in result.content:
                part = _reports.content_of(block)
                parts.append(
                    part
                    if part is not None
                    else block.model_dump(mode="json", by_alias=True, exclude_none=True)
                )
        except ValueError as exc:
            return Err(
                ToolError(
                    f"MCP server '{self.name}' tool '{remote_name}' answered content that "
                    f"cannot be read: {exc}",
                    tool_name=tool.name,
                )
            )
        return Ok(parts[0] if len(parts) == 1 else parts)

    # -- internals: what the server asks and tells during a call (_server_requests) ------

    async def _on_elicit(
        self, context: t.Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        return await on_elicit(self, context, params)

    async def _on_sample(
        self, context: t.Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        return await on_sample(self, context, params)

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        await on_log(self, params)


@attrs.frozen(slots=True)
class _Made:
    """How a server's tools were made (:meth:`MCPServer.tools`'s options), to make
    them again from a new definition."""

    trusted: bool
    prefix: str
    timeout: float | None
    policy: _pinned.OnDefinitionChange


class _RemoteCall:
    """The function of a remote tool: a synchronous request under the attempt's
    deadline, for the definition ``pin`` it was made for."""

    __slots__ = ("__name__", "entry", "made", "name", "pin", "server", "tool", "waiting")

    def __init__(
        self,
        server: MCPServer,
        entry: types.Tool,
        pin: _pinned.Definition,
        made: _Made,
        waiting: _pinned.DefinitionChange | None = None,
    ) -> None:
        self.server = server
        self.name = entry.name
        self.__name__ = entry.name
        #: The listed entry the tool shows (for a tool waiting for approval, the
        #: accepted one), and the definition a call of it runs under.
        self.entry = entry
        self.pin = pin
        self.made = made
        #: The change a person must approve before this tool runs (None: none).
        self.waiting = waiting
        self.tool: Tool | None = None

    def __call__(self, ctx: RunContext[t.Any], /, **arguments: t.Any) -> Ok[t.Any] | Err:
        arguments.pop(_PIN, None)  # the digest the partial binds: self.pin's
        return self.server._call_pinned(self, ctx, arguments)


def _remote_of(tool: Tool) -> _RemoteCall | None:
    """The :class:`_RemoteCall` behind a tool made by :meth:`MCPServer.tools`."""
    function = tool.function
    if isinstance(function, functools.partial) and isinstance(function.func, _RemoteCall):
        return function.func
    return None


def definition_change(tool: Tool) -> DefinitionChange | None:
    """The change of remote definition that ``tool`` waits for a person to approve
    (a tool of a server registered with ``on_definition_change="ask"``, whose
    definition changed), or None. For an approval handler or the page that shows a
    :class:`~nous_tools.NeedsApproval`: ``definition_change(request.tool).diff``."""
    remote = _remote_of(tool)
    return remote.waiting if remote is not None else None


def register_mcp(
    registry: Registry,
    server: MCPServer,
    *,
    trusted: bool = False,
    prefix: str | None = None,
    replace: bool = False,
    on_definition_change: _pinned.OnDefinitionChange = "refuse",
) -> list[Tool]:
    """Register ``server.tools(trusted=trusted, prefix=prefix)`` in ``registry`` and
    return them: ``registry.register_mcp(server, ...)`` (the same, options and
    all), as a function.

    A remote tool never replaces a registered tool silently: a name already in
    ``registry`` (or twice in the server's list) is a ``ValueError`` naming both
    tools, and nothing is registered — unless ``replace=True``. (A hostile server
    could otherwise take over a local tool's name, and its approval level.)

    Each tool is pinned to its definition as listed now (name, title, description,
    input and output schemas, annotations, task support). Before each call the
    server's list is read again — through the SDK's response cache, so with no
    request while the server's ``ttlMs`` hint holds and no
    ``notifications/tools/list_changed`` came; for a server without the hint, none
    either for the ``list_ttl`` seconds given to :meth:`MCPServer.stdio` or
    :meth:`MCPServer.http` (0 by default: every call) — and when the tool's
    definition differs from the pinned one, ``on_definition_change`` decides:

    * ``"refuse"`` (the default): the call is an ``Err`` naming the tool and the
      fields that changed, with the change; the tool does not run until the change
      is accepted (:meth:`MCPServer.accept_definitions`, or registering again);
    * ``"ask"``: the call is an ``Err`` showing the change, and the registered tool
      becomes ``"ask"`` with the change in its description: the next call is a
      :class:`~nous_tools.NeedsApproval`; once approved it runs, and the new
      definition is the pinned one;
    * ``"accept"``: the new definition is adopted (a warning is logged) and the
      registered tool replaced by one made from it; the call runs unless it, or the
      new tool, needs an approval (then it is an ``Err``: call again).

    The definition's digest is part of the tool's digest, so an approval token
    issued for one definition never redeems for another."""
    return registry.register_mcp(
        server,
        trusted=trusted,
        prefix=prefix,
        replace=replace,
        on_definition_change=on_definition_change,
    )


def _unused(**arguments: t.Any) -> None:  # pragma: no cover - never called
    raise AssertionError("not called")
