"""Undo for a deletion: a deleted document waits in the trash, unsearchable, and comes back whole.

Every test runs on both backends (``store_backend``): embedded, where the trash is a SQLite file beside
the manifest, and shared, where it is a Postgres table that every replica (its own KB_AGENT_HOME, the same
Postgres and Chroma server) lists, restores and purges.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stores.embeddings import HashingEmbedder
from stores.knowledge import trash as trash_module
from stores.knowledge.knowledge_base import KnowledgeBase
from stores.knowledge.trash import TrashError
from tests.integration.conftest import Backend
from tests.integration.test_shared_kb import first_line, homes, kb_agent, retrievers, started_in

ROOT = Path(__file__).resolve().parents[2]


def _docs(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "leave.md").write_text("# Leave\n\nAnnual leave is 15 days for every employee.\n", "utf-8")
    (docs / "travel.md").write_text("# Travel\n\nHotels are refunded up to 500 yuan a night.\n", "utf-8")
    return docs


def _open(home: Path, backend: Backend, days: float = 7.0, collection: str = "knowledge") -> KnowledgeBase:
    return KnowledgeBase(
        home, embedder=HashingEmbedder(), trash_days=days, collection=collection, **backend.kwargs()
    )


def _kb(tmp_path: Path, backend: Backend, days: float = 7.0, collection: str = "knowledge") -> KnowledgeBase:
    kb = _open(tmp_path / "home", backend, days, collection)
    kb.ingest([_docs(tmp_path)])
    return kb


def _sources(kb: KnowledgeBase, mode: str = "hybrid") -> set[str]:
    return {p["source"] for p in kb.search("annual leave days", top_k=10, mode=mode)}


def _deleted_days_ago(monkeypatch: pytest.MonkeyPatch, days: float) -> None:
    """Deletions from now on are dated ``days`` ago (the trash reads the clock when it keeps one)."""

    class Clock(datetime):
        @classmethod
        def now(cls, tz: object = None) -> datetime:  # type: ignore[override]
            return datetime.now(UTC) - timedelta(days=days)

    monkeypatch.setattr(trash_module, "datetime", Clock)


def test_a_deleted_document_is_unsearchable_then_restored_whole(
    tmp_path: Path, store_backend: Backend
) -> None:
    kb = _kb(tmp_path, store_backend)
    assert "leave.md" in _sources(kb)
    removed, trash_id = kb.delete_to_trash("leave.md")
    assert removed == 1 and trash_id is not None
    assert all("leave.md" not in _sources(kb, mode) for mode in ("vector", "bm25", "hybrid"))
    assert kb.stats()["documents"] == 1
    (item,) = kb.trash.items()
    assert (item.id, item.source, item.chunks) == (trash_id, "leave.md", 1)
    record = kb.restore(trash_id)
    assert record.source == "leave.md" and kb.stats()["documents"] == 2
    assert all("leave.md" in _sources(kb, mode) for mode in ("vector", "bm25"))
    assert kb.index_ids()["chroma"] == kb.index_ids()["bm25"] == kb.index_ids()["manifest"]
    assert kb.trash.items() == []
    with pytest.raises(TrashError, match="nothing in the trash has id"):
        kb.restore(trash_id)
    assert (tmp_path / "home" / "knowledge" / "trash.sqlite3").exists() is not store_backend.shared


def test_a_restore_never_overwrites_a_document_ingested_since(tmp_path: Path, store_backend: Backend) -> None:
    kb = _kb(tmp_path, store_backend)
    _, trash_id = kb.delete_to_trash("leave.md")
    kb.ingest([tmp_path / "docs"])  # the same file comes back by a new ingest
    with pytest.raises(TrashError, match="ingested again"):
        kb.restore(trash_id)
    assert [i.id for i in kb.trash.items()] == [trash_id]  # kept: a refused restore loses nothing


def test_old_documents_are_purged_and_zero_days_means_final(
    tmp_path: Path, store_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = _kb(tmp_path, store_backend)
    with monkeypatch.context() as clock:
        _deleted_days_ago(clock, 8)
        _, old = kb.delete_to_trash("leave.md")
    _, recent = kb.delete_to_trash("travel.md")
    assert [i.id for i in kb.trash.items()] == [recent]  # older than 7 days: gone for good
    assert kb.trash.purge(old) == 0
    assert kb.trash.purge(everything=True) == 1 and kb.trash.items() == []
    final = _kb(tmp_path / "final", store_backend, days=0, collection="final")
    assert final.delete_to_trash("leave.md") == (1, None) and final.trash.items() == []


def test_a_document_deleted_through_one_replica_is_listed_and_restored_through_another(
    tmp_path: Path, store_backend: Backend
) -> None:
    home_a, home_b = homes(tmp_path, store_backend)
    a_env = {"KB_AGENT_HOME": str(home_a), "KB_AGENT_EMBEDDER": "hashing"}
    b_env = {"KB_AGENT_HOME": str(home_b), "KB_AGENT_EMBEDDER": "hashing"}
    done = kb_agent("ingest", str(_docs(tmp_path)), env=a_env)
    assert done.returncode == 0, done.stderr
    a, b = _open(home_a, store_backend), _open(home_b, store_backend)  # two replicas, kept open
    for kb in (a, b):
        assert retrievers(kb, "annual leave")["leave.md#0"] == ["bm25", "vector"]

    call = [
        "tools",
        "call",
        "delete_document",
        "--args",
        '{"doc_id": "leave.md"}',
        "--roles",
        "admin",
        "--json",
    ]
    deleted = subprocess.run(  # the delete_document tool, approved at A's terminal
        [sys.executable, "-m", "cli", *call],
        cwd=ROOT,
        input="y\n",
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(ROOT), **a_env},
    )
    assert deleted.returncode == 0, deleted.stderr
    trash_id = json.loads(json.loads(deleted.stdout)["content"])["trash_id"]
    for kb in (a, b):
        assert "leave.md#0" not in retrievers(kb, "annual leave")

    listed = kb_agent("trash", "list", "--json", env=b_env)
    assert listed.returncode == 0, listed.stderr
    assert [(i["id"], i["source"], i["chunks"]) for i in json.loads(listed.stdout)] == [
        (trash_id, "leave.md", 1)
    ]
    restored = kb_agent("trash", "restore", str(trash_id), env=b_env)
    assert restored.returncode == 0 and "restored leave.md" in restored.stdout, restored.stderr
    for kb in (a, b):  # the shared index version moved: both replicas' BM25 follow, as after an ingest
        assert retrievers(kb, "annual leave")["leave.md#0"] == ["bm25", "vector"]
        ids = kb.index_ids()
        assert ids["chroma"] == ids["bm25"] == ids["manifest"] == {"leave.md#0", "travel.md#0"}
    assert a.trash.items() == b.trash.items() == []
    again = kb_agent("trash", "restore", str(trash_id), env=a_env)
    assert again.returncode == 2 and "nothing in the trash has id" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1 and "Traceback" not in again.stderr


def test_two_replicas_restoring_one_document_at_once_restore_it_once(
    tmp_path: Path, store_backend: Backend
) -> None:
    home_a, home_b = homes(tmp_path, store_backend)
    holder = _open(tmp_path / "c" if store_backend.shared else home_a, store_backend)
    holder.ingest([_docs(tmp_path)])
    _, trash_id = holder.delete_to_trash("leave.md")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KB_AGENT_EMBEDDER": "hashing"}
    with holder.manifest.lock():  # both restores start while a third writer holds the knowledge base
        procs = started_in((home_a, home_b), env, "trash", "restore", str(trash_id))
        for proc in procs:
            line = first_line(proc, 120)
            assert "another process is writing this knowledge base" in line, line
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        outcomes.append((proc.returncode, out + err))
    assert sorted(code for code, _ in outcomes) == [0, 2], outcomes
    assert sum("restored leave.md" in text for _, text in outcomes) == 1
    assert sum("nothing in the trash has id" in text for _, text in outcomes) == 1
    ids = holder.index_ids()
    assert ids["chroma"] == ids["bm25"] == ids["manifest"] == {"leave.md#0", "travel.md#0"}
    assert holder.trash.items() == []


def test_any_replica_purges_what_is_older_than_trash_days_and_an_unknown_id_is_an_error(
    tmp_path: Path, store_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not store_backend.shared:
        pytest.skip("replicas with their own data dir share a trash only in shared mode")
    a, b = _open(tmp_path / "a", store_backend), _open(tmp_path / "b", store_backend)
    a.ingest([_docs(tmp_path)])
    with monkeypatch.context() as clock:
        _deleted_days_ago(clock, 8)
        _, old = a.delete_to_trash("leave.md")
    _, recent = a.delete_to_trash("travel.md")
    assert [i.id for i in b.trash.items()] == [recent]  # B purged A's expired deletion
    assert [i.id for i in a.trash.items()] == [recent]
    with pytest.raises(TrashError, match=f"nothing in the trash has id {old}"):
        a.restore(old)
    b_env = {"KB_AGENT_HOME": str(tmp_path / "b"), "KB_AGENT_EMBEDDER": "hashing"}
    unknown = kb_agent("trash", "purge", str(old), env=b_env)
    assert unknown.returncode == 2 and f"nothing in the trash has id {old}" in unknown.stderr
    purged = kb_agent("trash", "purge", "--all", env=b_env)
    assert purged.returncode == 0 and "1 document(s) deleted for good" in purged.stdout
    assert a.trash.items() == []


@pytest.mark.postgres
def test_connections_the_database_dropped_are_replaced_and_an_unreachable_one_is_one_error(
    tmp_path: Path, shared_backend: dict[str, str]
) -> None:
    """The trash borrows pooled connections, each checked before it is lent: connections the server
    dropped while idle (a restart, ``pg_terminate_backend``) cost nothing; an unreachable database is one
    line naming the setting."""
    import psycopg

    kb = _kb(tmp_path, Backend("shared", shared_backend))
    _, trash_id = kb.delete_to_trash("leave.md")
    with psycopg.connect(shared_backend["KB_AGENT_DATABASE_URL"], autocommit=True) as conn:
        killed = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert killed and killed[0] >= 1
    assert [i.id for i in kb.trash.items()] == [trash_id]  # on a fresh connection: nothing was lost

    env = {**shared_backend, "KB_AGENT_HOME": str(tmp_path / "b"), "KB_AGENT_EMBEDDER": "hashing"}
    env["KB_AGENT_DATABASE_URL"] = "postgresql://kb:secret@127.0.0.1:1/kb"
    for args in (("trash", "list"), ("trash", "restore", str(trash_id)), ("trash", "purge", "--all")):
        done = kb_agent(*args, env=env)
        line = done.stderr.strip()
        assert done.returncode == 1 and "KB_AGENT_DATABASE_URL" in line and len(line.splitlines()) == 1, line
        assert "secret" not in line


def test_a_local_trash_file_is_not_listed_by_the_shared_trash_and_says_so(
    tmp_path: Path, store_backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    if not store_backend.shared:
        pytest.skip("only a shared knowledge base leaves a data dir's own trash file aside")
    embedded = _kb(tmp_path, Backend("embedded", {}))  # this data dir's own knowledge base, first
    embedded.delete_to_trash("leave.md")
    embedded.trash.close()
    shared = _open(tmp_path / "home", store_backend)
    assert shared.trash.items() == []
    assert "1 deleted document(s) kept before this knowledge base was shared" in caplog.text


class _OtherEmbedder(HashingEmbedder):
    """Another embedder (name and dimension) than the CLI's ``hashing``: what a KB_AGENT_EMBEDDER switch meets."""

    name = "other"

    def __init__(self) -> None:
        super().__init__(dim=64)


