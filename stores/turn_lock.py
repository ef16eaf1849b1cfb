"""One turn per thread at a time, across processes.

Two turns on one thread at once fork its checkpoints: each process reads the other's answer and the
thread's current state keeps neither turn. A turn therefore holds its thread's lock from before it reads
the state until after it is saved. Where threads live decides the lock: a file lock (``flock``) beside the
SQLite file, or a Postgres session advisory lock on a connection held from the pool for the turn (the lock
is given up before the connection goes back). Both are released by the operating system or the server when
the holder dies, so a ``kill -9`` never leaves a thread locked.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stores.checkpoint import sqlite_path
from stores.postgres import CHECKPOINT_SETTING, is_postgres

POLL_SECONDS = 0.05


class ThreadBusyError(RuntimeError):
    """Another turn holds the thread; the message says what to do."""

    def __init__(self, thread_id: str, waited: float) -> None:
        super().__init__(
            f"thread {thread_id!r} is busy with another turn (waited {waited:g} s): ask again when it has "
            "finished, use another thread, or wait longer with KB_AGENT_TURN_WAIT"
        )
        self.thread_id = thread_id


def _key(thread_id: str) -> bytes:
    return hashlib.blake2b(f"kb-agent-turn:{thread_id}".encode(), digest_size=8).digest()


class TurnLocks:
    """Per-thread turn locks where the threads live: ``url`` = postgresql://… or sqlite:///path, else data_dir.

    ``pool`` (a :func:`stores.postgres.open_pool` on the threads' database) holds each lock on one of its
    connections for the turn instead of on a pool of its own for ``url``; a held lock takes one connection
    of the pool, so size it for the turns that run at once. ``close`` leaves a handed pool open."""

    def __init__(self, data_dir: str | Path, url: str = "", *, pool: Any = None) -> None:
        self._pool, self._owns_pool = pool, False
        if pool is None and is_postgres(url):
            from stores.postgres import open_pool

            self._pool, self._owns_pool = open_pool(url, setting=CHECKPOINT_SETTING), True
        if self._pool is None:
            db = sqlite_path(data_dir, url)
            self._dir = db.parent / f"{db.name}.turns"

    def close(self) -> None:
        """Close the pool these locks opened (never one they were handed)."""
        if self._owns_pool:
            self._pool.close()

    @contextlib.contextmanager
    def hold(self, thread_id: str, wait: float) -> Iterator[None]:
        """Hold ``thread_id``'s turn lock, waiting up to ``wait`` seconds; else :class:`ThreadBusyError`."""
        with self.attempt(thread_id, wait) as held:
            if not held:
                raise ThreadBusyError(thread_id, wait)
            yield

    @contextlib.contextmanager
    def attempt(self, thread_id: str, wait: float = 0.0) -> Iterator[bool]:
        """Try to hold the lock within ``wait`` seconds; yields whether it is held (released on exit)."""
        try_lock, release = self._postgres(thread_id) if self._pool is not None else self._file(thread_id)
        deadline = time.monotonic() + max(0.0, wait)
        try:
            held = try_lock()
            while not held and time.monotonic() < deadline:
                time.sleep(POLL_SECONDS)
                held = try_lock()
            yield held
        finally:
            release()

    def _file(self, thread_id: str) -> tuple[Any, Any]:
        import fcntl

        self._dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._dir / f"{_key(thread_id).hex()}.lock", os.O_RDWR | os.O_CREAT, 0o600)

        def try_lock() -> bool:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        return try_lock, lambda: os.close(fd)  # closing the descriptor releases the lock

    def _postgres(self, thread_id: str) -> tuple[Any, Any]:
        from stores.postgres import lost_as_error, session

        held = contextlib.ExitStack()
        conn = held.enter_context(session(self._pool))  # given back, its advisory locks given up
        key = int.from_bytes(_key(thread_id), "big", signed=True)

        def try_lock() -> bool:
            with lost_as_error(self._pool, conn):
                return bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0])

        return try_lock, held.close
