"""The memory-extraction outbox: a finished turn's pending extraction, written durably before the answer
returns, so a crash or kill loses no memory.

One row per turn in ``memory_outbox`` (``<data_dir>/memory_outbox.sqlite`` by default, Postgres with
``KB_AGENT_DATABASE_URL``). The process that wrote a row owns it and deletes it once the extraction is
applied; a row whose owner died (a dead pid on this host, or a lease expired elsewhere) is claimed by the
next process that opens the outbox. Running an extraction twice writes a memory once, because a memory's id
is its (user, type, normalised content).
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict

from stores.sql import SCHEMA_LOCK, open_database

LEASE_SECONDS = 600.0  # a row of a process on another host is taken over after this long
SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_outbox (
    id {serial} PRIMARY KEY,
    user_id TEXT NOT NULL,
    thread_id TEXT,
    messages TEXT NOT NULL,
    owner TEXT NOT NULL,
    claimed_at REAL NOT NULL
)
"""


@dataclass(frozen=True)
class OutboxJob:
    """One turn whose memories are still to be extracted."""

    id: int
    user_id: str
    thread_id: str | None
    messages: list[BaseMessage]


def _alive(owner: str) -> bool:
    """Whether the process named by ``owner`` (host:pid:nonce) may still be working on its rows."""
    host, pid, _ = owner.split(":", 2)
    if host != socket.gethostname():
        return True  # unknowable from here: the lease decides
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True


class MemoryOutbox:
    """Durable queue of extraction work; safe across threads and processes.

    ``pool`` (a :func:`stores.postgres.open_pool`) puts it on the deployment's Postgres pool instead of a
    pool of its own for ``url``; closing the outbox leaves that pool open."""

    def __init__(
        self, data_dir: str | Path, url: str = "", *, lease: float = LEASE_SECONDS, pool: Any = None
    ) -> None:
        self._db = db = open_database(Path(data_dir) / "memory_outbox.sqlite", url, pool=pool)
        self._mark, self._postgres = db.mark, db.postgres
        db.run(self._create, retry=True)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease = lease

    def _create(self, conn: Any) -> None:
        schema = SCHEMA.format(serial=self._db.serial())
        if not self._postgres:
            conn.execute(schema)
            return
        with conn.transaction():  # two processes creating the table at once collide in Postgres's catalog
            conn.execute(SCHEMA_LOCK)
            conn.execute(schema)

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self._mark)

    def add(self, user_id: str, thread_id: str | None, messages: list[BaseMessage]) -> int:
        """Write one turn's pending extraction (committed when this returns); its id."""
        row = (
            user_id,
            thread_id,
            json.dumps(messages_to_dict(messages), ensure_ascii=False),
            self.owner,
            time.time(),
        )
        sql = "INSERT INTO memory_outbox (user_id, thread_id, messages, owner, claimed_at) VALUES (?, ?, ?, ?, ?)"
        if self._postgres:  # no retry: an insert whose reply was lost may have landed
            return int(self._db.execute(self._sql(sql) + " RETURNING id", row).fetchone()[0])
        return int(self._db.execute(sql, row).lastrowid or 0)

    def done(self, job_id: int) -> None:
        """The turn's extraction is applied: forget it."""
        self._db.execute(self._sql("DELETE FROM memory_outbox WHERE id = ?"), (job_id,), retry=True)

    def pending(self) -> list[OutboxJob]:
        """Every unfinished turn, oldest first, whoever owns it."""
        rows = self._db.execute(
            "SELECT id, user_id, thread_id, messages, owner, claimed_at FROM memory_outbox ORDER BY id",
            retry=True,
        ).fetchall()
        return [self._job(row) for row in rows]

    def claim_orphans(self) -> list[OutboxJob]:
        """Take over the turns whose owner died (or whose lease expired); oldest first."""
        rows = self._db.execute(
            "SELECT id, user_id, thread_id, messages, owner, claimed_at FROM memory_outbox ORDER BY id",
            retry=True,
        ).fetchall()
        claimed = []
        now = time.time()
        for row in rows:
            owner, claimed_at = row[4], float(row[5])
            if owner == self.owner or (_alive(owner) and now - claimed_at < self.lease):
                continue
            # Compare-and-set: of two processes reclaiming one row, one wins. A row already ours matches
            # too, so a retry after a reply lost on its way back still counts the claim as won.
            cursor = self._db.execute(
                self._sql(
                    "UPDATE memory_outbox SET owner = ?, claimed_at = ? WHERE id = ? AND owner IN (?, ?)"
                ),
                (self.owner, now, row[0], owner, self.owner),
                retry=True,
            )
            if cursor.rowcount == 1:
                claimed.append(self._job(row))
        return claimed

    @staticmethod
    def _job(row: Any) -> OutboxJob:
        return OutboxJob(int(row[0]), row[1], row[2], messages_from_dict(json.loads(row[3])))

    def close(self) -> None:
        """Close the connection, or the pool this outbox opened (never one it was handed)."""
        self._db.close()
