"""User feedback on answers (the ``submit_feedback`` tool): SQLite under the data dir, or Postgres.

Each row keeps who said it, in which thread, and the answer it is about, so retrieval weights or prompts
can later be tuned from it. ``cited`` holds the chunks the answer cited as the agent recorded them when it
answered (never parsed from text a caller sent); only those rows weigh in retrieval, and a chunk is
down-weighted only when enough *distinct users* rated answers citing it bad.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
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
    answer TEXT,
    cited TEXT
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
    cited: tuple[str, ...] | None = None  # as recorded by the agent; None: not an answer it recorded


class FeedbackStore:
    """Append-only feedback log; ``url`` = postgresql://… uses Postgres, else ``<data_dir>/feedback.sqlite``.

    ``pool`` (a :func:`stores.postgres.open_pool`) puts it on the deployment's Postgres pool instead of a
    pool of its own for ``url``; closing the store leaves that pool open."""

    def __init__(self, data_dir: str | Path, url: str = "", *, pool: Any = None) -> None:
        self._db = db = open_database(Path(data_dir) / "feedback.sqlite", url, pool=pool)
        self._mark, self._postgres = db.mark, db.postgres
        db.create(SCHEMA.format(serial=db.serial()))
        # A table from before ratings counted recorded citations only gets the column.
        if self._postgres:
            db.execute("ALTER TABLE feedback ADD COLUMN IF NOT EXISTS cited TEXT", retry=True)
        elif "cited" not in {row[1] for row in db.execute("PRAGMA table_info(feedback)", retry=True).fetchall()}:
            db.execute("ALTER TABLE feedback ADD COLUMN cited TEXT", retry=True)
        self._bad_cache: dict[tuple[int, int], tuple[Any, dict[str, int]]] = {}

    def add(
        self,
        *,
        user_id: str,
        thread_id: str | None,
        rating: str,
        reason: str | None = None,
        question: str | None = None,
        answer: str | None = None,
        cited: list[str] | tuple[str, ...] | None = None,
    ) -> int:
        """Store one rating; returns its id. ``cited``: the chunks the agent recorded for the answer."""
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
            None if cited is None else json.dumps(list(cited), ensure_ascii=False),
        )
        marks = ", ".join([self._mark] * len(row))
        sql = (
            "INSERT INTO feedback (created_at, user_id, thread_id, rating, reason, question, answer, cited) "
            f"VALUES ({marks})"
        )
        if self._postgres:  # no retry: an insert whose reply was lost may have landed
            return int(self._db.execute(sql + " RETURNING id", row).fetchone()[0])
        return int(self._db.execute(sql, row).lastrowid or 0)

    def list(
        self, *, user_id: str | None = None, rating: str | None = None, limit: int = 100
    ) -> list[FeedbackRecord]:
        """Newest first, optionally for one user or one rating."""
        sql = "SELECT id, created_at, user_id, thread_id, rating, reason, question, answer, cited FROM feedback"
        where, params = [], []
        for column, value in (("user_id", user_id), ("rating", rating)):
            if value is not None:
                where.append(f"{column} = {self._mark}")
                params.append(value)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY id DESC LIMIT {int(limit)}"
        rows = self._db.execute(sql, tuple(params), retry=True).fetchall()
        return [_record(*row) for row in rows]

    def bad_citations(self, min_count: int = 2, min_users: int = 1) -> dict[str, int]:
        """Chunk ids the agent cited in at least ``min_count`` answers rated bad by at least ``min_users``
        distinct users, with the number of such ratings. Rows without recorded citations do not count.

        Re-read only when feedback was added since the last call (retrieval asks on every question).
        """
        newest = self._db.execute("SELECT MAX(id) FROM feedback", retry=True).fetchone()[0]
        cached = self._bad_cache.get((min_count, min_users))
        if cached is not None and cached[0] == newest:
            return cached[1]
        counts: Counter[str] = Counter()
        raters: defaultdict[str, set[str]] = defaultdict(set)
        for record in self.list(rating="bad", limit=100_000):
            for cid in set(record.cited or ()):
                counts[cid] += 1
                raters[cid].add(record.user_id)
        result = {cid: n for cid, n in counts.items() if n >= min_count and len(raters[cid]) >= min_users}
        self._bad_cache[(min_count, min_users)] = (newest, result)
        return result

    def close(self) -> None:
        """Close the connection, or the pool this store opened (never one it was handed)."""
        self._db.close()


def cited_ids(answer: str) -> list[str]:
    """The ``[source#n]`` chunk ids an answer cites, in order."""
    return _CITATION.findall(answer)


def answer_digest(text: str) -> str:
    """What an answer said, in a form that tells it from any other text given the same message id."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _record(
    row_id: int,
    created_at: str,
    user_id: str,
    thread_id: str | None,
    rating: str,
    reason: str | None,
    question: str | None,
    answer: str | None,
    cited: Any,
) -> FeedbackRecord:
    """A row of :meth:`FeedbackStore.list`'s query, its citations read back from their JSON."""
    return FeedbackRecord(row_id, created_at, user_id, thread_id, rating, reason, question, answer, _cited(cited))


def _cited(raw: Any) -> tuple[str, ...] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return None
    return tuple(str(v) for v in value) if isinstance(value, list) else None


def downweight(passages: Sequence[Passage], penalised: Mapping[str, int], factor: float) -> list[Passage]:
    """Scores of chunks in ``penalised`` times ``factor`` (once: bounded however often they were rated
    bad), then best first again; nothing changes when ``factor`` is 1 or nothing is penalised."""
    if factor >= 1.0 or not penalised or not any(p.get("id") in penalised for p in passages):
        return list(passages)
    weighted: list[Passage] = [
        {**p, "score": float(p.get("score", 0.0)) * factor, "metadata": {**(p.get("metadata") or {}), "feedback_penalty": factor}}
        if p.get("id") in penalised
        else p
        for p in passages
    ]
    return sorted(weighted, key=lambda p: -float(p.get("score", 0.0)))