def test_ingest_reindex_switches_embedders_and_empties_the_trash_of_old_vectors(
    tmp_path: Path, store_backend: Backend
) -> None:
    """The mismatch error names ``kb-agent ingest --reindex PATH``; that command must exist and leave nothing
    of the old embedder behind, the trash included (its 64-dim vectors cannot go into a 256-dim collection)."""
    home = tmp_path / "home"
    old = KnowledgeBase(home, embedder=_OtherEmbedder(), **store_backend.kwargs())
    docs = _docs(tmp_path)
    old.ingest([docs])
    _, trash_id = old.delete_to_trash("leave.md")
    assert trash_id is not None
    env = {"KB_AGENT_HOME": str(home), "KB_AGENT_EMBEDDER": "hashing"}

    refused = kb_agent("ingest", str(docs), env=env)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "built with embedder 'other'" in refused.stderr and "kb-agent ingest --reindex" in refused.stderr

    done = kb_agent("ingest", "--reindex", str(docs), "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["added"]) == ["leave.md", "travel.md"]
    assert "emptied the knowledge base" in done.stderr
    new = _open(home, store_backend)  # the hashing embedder: opens without a mismatch now
    assert new.stats()["embedder"] == "hashing" and new.stats()["documents"] == 2
    assert new.trash.items() == []  # the old vectors went with the old collection
    with pytest.raises(TrashError):
        new.restore(trash_id)
    assert all("leave.md" in _sources(new, mode) for mode in ("vector", "bm25"))
