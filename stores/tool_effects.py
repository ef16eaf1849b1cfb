"""Side-effecting tool calls, recorded by ``tool_call_id`` so that each happens once.

LangGraph re-runs a whole node when a run resumes after the node failed: a ``remember`` or
``delete_document`` that finished before another call of the same round crashed would run a second time.
Each side-effecting call is therefore claimed here before it runs and its result saved after; a re-run of
the same tools step (same thread, same task) gets the saved result back instead of running again. A call
whose claim has no result (the process died while it ran) is not run again either: it may have taken
effect, so the model is told to check. Rows live beside the threads (the SQLite file under the data dir,
or the Postgres database of ``KB_AGENT_CHECKPOINT_URL``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from stores.checkpoint import sqlite_path
from stores.postgres import CHECKPOINT_SETTING, is_postgres
from stores.sql import Rows, open_database

RUNNING = "running"
# A tools step is re-run only while its run is being resumed; a record this old guards nothing any more.
RETENTION = timedelta(days=30)
SCHEMA = """CREATE TABLE IF NOT EXISTS kb_tool_effects (
    scope TEXT NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    status TEXT NOT NULL,
    content TEXT NOT NULL DEFAULT '',
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (scope, call_id)
)"""


@dataclass(frozen=True)
class RecordedCall:
    """What an earlier run of the call left: ``status`` is "success", "error" or "running" (no result)."""

    tool: str
    status: str
    content: str


class ToolEffectLog:
    """The record of side-effecting calls; ``url`` = postgresql://… or sqlite:///path, else under data_dir.

    ``pool`` (a :func:`stores.postgres.open_pool` on the threads' database) puts it on that shared pool
    instead of a pool of its own for ``url``; closing the log leaves that pool open."""

    def __init__(
        self, data_dir: str | Path, url: str = "", *, retention: timedelta = RETENTION, pool: Any = None
    ) -> None:
        postgres = pool is not None or is_postgres(url)
        self._db = open_database(
            Path() if postgres else sqlite_path(data_dir, url), url, pool=pool, setting=CHECKPOINT_SETTING
        )
        self._mark = self._db.mark
        self._db.create(SCHEMA)
        self.prune(retention)  # once per open: the table stays the size of recent activity

    @classmethod
    def in_memory(cls) -> ToolEffectLog:
        """A record that lives as long as the process: for threads that do (an in-memory checkpointer)."""
        return cls(Path(), "sqlite:///:memory:")

    def prune(self, older_than: timedelta) -> int:
        """Drop records older than ``older_than``; returns how many went."""
        cutoff = (datetime.now(UTC) - older_than).isoformat()
        return max(0, self._run("DELETE FROM kb_tool_effects WHERE recorded_at < ?", (cutoff,), retry=True).rowcount)

    def _run(self, sql: str, params: tuple[Any, ...], *, retry: bool = False) -> Rows:
        return self._db.execute(sql.replace("?", self._mark), params, retry=retry)

    def claim(self, scope: str, call_id: str, tool: str) -> RecordedCall | None:
        """Claim the call before it runs: None means run it; else what an earlier run recorded."""
        now = datetime.now(UTC).isoformat()
        # no retry: a claim whose reply was lost would read back as another run's, and the call not run
        inserted = self._run(
            "INSERT INTO kb_tool_effects (scope, call_id, tool, status, recorded_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (scope, call_id) DO NOTHING",
            (scope, call_id, tool, RUNNING, now),
        )
        if inserted.rowcount:
            return None
        row = self._run(
            "SELECT tool, status, content FROM kb_tool_effects WHERE scope = ? AND call_id = ?",
            (scope, call_id),
            retry=True,
        ).fetchone()
        return RecordedCall(str(row[0]), str(row[1]), str(row[2]))

    def record(self, scope: str, call_id: str, status: str, content: str) -> None:
        """Save the result of a claimed call."""
        self._run(
            "UPDATE kb_tool_effects SET status = ?, content = ? WHERE scope = ? AND call_id = ?",
            (status, content, scope, call_id),
            retry=True,
        )

    def step(self, scope: str) -> StepEffects:
        """The record of one tools step (a thread and the task that runs it)."""
        return StepEffects(self, scope)

    def close(self) -> None:
        """Close the connection, or the pool this log opened (never one it was handed)."""
        self._db.close()


@dataclass(frozen=True)
class StepEffects:
    """:class:`ToolEffectLog` bound to one tools step: what the executor sees (``ToolContext.effects``)."""

    log: ToolEffectLog
    scope: str

    def claim(self, call_id: str, tool: str) -> RecordedCall | None:
        return self.log.claim(self.scope, call_id, tool)

    def record(self, call_id: str, status: str, content: str) -> None:
        self.log.record(self.scope, call_id, status, content)
