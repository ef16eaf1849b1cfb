"""High-risk memories (health, finances, identity) wait for the user: never recalled until confirmed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stores.embeddings import HashingEmbedder
from stores.memory.checks import high_risk
from stores.memory.pending import PendingMemoryError, confirm, drop, pending
from stores.memory.store import ChromaMemoryStore


def _propose(store: ChromaMemoryStore, user: str, content: str) -> str:
    raw = json.dumps({"operations": [{"action": "ADD", "type": "semantic", "content": content, "confidence": 0.95}]})
    (entry,) = store.apply(raw, user_id=user, thread_id="t", latest_user_message=content, snapshot=[])
    return entry.status


@pytest.mark.parametrize(
    "content, subject",
    [
        ("用户正在服用降压药", "health"),
        ("The user was diagnosed with diabetes", "health"),
        ("用户每个月工资两万", "finances"),
        ("The user has a mortgage of 2 million", "finances"),
        ("用户的宗教信仰是佛教", "identity"),
        ("用户喜欢简洁的回答", None),
    ],
)
def test_high_risk_subjects_are_named(content: str, subject: str | None) -> None:
    assert high_risk(content) == subject


def test_a_high_risk_memory_waits_and_is_not_recalled_until_confirmed(tmp_path: Path) -> None:
    store = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder())
    assert _propose(store, "alice", "用户正在服用降压药") == "pending"
    assert store.list("alice") == [] and store.recall("alice", "降压药") == []
    (held,) = pending(store, "alice")
    assert held.new_content == "用户正在服用降压药" and "health" in (held.reason or "")
    with pytest.raises(PendingMemoryError):
        confirm(store, "bob", held.id)  # another user's pending memory does not exist for bob
    applied = confirm(store, "alice", held.id)
    assert applied.status == "applied" and [m["content"] for m in store.list("alice")] == ["用户正在服用降压药"]
    assert pending(store, "alice") == []
    with pytest.raises(PendingMemoryError):
        confirm(store, "alice", held.id)  # once


def test_a_dropped_memory_is_never_written(tmp_path: Path) -> None:
    store = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder())
    assert _propose(store, "alice", "用户每个月工资两万") == "pending"
    assert _propose(store, "alice", "用户喜欢简洁的回答") == "applied"  # ordinary memories are not held
    (held,) = pending(store, "alice")
    assert drop(store, "alice", held.id).status == "dropped"
    assert pending(store, "alice") == [] and [m["content"] for m in store.list("alice")] == ["用户喜欢简洁的回答"]


def test_the_user_s_own_command_is_the_confirmation(tmp_path: Path) -> None:
    store = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder())
    entry = store.manage("alice", "ADD", content="用户正在服用降压药", memory_type="semantic")
    assert entry.status == "applied" and pending(store, "alice") == []
