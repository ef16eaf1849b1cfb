"""What the knowledge base has ingested, per file: the ledger that makes re-ingesting idempotent.

One SQLite file (stdlib) under the KB directory records each source's content hash, groups and chunk
ids/hashes, so an unchanged file costs one hash and a changed one re-embeds only the chunks that changed.
``meta`` holds the embedder that built the index and a generation counter bumped by every write, which
lets other instances notice their in-memory BM25 index is stale. ``lock()`` serialises writers of one KB
across threads (a re-entrant lock per path) and processes (``fcntl.flock`` on a lock file).

With a ``postgresql://`` URL the same two tables live in Postgres (``kb_<collection>_files`` and
``_meta``) and the lock is a Postgres advisory lock, so replicas on other machines share the ledger,
the generation (the index version) and the lock; the SQLite file under the data dir is the default.
"""

from __future__ import annotations

import fcntl
import json
import logging
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stores.postgres import is_postgres
from stores.sql import SCHEMA_LOCK, switch_to_wal

log = logging.getLogger(__name__)
MANIFEST_FILE = "manifest.sqlite3"
LOCK_FILE = "ingest.lock"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS {files} (
    source TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    groups TEXT NOT NULL,
    chunk_ids TEXT NOT NULL,
    chunk_hashes TEXT NOT NULL,
    ingested_at TEXT NOT NULL,
    path TEXT NOT NULL DEFAULT '',
    languages TEXT
);
CREATE TABLE IF NOT EXISTS {meta} (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_COLUMNS = "source, content_hash, size, groups, chunk_ids, chunk_hashes, ingested_at, path, languages"

WAITING = "another process is writing this knowledge base (%s): waiting for it to finish"

_thread_locks: dict[str, threading.RLock] = {}
_thread_locks_guard = threading.Lock()
_depth: dict[str, int] = {}  # re-entry count per lock path, guarded by that path's RLock


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class FileRecord:
    """One ingested file; ``chunk_ids[i]`` has hash ``chunk_hashes[i]``; ``path`` is the absolute file path
    it was read from (sources are relative to their root, so pruning needs where they came from);
    ``languages`` the languages its passages are written in (``stores.knowledge.languages``), None when
    it was recorded before the manifest kept them (unknown: see ``KnowledgeBase.languages``)."""

    source: str
    content_hash: str
    size: int
    groups: list[str]
    chunk_ids: list[str] = field(default_factory=list)
    chunk_hashes: list[str] = field(default_factory=list)
    ingested_at: str = ""
    path: str = ""
    languages: list[str] | None = None

    def hashes(self) -> dict[str, str]:
        return dict(zip(self.chunk_ids, self.chunk_hashes, strict=True))


def _record(row: Any) -> FileRecord:
    return FileRecord(
        source=row["source"],
        content_hash=row["content_hash"],
        size=int(row["size"]),
        groups=json.loads(row["groups"]),
        chunk_ids=json.loads(row["chunk_ids"]),
        chunk_hashes=json.loads(row["chunk_hashes"]),
        ingested_at=row["ingested_at"],
        path=row["path"],
        languages=_languages(row["languages"]),
    )


def _languages(stored: str | None) -> list[str] | None:
    return None if stored is None else json.loads(stored)


class Manifest:
    """The per-KB ledger; each call borrows a connection for its duration, so instances are thread-safe.

    ``database_url`` (``postgresql://``) keeps it in Postgres under ``namespace`` (the collection) instead
    of ``<directory>/manifest.sqlite3``; the lock is then a Postgres advisory lock on that namespace.
    ``pool`` (a :func:`stores.postgres.open_pool`) does the same on the deployment's pool instead of one
    of its own for ``database_url``; ``close`` leaves a handed pool open.
    """

    def __init__(
        self, directory: str | Path, *, database_url: str = "", namespace: str = "knowledge", pool: Any = None
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / MANIFEST_FILE
        self.lock_path = self.directory / LOCK_FILE
        self.database_url = database_url
        self.shared = pool is not None or is_postgres(database_url)
        self.pool, self._owns_pool = pool, False
        if self.shared:
            if pool is None:
                from stores.postgres import open_pool

                self.pool, self._owns_pool = open_pool(database_url), True
            prefix = "kb_" + re.sub(r"[^a-z0-9_]", "_", namespace.lower())
            self.files, self.meta_table, self.mark = f"{prefix}_files", f"{prefix}_meta", "%s"
            self.lock_key = f"kb-agent:{prefix}"
            self._pg = threading.local()
        else:
            self.files, self.meta_table, self.mark = "files", "meta", "?"
            self.lock_key = str(self.lock_path.resolve())
        with self._connect() as db:
            if self.shared:  # two processes creating the tables at once collide in Postgres's catalog
                db.execute(SCHEMA_LOCK)
            else:
                switch_to_wal(db)
            for statement in _SCHEMA.format(files=self.files, meta=self.meta_table).split(";"):
                if statement.strip():
                    db.execute(statement)
            self._add_languages_column(db)

    def _add_languages_column(self, db: Any) -> None:
        """A ledger from before languages were recorded gets the column, NULL (unknown) in every row."""
        if self.shared:
            db.execute(f"ALTER TABLE {self.files} ADD COLUMN IF NOT EXISTS languages TEXT")
        elif "languages" not in {row[1] for row in db.execute(f"PRAGMA table_info({self.files})")}:
            db.execute(f"ALTER TABLE {self.files} ADD COLUMN languages TEXT")

    def _sql(self, sql: str) -> str:
        return sql.format(files=self.files, meta=self.meta_table).replace("?", self.mark)

    def close(self) -> None:
        """Close the pool this manifest opened (never one it was handed)."""
        if self._owns_pool:
            self.pool.close()

    @contextmanager
    def _connect(self) -> Iterator[Any]:
        """A connection whose ``with`` block is one transaction (committed, or rolled back on error)."""
        if self.shared:  # borrowed from the pool, which keeps it open: a search does not pay a connect
            from psycopg.rows import dict_row

            from stores.postgres import borrowed

            with borrowed(self.pool) as conn, conn.transaction(), conn.cursor(row_factory=dict_row) as cursor:
                yield cursor
            return
        with closing(sqlite3.connect(self.path, timeout=30)) as db:
            db.row_factory = sqlite3.Row
            with db:
                yield db

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """The rows of one query. A read leaves nothing behind, so on Postgres a connection lost mid-way
        (a restart) costs one more try on a fresh connection instead of the caller's search."""
        if not self.shared:
            with self._connect() as db:
                return db.execute(self._sql(sql), params).fetchall()
        from psycopg.rows import dict_row

        from stores.postgres import run

        def read(conn: Any) -> list[Any]:
            with conn.cursor(row_factory=dict_row) as cursor:
                return cursor.execute(self._sql(sql), params).fetchall()

        return run(self.pool, read, retry=True)

    # -- locking ---------------------------------------------------------------------------------
    @contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive writer lock for this KB: re-entrant in a thread, exclusive across threads/processes."""
        key = self.lock_key
        with _thread_locks_guard:
            rlock = _thread_locks.setdefault(key, threading.RLock())
        with rlock:  # from here on only this thread touches _depth[key]
            if _depth.get(key, 0):
                _depth[key] += 1
                try:
                    yield
                finally:
                    _depth[key] -= 1
                return
            with self._process_lock():
                _depth[key] = 1
                try:
                    yield
                finally:
                    _depth[key] = 0

    @contextmanager
    def _process_lock(self) -> Iterator[None]:
        """The cross-process part of ``lock``: an advisory lock (Postgres) or ``flock`` on a file."""
        if not self.shared:
            with open(self.lock_path, "a+") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    log.warning(WAITING, self.directory)
                    fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
            return
        from stores.postgres import session

        # a connection held for the lock: it lives as long as the session, and a crash releases it; the
        # session gives it up before the connection goes back to the pool
        with session(self.pool) as conn:
            if not conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (self.lock_key,)).fetchone()[0]:
                log.warning(WAITING, self.lock_key)
                conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (self.lock_key,))
            self._pg.lock_conn = conn
            try:
                yield
            finally:
                self._pg.lock_conn = None

    def _check_lock(self) -> None:
        """Before recording an ingest: the advisory lock's session must still be alive. If the database
        dropped it, another writer may have run meanwhile, so nothing is recorded (a re-run reconciles)."""
        conn = getattr(self._pg, "lock_conn", None) if self.shared else None
        if conn is not None:
            from stores.postgres import lost_as_error

            with lost_as_error(self.pool, conn):
                conn.execute("SELECT 1")

    # -- files -----------------------------------------------------------------------------------
    def get(self, source: str) -> FileRecord | None:
        rows = self._read("SELECT * FROM {files} WHERE source = ?", (source,))
        return _record(rows[0]) if rows else None

    def records(self) -> dict[str, FileRecord]:
        rows = self._read("SELECT * FROM {files} ORDER BY source")
        return {row["source"]: _record(row) for row in rows}

    def put(self, record: FileRecord) -> None:
        """Insert or replace one file's record (and bump the generation) in one transaction."""
        self.apply([record], [])

    def apply(self, puts: Iterable[FileRecord], removes: Iterable[str]) -> None:
        """Write several records and forget several sources atomically: all of it lands, or none."""
        rows = []
        for record in puts:
            if len(record.chunk_ids) != len(record.chunk_hashes):
                raise ValueError("chunk_ids and chunk_hashes must have the same length")
            record.ingested_at = record.ingested_at or now_iso()
            rows.append(
                (
                    record.source,
                    record.content_hash,
                    record.size,
                    json.dumps(record.groups, ensure_ascii=False),
                    json.dumps(record.chunk_ids, ensure_ascii=False),
                    json.dumps(record.chunk_hashes),
                    record.ingested_at,
                    record.path,
                    None if record.languages is None else json.dumps(sorted(record.languages)),
                )
            )
        gone = [(source,) for source in removes]
        self._check_lock()
        with self._connect() as db:
            upsert = (
                f"INSERT INTO {{files}} ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (source) DO UPDATE "
                "SET " + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS.split(", ")[1:])
            )
            if rows:
                db.executemany(self._sql(upsert), rows)
            if gone:
                db.executemany(self._sql("DELETE FROM {files} WHERE source = ?"), gone)
            if rows or gone:
                self._touch(db)

    def remove(self, source: str) -> FileRecord | None:
        """Forget ``source``; returns what was recorded for it (None if nothing)."""
        with self._connect() as db:
            row = db.execute(self._sql("SELECT * FROM {files} WHERE source = ?"), (source,)).fetchone()
            if row is None:
                return None
            db.execute(self._sql("DELETE FROM {files} WHERE source = ?"), (source,))
            self._touch(db)
        return _record(row)

    def clear(self) -> None:
        with self._connect() as db:
            db.execute(self._sql("DELETE FROM {files}"))
            self._touch(db)

    def chunk_ids(self) -> set[str]:
        return {cid for record in self.records().values() for cid in record.chunk_ids}

    def languages_by_groups(self) -> list[tuple[list[str], list[str] | None]]:
        """Each file's (groups, languages), languages None where unknown: two short columns, no chunk ids."""
        rows = self._read("SELECT groups, languages FROM {files}")
        return [(json.loads(row["groups"]), _languages(row["languages"])) for row in rows]

    # -- meta ------------------------------------------------------------------------------------
    _SET_META = "INSERT INTO {meta} VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"

    def _touch(self, db: Any) -> None:
        db.execute(
            self._sql(
                "INSERT INTO {meta} VALUES ('generation', '1') ON CONFLICT (key) "
                "DO UPDATE SET value = CAST(CAST({meta}.value AS INTEGER) + 1 AS TEXT)"
            )
        )
        db.execute(self._sql(self._SET_META), ("last_update", now_iso()))

    def touch(self) -> None:
        """Bump the generation without changing a record: other processes reload (after a repair)."""
        with self._connect() as db:
            self._touch(db)

    def meta(self) -> dict[str, str]:
        return {row["key"]: row["value"] for row in self._read("SELECT key, value FROM {meta}")}

    def set_meta(self, **values: str | int) -> None:
        with self._connect() as db:
            db.executemany(self._sql(self._SET_META), [(k, str(v)) for k, v in values.items()])

    def generation(self) -> int:
        """Bumped by every write to ``files``: a cheap "has anyone changed this KB?" check."""
        rows = self._read("SELECT value FROM {meta} WHERE key = 'generation'")
        return int(rows[0]["value"]) if rows else 0
