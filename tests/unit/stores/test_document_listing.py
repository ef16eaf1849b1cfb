"""The documents listing shared by ``kb-agent documents list`` and the chat page: what a caller's groups may
read, titled by the document's own title, found by words of title or file name, newest first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stores.embeddings import HashingEmbedder
from stores.knowledge.knowledge_base import KnowledgeBase
from stores.knowledge.listing import added_by, list_documents, upload_folder, visible_to

REPO = Path(__file__).resolve().parents[3]


def _docs(root: Path) -> Path:
    (root / "hr").mkdir(parents=True)
    (root / "travel.md").write_text("# Travel policy\n\nEmployees fly economy.\n", "utf-8")
    (root / "notes.txt").write_text("Plain notes without a heading, about parking.\n", "utf-8")
    (root / "hr" / "bands.md").write_text("# Salary bands\n\nThe L5 band is 88,000 CNY.\n", "utf-8")
    (root / "hr" / ".groups").write_text("hr\n", "utf-8")
    return root


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    base = KnowledgeBase(tmp_path / "data", embedder=HashingEmbedder())
    base.ingest([_docs(tmp_path / "docs")])
    yield base
    base.close()


def test_a_caller_sees_only_the_documents_their_groups_may_read(kb: KnowledgeBase) -> None:
    assert {d.source for d in list_documents(kb, ["public"])} == {"travel.md", "notes.txt"}
    assert {d.source for d in list_documents(kb, ["hr"])} == {"travel.md", "notes.txt", "hr/bands.md"}
    assert {d.source for d in list_documents(kb, None)} == {"travel.md", "notes.txt", "hr/bands.md"}


def test_each_document_has_its_title_chunks_groups_and_when(kb: KnowledgeBase) -> None:
    by_source = {d.source: d for d in list_documents(kb)}
    assert by_source["travel.md"].title == "Travel policy"
    assert by_source["notes.txt"].title == "notes"  # no title of its own: the file's name
    bands = by_source["hr/bands.md"]
    assert bands.groups == ["hr"] and bands.chunks >= 1 and bands.ingested_at and bands.languages == ["en"]


def test_a_search_keeps_documents_whose_title_or_file_holds_every_word(kb: KnowledgeBase) -> None:
    assert [d.source for d in list_documents(kb, None, "travel")] == ["travel.md"]
    assert [d.source for d in list_documents(kb, None, "SALARY bands")] == ["hr/bands.md"]
    assert [d.source for d in list_documents(kb, None, "bands.md")] == ["hr/bands.md"]
    assert list_documents(kb, None, "salary travel") == []


def test_a_document_without_groups_is_public() -> None:
    assert visible_to([], ["public"]) and visible_to(["public"], []) and not visible_to(["hr"], ["eng"])


def test_the_cli_lists_the_same_documents_as_json(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_AGENT_")}
    env.update(KB_AGENT_HOME=str(tmp_path / "home"), KB_AGENT_EMBEDDER="hashing")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cli", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
        )

    assert cli("ingest", str(_docs(tmp_path / "docs"))).returncode == 0
    listed = cli("documents", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert {r["source"] for r in rows} == {"travel.md", "notes.txt", "hr/bands.md"}
    assert {"title", "chunks", "groups", "ingested_at"} <= set(rows[0])
    public = json.loads(cli("documents", "list", "--json", "--groups", "public", "--search", "travel").stdout)
    assert [r["source"] for r in public] == ["travel.md"]
    table = cli("documents", "list")
    assert table.returncode == 0 and "Travel policy" in table.stdout


def test_a_file_added_from_the_page_names_who_added_it(tmp_path: Path) -> None:
    folder = Path(upload_folder(tmp_path / "data", "ana/b..c"))
    assert folder.parent == tmp_path / "data" / "uploads" and ".." not in folder.name and "/" not in folder.name
    folder.mkdir(parents=True)
    (folder / "visa.md").write_text("# Visa rules\n\nBooked by the travel desk.\n", "utf-8")
    base = KnowledgeBase(tmp_path / "data", embedder=HashingEmbedder())
    try:
        base.ingest([folder / "visa.md"])
        base.ingest([_docs(tmp_path / "docs")])
        by = {d.source: d.added_by for d in list_documents(base)}
    finally:
        base.close()
    assert by["visa.md"] == "ana/b..c" and by["travel.md"] == ""
    assert added_by("/srv/docs/travel.md") == "" and added_by("relative.md") == ""
