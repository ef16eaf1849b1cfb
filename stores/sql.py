"""One connection helper for the small relational stores (feedback, audit, thread owners).

Each is a SQLite file under the data dir by default and a Postgres database when a ``postgresql://`` URL is
configured; the code above differs only in the parameter placeholder, which this hands back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse


def is_postgres(url: str) -> bool:
    return url.startswith(("postgres://", "postgresql://"))


@dataclass
class Database:
    """An autocommit connection, its placeholder (``?`` or ``%s``) and whether it is Postgres."""

    conn: Any
    mark: str
    postgres: bool

    def serial(self) -> str:
        """The auto-increment primary-key type of this backend."""
        return "BIGSERIAL" if self.postgres else "INTEGER"


class StoreUnavailableError(ConnectionError):
    """A configured database or Chroma server cannot be reached; the message names the setting."""


def postgres_address(url: str) -> str:
    """``host:port/db`` of a Postgres URL, for messages: never the user or the password."""
    info = urlparse(url)
    return f"{info.hostname or 'localhost'}:{info.port or 5432}{info.path or ''}"


def connect_postgres(url: str, *, dict_rows: bool = False) -> Any:
    """An autocommit psycopg connection, or :class:`StoreUnavailableError` naming KB_AGENT_DATABASE_URL."""
    import psycopg
    from psycopg.rows import dict_row

    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10, row_factory=dict_row if dict_rows else None)
    except psycopg.OperationalError as exc:
        where = postgres_address(url)
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rsplit(": ", 1)[-1]
        raise StoreUnavailableError(
            f"KB_AGENT_DATABASE_URL: cannot connect to Postgres at {where} ({reason}); check the URL and that "
            "the server is running"
        ) from None


def open_database(sqlite_file: str | Path, url: str = "") -> Database:
    """Postgres for a ``postgresql://`` URL, else the SQLite file (created, WAL, shared across threads)."""
    if is_postgres(url):
        return Database(connect_postgres(url), "%s", True)
    path = Path(sqlite_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    return Database(conn, "?", False)


@contextmanager
def postgres_lost(url: str, conn: Any) -> Iterator[None]:
    """Turn a connection the database dropped mid-way (restart, failover, ``pg_terminate_backend``) into
    one message naming the setting; the caller's transaction is rolled back, so nothing half-written stays."""
    import psycopg

    try:
        yield
    except psycopg.OperationalError as exc:
        if not conn.closed and not conn.broken:
            raise
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StoreUnavailableError(
            f"KB_AGENT_DATABASE_URL: lost the connection to Postgres at {postgres_address(url)} ({reason}); "
            "nothing of this write was recorded: run the command again once the database is back"
        ) from None
