"""Approval stores that keep an approval single-use across processes (issue 21, item
2): ``contrib.django.CacheApprovalStore`` refuses the cache backends whose ``add``
is not atomic across processes, and on the ones it accepts, real processes racing
to redeem one signed token run the tool exactly once — the database cache on
SQLite here, Redis in the slow suite.
"""

from __future__ import annotations

import json
import multiprocessing
import pathlib
import typing as t

import pytest

pytest.importorskip("django")

import approval_race
from django.core.cache.backends.db import DatabaseCache
from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.locmem import LocMemCache
from django.core.exceptions import ImproperlyConfigured

from nous_tools.contrib.django import CacheApprovalStore

RACERS = 8
WAIT = 180.0
SPAWN = multiprocessing.get_context("spawn")


def _token() -> dict[str, t.Any]:
    registry = approval_race.make_registry()
    pending = registry.execute("refund", {"order": 42})
    return t.cast(dict[str, t.Any], json.loads(json.dumps(pending.to_dict(approval_race.SECRET))))


def _join(processes: list[t.Any]) -> None:
    for process in processes:
        process.join(WAIT)
    for process in processes:
        if process.is_alive():  # pragma: no cover - a hung child fails the test
            process.kill()
            process.join(WAIT)
    assert [process.exitcode for process in processes] == [0] * len(processes)


def _race(
    tmp_path: pathlib.Path, caches: dict[str, t.Any], databases: dict[str, t.Any] | None = None
) -> tuple[list[str], list[str]]:
    """RACERS processes redeem one token at once; (their outcomes, the tool's runs)."""
    runs = tmp_path / "runs.txt"
    data = _token()
    barrier = SPAWN.Barrier(RACERS)
    results = SPAWN.Queue()
    processes = [
        SPAWN.Process(
            target=approval_race.redeem,
            args=(caches, databases, data, str(runs), barrier, results),
        )
        for _ in range(RACERS)
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=WAIT) for _ in processes]
    _join(processes)
    lines = runs.read_text().splitlines() if runs.exists() else []
    return sorted(outcomes), lines


def _assert_ran_once(outcomes: list[str], runs: list[str]) -> None:
    assert len(runs) == 1, runs
    assert outcomes.count("ran") == 1, outcomes
    refused = [o for o in outcomes if o != "ran"]
    assert refused == [
        "ApprovalAlreadyUsed: Tool 'refund' was not run: its approval was already used"
    ] * (RACERS - 1)


# -- the backends that cannot keep a claim single-use ----------------------------------


@pytest.mark.parametrize(
    ("cache", "words"),
    [
        (DummyCache("dummy", {}), "its add() stores nothing and always answers True"),
        (
            FileBasedCache("/nonexistent/nous-tools-cache", {}),
            "its add() checks whether the file exists, then writes it",
        ),
        (LocMemCache("locmem", {}), "it lives in one process's memory"),
    ],
    ids=["DummyCache", "FileBasedCache", "LocMemCache"],
)
def test_each_cache_backend_without_an_atomic_add_is_refused_naming_it_and_the_fix(
    cache: t.Any, words: str
) -> None:
    backend = f"{type(cache).__module__}.{type(cache).__qualname__}"
    with pytest.raises(ImproperlyConfigured) as raised:
        CacheApprovalStore(cache)
    message = str(raised.value)
    assert backend in message
    assert words in message
    assert "Redis (django.core.cache.backends.redis.RedisCache)" in message
    assert "Memcached" in message and "the database cache (DatabaseCache)" in message
    assert ("single_process=True" in message) is (type(cache) is LocMemCache)


def test_a_subclass_of_a_refused_backend_is_refused_too() -> None:
    class MyFileCache(FileBasedCache):
        pass

    with pytest.raises(ImproperlyConfigured, match=r"a django\.core\.cache\.backends\.filebased"):
        CacheApprovalStore(MyFileCache("/nonexistent/nous-tools-cache", {}))


def test_loc_mem_cache_is_accepted_when_the_site_says_it_runs_in_one_process() -> None:
    store = CacheApprovalStore(LocMemCache("one-process", {}), single_process=True)
    assert store.claim("the-id") is True
    assert store.claim("the-id") is False
    with pytest.raises(ImproperlyConfigured):  # single_process does not make the others safe
        CacheApprovalStore(DummyCache("dummy", {}), single_process=True)
    with pytest.raises(TypeError):
        CacheApprovalStore(LocMemCache("x", {}), single_process=t.cast(bool, "yes"))


def test_the_shared_backends_are_accepted() -> None:
    assert CacheApprovalStore(DatabaseCache("nous_tools_cache", {})).cache is not None
    from django.core.cache.backends.redis import RedisCache

    assert CacheApprovalStore(RedisCache("redis://127.0.0.1:1", {})).cache is not None


def test_a_refused_backend_looked_up_by_alias_refuses_the_call_and_the_tool_does_not_run(
    tmp_path: pathlib.Path,
) -> None:
    runs = tmp_path / "runs.txt"
    caches = {
        "default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"},
        "files": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(tmp_path / "cache"),
        },
        "local": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    }
    results = SPAWN.Queue()
    process = SPAWN.Process(target=approval_race.refused_aliases, args=(caches, str(runs), results))
    process.start()
    answers = {}
    for _ in caches:
        alias, ok, reason, why = results.get(timeout=WAIT)
        answers[alias] = (ok, reason, why)
    _join([process])
    assert not runs.exists()  # the tool never ran
    for alias, backend in (
        ("default", "DummyCache"),
        ("files", "FileBasedCache"),
        ("local", "LocMemCache"),
    ):
        ok, reason, why = answers[alias]
        assert ok is False
        assert "the approval store failed (ImproperlyConfigured)" in reason, reason
        assert f"on cache {alias!r}, a django.core.cache.backends." in why
        assert backend in why and "The fix: " in why


# -- real processes racing on a real shared cache --------------------------------------


def test_processes_racing_to_redeem_one_token_on_the_database_cache_run_the_tool_once(
    tmp_path: pathlib.Path,
) -> None:
    databases = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(tmp_path / "site.sqlite3"),
            "OPTIONS": {"timeout": WAIT},  # the racers wait for the lock, however busy
        }
    }
    caches = {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "nous_tools_cache",
        }
    }
    setup = SPAWN.Process(target=approval_race.create_cache_table, args=(caches, databases))
    setup.start()
    _join([setup])
    outcomes, runs = _race(tmp_path, caches, databases)
    _assert_ran_once(outcomes, runs)


@pytest.mark.slow
def test_processes_racing_to_redeem_one_token_on_redis_run_the_tool_once(
    tmp_path: pathlib.Path,
) -> None:
    pytest.importorskip("redis")
    from servers import redis_server

    with redis_server() as url:
        caches = {
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": url,
            }
        }
        outcomes, runs = _race(tmp_path, caches)
    _assert_ran_once(outcomes, runs)
