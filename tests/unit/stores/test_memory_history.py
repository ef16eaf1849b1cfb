"""Interaction history: the questions a user asks become episodic memories, a repeat counts, they expire."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from stores.embeddings import HashingEmbedder
from stores.memory.extraction import OfflineExtractor
from stores.memory.history import history_operation, memory_kind
from stores.memory.rules import ExtractionRequest
from stores.memory.store import ChromaMemoryStore


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def _ops(text: str, memories: tuple[dict[str, str], ...] = ()) -> list[dict]:
    return OfflineExtractor()(ExtractionRequest("u", text, (), memories))["operations"]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("年假可以分几次休？", "用户问过：年假可以分几次休？"),
        (
            "Which VPN client should contractors install?",
            "The user asked: Which VPN client should contractors install?",
        ),
    ],
)
def test_a_question_is_kept_as_an_episodic_memory(text: str, content: str) -> None:
    assert [(op["action"], op["type"], op["content"]) for op in _ops(text)] == [("ADD", "episodic", content)]


def test_asking_again_in_other_words_counts_on_the_same_memory() -> None:
    earlier = ({"id": "h1", "memory_type": "episodic", "content": "用户问过：年假可以分几次休？"},)
    [op] = _ops("年假能不能分开休", earlier)
    assert (op["action"], op["target_id"], op["content"]) == (
        "UPDATE",
        "h1",
        "用户问过 2 次：年假能不能分开休",
    )
    third = ({"id": "h1", "memory_type": "episodic", "content": op["content"]},)
    assert _ops("年假是否可以拆开休？", third)[0]["content"] == "用户问过 3 次：年假是否可以拆开休？"
    en = (
        {
            "id": "h2",
            "memory_type": "episodic",
            "content": "The user asked: how do contractors get VPN access?",
        },
    )
    [again] = _ops("What VPN access do contractors get?", en)
    assert (again["action"], again["target_id"]) == ("UPDATE", "h2") and "2 times" in again["content"]


def test_another_topic_is_another_memory() -> None:
    earlier = ({"id": "h1", "memory_type": "episodic", "content": "用户问过：年假可以分几次休？"},)
    assert [op["action"] for op in _ops("加班费怎么算？", earlier)] == ["ADD"]
    # a semantic memory that happens to read like a question is not history
    semantic = ({"id": "s1", "memory_type": "semantic", "content": "用户问过：年假可以分几次休？"},)
    assert [op["action"] for op in _ops("年假可以分几次休？", semantic)] == ["ADD"]


@pytest.mark.parametrize(
    "text",
    [
        "我在哪个城市生活？",  # about the user: answered from memory, not history
        "what is my name?",
        "who is my employer?",
        "我家在哪？",
        "Do you remember what I told you?",
        "算一下 17 × 23 是多少",
        "今天星期几？",
        "what time is it?",
        "我的哮喘药能报销吗？",  # health: never kept unasked
        "我的工资卡号 6222020200112233445 能用吗？",
        "？？？",
        "我想知道",
        "The policy covers taxis.",  # a statement, not a question
    ],
)
def test_questions_not_worth_keeping_are_not_kept(text: str) -> None:
    assert history_operation(text, ()) is None
    assert _ops(text) == []


@pytest.mark.parametrize(
    "text",
    [
        # about the user: memory answers it, and asking changes nothing about them
        "我平时喜欢喝什么？",
        "我最爱吃的水果是啥？",
        "你觉得我适合做什么工作？",
        "Which languages do I speak?",
        "Do I have any pets?",
        "how do I usually take my coffee?",
        "你还记得上次那个问题吗？",
        # calculations
        "三加五再乘以二是多少？",
        "八的平方根是多少？",
        "What is seven times eight?",
        "7% of 1,250 is how much?",
        "１２＋３０等于多少？",
        # dates and times
        "下周三是几号？",
        "距离元旦还有几天？",
        "What's the date tomorrow?",
        "Which weekday is 2026-12-25?",
        # greetings, small talk, the assistant itself
        "你好吗？",
        "早上好呀，在吗？",
        "hey, how is it going?",
        "你是谁？",
        "what can you do?",
    ],
)
def test_questions_about_the_user_calculations_dates_and_greetings_are_never_history(text: str) -> None:
    assert history_operation(text, ()) is None
    assert _ops(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "我该怎么申请报销差旅费？",  # the user as the one who follows a procedure: a subject of its own
        "How do I request a new laptop?",
        "加班费怎么算？",
        "What does the onboarding checklist include?",
    ],
)
def test_a_question_on_a_subject_of_its_own_is_still_history(text: str) -> None:
    [op] = _ops(text)
    assert (op["action"], op["type"]) == ("ADD", "episodic") and text in op["content"]


def test_a_history_record_is_its_own_kind_and_any_other_memory_a_fact() -> None:
    assert (
        memory_kind({"memory_type": "episodic", "content": "用户问过 2 次：年假可以分几次休？"}) == "history"
    )
    assert memory_kind({"memory_type": "episodic", "content": "The user asked: how do I claim?"}) == "history"
    assert memory_kind({"memory_type": "episodic", "content": "The user moved to Lisbon in May"}) == "fact"
    assert memory_kind({"memory_type": "semantic", "content": "用户问过：这不是历史"}) == "fact"
    assert memory_kind({"memory_type": "procedural", "content": "用户要求：回答要简短"}) == "fact"


def test_a_model_proposed_history_record_of_a_question_about_the_user_is_refused(tmp_path: Path) -> None:
    store = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder())
    question = "What's my favourite drink?"
    proposal = {
        "operations": [
            {
                "action": "ADD",
                "type": "episodic",
                "confidence": 0.95,
                "content": f"The user asked: {question}",
                "target_id": None,
            }
        ]
    }
    [entry] = store.apply(proposal, user_id="ann", thread_id="t1", latest_user_message=question, snapshot=[])
    assert (entry.status, entry.rule) == ("rejected", 4) and "about the user" in (entry.reason or "")
    kept = "Which VPN client should contractors install?"
    proposal["operations"][0]["content"] = f"The user asked: {kept}"
    [entry] = store.apply(proposal, user_id="ann", thread_id="t1", latest_user_message=kept, snapshot=[])
    assert entry.status == "applied"


def test_the_store_keeps_the_history_for_30_days_then_purges_it(tmp_path: Path) -> None:
    clock = Clock()
    store = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder(), clock=clock, ttl_days={"episodic": 30})
    turn = [HumanMessage("How long is the notice period for contractors?"), AIMessage("Two weeks.")]
    assert store.update_from_turn("ann", "t1", turn) == 1
    again = [HumanMessage("contractors: what notice period applies?"), AIMessage("Two weeks.")]
    assert store.update_from_turn("ann", "t2", again) == 1
    [kept] = store.list("ann")
    assert kept["memory_type"] == "episodic" and kept["content"].startswith("The user asked 2 times: ")
    expires = datetime.fromisoformat(kept["expires_at"])
    assert timedelta(days=29.9) < expires - clock.now < timedelta(days=30.1)
    assert [m["id"] for m in store.recall("ann", "notice period")] == [kept["id"]]
    clock.now += timedelta(days=31)
    assert store.list("ann") == [] and store.purge_all_expired() == 1
    assert store.audit.list(user_id="ann")[0].action == "EXPIRE"
