"""Undo for a deletion: a deleted document goes to a trash kept ``trash_days`` days.

The trash holds what restoring needs without re-reading the file or re-embedding: the manifest record
and every chunk's text, metadata and vector. A document in the trash is in none of the three stores, so
no search can return it. Restoring puts it back in all three under the manifest lock; a document that
was ingested again meanwhile is not overwritten.

The trash lives where the manifest does: a SQLite file beside it (``<kb_dir>/trash.sqlite3``) by default,
and in shared mode (a ``postgresql://`` database URL and a Chroma server) the Postgres table
``kb_<collection>_trash``, so a document deleted through one replica is listed, restored or purged through
any other, and survives the loss of the replica that deleted it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stores.knowledge.manifest import FileRecord
from stores.postgres import is_postgres
from stores.sql import SCHEMA_LOCK, Database, open_database
from stores.text_analysis import indexed_text

if TYPE_CHECKING:
    from stores.knowledge.index import KnowledgeIndex

log = logging.getLogger(__name__)
TRASH_FILE = "trash.sqlite3"
SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    id {serial} PRIMARY KEY{autoincrement},
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
    """The deleted documents of one knowledge base, kept ``days`` days (0: deletions are final).

    ``database_url`` (``postgresql://``, given only in shared mode) keeps them in Postgres under
    ``namespace`` (the collection) instead of ``<kb_dir>/trash.sqlite3``; ``pool`` (the deployment's,
    or the manifest's) does the same on that pool instead of one of its own, and ``close`` leaves it open.
    """

    def __init__(
        self,
        kb_dir: str | Path,
        days: float = 7.0,
        *,
        database_url: str = "",
        namespace: str = "knowledge",
        pool: Any = None,
    ) -> None:
        self.path = Path(kb_dir) / TRASH_FILE
        self.days = days
        self.database_url = database_url if is_postgres(database_url) else ""
        self.pool = pool
        self.shared = bool(self.database_url) or pool is not None
        self.table = "kb_" + re.sub(r"[^a-z0-9_]", "_", namespace.lower()) + "_trash" if self.shared else "trash"
        self._lock = threading.Lock()
        self._database: Database | None = None
        with self._db() as db:
            if self.shared:  # two replicas creating the table at once collide in Postgres's catalog
                db.execute(SCHEMA_LOCK)
            serial, autoincrement = ("BIGSERIAL", "") if self.shared else ("INTEGER", " AUTOINCREMENT")
            db.execute(SCHEMA.format(table=self.table, serial=serial, autoincrement=autoincrement))
        if self.shared and self.path.exists():
            self._warn_local_file()

    def _warn_local_file(self) -> None:
        """A trash file left in this data dir (the embedded mode's, or from before the trash was shared)
        is neither listed nor adopted: its documents may come from another knowledge base or embedder."""
        with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(self.path, timeout=5)) as local:
            (count,) = local.execute("SELECT count(*) FROM trash").fetchone()
            if count:
                log.warning(
                    "%s holds %d deleted document(s) kept before this knowledge base was shared; the shared "
                    "trash does not list them (unset KB_AGENT_DATABASE_URL and KB_AGENT_CHROMA_URL to see them)",
                    self.path,
                    count,
                )

    @contextlib.contextmanager
    def _db(self) -> Iterator[Any]:
        """A connection for one transaction: on Postgres borrowed from the pool, which replaces one the
        server dropped, and losing it mid-way is one message naming KB_AGENT_DATABASE_URL; on SQLite the
        file's, each statement a transaction of its own."""
        with self._lock:
            database = self._database
            if database is None:
                database = self._database = open_database(self.path, self.database_url, pool=self.pool)
        with database.transaction() as conn:
            yield _Marked(conn, database.mark)

    def put(self, record: FileRecord, chunks: list[dict[str, Any]]) -> int:
        """Keep a deleted document; returns its trash id."""
        row = (
            record.source,
            datetime.now(UTC).isoformat(timespec="seconds"),
            json.dumps(dataclasses.asdict(record), ensure_ascii=False),
            json.dumps(chunks, ensure_ascii=False),
        )
        with self._db() as db:
            sql = f"INSERT INTO {self.table} (source, deleted_at, record, chunks) VALUES (?, ?, ?, ?) RETURNING id"
            return int(db.execute(sql, row).fetchall()[0][0])  # all: SQLite commits once the statement ends

    def items(self) -> list[TrashItem]:
        """What can still be restored, newest first (expired documents are purged first)."""
        self.purge()
        with self._db() as db:
            rows = db.execute(f"SELECT id, source, deleted_at, record FROM {self.table} ORDER BY id DESC").fetchall()
        out = []
        for trash_id, source, deleted_at, record in rows:
            data = json.loads(record)
            out.append(TrashItem(trash_id, source, deleted_at, len(data.get("chunk_ids", [])), data.get("groups", [])))
        return out

    def peek(self, trash_id: int) -> tuple[FileRecord, list[dict[str, Any]]]:
        """What restores one document (it stays in the trash until ``purge(trash_id)``)."""
        with self._db() as db:
            row = db.execute(f"SELECT record, chunks FROM {self.table} WHERE id = ?", (trash_id,)).fetchone()
        if row is None:
            raise TrashError(
                f"nothing in the trash has id {trash_id}: it was restored or purged already, or never there "
                "(kb-agent trash list)"
            )
        return FileRecord(**json.loads(row[0])), json.loads(row[1])

    def purge(self, trash_id: int | None = None, *, everything: bool = False) -> int:
        """Delete for good: one id, everything, or (by default) what is older than ``days``."""
        with self._db() as db:
            if trash_id is not None:
                return int(db.execute(f"DELETE FROM {self.table} WHERE id = ?", (trash_id,)).rowcount or 0)
            if everything:
                return int(db.execute(f"DELETE FROM {self.table}").rowcount or 0)
            cutoff = (datetime.now(UTC) - timedelta(days=self.days)).isoformat(timespec="seconds")
            return int(db.execute(f"DELETE FROM {self.table} WHERE deleted_at < ?", (cutoff,)).rowcount or 0)

    def close(self) -> None:
        """Close the connection, or the pool this trash opened (the next call opens it again); a pool it
        was handed stays open."""
        with self._lock:
            if self._database is not None:
                self._database.close()
                self._database = None


@dataclass(frozen=True)
class _Marked:
    """A connection whose ``execute`` takes ``?`` placeholders on either backend."""

    conn: Any
    mark: str

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return self.conn.execute(sql.replace("?", self.mark), params)


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
        if chunks:  # upsert: chunks a crashed restore left behind are strays, not the document
            index.collection.upsert(
                ids=[c["id"] for c in chunks],
                embeddings=[c["embedding"] for c in chunks],
                documents=[c["text"] for c in chunks],
                metadatas=[c["metadata"] for c in chunks],
            )
            index.bm25.upsert([(c["id"], indexed_text(c["text"], c["metadata"]), record.groups) for c in chunks])
        index.manifest.apply([record], [])  # moves the index version: every replica's BM25 follows
        index.wrote()
        trash.purge(trash_id)  # last: a crash before this leaves it restorable, never lost
    return record
