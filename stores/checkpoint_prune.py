"""Pruning a thread's checkpoints without losing a word of its history.

Every graph step writes a checkpoint holding the whole state, so a thread's database grows by several
copies of its recent history per turn. Most of those copies are redundant: messages are only appended,
or removed when the running summary folds them. A message therefore lives in a contiguous run
of checkpoints, and the full history (``/history --all``) survives if we keep

* the latest checkpoints (``keep_recent``, at least one: the thread's current state and pending writes),
* and every checkpoint right before one that removed messages (the last copy of the folded messages).

Everything else is deleted. :func:`discard_after` is the other use: undoing a failed turn. Time travel to a deleted step is what is given up; say so where this is
offered. SQLite rows are deleted directly; Postgres rows too, with the blobs no kept checkpoint uses.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver


@dataclass(frozen=True)
class PruneReport:
    thread_id: str
    kept: int  # of the checkpoints examined
    deleted: int
    latest: str | None = None  # the newest checkpoint id: pass it as ``since`` to prune incrementally


def _message_ids(item: CheckpointTuple) -> set[str]:
    messages = (item.checkpoint.get("channel_values") or {}).get("messages") or []
    return {str(m.id) for m in messages if getattr(m, "id", None)}


def checkpoints_to_delete(items: list[CheckpointTuple], keep_recent: int = 1) -> list[str]:
    """Which of one namespace's checkpoints (newest first, as ``list`` returns them) can go."""
    keep_recent = max(1, keep_recent)
    oldest_first = list(reversed(items))
    keep: set[str] = {str(i.config["configurable"]["checkpoint_id"]) for i in items[:keep_recent]}
    for before, after in itertools.pairwise(oldest_first):
        if _message_ids(before) - _message_ids(after):  # ``after`` removed (folded) messages
            keep.add(str(before.config["configurable"]["checkpoint_id"]))
    return [cid for i in items if (cid := str(i.config["configurable"]["checkpoint_id"])) not in keep]


def prune_thread(
    saver: BaseCheckpointSaver, thread_id: str, *, keep_recent: int = 1, since: str | None = None
) -> PruneReport:
    """Delete the redundant checkpoints of ``thread_id`` (all namespaces); returns what was kept/deleted.

    ``since`` (the ``latest`` of an earlier report) limits the work to the checkpoints written after that
    prune, so pruning after every turn costs one turn's checkpoints, not the whole thread's.
    """
    by_ns: dict[str, list[CheckpointTuple]] = {}
    latest: str | None = None
    for item in saver.list({"configurable": {"thread_id": thread_id}}):
        cid = str(item.config["configurable"]["checkpoint_id"])
        latest = latest or cid
        by_ns.setdefault(str(item.config["configurable"].get("checkpoint_ns", "")), []).append(item)
        if since is not None and cid <= since:  # ids sort by time: everything older was examined before
            break
    doomed = {ns: checkpoints_to_delete(items, keep_recent) for ns, items in by_ns.items()}
    total = sum(len(items) for items in by_ns.values())
    deleted = sum(len(ids) for ids in doomed.values())
    if deleted:
        _delete(saver, thread_id, doomed)
    return PruneReport(thread_id=thread_id, kept=total - deleted, deleted=deleted, latest=latest)


def discard_after(saver: BaseCheckpointSaver, thread_id: str, checkpoint_id: str | None) -> int:
    """Delete every checkpoint of ``thread_id`` newer than ``checkpoint_id`` (None: all of them).

    This is how a failed turn is undone: the thread is left exactly as it was before the turn began.
    """
    doomed: dict[str, list[str]] = {}
    for item in saver.list({"configurable": {"thread_id": thread_id}}):
        cid = str(item.config["configurable"]["checkpoint_id"])
        if checkpoint_id is not None and cid <= checkpoint_id:
            break
        doomed.setdefault(str(item.config["configurable"].get("checkpoint_ns", "")), []).append(cid)
    count = sum(len(ids) for ids in doomed.values())
    if count:
        _delete(saver, thread_id, doomed)
    return count


def _delete(saver: BaseCheckpointSaver, thread_id: str, doomed: dict[str, list[str]]) -> None:
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        _delete_sqlite(saver, conn, thread_id, doomed)
        return
    if type(saver).__module__.startswith("langgraph.checkpoint.postgres"):
        _delete_postgres(saver, thread_id, doomed)
        return
    if isinstance(saver, InMemorySaver):
        for ns, ids in doomed.items():
            for cid in ids:
                saver.storage[thread_id][ns].pop(cid, None)
                saver.writes.pop((thread_id, ns, cid), None)
        return
    raise NotImplementedError(f"pruning is not supported for {type(saver).__name__}")


def _chunks(ids: list[str], size: int = 500) -> Iterable[list[str]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def _delete_sqlite(
    saver: Any, conn: sqlite3.Connection, thread_id: str, doomed: dict[str, list[str]]
) -> None:
    with saver.lock:  # the saver's own lock: no write of a running turn interleaves
        for ns, ids in doomed.items():
            for part in _chunks(ids):
                marks = ",".join("?" * len(part))
                for table in ("writes", "checkpoints"):
                    conn.execute(
                        f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = ? "
                        f"AND checkpoint_id IN ({marks})",
                        (thread_id, ns, *part),
                    )
        conn.commit()


def _delete_postgres(saver: Any, thread_id: str, doomed: dict[str, list[str]]) -> None:
    with saver._cursor() as cur, cur.connection.transaction():
        for ns, ids in doomed.items():
            for table in ("checkpoint_writes", "checkpoints"):
                cur.execute(
                    f"DELETE FROM {table} WHERE thread_id = %s AND checkpoint_ns = %s "
                    "AND checkpoint_id = ANY(%s)",
                    (thread_id, ns, ids),
                )
        # Blobs (channel values by version) no kept checkpoint refers to any more.
        cur.execute(
            "DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND NOT EXISTS ("
            " SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id"
            " AND c.checkpoint_ns = b.checkpoint_ns"
            " AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)",
            (thread_id,),
        )
