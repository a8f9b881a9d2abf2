"""Django integration: the approval flow's views, an approval store on Django's
cache framework, worker hooks that keep the ORM's connections in order, and the
call journal on the site's database.

**The views.** :func:`urls` gives the approval flow's two endpoints for a registry,
to ``include()`` in the site's URLconf (``docs/how-to/django.md``)::

    from django.urls import include, path
    from nous_tools.contrib.django import urls

    urlpatterns = [path("agent/", include(urls(registry)))]

``pip install 'nous-tools[django]'``, then give the registry a store that every
process of the site shares — a cache whose ``add`` is atomic across processes:
Redis (``django.core.cache.backends.redis.RedisCache``), Memcached
(``PyMemcacheCache``, ``PyLibMCCache``) or the database cache (``DatabaseCache``)::

    from nous_tools import Registry
    from nous_tools.contrib.django import CacheApprovalStore

    registry = Registry(tools, name="support-bot", approval_store=CacheApprovalStore())

Each approval id is claimed with ``cache.add`` — which sets a key only when it is
absent, atomically on those backends — so a token replayed to another process is
refused as it is in the one that ran it. The backends whose ``add`` is not atomic
across processes are refused with an error that says so (they would let one
approval run several times): ``DummyCache`` (its ``add`` stores nothing and always
answers True), ``FileBasedCache`` (its ``add`` checks for the file, then writes it)
and ``LocMemCache`` (per process), unless you say the site runs in one process
(``CacheApprovalStore(single_process=True)``). See ``docs/concepts/approval.md``.

**Database connections in worker threads.** Django keeps one connection per
thread, and closes it (when it is broken, or older than ``CONN_MAX_AGE``) at the
start and end of each request — in the request's thread. A tool with a timeout
runs in the executor's worker threads, where no request starts or ends, so each
worker would keep its connection forever, broken ones included. Give the
executor Django's request-end cleanup as its ``after_task`` hook::

    from nous_tools import ToolExecutor
    from nous_tools.contrib.django import close_connections

    executor = ToolExecutor(after_task=close_connections)

See ``docs/how-to/scale-out.md`` ("Thread-bound resources").

**Without having to know.** Add ``"nous_tools.contrib.django.NousToolsConfig"`` to
``INSTALLED_APPS``: at Django's start it makes the process-wide default executor
(the one ``execute`` and every ``Registry`` without an executor of its own use) a
:func:`django_executor`, whose worker threads close their connections after each
task and when they end. Give a registry an executor of your own with
``django_executor(...)``, which takes ``ToolExecutor``'s options. The transaction
rule and a complete app: ``docs/how-to/django.md``.

**The call journal on the site's database.** :class:`DjangoJournal` keeps the
journal (``docs/concepts/journal.md``) in a table of a database Django already
knows, PostgreSQL or SQLite::

    from nous_tools import Registry
    from nous_tools.contrib.django import DjangoJournal

    registry = Registry(tools, journal=DjangoJournal(using="journal"))

This module imports without Django; the cache is looked up at the first claim, the
database connection at the first journaled call.
"""

from __future__ import annotations

import collections.abc as c
import contextlib
import hashlib
import math
import threading
import time
import typing as t
import weakref

from nous_tools.contrib.django._views import check_views, urls
from nous_tools.journal._sql import TABLE, SQLJournal

if t.TYPE_CHECKING:
    from nous_tools import ToolExecutor

__all__ = [
    "CacheApprovalStore",
    "DjangoJournal",
    "close_all_connections",
    "close_connections",
    "django_executor",
    "install_default_executor",
    "urls",
]

#: How long a claim is kept by default: one day, the registry's default approval max age.
DEFAULT_TIMEOUT = 24 * 60 * 60.0


class _Cache(t.Protocol):
    def add(self, key: str, value: t.Any, timeout: t.Any = ..., version: t.Any = None) -> bool: ...


