"""The memory audit history: SQLite under the data dir, or Postgres when a URL is given.

Every change to a long-term memory (old and new content, action, user, thread, time, where it came
from) and every rejected proposal with the rule that rejected it. Append-only: nothing here is ever
updated, so the history can be trusted when a user asks "why do you think that about me?". Secrets must
not reach it either: the rules keep only the kind of what they refused, and every text an entry carries is
checked again here, whoever wrote it, so a secret in an error message or an old memory is withheld too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stores.memory.secrets import withheld
from stores.sql import open_database

STATUSES = ("applied", "unchanged", "rejected", "failed", "pending", "dropped")
SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_audit (
    id {serial} PRIMARY KEY,
    created_at TEXT NOT NULL,
    user_id TEXT NOT NULL,
    thread_id TEXT,
    source TEXT NOT NULL,
    action TEXT NOT NULL,
    status TEXT NOT NULL,
    memory_id TEXT,
    memory_type TEXT,
    old_content TEXT,
    new_content TEXT,
    rule INTEGER,
    reason TEXT,
    confidence REAL
)
"""
INDEX = "CREATE INDEX IF NOT EXISTS memory_audit_user ON memory_audit (user_id, id)"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True, kw_only=True)
class AuditEntry:
    """One row: ``status`` is applied, unchanged (a duplicate ADD), rejected (with ``rule``) or failed (an
    extraction that never produced operations)."""

    user_id: str
    action: str
    status: str
    thread_id: str | None = None
    source: str = "extraction"  # extraction | tool | cli
    memory_id: str | None = None
    memory_type: str | None = None
    old_content: str | None = None
    new_content: str | None = None
    rule: int | None = None
    reason: str | None = None
    confidence: float | None = None
    created_at: str = field(default_factory=_now)
    id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_COLUMNS = [f.name for f in fields(AuditEntry) if f.name != "id"]


def _without_secrets(entry: AuditEntry) -> AuditEntry:
    """``entry`` with any text that holds a secret replaced by the kinds it held. An address stays: a memory
    may hold one the user asked to keep, and its audit says what was written."""
    texts: dict[str, Any] = {
        name: withheld(value, limit=len(value), allow_email=True)
        for name in ("old_content", "new_content", "reason")
        if isinstance(value := getattr(entry, name), str)
    }
    return replace(entry, **texts)


class AuditStore:
    """``url`` = postgresql://… uses Postgres, else ``<data_dir>/audit.sqlite``; safe across threads.

    ``pool`` (a :func:`stores.postgres.open_pool`) puts it on the deployment's Postgres pool instead of a
    pool of its own for ``url``; closing the store leaves that pool open."""

    def __init__(self, data_dir: str | Path, url: str = "", *, pool: Any = None) -> None:
        self._db = db = open_database(Path(data_dir) / "audit.sqlite", url, pool=pool)
        self._mark, self._postgres = db.mark, db.postgres
        db.create(SCHEMA.format(serial=db.serial()), INDEX)

    def record(self, entry: AuditEntry) -> int:
        """Append one entry; returns its id."""
        if entry.status not in STATUSES:
            raise ValueError(f"audit status must be one of {', '.join(STATUSES)}, got {entry.status!r}")
        entry = _without_secrets(entry)
        row = tuple(getattr(entry, name) for name in _COLUMNS)
        sql = (
            f"INSERT INTO memory_audit ({', '.join(_COLUMNS)}) "
            f"VALUES ({', '.join([self._mark] * len(_COLUMNS))})"
        )
        if self._postgres:  # no retry: an insert whose reply was lost may have landed
            return int(self._db.execute(sql + " RETURNING id", row).fetchone()[0])
        return int(self._db.execute(sql, row).lastrowid or 0)

    def list(
        self,
        *,
        user_id: str | None = None,
        status: str | None = None,
        memory_id: str | None = None,
        limit: int = 100,
    ) -> list[AuditEntry]:
        """Newest first, filtered by user, status and memory."""
        clauses, params = [], []
        for column, value in (("user_id", user_id), ("status", status), ("memory_id", memory_id)):
            if value is not None:
                clauses.append(f"{column} = {self._mark}")
                params.append(value)
        sql = f"SELECT id, {', '.join(_COLUMNS)} FROM memory_audit"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += f" ORDER BY id DESC LIMIT {int(limit)}"
        rows = self._db.execute(sql, tuple(params), retry=True).fetchall()
        return [AuditEntry(id=row[0], **dict(zip(_COLUMNS, row[1:], strict=True))) for row in rows]

    def close(self) -> None:
        """Close the connection, or the pool this store opened (never one it was handed)."""
        self._db.close()
