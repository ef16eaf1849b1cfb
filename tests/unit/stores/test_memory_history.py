"""Interaction history: the questions a user asks become episodic memories, a repeat counts, they expire."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from stores.embeddings import HashingEmbedder
from stores.memory.extraction import OfflineExtractor
from stores.memory.history import history_operation
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