#: Django's cache backends whose ``add`` is not atomic across processes, and why.
_UNSAFE_BACKENDS: dict[str, str] = {
    "django.core.cache.backends.dummy.DummyCache": (
        "its add() stores nothing and always answers True, so every replay would run"
    ),
    "django.core.cache.backends.filebased.FileBasedCache": (
        "its add() checks whether the file exists, then writes it: two processes (or "
        "threads) both see no file and both run the tool"
    ),
    "django.core.cache.backends.locmem.LocMemCache": (
        "it lives in one process's memory, so another process of the site would run a "
        "replayed approval again"
    ),
}

_SAFE = (
    "Redis (django.core.cache.backends.redis.RedisCache), Memcached (PyMemcacheCache, "
    "PyLibMCCache) or the database cache (DatabaseCache)"
)


def _unsafe_backend(cache: object, single_process: bool) -> tuple[str, str] | None:
    """``(backend path, why)`` when ``cache`` is (a subclass of) a backend whose
    ``add`` cannot make a claim single-use, else None."""
    for cls in type(cache).__mro__:
        path = f"{cls.__module__}.{cls.__qualname__}"
        why = _UNSAFE_BACKENDS.get(path)
        if why is None:
            continue
        if single_process and path.endswith(".LocMemCache"):
            return None
        return path, why
    return None


def _refuse(cache: object, where: str, single_process: bool) -> None:
    found = _unsafe_backend(cache, single_process)
    if found is None:
        return
    path, why = found
    shown = type(cache).__module__ + "." + type(cache).__qualname__
    backend = path if shown == path else f"{shown} (a {path})"
    fix = f"use a cache that every process of the site shares, with an atomic add: {_SAFE}"
    if path.endswith(".LocMemCache"):
        fix += "; or, when the site runs in a single process, pass single_process=True"
    message = (
        f"CacheApprovalStore cannot keep approvals single-use on {where}, a {backend}: "
        f"{why}. The fix: {fix}."
    )
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(message)


class CacheApprovalStore:
    """An :class:`~nous_tools.ApprovalStore` on a Django cache.

    ``cache`` is a Django cache object (default: ``django.core.cache.caches[alias]``,
    looked up at the first claim, ``alias`` defaulting to ``"default"``). Its
    ``add`` must be atomic across the site's processes: Redis
    (``RedisCache``), Memcached (``PyMemcacheCache``, ``PyLibMCCache``) and the
    database cache (``DatabaseCache``) are. ``DummyCache``, ``FileBasedCache`` and
    ``LocMemCache`` are refused with ``ImproperlyConfigured`` (given as ``cache``:
    at once; looked up by ``alias``: at the first claim, which the registry then
    refuses to run) — ``LocMemCache`` is accepted with ``single_process=True``, for a
    site that runs in one process.

    A claim is remembered until the token it comes from expires (the registry
    passes that time to :meth:`claim`); ``timeout`` (seconds; default one day; None
    keeps claims as long as the cache does) is how long a claim made without an
    expiry is remembered. Keys are
    ``key_prefix`` followed by the SHA-256 of the id, so any id is a valid key on
    every backend (Memcached's 250-character, no-space keys included).

    ``claim`` returns what ``cache.add`` returns: True when this call stored the
    key. A backend error propagates, and the registry then refuses to run the call
    (fail closed).
    """

    def __init__(
        self,
        cache: _Cache | None = None,
        *,
        alias: str = "default",
        timeout: float | None = DEFAULT_TIMEOUT,
        key_prefix: str = "nous-tools:approval:",
        single_process: bool = False,
    ) -> None:
        if timeout is not None and (type(timeout) not in (int, float) or not timeout > 0):
            raise ValueError(f"timeout must be a number of seconds > 0 or None, got {timeout!r}")
        if type(single_process) is not bool:
            raise TypeError(f"single_process must be a bool, got {type(single_process).__name__}")
        if cache is not None:
            _refuse(cache, "the cache given", single_process)
        self._cache = cache
        self.alias = alias
        self.timeout = timeout
        self.key_prefix = key_prefix
        self.single_process = single_process

    @property
    def cache(self) -> _Cache:
        """The Django cache the claims are kept in (``ImproperlyConfigured`` when its
        backend cannot keep a claim single-use; see the class docs)."""
        if self._cache is None:
            from django.core.cache import caches

            cache = caches[self.alias]
            _refuse(cache, f"cache {self.alias!r}", self.single_process)
            self._cache = t.cast(_Cache, cache)
        return self._cache

    def key(self, approval_id: str) -> str:
        """The cache key of ``approval_id``."""
        return self.key_prefix + hashlib.sha256(approval_id.encode("utf-8")).hexdigest()

    def claim(self, approval_id: str, expires_at: float | None = None) -> bool:
        """True the first time ``approval_id`` is claimed (``cache.add`` stored it).
        The key lives until ``expires_at`` (Unix seconds: the token's expiry, which
        the registry passes), else for ``timeout``."""
        if type(approval_id) is not str:
            raise TypeError(f"approval ids are str, got {type(approval_id).__name__}")
        return self.cache.add(self.key(approval_id), 1, timeout=self._timeout(expires_at)) is True

    def _timeout(self, expires_at: float | None) -> float | None:
        if expires_at is None:
            return self.timeout
        if type(expires_at) not in (int, float) or math.isnan(expires_at):
            raise TypeError(f"expires_at must be Unix seconds or None, got {expires_at!r}")
        if expires_at == math.inf:
            return None  # the token never expires: keep the claim as long as the cache does
        # Whole seconds, rounded up (Memcached counts whole seconds), and at least one
        # (0 would not store the key at all).
        return max(1, math.ceil(expires_at - time.time()))

    def __repr__(self) -> str:
        return f"<CacheApprovalStore alias={self.alias!r} timeout={self.timeout}>"


