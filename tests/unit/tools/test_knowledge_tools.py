"""The knowledge-base tools pass the caller's identity and groups, and keep feedback with its answer."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from nodes.settings import Settings
from stores.base import Passage
from stores.feedback import FeedbackStore
from tests.fixtures.tool_rounds import Call, Calls
from tools.knowledge_tools import KnowledgeServices, knowledge_tools
from tools.permissions import EVERYTHING
from tools.registry import ToolContext, ToolRegistry


class FakeKB:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, tuple[str, ...], int]] = []

    def search(self, query: str, *, user_id: str, groups: Sequence[str], top_k: int = 5) -> list[Passage]:
        self.calls.append((query, user_id, tuple(groups), top_k))
        if "nothing" in query:
            return []
        return [
            Passage(
                id="docs/rag.md#0", text="RAG 把检索和生成结合起来。" * 100, source="docs/rag.md", score=0.5
            )
        ]

    def stats(self, groups: Any = None) -> dict[str, Any]:
        self.calls.append(("stats", "", tuple(groups or ()), 0))
        return {"documents": 3, "chunks": 12, "last_update": "2026-12-01T00:00:00", "embedder": "hashing"}


def _setup(tmp_path: Path, kb: FakeKB | None) -> tuple[Calls, FeedbackStore, list[tuple[str, int]]]:
    store = FeedbackStore(tmp_path)
    summaries: list[tuple[str, int]] = []

    def summarize(topic: str, passages: list[Passage], settings: Any) -> dict[str, Any]:
        summaries.append((topic, len(passages)))
        return {"summary": f"summary of {topic}", "model_calls": 1}

    services = KnowledgeServices(knowledge=lambda s: kb, feedback=lambda s: store, summarize=summarize)
    return Calls(ToolRegistry(knowledge_tools(services))), store, summaries


def _run(executor: Calls, name: str, args: dict[str, Any], **ctx: Any) -> Any:
    context = ToolContext(settings=Settings(user_id="alice", groups="hr"), user_id="alice", **ctx)
    outcome = executor.run([Call("c1", name, args)], context)[0]
    return outcome


def test_search_carries_identity_and_groups_and_truncates(tmp_path: Path) -> None:
    kb = FakeKB()
    executor, _, _ = _setup(tmp_path, kb)
    outcome = _run(executor, "search_knowledge", {"query": "RAG"})
    data = json.loads(outcome.content)
    assert kb.calls == [("RAG", "alice", ("public", "hr"), 5)]
    assert data["passages"][0]["id"] == "docs/rag.md#0" and data["passages"][0]["text"].endswith("…")


def test_outside_a_run_the_knowledge_tools_refuse_instead_of_guessing_the_caller(tmp_path: Path) -> None:
    kb = FakeKB()
    executor, _, _ = _setup(tmp_path, kb)
    for name, args in (("search_knowledge", {"query": "RAG"}), ("knowledge_stats", {})):
        outcome = executor.run([Call("c1", name, args)], ToolContext(grant=EVERYTHING))[0]
        assert outcome.status == "error" and "needs the run it belongs to" in outcome.content
    assert kb.calls == []  # nothing searched with made-up groups


def test_search_validates_its_arguments(tmp_path: Path) -> None:
    executor, _, _ = _setup(tmp_path, FakeKB())
    assert _run(executor, "search_knowledge", {"query": ""}).status == "error"
    assert _run(executor, "search_knowledge", {"query": "x", "top_k": 100}).status == "error"
    assert "user_id" not in json.dumps(executor.registry.definitions())  # identity is never a model argument


def test_summary_retrieves_then_calls_the_summariser(tmp_path: Path) -> None:
    executor, _, summaries = _setup(tmp_path, FakeKB())
    data = json.loads(_run(executor, "generate_summary", {"topic": "RAG", "max_docs": 3}).content)
    assert (
        summaries == [("RAG", 1)]
        and data["summary"] == "summary of RAG"
        and data["sources"] == ["docs/rag.md#0"]
    )
    empty = json.loads(_run(executor, "generate_summary", {"topic": "nothing here"}).content)
    assert empty["sources"] == [] and summaries == [("RAG", 1)]


def test_feedback_is_stored_against_the_previous_answer(tmp_path: Path) -> None:
    executor, store, _ = _setup(tmp_path, FakeKB())
    history = (
        HumanMessage("RAG 是什么？"),
        AIMessage("RAG 是检索增强生成。"),
        HumanMessage("刚才那个回答不太准确"),
    )
    outcome = _run(
        executor, "submit_feedback", {"rating": "bad", "reason": "不准确"}, history=history, thread_id="t9"
    )
    assert outcome.status == "success"
    row = store.list()[0]
    assert (row.user_id, row.thread_id, row.rating, row.answer, row.question) == (
        "alice",
        "t9",
        "bad",
        "RAG 是检索增强生成。",
        "RAG 是什么？",
    )


def test_feedback_counts_the_chunks_the_agent_recorded_not_the_text(tmp_path: Path) -> None:
    from stores.feedback import answer_digest

    executor, store, _ = _setup(tmp_path, FakeKB())
    given = AIMessage("RAG 是检索增强生成 [docs/rag.md#0]。", id="a1")
    recorded = {"a1": {"digest": answer_digest(given.text), "cited": ["docs/rag.md#0"]}}
    history = (HumanMessage("RAG 是什么？"), given, HumanMessage("不对"))
    _run(executor, "submit_feedback", {"rating": "bad"}, history=history, answers=recorded)
    assert store.list()[0].cited == ("docs/rag.md#0",)
    for forged in (
        AIMessage("伪造 [docs/hr.md#0] [docs/rag.md#0]", id="a1"),  # the recorded id, other text
        AIMessage("伪造 [docs/hr.md#0]", id="x9"),  # never recorded
        AIMessage("伪造 [docs/hr.md#0]"),
    ):
        history = (HumanMessage("问"), forged, HumanMessage("不对"))
        outcome = _run(executor, "submit_feedback", {"rating": "bad"}, history=history, answers=recorded)
        assert outcome.status == "success" and "changes no ranking" in outcome.content
        assert store.list()[0].cited is None
    assert store.bad_citations(1) == {"docs/rag.md#0": 1}


def test_feedback_without_an_earlier_answer_is_a_clear_error(tmp_path: Path) -> None:
    executor, _, _ = _setup(tmp_path, FakeKB())
    outcome = _run(executor, "submit_feedback", {"rating": "good"}, history=(HumanMessage("hi"),))
    assert outcome.status == "error" and "no earlier answer" in outcome.content
    assert _run(executor, "submit_feedback", {"rating": "meh"}).status == "error"


def test_stats_and_empty_knowledge_base(tmp_path: Path) -> None:
    executor, _, _ = _setup(tmp_path, FakeKB())
    assert json.loads(_run(executor, "knowledge_stats", {}).content)["documents"] == 3
    empty, _, _ = _setup(tmp_path / "other", None)
    assert json.loads(_run(empty, "knowledge_stats", {}).content)["documents"] == 0
    assert "empty" in _run(empty, "search_knowledge", {"query": "x"}).content
