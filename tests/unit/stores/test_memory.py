"""The Chroma memory store: records, scoping at the storage layer, hybrid recall, expiry, and isolation."""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from stores.embeddings import HashingEmbedder
from stores.memory.recall import fuse, keyword_scores
from stores.memory.rules import ExtractionRequest
from stores.memory.store import ChromaMemoryStore


class Clock:
    """A clock the test moves by hand, so "newer" and "expired" are exact."""

    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


class SpyCollection:
    """Records every ``where`` the store sends to Chroma."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            return method(*args, **kwargs)

        return call


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> ChromaMemoryStore:
    return ChromaMemoryStore(tmp_path, embedder=HashingEmbedder(), clock=clock)


def test_records_have_every_field_and_are_per_user(store: ChromaMemoryStore) -> None:
    record, created = store.add("alice", "episodic", "用户上周去了杭州", thread_id="t1")
    assert created and record["id"].startswith("mem_")
    assert {k: record[k] for k in ("user_id", "memory_type", "content", "source_thread_id")} == {
        "user_id": "alice",
        "memory_type": "episodic",
        "content": "用户上周去了杭州",
        "source_thread_id": "t1",
    }
    assert record["created_at"] and record["updated_at"] and record["expires_at"] is None
    assert store.get("bob", record["id"]) is None and store.list("bob") == []


def test_reads_and_writes_send_the_user_id_to_chroma(store: ChromaMemoryStore) -> None:
    record, _ = store.add("alice", "semantic", "用户喜欢喝茶")
    spy = SpyCollection(store._collection)
    store._opened = spy  # type: ignore[assignment]
    store.recall("alice", "茶")
    store.get("alice", record["id"])
    store.update("alice", record["id"], "用户喜欢喝绿茶")
    store.delete("alice", record["id"])
    for name, kwargs in spy.calls:
        if name in {"get", "query", "delete"}:
            assert "alice" in repr(kwargs.get("where")), (name, kwargs)
    assert ("delete", {"ids": [record["id"]], "where": {"user_id": "alice"}}) in spy.calls


def test_other_users_ids_can_be_neither_read_updated_nor_deleted(store: ChromaMemoryStore) -> None:
    bobs, _ = store.add("bob", "semantic", "用户喜欢喝茶")
    assert store.get("alice", bobs["id"]) is None
    assert store.update("alice", bobs["id"], "用户喜欢咖啡") is None
    assert store.delete("alice", bobs["id"]) is None
    assert store.get("bob", bobs["id"])["content"] == "用户喜欢喝茶"


def test_add_is_an_upsert_on_user_type_and_normalised_content(store: ChromaMemoryStore) -> None:
    first, created = store.add("alice", "semantic", "The user likes tea.")
    again, created_again = store.add("alice", "semantic", "  the user LIKES tea ")
    assert created and not created_again and again["id"] == first["id"]
    assert again["updated_at"] > first["updated_at"]  # refreshed, so it ranks as newer
    assert len(store.list("alice")) == 1
    with pytest.raises(ValueError, match="memory type"):
        store.add("alice", "preference", "用户喜欢喝茶")


def test_concurrent_adds_of_one_fact_keep_one_record(store: ChromaMemoryStore) -> None:
    results: list[bool] = []
    threads = [
        threading.Thread(target=lambda: results.append(store.add("alice", "semantic", "用户喜欢喝茶")[1]))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1 and len(store.list("alice")) == 1


def test_recall_ranks_keyword_and_vector_matches_first_and_caps_at_top_k(store: ChromaMemoryStore) -> None:
    for i in range(8):
        store.add("alice", "episodic", f"用户第{i}次去了博物馆参观展览")
    wanted, _ = store.add("alice", "semantic", "用户喜欢简洁的中文回答")
    store.add("alice", "episodic", "用户买了一台新电脑")  # newest, irrelevant
    found = store.recall("alice", "回答要简洁", 5)
    assert len(found) == 5 and found[0]["id"] == wanted["id"]
    assert all(m["user_id"] == "alice" for m in found)


class PlannedEmbedder:
    """Vectors chosen by the test: the query is [1, 0]; named texts get fixed directions."""

    name, dim = "planned", 2

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def _vec(self, text: str) -> np.ndarray:
        return np.asarray(self.vectors.get(text, [0.0, 1.0]), dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.vstack([self._vec(t) for t in texts]) if texts else np.zeros((0, 2), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray([1.0, 0.0], dtype=np.float32)


@pytest.mark.parametrize("newer", ["semantic", "episodic"])
def test_recall_ties_go_to_the_newer_memory(store: ChromaMemoryStore, newer: str) -> None:
    # One content under two types: the same terms and the same vector, so exactly the same fused score.
    older = "episodic" if newer == "semantic" else "semantic"
    first, _ = store.add("alice", older, "用户喜欢咖啡和茶")
    second, _ = store.add("alice", newer, "用户喜欢咖啡和茶")
    store.add("alice", "semantic", "用户住在杭州")
    found = store.recall("alice", "咖啡 茶", 2)
    assert [m["id"] for m in found] == [second["id"], first["id"]]


@pytest.mark.filterwarnings("ignore:legacy embedding function config")
def test_recall_puts_the_question_s_rare_words_above_a_nearer_neighbour(tmp_path: Path, clock: Clock) -> None:
    # Every memory shares the speaker's name with the question. RRF (k=60) ranked the nearest vector
    # neighbour first; the IDF-weighted keyword score lets the one memory naming "pottery class" win.
    near, rare = "Caroline: I like tea", "Caroline: the pottery class was fun"
    fillers = [f"Caroline: went to the gym with {name}" for name in ("Mel", "Jon", "Gina", "Tim")]
    vectors = {near: [1.0, 0.0], rare: [0.0, 1.0], **{f: [0.5, 0.866] for f in fillers}}
    store = ChromaMemoryStore(tmp_path, embedder=PlannedEmbedder(vectors), clock=clock)
    ids = {text: store.add("alice", "episodic", text)[0]["id"] for text in [rare, *fillers, near]}
    found = store.recall("alice", "Caroline pottery class", 2)
    assert [m["id"] for m in found] == [ids[rare], ids[near]]


def test_keyword_scores_weight_shared_terms_by_rarity() -> None:
    contents = {
        "a": "Melanie: the kids love pottery",
        "b": "Melanie: the kids at the beach",
        "c": "Melanie: kids again",
        "d": "Caroline: the adoption agency called",
    }
    scores = keyword_scores("Did Melanie's kids call the adoption agency?", contents)
    common, rare = math.log(1 + 1.5 / 3.5), math.log(1 + 3.5 / 1.5)  # df 3 and df 1 of N = 4
    assert scores == pytest.approx({"a": 2 * common, "b": 2 * common, "c": 2 * common, "d": 3 * rare})
    assert keyword_scores("the of and", contents) == {} and keyword_scores("pottery", {}) == {}


def test_fuse_weights_keyword_by_its_best_and_vector_by_its_range() -> None:
    keyword, vector = {"a": 2.0, "b": 1.0}, {"b": 0.9, "c": 0.8, "a": 0.7}
    fused = fuse(keyword, vector, 0.3)
    assert fused == pytest.approx({"a": 0.7, "b": 0.7 * 0.5 + 0.3, "c": 0.3 * 0.5})
    assert list(fuse(keyword, vector, 0.0)) == ["a", "b"]  # a weight of 0 or 1 leaves one side alone
    assert list(fuse(keyword, vector, 1.0)) == ["b", "c", "a"]
    assert fuse({}, {}, 0.3) == {}
    with pytest.raises(ValueError, match="vector_weight"):
        fuse(keyword, vector, 1.5)


def test_empty_query_recalls_the_newest(store: ChromaMemoryStore) -> None:
    ids = [store.add("alice", "semantic", f"用户喜欢第{i}种茶")[0]["id"] for i in range(7)]
    assert [m["id"] for m in store.recall("alice", "  ", 3)] == ids[::-1][:3]


def test_expired_memories_are_not_recalled_listed_or_shown_to_extraction(
    tmp_path: Path, clock: Clock
) -> None:
    store = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder(), clock=clock, ttl_days={"episodic": 30})
    old, _ = store.add("alice", "episodic", "用户去了杭州出差")
    kept, _ = store.add("alice", "semantic", "用户喜欢杭州的龙井茶")
    past, _ = store.add("alice", "semantic", "用户在杭州实习", expires_at=clock.now - timedelta(days=1))
    assert old["expires_at"] and kept["expires_at"] is None
    clock.now += timedelta(days=31)
    assert [m["id"] for m in store.snapshot("alice", "杭州")] == [kept["id"]]
    assert len(store.list("alice", include_expired=True)) == 3  # this process swept when it was first used
    assert [m["id"] for m in store.recall("alice", "杭州")] == [kept["id"]]
    assert [m["id"] for m in store.list("alice")] == [kept["id"]]
    assert store.purge_expired("alice") == 2 and store.get("alice", past["id"]) is None


def test_expired_memories_are_purged_for_every_user_on_first_use_and_audited(
    tmp_path: Path, clock: Clock
) -> None:
    writer = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder(), clock=clock, ttl_days={"episodic": 30})
    gone, _ = writer.add("alice", "episodic", "用户上周问过两次退款政策")
    bobs, _ = writer.add("bob", "episodic", "The user asked about parking twice this week")
    kept, _ = writer.add("bob", "semantic", "The user prefers short answers")
    clock.now += timedelta(days=31)
    opened = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder(), clock=clock, ttl_days={"episodic": 30})
    assert [m["id"] for m in opened.list("bob")] == [kept["id"]]  # the first use sweeps every user
    assert opened.get("alice", gone["id"]) is None and opened.get("bob", bobs["id"]) is None
    assert [m["id"] for m in opened.list("bob", include_expired=True)] == [kept["id"]]
    (entry,) = opened.audit.list(user_id="alice", status="applied", limit=10)[:1]
    assert entry.action == "EXPIRE" and entry.source == "expiry" and entry.old_content == gone["content"]
    assert [e.memory_id for e in opened.audit.list(user_id="bob", limit=10) if e.action == "EXPIRE"] == [
        bobs["id"]
    ]


def test_a_failing_sweep_never_fails_the_read(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder(), clock=clock)
    kept, _ = store.add("alice", "semantic", "用户喜欢龙井茶")

    def broken() -> int:
        raise OSError("disk went away")

    monkeypatch.setattr(store, "purge_all_expired", broken)
    assert [m["id"] for m in store.list("alice")] == [kept["id"]]


def test_update_keeps_id_type_creation_time_and_source(store: ChromaMemoryStore) -> None:
    record, _ = store.add("alice", "semantic", "用户喜欢咖啡", thread_id="t1")
    old, new = store.update("alice", record["id"], "用户喜欢浓缩咖啡") or (None, None)
    assert old["content"] == "用户喜欢咖啡" and new["content"] == "用户喜欢浓缩咖啡"
    assert (new["id"], new["memory_type"], new["created_at"], new["source_thread_id"]) == (
        record["id"],
        "semantic",
        record["created_at"],
        "t1",
    )
    assert store.recall("alice", "浓缩咖啡")[0]["content"] == "用户喜欢浓缩咖啡"  # re-embedded


class RecordingExtractor:
    def __init__(self, reply: Any = None) -> None:
        self.requests: list[ExtractionRequest] = []
        self.reply = reply if reply is not None else {"operations": []}

    def __call__(self, request: ExtractionRequest) -> Any:
        self.requests.append(request)
        return self.reply


def test_extraction_sees_user_messages_only_and_at_most_100_memories(tmp_path: Path) -> None:
    extractor = RecordingExtractor()
    store = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder(), extractor=extractor)
    for i in range(120):
        store.add("alice", "episodic", f"用户第{i}天读了一本书")
    store.add("bob", "semantic", "用户喜欢喝茶")
    messages = [
        HumanMessage("第一问"),
        AIMessage("助手说：用户是医生"),
        HumanMessage("第二问"),
        AIMessage("", tool_calls=[{"name": "x", "args": {}, "id": "c1"}]),
        ToolMessage("工具说：用户住在火星", tool_call_id="c1"),
        HumanMessage("记住我喜欢读书"),
        AIMessage("好的"),
    ]
    assert store.update_from_turn("alice", "t1", messages) == 0
    [request] = extractor.requests
    assert request.latest_user_message == "记住我喜欢读书"
    assert request.earlier_user_messages == ("第一问", "第二问")
    payload = request.payload()
    assert "助手说" not in payload and "工具说" not in payload and "好的" not in payload
    assert len(request.existing_memories) == 100
    assert all(m["user_id"] == "alice" for m in request.existing_memories)


def test_update_from_turn_with_the_offline_extractor(store: ChromaMemoryStore) -> None:
    assert (
        store.update_from_turn("alice", "t1", [HumanMessage("记住我喜欢简洁的中文回答"), AIMessage("好")])
        == 1
    )
    [memory] = store.list("alice")
    assert (memory["memory_type"], memory["content"]) == ("semantic", "用户喜欢简洁的中文回答")
    assert store.update_from_turn("alice", "t2", [HumanMessage("忘掉关于简洁回答的记忆")]) == 1
    assert store.list("alice") == []
    assert store.update_from_turn("alice", "t3", [AIMessage("只有助手的话")]) == 0


# -- isolation as a property -----------------------------------------------------------------------
USERS = ("alice", "bob", "carol", "dave")
WORDS = ("茶", "咖啡", "简洁", "回答", "杭州", "Python", "tea", "short", "answers", "博物馆")
_iso_store: list[ChromaMemoryStore] = []
_operations_run = [0]

user_st = st.sampled_from(USERS)
content_st = st.lists(st.sampled_from(WORDS), min_size=2, max_size=4).map(lambda ws: "用户喜欢" + "".join(ws))
target_st = st.one_of(st.integers(0, 10_000), st.sampled_from(["mem_x", "", "' OR 1=1 --", "*"]))
operation_st = st.one_of(
    st.tuples(st.just("add"), user_st, content_st),
    st.tuples(st.just("update"), user_st, target_st, content_st),
    st.tuples(st.just("delete"), user_st, target_st),
    st.tuples(st.just("get"), user_st, target_st),
    st.tuples(st.just("recall"), user_st, content_st),
    st.tuples(st.just("extract_delete"), user_st, st.lists(target_st, min_size=1, max_size=3)),
    st.tuples(st.just("extract_update"), user_st, target_st, content_st),
    st.tuples(st.just("manage_delete"), user_st, target_st),
)


def run_operations(operations: list[tuple[Any, ...]]) -> None:
    """Apply random operations by several users, checking each against a model of who owns what."""
    store = _iso_store[0]
    run = uuid.uuid4().hex[:8]  # each example gets its own users, so examples do not interfere
    users = {u: f"{u}-{run}" for u in USERS}
    model: dict[str, dict[str, str]] = {u: {} for u in users.values()}
    pool: list[str] = []  # every id ever created, of any user: the crafted targets

    def target(t: Any) -> str:
        return pool[t % len(pool)] if isinstance(t, int) and pool else str(t)

    def owner(memory_id: str) -> str | None:
        return next((u for u, mine in model.items() if memory_id in mine), None)

    for operation in operations:
        kind, user = operation[0], users[operation[1]]
        if kind == "add":
            record, _ = store.add(user, "semantic", operation[2])
            model[user][record["id"]] = record["content"]
            pool.append(record["id"])
        elif kind == "update":
            memory_id = target(operation[2])
            changed = store.update(user, memory_id, operation[3])
            assert (changed is not None) == (owner(memory_id) == user)
            if changed is not None:
                model[user][memory_id] = changed[1]["content"]
        elif kind in {"delete", "manage_delete"}:
            memory_id = target(operation[2])
            if kind == "delete":
                done = store.delete(user, memory_id) is not None
            else:
                done = store.manage(user, "DELETE", memory_id=memory_id).status == "applied"
            assert done == (owner(memory_id) == user)
            model[user].pop(memory_id, None) if done else None
        elif kind == "get":
            memory_id = target(operation[2])
            got = store.get(user, memory_id)
            assert (got is not None) == (owner(memory_id) == user)
        elif kind == "recall":
            assert {m["id"] for m in store.recall(user, operation[2])} <= set(model[user])
        elif kind == "extract_delete":  # a hostile snapshot listing everyone's memories
            ids = [target(t) for t in operation[2]]
            everyone = [{"id": i, "memory_type": "semantic", "content": ""} for i in pool]
            ops = [{"action": "DELETE", "type": "semantic", "target_id": i, "confidence": 0.99} for i in ids]
            entries = store.apply(
                {"operations": ops},
                user_id=user,
                thread_id="t",
                latest_user_message="忘掉这些记忆",
                snapshot=everyone,
            )
            for i, entry in zip(ids, entries, strict=True):
                assert (entry.status == "applied") == (owner(i) == user)
                if entry.status == "applied":
                    model[user].pop(i)
        elif kind == "extract_update":
            memory_id = target(operation[2])
            op = {
                "action": "UPDATE",
                "type": "semantic",
                "content": operation[3],
                "target_id": memory_id,
                "confidence": 0.99,
            }
            [entry] = store.apply(
                {"operations": [op]}, user_id=user, thread_id="t", latest_user_message="更正", snapshot=[]
            )
            if entry.status == "applied":
                assert owner(memory_id) == user
                model[user][memory_id] = operation[3]
            else:
                assert owner(memory_id) != user or entry.rule == 5
        _operations_run[0] += 1
    for user, mine in model.items():
        listed = {m["id"]: m["content"] for m in store.list(user)}
        assert listed == mine
        assert all(m["user_id"] == user for m in store.list(user))


def test_no_user_ever_reads_updates_or_deletes_another_users_memory(tmp_path: Path) -> None:
    """≥ 1,000 random operations by four users, targets drawn from every user's ids (and junk)."""
    _iso_store[:] = [ChromaMemoryStore(tmp_path, embedder=HashingEmbedder())]
    _operations_run[0] = 0
    check = settings(
        max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
    )(given(st.lists(operation_st, min_size=100, max_size=100))(run_operations))
    check()
    assert _operations_run[0] >= 1000


