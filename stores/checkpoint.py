"""Where threads live: SQLite under the data dir by default, Postgres when a URL says so.

One setting switches the backend (``KB_AGENT_CHECKPOINT_URL``); nothing above this module changes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from stores.faults import BUSY_SECONDS, sqlite_failure

SQLITE_FILE = "threads.sqlite"
WAL_PAGES = 256  # pages (4 KiB) of write-ahead log between automatic checkpoints: 1 MiB
WAL_BYTES = 1 << 20  # the log file is cut back to this after a checkpoint


class CheckpointConfigError(ValueError):
    """A checkpoint URL this build cannot use; the message says what to install or change."""


def _is_postgres(url: str) -> bool:
    return url.startswith(("postgres://", "postgresql://"))


def sqlite_path(data_dir: str | Path, url: str = "") -> Path:
    """The SQLite file for threads: ``sqlite:///path`` if given, else ``<data_dir>/threads.sqlite``."""
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///"))
    if url:
        raise CheckpointConfigError(
            f"unsupported checkpoint URL {url!r}: use postgresql://user:pass@host/db or sqlite:///path"
        )
    return Path(data_dir) / SQLITE_FILE


def _postgres_module() -> Any:
    try:
        from langgraph.checkpoint import postgres
    except ImportError:
        raise CheckpointConfigError(
            "a Postgres checkpoint URL needs the postgres extra: pip install 'kb-agent[postgres]'"
        ) from None
    return postgres


@contextmanager
def open_checkpointer(data_dir: str | Path, url: str = "", *, pool: Any = None) -> Iterator[BaseCheckpointSaver]:
    """A ready checkpointer (tables created); closed on exit.

    ``pool`` (a :func:`stores.postgres.open_pool` on ``url``'s database) serves a Postgres checkpointer
    from that shared pool, whose connections are checked before each use, so a database restart costs at
    most the write in flight; without it the checkpointer holds one connection of its own."""
    if _is_postgres(url):
        postgres = _postgres_module()
        if pool is not None:
            from stores.postgres import pool_failures

            saver = _failures_named(postgres.PostgresSaver, lambda: pool_failures(pool))(pool)
            saver.setup()
            yield saver  # the pool's owner closes it
            return
        with postgres.PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            yield saver
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = sqlite_path(data_dir, url)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=BUSY_SECONDS)
    try:
        saver = _failures_named(SqliteSaver, lambda: _sqlite_failures(path))(conn)
        saver.setup()
        # Every step writes a checkpoint: fold the write-ahead log back into the database every 1 MiB
        # (not 4) and cut the file back to that size, so a thread's folder is its data, not a 4 MiB log.
        conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_PAGES}")
        conn.execute(f"PRAGMA journal_size_limit = {WAL_BYTES}")
        yield saver
    finally:
        conn.close()


# What a checkpointer does to its store: each call's failure is named by the store it failed on.
_SAVER_CALLS = ("setup", "get_tuple", "put", "put_writes", "delete_thread", "prune")


def _failures_named(cls: type[Any], failures: Callable[[], AbstractContextManager[None]]) -> type[Any]:
    """``cls`` whose calls run under ``failures()`` (which turns a lost or locked store into one
    :class:`~stores.faults.StoreFailure`); ``list``'s rows too, as they are read."""

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            with failures():
                return method(self, *args, **kwargs)

        return call

    def rows(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        with failures():
            yield from cls.list(self, *args, **kwargs)

    calls = {name: wrap(getattr(cls, name)) for name in _SAVER_CALLS if hasattr(cls, name)}
    # the same name and module: code that tells savers apart by them (pruning) still knows this one
    return type(cls.__name__, (cls,), {**calls, "list": rows, "__module__": cls.__module__})


@contextmanager
def _sqlite_failures(path: Path) -> Iterator[None]:
    try:
        yield
    except sqlite3.OperationalError as exc:
        if failure := sqlite_failure(path, exc, waited=BUSY_SECONDS):
            raise failure from exc
        raise


@asynccontextmanager
async def open_async_checkpointer(data_dir: str | Path, url: str = "") -> AsyncIterator[BaseCheckpointSaver]:
    """The async twin of :func:`open_checkpointer`, for ``ainvoke``/``astream`` callers."""
    if _is_postgres(url):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        _postgres_module()
        async with AsyncPostgresSaver.from_conn_string(url) as saver:
            await saver.setup()
            yield saver
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    path = sqlite_path(data_dir, url)
    path.parent.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        await saver.setup()
        yield saver


@dataclass(frozen=True)
class ThreadInfo:
    thread_id: str
    last_activity: str
    checkpoints: int


def list_threads(saver: BaseCheckpointSaver, limit: int = 10_000) -> list[ThreadInfo]:
    """Threads the checkpointer holds, most recently active first (backend-agnostic scan)."""
    seen: dict[str, dict[str, Any]] = {}
    for item in saver.list(None, limit=limit):
        thread = str(item.config["configurable"]["thread_id"])
        ts = str(item.checkpoint.get("ts", ""))
        entry = seen.setdefault(thread, {"ts": ts, "n": 0})
        entry["n"] += 1
        entry["ts"] = max(entry["ts"], ts)
    rows = [ThreadInfo(t, v["ts"], v["n"]) for t, v in seen.items()]
    return sorted(rows, key=lambda r: r.last_activity, reverse=True)
