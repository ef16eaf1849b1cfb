"""One pool of Postgres connections per database, shared by the stores on it, and what lets those stores
outlive a restart of the server under them.

A store that opened one connection and kept it was broken for good by a restart (or a failover, or
``pg_terminate_backend``): every later call failed on the dead connection. Here each operation borrows a
connection for its own duration; the pool checks a connection before lending it and replaces a dead one, so
a restart costs at most the operation in flight, and that one runs again on a fresh connection when running
it twice leaves what running it once does. State that lives as long as a session (an advisory lock, a
LISTEN) holds its borrowed connection for that long and is given up before the connection goes back.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from stores.base import StoreUnavailableError
from stores.faults import StoreFailure

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

T = TypeVar("T")
DATABASE_SETTING = "KB_AGENT_DATABASE_URL"
CHECKPOINT_SETTING = "KB_AGENT_CHECKPOINT_URL"  # threads, their owners, locks and tool effects
MIN_SIZE = 1  # kept open while idle: the next operation does not pay a connect
MAX_SIZE = 20  # operations in flight at once, plus the sessions held (turn locks, the ingest lock)
WAIT_SECONDS = 10.0  # for a connection at open, and for a free one of the pool before giving up
QUICK_SECONDS = 1.0  # a borrow that gets none this soon looks whether the server still takes connections
# libpq's own deadlines for a server lost without a goodbye (its host down, the network cut): probes after
# 10 s idle, 3 unanswered 5 s apart end the connection; data unacknowledged for 30 s ends it too. A server
# that dies on a live host resets the connection at once; its loss is then named by lost_as_error.
KEEPALIVE: dict[str, Any] = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}
CONNECTION: dict[str, Any] = {**KEEPALIVE, "tcp_user_timeout": 30_000}


def is_postgres(url: str) -> bool:
    return url.startswith(("postgres://", "postgresql://"))


def postgres_address(url: str) -> str:
    """``host:port/db`` of a Postgres URL, for messages: never the user or the password."""
    info = urlparse(url)
    return f"{info.hostname or 'localhost'}:{info.port or 5432}{info.path or ''}"


def connect_postgres(url: str, *, setting: str = DATABASE_SETTING) -> Any:
    """An autocommit psycopg connection, or :class:`StoreUnavailableError` naming ``setting``."""
    import psycopg

    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=round(WAIT_SECONDS), **CONNECTION)
    except psycopg.OperationalError as exc:
        where = postgres_address(url)
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rsplit(": ", 1)[-1]
        raise StoreUnavailableError(
            f"{setting}: cannot connect to Postgres at {where} ({reason}); check the URL and that "
            "the server is running"
        ) from None


class _LossReportedElsewhere(logging.Filter):
    """The pool's warnings on putting a dead connection aside and on each failed reconnection repeat a
    loss this module reports itself, in one line naming the setting; users see that line, not one per try."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(
            (
                "discarding closed connection",
                "discarding broken connection",
                "error connecting in",
                "reconnection attempt in pool",
                "task run",
            )
        )


logging.getLogger("psycopg.pool").addFilter(_LossReportedElsewhere())


class ConnectionLostError(StoreFailure):
    """The server dropped the connection while an operation ran on it; the next operation reconnects."""


def open_pool(
    url: str,
    *,
    setting: str = DATABASE_SETTING,
    min_size: int = MIN_SIZE,
    max_size: int = MAX_SIZE,
    timeout: float = WAIT_SECONDS,
) -> ConnectionPool:
    """A pool of autocommit connections to ``url``, each checked before it is lent (a dead one is
    replaced); :class:`StoreUnavailableError` naming ``setting`` when Postgres cannot be reached now.

    ``setting`` is the pool's name, so errors met later on it name the setting to check as well."""
    from psycopg_pool import ConnectionPool, PoolTimeout

    # One plain connect first: a refused connection, a wrong password or a missing database fails at once,
    # with its reason, instead of after the pool's retries.
    connect_postgres(url, setting=setting).close()
    pool: ConnectionPool = ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        kwargs={"autocommit": True, "connect_timeout": max(1, round(timeout)), **CONNECTION},
        check=ConnectionPool.check_connection,
        timeout=timeout,
        name=setting,
        open=False,
    )
    try:
        pool.open(wait=True, timeout=timeout)
    except PoolTimeout:
        pool.close()
        raise StoreUnavailableError(
            f"{setting}: Postgres at {postgres_address(url)} accepted one connection but not the pool's "
            f"{min_size} within {timeout:g} s; check the server's max_connections"
        ) from None
    return pool


def _address(pool: ConnectionPool) -> str:
    """Where ``pool`` connects, for messages: :func:`open_pool` opens every pool from a URL."""
    conninfo = pool.conninfo
    return postgres_address(conninfo) if isinstance(conninfo, str) else "(a conninfo function)"


def _setting(pool: ConnectionPool) -> str:
    return pool.name if pool.name.startswith("KB_AGENT_") else DATABASE_SETTING


@contextlib.contextmanager
def lost_as_error(pool: ConnectionPool, conn: Any) -> Iterator[None]:
    """Turn ``conn`` dropped by the server mid-way into :class:`ConnectionLostError`, one line naming the
    setting; other errors (a constraint, a full disk) pass as they are."""
    import psycopg

    try:
        yield
    except psycopg.OperationalError as exc:
        if not conn.closed and not conn.broken:
            raise
        raise connection_lost(_setting(pool), _address(pool), exc) from None


