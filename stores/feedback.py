"""User feedback on answers (the ``submit_feedback`` tool): SQLite under the data dir, or Postgres.

Each row keeps who said it, in which thread, and the answer it is about, so retrieval weights or prompts
can later be tuned from it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stores.base import Passage
from stores.sql import open_database

RATINGS = ("good", "bad")
_CITATION = re.compile(r"\[([^\[\]\s]+#\d+)\]")
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
    """Append-only feedback log; ``url`` = postgresql://… uses Postgres, else ``<data_dir>/feedback.sqlite``.

    ``pool`` (a :func:`stores.postgres.open_pool`) puts it on the deployment's Postgres pool instead of a
    pool of its own for ``url``; closing the store leaves that pool open."""

    def __init__(self, data_dir: str | Path, url: str = "", *, pool: Any = None) -> None:
        self._db = db = open_database(Path(data_dir) / "feedback.sqlite", url, pool=pool)
        self._mark, self._postgres = db.mark, db.postgres
        db.execute(SCHEMA.format(serial=db.serial()), retry=True)
        self._bad_cache: dict[int, tuple[Any, dict[str, int]]] = {}

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
        if self._postgres:  # no retry: an insert whose reply was lost may have landed
            return int(self._db.execute(sql + " RETURNING id", row).fetchone()[0])
        return int(self._db.execute(sql, row).lastrowid or 0)

    def list(
        self, *, user_id: str | None = None, rating: str | None = None, limit: int = 100
    ) -> list[FeedbackRecord]:
        """Newest first, optionally for one user or one rating."""
        sql = "SELECT id, created_at, user_id, thread_id, rating, reason, question, answer FROM feedback"
        where, params = [], []
        for column, value in (("user_id", user_id), ("rating", rating)):
            if value is not None:
                where.append(f"{column} = {self._mark}")
                params.append(value)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY id DESC LIMIT {int(limit)}"
        rows = self._db.execute(sql, tuple(params), retry=True).fetchall()
        return [FeedbackRecord(*row) for row in rows]

    def bad_citations(self, min_count: int = 2) -> dict[str, int]:
        """Chunk ids cited in at least ``min_count`` answers rated bad, with that count.

        Re-read only when feedback was added since the last call (retrieval asks on every question).
        """
        newest = self._db.execute("SELECT MAX(id) FROM feedback", retry=True).fetchone()[0]
        cached = self._bad_cache.get(min_count)
        if cached is not None and cached[0] == newest:
            return cached[1]
        counts: Counter[str] = Counter()
        for record in self.list(rating="bad", limit=100_000):
            counts.update(set(cited_ids(record.answer or "")))
        result = {cid: n for cid, n in counts.items() if n >= min_count}
        self._bad_cache[min_count] = (newest, result)
        return result

    def close(self) -> None:
        """Close the connection, or the pool this store opened (never one it was handed)."""
        self._db.close()


def cited_ids(answer: str) -> list[str]:
    """The ``[source#n]`` chunk ids an answer cites, in order."""
    return _CITATION.findall(answer)


def downweight(passages: Sequence[Passage], penalised: Mapping[str, int], factor: float) -> list[Passage]:
    """Scores of chunks in ``penalised`` times ``factor`` (once: bounded however often they were rated
    bad), then best first again; nothing changes when ``factor`` is 1 or nothing is penalised."""
    if factor >= 1.0 or not penalised or not any(p.get("id") in penalised for p in passages):
        return list(passages)
    weighted = [
        {**p, "score": float(p.get("score", 0.0)) * factor, "metadata": {**(p.get("metadata") or {}), "feedback_penalty": factor}}
        if p.get("id") in penalised
        else p
        for p in passages
    ]
    return sorted(weighted, key=lambda p: -float(p.get("score", 0.0)))  # type: ignore[return-value]