def close_connections() -> None:
    """Close this thread's database connections that are broken or older than
    ``CONN_MAX_AGE`` (Django's ``close_old_connections``, what Django runs when a
    request ends). The ``after_task`` hook for ``ToolExecutor``: with the default
    ``CONN_MAX_AGE = 0`` each task's connection is closed after it; with a longer
    one a worker keeps at most one connection, and replaces it once it breaks."""
    from django.db import close_old_connections

    close_old_connections()


def close_all_connections() -> None:
    """Close every database connection of this thread (``connections.close_all()``):
    an ``on_worker_exit`` hook, so a worker that ends leaves no connection open even
    with persistent connections (``CONN_MAX_AGE > 0``)."""
    from django.db import connections

    connections.close_all()


def _then(
    first: t.Callable[[], object] | None, last: t.Callable[[], object]
) -> t.Callable[[], object]:
    """A hook that runs ``first`` (when given), then ``last`` even if ``first`` raised."""
    if first is None:
        return last

    def both() -> None:
        try:
            first()
        finally:
            last()

    return both


#: The executors made by django_executor (so install_default_executor knows one).
_MADE: weakref.WeakSet[t.Any] = weakref.WeakSet()


def django_executor(max_workers: int | None = None, **options: t.Any) -> ToolExecutor:
    """A :class:`~nous_tools.ToolExecutor` whose worker threads keep Django's
    database connections in order: ``after_task`` closes the thread's connections
    that are broken or past ``CONN_MAX_AGE`` (:func:`close_connections`, what Django
    does when a request ends) and ``on_worker_exit`` closes all of them
    (:func:`close_all_connections`). ``options`` are ``ToolExecutor``'s; an
    ``after_task`` or ``on_worker_exit`` given there runs first, then the closing.

    >>> from nous_tools.contrib.django import django_executor
    >>> with django_executor(max_workers=2) as executor:
    ...     executor.max_workers
    2
    """
    from nous_tools import ToolExecutor

    executor = ToolExecutor(
        max_workers,
        **{
            **options,
            "after_task": _then(options.get("after_task"), close_connections),
            "on_worker_exit": _then(options.get("on_worker_exit"), close_all_connections),
        },
    )
    _MADE.add(executor)
    return executor


def install_default_executor() -> ToolExecutor:
    """Make the process-wide default executor a :func:`django_executor` (unless it is
    one already) and return it: then ``execute``, ``execute_tool_calls`` and every
    ``Registry`` without an executor of its own close their workers' connections.
    :class:`NousToolsConfig` calls it when Django starts. An executor it replaces is
    not shut down (its running calls finish there)."""
    from nous_tools import executor as _executor

    current = _executor._default
    if current is not None and current in _MADE:
        return current
    made = django_executor()
    _executor.set_default_executor(made)
    return made


