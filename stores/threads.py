"""Who owns which thread, its title and when it was last used.

The checkpointer keeps a thread's messages but not its owner: without this registry any user who knows a
thread id could read and continue it. Rows live next to the threads themselves — a table in the same
SQLite file (``<data_dir>/threads.sqlite`` or ``sqlite:///path``) or the same Postgres database
(``postgresql://…``), the switch of ``stores.checkpoint``. Claiming is one atomic insert, so two users
racing for a new id cannot both win.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stores.checkpoint import sqlite_path
from stores.postgres import CHECKPOINT_SETTING, is_postgres
from stores.sql import Rows, open_database

TITLE_CHARS = 40
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS kb_thread_registry (
        thread_id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        last_activity TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS kb_thread_registry_user ON kb_thread_registry (user_id, last_activity)",
    # A turn in progress: written before a turn runs, cleared after it is saved or undone. One left
    # behind means its process died (kill -9, power loss); the next open of the thread undoes the turn.
    """CREATE TABLE IF NOT EXISTS kb_turn_marker (
        thread_id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        before_checkpoint TEXT,
        started_at TEXT NOT NULL
    )""",
)


class ThreadOwnershipError(PermissionError):
    """The thread belongs to another user; the message says what to do instead (it never names the owner)."""

    def __init__(self, thread_id: str, user_id: str) -> None:
        super().__init__(
            f"thread {thread_id!r} belongs to another user, so {user_id!r} cannot open, change or delete it; "
            "start a new thread or pick one of your own (kb-agent chat: /new, /threads)"
        )
        self.thread_id = thread_id
        self.user_id = user_id


@dataclass(frozen=True)
class ThreadInfo:
    thread_id: str
    title: str
    created_at: str
    last_activity: str


def title_for(question: str) -> str:
    """A thread's title: the first question's first 40 characters, whitespace collapsed."""
    return " ".join(question.split())[:TITLE_CHARS]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class ThreadRegistry:
    """Thread owners and titles; ``url`` = postgresql://… or sqlite:///path, else under ``data_dir``.

    ``pool`` (a :func:`stores.postgres.open_pool` on the threads' database) puts it on that shared pool
    instead of a pool of its own for ``url``; closing the registry leaves that pool open."""

    def __init__(self, data_dir: str | Path, url: str = "", *, pool: Any = None) -> None:
        # sqlite_path raises CheckpointConfigError on an unsupported URL
        path = Path() if pool is not None or is_postgres(url) else sqlite_path(data_dir, url)
        self._db = open_database(path, url, pool=pool, setting=CHECKPOINT_SETTING)
        self._mark, self._postgres = self._db.mark, self._db.postgres
        self._db.create(*SCHEMA)

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self._mark)

    def _run(self, sql: str, params: tuple[Any, ...] = (), *, retry: bool = True) -> Rows:
        """One statement; retried on a fresh connection when the first is lost mid-way, since every
        statement here leaves the same rows when it runs twice (``delete`` says when its count may not)."""
        return self._db.execute(self._sql(sql), params, retry=retry)

    def owner(self, thread_id: str) -> str | None:
        """The user who owns ``thread_id``, or None for a thread nobody has claimed."""
        row = self._run("SELECT user_id FROM kb_thread_registry WHERE thread_id = ?", (thread_id,)).fetchone()
        return None if row is None else str(row[0])

    def check(self, thread_id: str, user_id: str) -> None:
        """Raise :class:`ThreadOwnershipError` unless ``thread_id`` is unclaimed or ``user_id``'s."""
        owner = self.owner(thread_id)
        if owner is not None and owner != user_id:
            raise ThreadOwnershipError(thread_id, user_id)

    def claim(self, thread_id: str, user_id: str, title: str = "") -> None:
        """Make ``user_id`` the owner of a new thread (first claim wins); re-claiming one's own is fine.

        ``title`` (usually the first question) names the thread if it has no title yet.
        """
        if not thread_id or not user_id:
            raise ValueError("a thread needs a non-empty thread id and user id")
        now = _now()
        self._run(
            "INSERT INTO kb_thread_registry (thread_id, user_id, title, created_at, last_activity) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (thread_id) DO NOTHING",
            (thread_id, user_id, title_for(title), now, now),
        )
        self.check(thread_id, user_id)
        if title.strip():
            self._run(
                "UPDATE kb_thread_registry SET title = ? WHERE thread_id = ? AND title = ''",
                (title_for(title), thread_id),
            )

    def touch(self, thread_id: str) -> None:
        """Record activity on ``thread_id`` now (after a turn)."""
        self._run("UPDATE kb_thread_registry SET last_activity = ? WHERE thread_id = ?", (_now(), thread_id))

    def get(self, thread_id: str) -> ThreadInfo | None:
        row = self._run(
            "SELECT thread_id, title, created_at, last_activity FROM kb_thread_registry WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()
        return None if row is None else ThreadInfo(*map(str, row))

    def list(self, user_id: str) -> list[ThreadInfo]:
        """``user_id``'s threads, most recently active first (other users' threads never appear)."""
        rows = self._run(
            "SELECT thread_id, title, created_at, last_activity FROM kb_thread_registry "
            "WHERE user_id = ? ORDER BY last_activity DESC, thread_id",
            (user_id,),
        ).fetchall()
        return [ThreadInfo(*map(str, row)) for row in rows]

    def rename(self, thread_id: str, user_id: str, title: str) -> None:
        """Give ``user_id``'s thread a new title (cut to 40 characters)."""
        self.check(thread_id, user_id)
        if self.owner(thread_id) is None:
            raise KeyError(f"no thread {thread_id!r}: ask a question in it first")
        self._run(
            "UPDATE kb_thread_registry SET title = ? WHERE thread_id = ? AND user_id = ?",
            (title_for(title), thread_id, user_id),
        )

    def delete(self, thread_id: str, user_id: str) -> bool:
        """Forget ``user_id``'s thread; False if it was not registered. The caller deletes its checkpoints."""
        self.check(thread_id, user_id)
        cursor = self._run(  # no retry: a delete whose reply was lost would read as "was not registered"
            "DELETE FROM kb_thread_registry WHERE thread_id = ? AND user_id = ?", (thread_id, user_id), retry=False
        )
        return bool(cursor.rowcount)

    def begin_turn(self, thread_id: str, user_id: str, before: str | None) -> None:
        """Mark a turn of ``thread_id`` as running; ``before`` is the checkpoint to go back to (None: none)."""
        self._run(
            "INSERT INTO kb_turn_marker (thread_id, user_id, before_checkpoint, started_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (thread_id) DO NOTHING",
            (thread_id, user_id, before, _now()),
        )

    def end_turn(self, thread_id: str) -> None:
        """The turn of ``thread_id`` is saved whole, or undone: clear its marker."""
        self._run("DELETE FROM kb_turn_marker WHERE thread_id = ?", (thread_id,))

    def unfinished_turn(self, thread_id: str) -> tuple[str, str | None] | None:
        """(user id, checkpoint before it) of a turn of ``thread_id`` that started and never ended."""
        row = self._run(
            "SELECT user_id, before_checkpoint FROM kb_turn_marker WHERE thread_id = ?", (thread_id,)
        ).fetchone()
        return None if row is None else (str(row[0]), None if row[1] is None else str(row[1]))

    def close(self) -> None:
        """Close the connection, or the pool this registry opened (never one it was handed)."""
        self._db.close()

    def __enter__(self) -> ThreadRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
