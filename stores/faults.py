"""A store that fails under a command, as one error that names the store and says what to do.

A store fails in many shapes: a Chroma server that is gone or does not answer (httpx's errors, deep in
Chroma's client), a Postgres that dropped its connections (psycopg's ``OperationalError``, a pool that lends
none), a SQLite file another process keeps locked past its busy timeout, a full disk. Each boundary — the
Chroma server client (:mod:`stores.chroma`), the Postgres pool (:mod:`stores.postgres`), the checkpointer
and the SQL stores — turns the shapes it meets into a :class:`StoreFailure` naming itself; what still
arrives unnamed at a command's edge (a store opened below code that cannot wrap it) is named here once, by
:func:`store_failure`, so the user reads one line whichever path the error took.

Every wait on a store is bounded by the library's own knob where it has one: psycopg's ``connect_timeout``
and the pool's ``timeout`` (:mod:`stores.postgres`), SQLite's busy timeout (``sqlite3.connect(timeout=)``),
and an httpx timeout on the Chroma server client, whose own settings have none.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stores.base import StoreUnavailableError
from stores.disk import DiskFullError, causes, storage_problem

BUSY_SECONDS = 30.0  # how long a SQLite store waits for another process's write to end (its busy timeout)
CHROMA_SETTING = "KB_AGENT_CHROMA_URL"
CHROMA_CONNECT_SECONDS = 5.0  # to open a connection to the Chroma server
CHROMA_SECONDS = 60.0  # for one request to answer: a large batch written on a busy server, not a dead one
NOT_DONE = "what was in flight was not completed"


class StoreFailure(StoreUnavailableError):
    """A store failed mid-command: ``store`` names it (a file, or a server with the setting pointing at it);
    the message says what happened and what to do. What the failed step wrote was not kept."""

    def __init__(self, store: str, problem: str, todo: str) -> None:
        super().__init__(f"{store}: {problem}; {todo}")
        self.store = store


def chroma_server_failure(url: str, exc: BaseException, timeout: Any = None) -> StoreFailure:
    """The Chroma server at ``url`` lost (refused, reset, closed) or silent past ``timeout`` (an
    ``httpx.Timeout``; the defaults here when None)."""
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        connect = isinstance(exc, httpx.ConnectTimeout)
        limit = getattr(timeout, "connect" if connect else "read", None) or (
            CHROMA_CONNECT_SECONDS if connect else CHROMA_SECONDS
        )
        problem = f"the Chroma server at {url} did not answer within {limit:g} s"
    else:
        problem = f"lost the Chroma server at {url} ({_reason(exc)})"
    return StoreFailure(
        CHROMA_SETTING, problem, f"{NOT_DONE}: check that `chroma run` is up there, then run the command again"
    )


def sqlite_failure(path: str | Path, exc: sqlite3.Error, *, waited: float | None = None) -> StoreFailure | None:
    """A SQLite file locked by another process past ``waited`` s, or that cannot be read or written; None for
    any other error (a full disk is named by :func:`store_failure`, a bug is a bug)."""
    said = str(exc).lower()
    if "locked" in said or "busy" in said:
        within = f" for {waited:g} s" if waited else ""
        return StoreFailure(
            str(path),
            f"locked by another process{within} (an ingest or a turn still writing, or one stopped mid-write)",
            "wait for it to finish, or stop it, then run the command again",
        )
    if "disk i/o error" in said:
        return StoreFailure(
            str(path),
            "could not be read or written (disk I/O error)",
            "check the disk and its free space, then run the command again",
        )
    return None


def postgres_failure(exc: BaseException, where: str = "Postgres") -> StoreFailure | None:
    """psycopg's word that the server cannot be used (gone, refusing, out of connections), or a pool that
    lent no connection in time; None for a query's own error."""
    try:
        import psycopg
        from psycopg_pool import PoolTimeout
    except ImportError:
        return None
    if isinstance(exc, PoolTimeout):
        return StoreFailure(
            where, "no connection to the database in time", "check that the server is running, then run the command again"
        )
    if isinstance(exc, psycopg.OperationalError) and getattr(exc, "sqlstate", None) != "53100":  # 53100: disk full
        return StoreFailure(
            where,
            f"the database connection failed ({_reason(exc)})",
            f"{NOT_DONE}: check that the server is running, then run the command again",
        )
    return None


def store_failure(exc: BaseException, data_dir: str | Path) -> str | None:
    """The one line for a store failure anywhere in ``exc``'s chain, or None when ``exc`` is not one.

    A full disk, a read-only or damaged data folder first (they name the path to fix), then a failure a
    boundary already named, then the shapes of Postgres and SQLite that reached the edge unnamed."""
    if line := storage_problem(exc, data_dir):
        return line
    chain = list(causes(exc))
    for cause in chain:
        if isinstance(cause, StoreUnavailableError | DiskFullError):
            return str(cause)
    for cause in chain:
        named = postgres_failure(cause)
        if named is None and isinstance(cause, sqlite3.OperationalError):
            named = sqlite_failure(f"a database under {data_dir}", cause)
        if named is not None:
            return str(named)
    return None


def _reason(exc: BaseException) -> str:
    """The last clause of the first line of ``exc``: ``Connection refused``, not the library's preamble."""
    first = (str(exc).strip().splitlines() or [""])[0].rsplit(": ", 1)[-1].strip()
    return re.sub(r"^\[Errno \d+\]\s*", "", first) or type(exc).__name__


def failures(exc: BaseException) -> Iterator[StoreFailure]:
    """The :class:`StoreFailure` errors in ``exc``'s chain, outermost first."""
    for cause in causes(exc):
        if isinstance(cause, StoreFailure):
            yield cause
