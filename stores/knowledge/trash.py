"""Undo for a deletion (seed 002): a deleted document goes to a trash kept ``trash_days`` days.

The trash holds what restoring needs without re-reading the file or re-embedding: the manifest record
and every chunk's text, metadata and vector. A document in the trash is in none of the three stores, so
no search can return it. Restoring puts it back in all three under the manifest lock; a document that
was ingested again meanwhile is not overwritten.

The trash is a SQLite file beside the manifest (``<kb_dir>/trash.sqlite3``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stores.manifest import FileRecord

if TYPE_CHECKING:
    from stores.knowledge.index import KnowledgeIndex

SCHEMA = """
CREATE TABLE IF NOT EXISTS trash (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    source TEXT NOT NULL,
    deleted_at TEXT NOT NULL,
    record TEXT NOT NULL,
    chunks TEXT NOT NULL
)
"""


class TrashError(LookupError):
    """Nothing in the trash has that id, or restoring it would overwrite a document ingested since."""


@dataclass(frozen=True)
class TrashItem:
    """A deleted document: when, what, and how many chunks it had."""

    id: int
    source: str
    deleted_at: str
    chunks: int
    groups: list[str]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Trash:
    """The deleted documents of one knowledge base, kept ``days`` days (0: deletions are final)."""

    def __init__(self, kb_dir: str | Path, days: float = 7.0) -> None:
        self.path = Path(kb_dir) / "trash.sqlite3"
        self.days = days
        self._lock = threading.Lock()
        with self._db() as db:
            db.execute(SCHEMA)

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, contextlib.closing(sqlite3.connect(self.path, timeout=30)) as db, db:
            yield db

    def put(self, record: FileRecord, chunks: list[dict[str, Any]]) -> int:
        """Keep a deleted document; returns its trash id."""
        row = (
            record.source,
            datetime.now(UTC).isoformat(timespec="seconds"),
            json.dumps(dataclasses.asdict(record), ensure_ascii=False),
            json.dumps(chunks, ensure_ascii=False),
        )
        with self._db() as db:
            return int(db.execute("INSERT INTO trash (source, deleted_at, record, chunks) VALUES (?, ?, ?, ?)", row).lastrowid)

    def items(self) -> list[TrashItem]:
        """What can still be restored, newest first (expired documents are purged first)."""
        self.purge()
        with self._db() as db:
            rows = db.execute("SELECT id, source, deleted_at, record FROM trash ORDER BY id DESC").fetchall()
        out = []
        for trash_id, source, deleted_at, record in rows:
            data = json.loads(record)
            out.append(TrashItem(trash_id, source, deleted_at, len(data.get("chunk_ids", [])), data.get("groups", [])))
        return out

    def peek(self, trash_id: int) -> tuple[FileRecord, list[dict[str, Any]]]:
        """What restores one document (it stays in the trash until ``purge(trash_id)``)."""
        with self._db() as db:
            row = db.execute("SELECT record, chunks FROM trash WHERE id = ?", (trash_id,)).fetchone()
        if row is None:
            raise TrashError(f"nothing in the trash has id {trash_id} (kb-agent trash list)")
        return FileRecord(**json.loads(row[0])), json.loads(row[1])

    def purge(self, trash_id: int | None = None, *, everything: bool = False) -> int:
        """Delete for good: one id, everything, or (by default) what is older than ``days``."""
        with self._db() as db:
            if trash_id is not None:
                return db.execute("DELETE FROM trash WHERE id = ?", (trash_id,)).rowcount
            if everything:
                return db.execute("DELETE FROM trash").rowcount
            cutoff = (datetime.now(UTC) - timedelta(days=self.days)).isoformat(timespec="seconds")
            return db.execute("DELETE FROM trash WHERE deleted_at < ?", (cutoff,)).rowcount


def move_to_trash(index: KnowledgeIndex, trash: Trash, source: str) -> tuple[int, int | None]:
    """Delete ``source`` from the three stores, keeping it in the trash; (chunks removed, trash id)."""
    with index.manifest.lock():
        index.refresh()
        record = index.manifest.get(source)
        if record is None:
            return 0, None
        found = index.collection.get(ids=record.chunk_ids, include=["documents", "metadatas", "embeddings"])
        embeddings = found.get("embeddings")
        chunks = [
            {"id": cid, "text": text or "", "metadata": dict(meta or {}), "embedding": [float(x) for x in vector]}
            for cid, text, meta, vector in zip(
                found["ids"],
                found["documents"] or [],
                found["metadatas"] or [],
                embeddings if embeddings is not None else [],
                strict=False,
            )
        ]
        trash_id = trash.put(record, chunks) if trash.days > 0 else None
        removed = index.delete_chunks(record.chunk_ids)
        index.manifest.apply([], [source])
        index.wrote()
        return removed, trash_id


def restore(index: KnowledgeIndex, trash: Trash, trash_id: int) -> FileRecord:
    """Put a document from the trash back into Chroma, BM25 and the manifest, as it was."""
    with index.manifest.lock():
        index.refresh()
        record, chunks = trash.peek(trash_id)
        if index.manifest.get(record.source) is not None:  # refused: it stays in the trash
            raise TrashError(
                f"{record.source!r} was ingested again since it was deleted; delete that one first to restore"
            )
        if chunks:
            index.collection.add(
                ids=[c["id"] for c in chunks],
                embeddings=[c["embedding"] for c in chunks],
                documents=[c["text"] for c in chunks],
                metadatas=[c["metadata"] for c in chunks],
            )
            index.bm25.upsert([(c["id"], c["text"], record.groups) for c in chunks])
        index.manifest.apply([record], [])
        index.wrote()
        trash.purge(trash_id)  # last: a crash before this leaves it restorable, never lost
    return record