def connection_lost(setting: str, address: str, exc: BaseException) -> ConnectionLostError:
    """The one line for a connection to ``address`` (named by ``setting``) that the server dropped."""
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return ConnectionLostError(
        setting,
        f"lost the connection to Postgres at {address} ({reason})",
        "what was in flight was not completed: run it again once the database is back",
    )


@contextlib.contextmanager
def pool_failures(pool: ConnectionPool) -> Iterator[None]:
    """For code that borrows ``pool``'s connections itself (LangGraph's checkpointer): a connection lost
    mid-way, or none lent in time, is one :class:`StoreFailure` naming the pool's setting and server."""
    import psycopg
    from psycopg_pool import PoolTimeout

    if not pool.get_stats().get("pool_available") and (refused := _refusal(pool)):
        # none to lend, and the server refuses new ones: the pool would wait its whole timeout in vain
        raise StoreFailure(
            _setting(pool),
            f"Postgres at {_address(pool)} stopped taking connections ({refused})",
            "what was in flight was not completed: run it again once the database is back",
        )
    try:
        yield
    except PoolTimeout:
        if refused := _refusal(pool):
            raise StoreFailure(
                _setting(pool),
                f"Postgres at {_address(pool)} stopped taking connections ({refused})",
                "what was in flight was not completed: run it again once the database is back",
            ) from None
        raise _no_connection(pool) from None
    except psycopg.OperationalError as exc:
        if not server_lost(exc):
            raise
        raise connection_lost(_setting(pool), _address(pool), exc) from exc


def server_lost(exc: BaseException) -> bool:
    """psycopg's word that the server is gone: a connection broken or closed on this side (no SQLSTATE),
    a connection exception (class 08), or the server shutting down (57P01-57P03); not a query's own error
    (a timeout, a lock not available, a full disk)."""
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


def _no_connection(pool: ConnectionPool) -> StoreUnavailableError:
    return StoreFailure(
        _setting(pool),
        f"no connection to Postgres at {_address(pool)} within {pool.timeout:g} s",
        "check that the server is running (or raise the pool's size if it is busy)",
    )


@contextlib.contextmanager
def borrowed(pool: ConnectionPool) -> Iterator[Any]:
    """A live connection of ``pool`` for the ``with`` block, then back to the pool; none free or none to
    be made within the pool's timeout is :class:`StoreUnavailableError` naming the setting."""
    with contextlib.ExitStack() as stack:
        conn = _lend(pool, stack)
        with lost_as_error(pool, conn):
            yield conn


def _lend(pool: ConnectionPool, stack: contextlib.ExitStack) -> Any:
    """A connection of ``pool``, entered on ``stack``. None within a second: if the server refuses new
    connections now (it went away mid-command), say so at once instead of waiting the pool's whole
    timeout while it tries to reconnect; if it takes them, the pool is busy: wait that timeout."""
    from psycopg_pool import PoolTimeout

    try:
        return stack.enter_context(pool.connection(timeout=min(QUICK_SECONDS, pool.timeout)))
    except PoolTimeout:
        if refused := _refusal(pool):
            raise StoreFailure(
                _setting(pool),
                f"Postgres at {_address(pool)} stopped taking connections ({refused})",
                "what was in flight was not completed: run it again once the database is back",
            ) from None
    try:
        return stack.enter_context(pool.connection())
    except PoolTimeout:
        raise _no_connection(pool) from None


def run(pool: ConnectionPool, work: Callable[[Any], T], *, retry: bool = False) -> T:
    """``work(connection)`` on a connection borrowed for this call. With ``retry`` (``work`` leaves the
    same rows when it runs twice) a connection lost mid-way costs one more try on a fresh connection."""
    try:
        with borrowed(pool) as conn:
            return work(conn)
    except ConnectionLostError:
        if not retry or _refusal(pool):
            raise  # a server that refuses now is not waited for: the pool would try for its whole timeout
    with borrowed(pool) as conn:
        return work(conn)


def _refusal(pool: ConnectionPool) -> str:
    """Why ``pool``'s server refuses a new connection now (within 2 s); empty when it takes one."""
    import psycopg

    conninfo = pool.conninfo
    if not isinstance(conninfo, str):
        return ""
    try:
        psycopg.connect(conninfo, autocommit=True, connect_timeout=2, **CONNECTION).close()
    except psycopg.Error as exc:
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0].rsplit(": ", 1)[-1]
    return ""


@contextlib.contextmanager
def session(pool: ConnectionPool) -> Iterator[Any]:
    """A connection held for state that lasts as long as its session (advisory locks, LISTEN) until the
    ``with`` block ends. That state is given up before the connection goes back, so the next borrower
    never inherits a lock; a connection that cannot give it up is closed, and the pool drops it."""
    import psycopg

    with borrowed(pool) as conn:
        try:
            yield conn
        finally:
            try:
                conn.execute("SELECT pg_advisory_unlock_all()")
                conn.execute("UNLISTEN *")
            except psycopg.Error:  # a lost session has given up its locks already
                conn.close()
