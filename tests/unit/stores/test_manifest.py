"""The ingest manifest: records round-trip, writes are atomic, the lock excludes threads and processes."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stores.knowledge.manifest import FileRecord, Manifest


def _record(source: str, n: int = 2, groups: list[str] | None = None) -> FileRecord:
    return FileRecord(
        source=source,
        content_hash=f"h-{source}",
        size=10 * n,
        groups=groups or ["public"],
        chunk_ids=[f"{source}#{i}" for i in range(n)],
        chunk_hashes=[f"c{i}" for i in range(n)],
        path=f"/docs/{source}",
    )


def test_records_round_trip_and_survive_reopening(tmp_path: Path) -> None:
    manifest = Manifest(tmp_path / "kb")
    manifest.put(_record("a.md", 3, ["财务", "public"]))
    manifest.put(_record("b.md", 1))
    again = Manifest(tmp_path / "kb")
    got = again.get("a.md")
    assert got is not None
    assert got.groups == ["财务", "public"]
    assert got.chunk_ids == ["a.md#0", "a.md#1", "a.md#2"]
    assert got.hashes() == {"a.md#0": "c0", "a.md#1": "c1", "a.md#2": "c2"}
    assert got.path == "/docs/a.md" and got.ingested_at
    assert list(again.records()) == ["a.md", "b.md"]
    assert again.chunk_ids() == {"a.md#0", "a.md#1", "a.md#2", "b.md#0"}
    assert again.get("missing") is None


def test_put_replaces_and_remove_returns_the_old_record(tmp_path: Path) -> None:
    manifest = Manifest(tmp_path)
    manifest.put(_record("a.md", 3))
    manifest.put(_record("a.md", 1))
    assert manifest.chunk_ids() == {"a.md#0"}
    removed = manifest.remove("a.md")
    assert removed is not None and removed.chunk_ids == ["a.md#0"]
    assert manifest.remove("a.md") is None
    assert manifest.records() == {}


def test_generation_and_meta(tmp_path: Path) -> None:
    manifest = Manifest(tmp_path)
    assert manifest.generation() == 0
    manifest.put(_record("a.md"))
    manifest.apply([_record("b.md")], ["a.md"])
    assert manifest.generation() == 2
    manifest.apply([], [])  # nothing written: nothing to notice
    assert manifest.generation() == 2
    manifest.set_meta(embedder="hashing", dim=256)
    meta = manifest.meta()
    assert meta["embedder"] == "hashing" and meta["dim"] == "256" and meta["last_update"]
    manifest.clear()
    assert manifest.records() == {} and manifest.generation() == 3


def test_apply_is_all_or_nothing(tmp_path: Path) -> None:
    manifest = Manifest(tmp_path)
    manifest.put(_record("keep.md"))

    def removals() -> Iterator[str]:
        yield "keep.md"
        raise RuntimeError("crash half-way through the transaction")

    with pytest.raises(RuntimeError):
        manifest.apply([_record("new.md")], removals())
    assert list(manifest.records()) == ["keep.md"]  # neither the insert nor the delete landed
    bad = _record("bad.md")
    bad.chunk_hashes.pop()
    with pytest.raises(ValueError, match="same length"):
        manifest.apply([_record("new.md"), bad], [])
    assert list(manifest.records()) == ["keep.md"]


def _bump(counter: Path) -> None:
    """Read-sleep-write: loses updates unless the caller holds the lock."""
    value = int(counter.read_text() or 0)
    time.sleep(0.002)
    counter.write_text(str(value + 1))


def test_lock_excludes_threads_and_is_reentrant(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")

    def work() -> None:
        manifest = Manifest(tmp_path)  # separate instances, as two KnowledgeBase objects would have
        for _ in range(10):
            with manifest.lock(), manifest.lock():  # nested in one thread: must not deadlock
                _bump(counter)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert counter.read_text() == "40"


def _process_work(directory: str, rounds: int) -> None:
    manifest = Manifest(directory)
    for _ in range(rounds):
        with manifest.lock():
            _bump(Path(directory) / "counter")


def test_lock_excludes_processes(tmp_path: Path) -> None:
    (tmp_path / "counter").write_text("0")
    Manifest(tmp_path)
    context = multiprocessing.get_context("spawn")  # a fresh interpreter, like a second CLI
    workers = [context.Process(target=_process_work, args=(str(tmp_path), 15)) for _ in range(2)]
    for worker in workers:
        worker.start()
    _process_work(str(tmp_path), 15)
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    assert (tmp_path / "counter").read_text() == "45"


@pytest.mark.parametrize("store", ["manifest", "sqlite"])
def test_many_open_a_new_database_at_once(tmp_path: Path, store: str) -> None:
    """Switching a fresh database to WAL needs it alone: openers that arrive together wait their turn
    instead of failing with "database is locked" (a thread of the lock test once died of it)."""
    from stores.sql import open_database

    opener = Manifest if store == "manifest" else lambda d: open_database(Path(d) / "x.sqlite", "").close()
    for attempt in range(10):
        directory = tmp_path / str(attempt)
        barrier = threading.Barrier(8)
        failures: list[BaseException] = []

        def open_it(
            directory: Path = directory, barrier: threading.Barrier = barrier, failures: list[BaseException] = failures
        ) -> None:
            barrier.wait()
            try:
                opener(directory)
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=open_it) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert failures == [], failures