def _app_config() -> type:
    from django.apps import AppConfig

    class NousToolsConfig(AppConfig):  # type: ignore[misc]  # Django has no types here
        """The Django app of nous-tools: list it in ``INSTALLED_APPS`` as
        ``"nous_tools.contrib.django.NousToolsConfig"``. At Django's start
        (:meth:`ready`) it installs a :func:`django_executor` as the process-wide
        default executor. It has no models, no migrations and no URLs."""

        name = "nous_tools.contrib.django"
        label = "nous_tools"
        verbose_name = "nous-tools"

        def ready(self) -> None:
            """Install the default executor (:func:`install_default_executor`), and
            register the system checks of the approval views (:func:`urls`)."""
            from django.core import checks

            install_default_executor()
            checks.register(check_views)

    NousToolsConfig.__module__ = __name__
    return NousToolsConfig


def __getattr__(name: str) -> t.Any:
    # NousToolsConfig subclasses Django's AppConfig, so it is made at its first use
    # (by Django, reading INSTALLED_APPS): this module imports without Django.
    if name == "NousToolsConfig":
        config = _app_config()
        globals()[name] = config
        return config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class DjangoJournal(SQLJournal):
    """The call journal in a table of the Django database ``using`` (an alias of
    ``settings.DATABASES``; PostgreSQL or SQLite), made on first use if missing.

    Each record is written in Django's autocommit mode, so it is durable when it
    returns. Inside a transaction (``transaction.atomic()``, ``ATOMIC_REQUESTS``)
    a record would be rolled back with the request, and the call could then run
    again: the journal refuses to work there — the call does not run,
    ``Err(JournalUnavailable)`` — so give it an alias of its own (a second entry of
    ``DATABASES`` for the same database, without ``ATOMIC_REQUESTS``). Django keeps
    one connection per thread: run the executor with
    ``after_task=close_connections`` as for any ORM use in tools.
    """

    _placeholder = "%s"
    _real = "DOUBLE PRECISION"

    def __init__(self, using: str = "default", *, grace: float = 60.0, table: str = TABLE) -> None:
        super().__init__(grace=grace, table=table)
        self.using = using
        self._ready = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<DjangoJournal using={self.using!r} table={self.table!r}>"

    @contextlib.contextmanager
    def _connection(self) -> c.Iterator[t.Any]:
        from django.db import connections

        connection = connections[self.using]
        if connection.in_atomic_block:
            raise RuntimeError(
                f"DjangoJournal cannot write inside a transaction of database {self.using!r} "
                "(transaction.atomic or ATOMIC_REQUESTS): its records would be rolled back "
                "with it; give it a database alias of its own"
            )
        if not self._ready:
            with self._lock:
                if not self._ready:
                    self._make_table(connection)
                    self._ready = True
        yield connection

    def _where(self) -> object:
        return self.using

    @contextlib.contextmanager
    def _transaction(self) -> c.Iterator[c.Callable[[str, t.Any], int]]:
        from django.db import transaction

        with (
            self._connection() as connection,
            transaction.atomic(using=self.using),
            connection.cursor() as cursor,
        ):

            def execute(sql: str, parameters: t.Any) -> int:
                cursor.execute(sql, parameters)
                return int(cursor.rowcount)

            yield execute

    def _database_now(self) -> float | None:
        """The server's clock on PostgreSQL (a SQLite file is on this host's)."""
        from django.db import connections

        if connections[self.using].vendor != "postgresql":
            return None
        (row,) = self._rows("SELECT EXTRACT(EPOCH FROM clock_timestamp())", ())
        return float(row[0])

    def _make_table(self, connection: t.Any) -> None:
        from django.db import DatabaseError

        for statement in self._schema():
            try:
                with connection.cursor() as cursor:
                    cursor.execute(statement)
            except DatabaseError:  # another process made it at the same moment
                if self.table not in connection.introspection.table_names():
                    raise

    def close(self) -> None:
        """Nothing to close: Django owns the connections."""