def test_a_failed_extraction_is_audited_and_raised(tmp_path: Path, clock: Clock) -> None:
    def broken(request: ExtractionRequest) -> str:
        raise TimeoutError("the model did not answer within 60 s")

    store = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder(), clock=clock, extractor=broken)
    with pytest.raises(TimeoutError):
        store.update_from_turn("alice", "t1", [HumanMessage("记住我喜欢简洁的回答")])
    failed = [e for e in store.audit.list(user_id="alice") if e.action == "EXTRACT"]
    assert [(e.status, e.thread_id) for e in failed] == [("failed", "t1")]
    assert "did not answer within 60 s" in (failed[0].reason or "")


def test_episodic_memories_expire_after_30_days_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graph.services import memory_store
    from nodes.settings import Settings

    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    assert Settings().memory_episodic_days == 30.0
    store = memory_store(Settings(data_dir=str(tmp_path)))
    assert store.ttl_days == {"episodic": 30.0}
    forever = memory_store(Settings(data_dir=str(tmp_path / "forever"), memory_episodic_days=0))
    assert forever.ttl_days == {}


def test_a_new_data_folder_starts_no_chroma_until_a_memory_is_written(tmp_path: Path) -> None:
    """Opening the store and reading from it (a turn's recall) create nothing; the first write does."""
    store = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder(dim=64))
    assert store.recall("ann", "where do I live?") == []
    assert store.list("ann") == [] and store.get("ann", "mem_x") is None
    assert store.purge_expired("ann") == 0
    assert not (tmp_path / "chroma").exists()
    store.add("ann", "semantic", "Ann lives in Beijing")
    assert (tmp_path / "chroma").exists()
    again = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder(dim=64))  # another process, same folder
    assert [m["content"] for m in again.recall("ann", "Beijing")] == ["Ann lives in Beijing"]


def test_recall_of_a_pasted_page_looks_for_its_question(tmp_path: Path, clock: Clock) -> None:
    asked: list[str] = []

    class Recording(HashingEmbedder):
        def embed_query(self, text: str) -> np.ndarray:
            asked.append(text)
            return super().embed_query(text)

    store = ChromaMemoryStore(tmp_path, embedder=Recording(), clock=clock)
    wanted, _ = store.add("alice", "semantic", "用户喜欢简洁的中文回答")
    page = "项目组讨论了发布计划、预算和人员安排，决定下周再议。" * 1200 + "\n回答要简洁吗？"
    found = store.recall("alice", page, 3)
    assert found and found[0]["id"] == wanted["id"]
    assert asked == ["回答要简洁吗？"]  # the question, not 30,000 characters of meeting notes
