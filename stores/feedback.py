"""User feedback on answers (seed 003 ``submit_feedback``): SQLite under the data dir, or Postgres.

Each row keeps who said it, in which thread, and the answer it is about, so retrieval weights or prompts
can later be tuned from it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stores.sql import open_database

RATINGS = ("good", "bad")
SCHEMA = """
CREATE TABLE IF NOT EXISTS feedback (
    id {serial} PRIMARY KEY,
    created_at TEXT NOT NULL,
    user_id TEXT NOT NULL,
    thread_id TEXT,
    rating TEXT NOT NULL,
    reason TEXT,
    question TEXT,
    answer TEXT
)
"""


@dataclass(frozen=True)
class FeedbackRecord:
    id: int
    created_at: str
    user_id: str
    thread_id: str | None
    rating: str
    reason: str | None
    question: str | None
    answer: str | None


class FeedbackStore:
    """Append-only feedback log; ``url`` = postgresql://… uses Postgres, else ``<data_dir>/feedback.sqlite``."""

    def __init__(self, data_dir: str | Path, url: str = "") -> None:
        self._lock = threading.Lock()
        db = open_database(Path(data_dir) / "feedback.sqlite", url)
        self._conn, self._mark, self._postgres = db.conn, db.mark, db.postgres
        self._conn.execute(SCHEMA.format(serial=db.serial()))

    def add(
        self,
        *,
        user_id: str,
        thread_id: str | None,
        rating: str,
        reason: str | None = None,
        question: str | None = None,
        answer: str | None = None,
    ) -> int:
        """Store one rating; returns its id."""
        if rating not in RATINGS:
            raise ValueError(f"rating must be one of {', '.join(RATINGS)}, got {rating!r}")
        row = (
            datetime.now(UTC).isoformat(timespec="seconds"),
            user_id,
            thread_id,
            rating,
            reason,
            question,
            answer,
        )
        marks = ", ".join([self._mark] * len(row))
        sql = f"INSERT INTO feedback (created_at, user_id, thread_id, rating, reason, question, answer) VALUES ({marks})"
        with self._lock:
            if self._postgres:
                return int(self._conn.execute(sql + " RETURNING id", row).fetchone()[0])
            return int(self._conn.execute(sql, row).lastrowid)

    def list(self, *, user_id: str | None = None, limit: int = 100) -> list[FeedbackRecord]:
        """Newest first, optionally for one user."""
        sql = "SELECT id, created_at, user_id, thread_id, rating, reason, question, answer FROM feedback"
        params: tuple[Any, ...] = ()
        if user_id is not None:
            sql += f" WHERE user_id = {self._mark}"
            params = (user_id,)
        sql += f" ORDER BY id DESC LIMIT {int(limit)}"
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        return [FeedbackRecord(*row) for row in rows]

    def close(self) -> None:
        self._conn.close()
