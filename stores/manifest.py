"""What the knowledge base has ingested, per file: the ledger that makes re-ingesting idempotent.

One SQLite file (stdlib) under the KB directory records each source's content hash, groups and chunk
ids/hashes, so an unchanged file costs one hash and a changed one re-embeds only the chunks that changed.
``meta`` holds the embedder that built the index and a generation counter bumped by every write, which
lets other instances notice their in-memory BM25 index is stale. ``lock()`` serialises writers of one KB
across threads (a re-entrant lock per path) and processes (``fcntl.flock`` on a lock file).
"""

from __future__ import annotations

import fcntl
import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

MANIFEST_FILE = "manifest.sqlite3"
LOCK_FILE = "ingest.lock"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    source TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    groups TEXT NOT NULL,
    chunk_ids TEXT NOT NULL,
    chunk_hashes TEXT NOT NULL,
    ingested_at TEXT NOT NULL,
    path TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_thread_locks: dict[str, threading.RLock] = {}
_thread_locks_guard = threading.Lock()
_depth: dict[str, int] = {}  # re-entry count per lock path, guarded by that path's RLock


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class FileRecord:
    """One ingested file; ``chunk_ids[i]`` has hash ``chunk_hashes[i]``; ``path`` is the absolute file path
    it was read from (sources are relative to their root, so pruning needs where they came from)."""

    source: str
    content_hash: str
    size: int
    groups: list[str]
    chunk_ids: list[str] = field(default_factory=list)
    chunk_hashes: list[str] = field(default_factory=list)
    ingested_at: str = ""
    path: str = ""

    def hashes(self) -> dict[str, str]:
        return dict(zip(self.chunk_ids, self.chunk_hashes, strict=True))


def _record(row: sqlite3.Row) -> FileRecord:
    return FileRecord(
        source=row["source"],
        content_hash=row["content_hash"],
        size=int(row["size"]),
        groups=json.loads(row["groups"]),
        chunk_ids=json.loads(row["chunk_ids"]),
        chunk_hashes=json.loads(row["chunk_hashes"]),
        ingested_at=row["ingested_at"],
        path=row["path"],
    )


class Manifest:
    """The per-KB ledger; each call opens a short-lived connection, so instances are thread-safe."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / MANIFEST_FILE
        self.lock_path = self.directory / LOCK_FILE
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection whose ``with`` block is one transaction (committed, or rolled back on error)."""
        with closing(sqlite3.connect(self.path, timeout=30)) as db:
            db.row_factory = sqlite3.Row
            with db:
                yield db

    # -- locking ---------------------------------------------------------------------------------
    @contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive writer lock for this KB: re-entrant in a thread, exclusive across threads/processes."""
        key = str(self.lock_path.resolve())
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
            with open(self.lock_path, "a+") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                _depth[key] = 1
                try:
                    yield
                finally:
                    _depth[key] = 0
                    fcntl.flock(handle, fcntl.LOCK_UN)

    # -- files -----------------------------------------------------------------------------------
    def get(self, source: str) -> FileRecord | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM files WHERE source = ?", (source,)).fetchone()
        return _record(row) if row else None

    def records(self) -> dict[str, FileRecord]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM files ORDER BY source").fetchall()
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
                )
            )
        gone = [(source,) for source in removes]
        with self._connect() as db:
            db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            db.executemany("DELETE FROM files WHERE source = ?", gone)
            if rows or gone:
                self._touch(db)

    def remove(self, source: str) -> FileRecord | None:
        """Forget ``source``; returns what was recorded for it (None if nothing)."""
        with self._connect() as db:
            row = db.execute("SELECT * FROM files WHERE source = ?", (source,)).fetchone()
            if row is None:
                return None
            db.execute("DELETE FROM files WHERE source = ?", (source,))
            self._touch(db)
        return _record(row)

    def clear(self) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM files")
            self._touch(db)

    def chunk_ids(self) -> set[str]:
        return {cid for record in self.records().values() for cid in record.chunk_ids}

    # -- meta ------------------------------------------------------------------------------------
    def _touch(self, db: sqlite3.Connection) -> None:
        db.execute(
            "INSERT INTO meta VALUES ('generation', '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )
        db.execute("INSERT OR REPLACE INTO meta VALUES ('last_update', ?)", (now_iso(),))

    def meta(self) -> dict[str, str]:
        with self._connect() as db:
            return {row["key"]: row["value"] for row in db.execute("SELECT key, value FROM meta")}

    def set_meta(self, **values: str | int) -> None:
        with self._connect() as db:
            db.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, str(v)) for k, v in values.items()]
            )

    def generation(self) -> int:
        """Bumped by every write to ``files``: a cheap "has anyone changed this KB?" check."""
        with self._connect() as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row["value"]) if row else 0
