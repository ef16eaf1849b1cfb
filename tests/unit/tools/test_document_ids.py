"""Document and chunk ids round-trip whatever the file is called, '#' in its name included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodes.settings import Settings
from stores.embeddings import HashingEmbedder
from stores.feedback import FeedbackStore
from stores.knowledge.chunking import source_of_chunk
from stores.knowledge.knowledge_base import KnowledgeBase
from tests.fixtures.tool_rounds import Call, Calls
from tools.approval import ApprovalDecision
from tools.knowledge_tools import KnowledgeServices, knowledge_tools
from tools.registry import ToolContext, ToolRegistry

NAMES = ["a#1.txt", "#.md", "x#y#2.md", "plain.md"]


@pytest.mark.parametrize(
    ("chunk_id", "source"),
    [("a#1.txt#0", "a#1.txt"), ("#.md#3", "#.md"), ("x#y#2.md#12", "x#y#2.md"), ("a#1", "a"), ("a", "a")],
)
def test_source_of_chunk_splits_on_the_last_hash_before_digits(chunk_id: str, source: str) -> None:
    assert source_of_chunk(chunk_id) == source


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeBase:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in NAMES:
        (docs / name).write_text(f"# {name}\n\nThe document called {name} talks about leave policy.\n")
    kb = KnowledgeBase(tmp_path / "kb", embedder=HashingEmbedder(dim=64))
    assert sorted(kb.ingest([docs]).added) == sorted(NAMES)
    return kb


def _delete(kb: KnowledgeBase, tmp_path: Path, doc_id: str) -> str:
    services = KnowledgeServices(
        knowledge=lambda s: kb, feedback=lambda s: FeedbackStore(tmp_path), summarize=lambda *a: {}
    )
    executor = Calls(ToolRegistry(knowledge_tools(services)))
    settings = Settings(user_id="root", roles="admin")
    context = ToolContext(settings=settings, user_id="root")
    [outcome] = executor.run(
        [Call("c1", "delete_document", {"doc_id": doc_id})],
        context,
        approver=lambda request: ApprovalDecision(True, "test"),
    )
    return outcome.content


@pytest.mark.parametrize("name", ["a#1.txt", "#.md", "x#y#2.md"])
@pytest.mark.parametrize("as_chunk", [False, True])
def test_delete_document_finds_a_file_with_hash_in_its_name(
    kb: KnowledgeBase, tmp_path: Path, name: str, as_chunk: bool
) -> None:
    hits = kb.search(f"document called {name}", top_k=10, mode="bm25")
    chunk = next(hit["id"] for hit in hits if hit["source"] == name)
    assert source_of_chunk(chunk) == name
    content = _delete(kb, tmp_path, chunk if as_chunk else name)
    assert json.loads(content)["deleted"] == name, content
    assert sorted(kb.manifest.records()) == sorted(n for n in NAMES if n != name)
