"""The offline model's requests fit its window: no WARNING for a normal KB question.

Passages that do not fit are dropped silently (lowest ranked first); a warning is left for when something
the user asked for (their own question) cannot fit.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from graph.services import open_knowledge_base
from nodes.settings import Settings
from nodes.summarize import HistoryLimits

QUESTION = "混合检索怎样合并向量检索和关键词检索的结果？"


@pytest.fixture
def full_chunks_kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A knowledge base whose chunks are full size (320 tokens), like real documents, all about retrieval."""
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(6):
        sentence = f"第{n}篇：混合检索同时使用向量检索和关键词检索，再用倒数排名融合合并两路结果，召回更全面。"
        (docs / f"retrieval-{n}.md").write_text(f"# 检索 {n}\n\n" + sentence * 6, encoding="utf-8")
    open_knowledge_base(Settings(), create=True).ingest([docs])
    return docs


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("kb_agent")]


def test_a_knowledge_question_logs_no_warning(
    full_chunks_kb: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kb_agent")  # a CLI test may leave it at ERROR
    config = {"configurable": {"thread_id": "t", "user_id": "alice"}}
    graph = build_graph(InMemorySaver())
    for question in (QUESTION, "什么是混合检索？", "倒数排名融合有什么用？"):
        result = graph.invoke({"messages": [HumanMessage(question)]}, config)
        assert len(result["passages"]) == 5 and "[retrieval-" in result["messages"][-1].content
    assert _warnings(caplog) == []


def test_the_offline_window_holds_the_tools_and_five_passages() -> None:
    limits = HistoryLimits.from_context(Settings())
    assert limits.context_window >= 16_384 and limits.input_budget > 2_163 + 5 * 800


def test_passages_that_do_not_fit_are_dropped_silently(
    full_chunks_kb: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kb_agent")  # a CLI test may leave it at ERROR
    config = {"configurable": {"thread_id": "t", "user_id": "alice"}}
    roomy = build_graph(InMemorySaver()).invoke({"messages": [HumanMessage(QUESTION)]}, config)
    assert len(roomy["passages"]) == 5
    tight = Settings(context_window=3_400)  # room for the tools, the question and one or two passages
    result = build_graph(InMemorySaver(), settings=tight).invoke({"messages": [HumanMessage(QUESTION)]}, config)
    assert 1 <= len(result["passages"]) < len(roomy["passages"])
    assert result["passages"] == roomy["passages"][: len(result["passages"])]  # the best ones are kept
    assert _warnings(caplog) == []
    assert any("passages" in r.getMessage() and "dropped" in r.getMessage() for r in caplog.records)


def test_a_question_that_cannot_fit_is_still_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kb_agent")  # a CLI test may leave it at ERROR
    tiny = Settings(context_window=2_000, reserved_answer_tokens=100, safety_margin_tokens=50)
    build_graph(InMemorySaver(), settings=tiny, knowledge=None).invoke(
        {"messages": [HumanMessage("词" * 3_000)]}, {"configurable": {"thread_id": "t"}}
    )
    assert any("exceeds its input budget" in w for w in _warnings(caplog))
