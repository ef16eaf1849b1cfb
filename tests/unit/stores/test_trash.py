"""Undo for a deletion: a deleted document waits in the trash, unsearchable, and comes back whole."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from stores.embeddings import HashingEmbedder
from stores.knowledge import KnowledgeBase
from stores.knowledge.trash import TrashError


def _kb(tmp_path: Path, days: float = 7.0) -> KnowledgeBase:
    docs = tmp_path / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "leave.md").write_text("# Leave\n\nAnnual leave is 15 days for every employee.\n", "utf-8")
    (docs / "travel.md").write_text("# Travel\n\nHotels are refunded up to 500 yuan a night.\n", "utf-8")
    kb = KnowledgeBase(tmp_path / "home", embedder=HashingEmbedder(), trash_days=days)
    kb.ingest([docs])
    return kb


def _sources(kb: KnowledgeBase, mode: str = "hybrid") -> set[str]:
    return {p["source"] for p in kb.search("annual leave days", top_k=10, mode=mode)}


def test_a_deleted_document_is_unsearchable_then_restored_whole(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
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


def test_a_restore_never_overwrites_a_document_ingested_since(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    _, trash_id = kb.delete_to_trash("leave.md")
    kb.ingest([tmp_path / "docs"])  # the same file comes back by a new ingest
    with pytest.raises(TrashError, match="ingested again"):
        kb.restore(trash_id)
    assert [i.id for i in kb.trash.items()] == [trash_id]  # kept: a refused restore loses nothing


def test_old_documents_are_purged_and_zero_days_means_final(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    _, old = kb.delete_to_trash("leave.md")
    _, recent = kb.delete_to_trash("travel.md")
    with sqlite3.connect(kb.trash.path) as db:
        db.execute("UPDATE trash SET deleted_at = '2020-01-01T00:00:00+00:00' WHERE id = ?", (old,))
    assert [i.id for i in kb.trash.items()] == [recent]  # older than 7 days: gone for good
    assert kb.trash.purge(everything=True) == 1 and kb.trash.items() == []
    final = _kb(tmp_path / "final", days=0)
    assert final.delete_to_trash("leave.md") == (1, None) and final.trash.items() == []
