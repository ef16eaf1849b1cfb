"""One connection helper for the small relational stores (feedback, audit, thread owners, the outbox).

Each is a SQLite file under the data dir by default and a Postgres database when a ``postgresql://`` URL is
configured; the code above differs only in the parameter placeholder, which this hands back. On Postgres a
store runs each operation on a connection borrowed from a pool (:mod:`stores.postgres`), the one the
deployment shares between its stores or one of the store's own, so a database restart does not leave it
holding a dead connection.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from stores.faults import BUSY_SECONDS, sqlite_failure
from stores.postgres import DATABASE_SETTING, borrowed, is_postgres, open_pool, run

T = TypeVar("T")
SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(hashtext('kb-agent:schema'))"  # held by whoever creates tables


@dataclass(frozen=True)
class Rows:
    """What one statement returned, read before its connection went back to the pool."""

    rows: list[Any]
    rowcount: int
    lastrowid: int | None = None

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[Any]:
        return self.rows


@dataclass
class Database:
    """Where a store's statements run, and its placeholder (``?`` or ``%s``).

    SQLite: one autocommit connection shared by the store's threads under ``lock``. Postgres: each call
    borrows an autocommit connection from ``pool`` for its duration; the pool is closed with the store only
    when the store opened it (``owns_pool``), never when it was handed the deployment's.
    """

    mark: str
    postgres: bool
    conn: Any = None
    pool: Any = None
    owns_pool: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    path: Path | None = None  # the SQLite file, named when it fails

    def serial(self) -> str:
        """The auto-increment primary-key type of this backend."""
        return "BIGSERIAL" if self.postgres else "INTEGER"

    def run(self, work: Callable[[Any], T], *, retry: bool = False) -> T:
        """``work(connection)``; on Postgres a connection lost mid-way is tried once more on a fresh one
        when ``retry`` (only for work that leaves the same rows when it runs twice)."""
        if self.pool is None:
            with self.lock, self._named():
                return work(self.conn)
        return run(self.pool, work, retry=retry)

    @contextmanager
    def _named(self) -> Iterator[None]:
        """SQLite locked by another process past the busy timeout, or unreadable: one line naming the file."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            if failure := sqlite_failure(self.path or "a SQLite database", exc, waited=BUSY_SECONDS):
                raise failure from exc
            raise

    def execute(self, sql: str, params: tuple[Any, ...] = (), *, retry: bool = False) -> Rows:
        """One statement; its rows, row count and (SQLite) new row id. ``retry`` as in :meth:`run`."""

        def statement(conn: Any) -> Rows:
            cursor = conn.execute(sql, params)
            rows = cursor.fetchall() if cursor.description else []
            return Rows(rows, cursor.rowcount, getattr(cursor, "lastrowid", None))

        return self.run(statement, retry=retry)

    def create(self, *statements: str) -> None:
        """Run ``CREATE ... IF NOT EXISTS`` statements. On Postgres they run in one transaction under the
        schema lock every store takes: two processes creating one table or index at once otherwise
        collide in the catalog ("duplicate key value violates unique constraint pg_class...")."""
        if not self.postgres:
            for statement in statements:
                self.execute(statement)
            return

        def schema(conn: Any) -> None:
            with conn.transaction():
                conn.execute(SCHEMA_LOCK)
                for statement in statements:
                    conn.execute(statement)

        self.run(schema, retry=True)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A connection for the ``with`` block: in one transaction on Postgres (committed, or rolled back
        on error); SQLite's own under the lock, each statement its own transaction."""
        if self.pool is None:
            with self.lock, self._named():
                yield self.conn
            return
        with borrowed(self.pool) as conn, conn.transaction():
            yield conn

    def close(self) -> None:
        """Close SQLite's connection, or the pool if this store opened it."""
        if self.pool is None:
            with self.lock:
                self.conn.close()
        elif self.owns_pool:
            self.pool.close()


def switch_to_wal(db: Any, seconds: float | None = None) -> None:
    """Put the database in WAL mode, within ``seconds`` (SQLite's busy timeout by default) in all.

    The switch needs the database alone: openers of a fresh database that arrive together fail with
    "database is locked" at once, so it is retried; a database another process keeps locked makes each try
    wait out the busy timeout, so the tries share one deadline (60 tries of 30 s each were half an hour)."""
    deadline = time.monotonic() + (BUSY_SECONDS if seconds is None else seconds)
    busy_ms = db.execute("PRAGMA busy_timeout").fetchone()[0]
    attempt = 0
    try:
        while True:
            left = deadline - time.monotonic()
            db.execute(f"PRAGMA busy_timeout = {max(1, min(busy_ms, int(left * 1000)))}")
            try:
                db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
            attempt += 1
            time.sleep(min(0.01 * attempt, 0.2, max(0.0, deadline - time.monotonic())))
    finally:
        db.execute(f"PRAGMA busy_timeout = {busy_ms}")


def open_database(
    sqlite_file: str | Path, url: str = "", *, pool: Any = None, setting: str = DATABASE_SETTING
) -> Database:
    """Postgres on ``pool`` (the deployment's, left open on close) or on a pool of its own for a
    ``postgresql://`` URL (named ``setting`` in errors); else the SQLite file (created, WAL, shared
    across threads)."""
    if pool is not None:
        return Database("%s", True, pool=pool)
    if is_postgres(url):
        return Database("%s", True, pool=open_pool(url, setting=setting), owns_pool=True)
    path = Path(sqlite_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=BUSY_SECONDS)
    try:
        switch_to_wal(conn)
    except sqlite3.OperationalError as exc:
        conn.close()
        if failure := sqlite_failure(path, exc, waited=BUSY_SECONDS):
            raise failure from exc
        raise
    return Database("?", False, conn=conn, path=path)
