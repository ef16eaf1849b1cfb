"""Questions with nothing to read in them, or in both languages, through the whole default graph: each gets
a clear answer in words, and none leaves a memory behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from graph.services import RunMemory, memory_store, open_knowledge_base, open_memory
from nodes.settings import Settings

KB = Path(__file__).resolve().parents[1] / "fixtures" / "kb"


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    open_knowledge_base(Settings(), create=True).ingest([KB])
    return build_graph(InMemorySaver(), memory=RunMemory())


def ask(graph: Any, question: str, thread: str) -> str:
    config = {"configurable": {"thread_id": thread, "user_id": "alice"}}
    result = graph.invoke({"messages": [HumanMessage(question)]}, config)
    assert open_memory(Settings()).drain(10)
    return str(result["messages"][-1].content)


@pytest.mark.parametrize(
    "question",
    ["？？？", "...!!!", "。，、；：", "🙂🙂🙂", "👍", "🤔？", "—— …… ——"],
)
def test_punctuation_or_emoji_gets_words_and_stores_nothing(agent: Any, question: str) -> None:
    answer = ask(agent, question, "t-odd")
    assert len(answer) > 20 and any(ch.isalpha() for ch in answer), answer  # said in words, not echoed
    assert "Traceback" not in answer and question not in answer
    assert memory_store(Settings()).list("alice") == []  # neither a fact nor a history record


@pytest.mark.parametrize(
    ("question", "cited"),
    [
        ("How many 带薪年假 days do employees get?", "leave.md"),
        ("密码 must be how long？", "passwords.md"),
    ],
)
def test_a_question_in_both_languages_finds_its_passage(agent: Any, question: str, cited: str) -> None:
    answer = ask(agent, question, "t-mixed")
    assert cited in answer, answer
    assert all(m["memory_type"] != "semantic" for m in memory_store(Settings()).list("alice"))


def test_a_pasted_page_with_a_question_is_answered_from_the_documents(agent: Any) -> None:
    notes = "以下是会议记录的原文，供参考：项目组讨论了发布计划、预算和人员安排，决定下周再议。" * 800
    answer = ask(agent, notes + "\n\n员工每年有几天带薪年假？", "t-page")
    assert "leave.md" in answer and "十天" in answer, answer[:300]
