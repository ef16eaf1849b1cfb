"""The usual category: a folder or group the user's memories name is preferred in their searches."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from graph.services import open_knowledge_base
from nodes.settings import Settings
from stores.embeddings import HashingEmbedder
from stores.memory.store import ChromaMemoryStore

QUESTION = "退货流程是什么？"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    docs = tmp_path / "docs"
    for folder in ("客服记录", "产品手册"):  # the same text in both: only the preference can order them
        (docs / folder).mkdir(parents=True)
        (docs / folder / "退货.md").write_text("# 退货\n\n退货流程：七天内申请退货。\n", encoding="utf-8")
    open_knowledge_base(Settings(data_dir=str(tmp_path / "home")), create=True).ingest([docs])
    return tmp_path / "home"


def _passages(home: Path, memory: ChromaMemoryStore, user: str, **settings: float) -> list[dict]:
    graph = build_graph(InMemorySaver(), memory=memory)
    ctx = Settings(data_dir=str(home), user_id=user, **settings)
    result = graph.invoke({"messages": [HumanMessage(QUESTION)]}, {"configurable": {"thread_id": user}}, context=ctx)
    return result["passages"]


def test_a_folder_the_user_remembers_using_is_boosted_once_and_only_for_them(home: Path, tmp_path: Path) -> None:
    memory = ChromaMemoryStore(tmp_path / "memories", embedder=HashingEmbedder())
    memory.add("alice", "semantic", "用户退货问题平时主要查产品手册")
    boosted = _passages(home, memory, "alice")
    plain = _passages(home, memory, "alice", preference_boost=1.0)
    manual = next(p for p in boosted if p["source"].startswith("产品手册/"))
    before = next(p for p in plain if p["source"].startswith("产品手册/"))
    assert boosted[0]["source"].startswith("产品手册/") and manual["metadata"]["preferred"] is True
    assert manual["score"] == pytest.approx(before["score"] * 1.15)
    other = next(p for p in boosted if p["source"].startswith("客服记录/"))
    assert "preferred" not in other["metadata"]
    bob = _passages(home, memory, "bob")  # no memory of his names a folder
    assert all("preferred" not in p["metadata"] for p in bob)
