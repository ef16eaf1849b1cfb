"""Feedback rows keep who, where, the rating and the answer they are about; SQLite and Postgres."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stores.feedback import FeedbackStore

POSTGRES_URL = os.environ.get("KB_TEST_POSTGRES_URL", "")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> FeedbackStore:
    if request.param == "postgres":
        if not POSTGRES_URL:
            pytest.skip("KB_TEST_POSTGRES_URL is not set (.ci/run starts Postgres and sets it)")
        return FeedbackStore(tmp_path, POSTGRES_URL)
    return FeedbackStore(tmp_path)


def test_feedback_is_stored_with_its_answer(store: FeedbackStore) -> None:
    user = f"u-{os.getpid()}-{id(store)}"
    first = store.add(user_id=user, thread_id="t1", rating="bad", reason="不准确", question="q", answer="a1")
    second = store.add(user_id=user, thread_id="t1", rating="good", answer="a2")
    rows = store.list(user_id=user)
    assert [r.id for r in rows] == [second, first]
    assert (rows[1].rating, rows[1].reason, rows[1].answer, rows[1].thread_id) == (
        "bad",
        "不准确",
        "a1",
        "t1",
    )


def test_unknown_rating_is_refused(store: FeedbackStore) -> None:
    with pytest.raises(ValueError, match="rating must be one of good, bad"):
        store.add(user_id="u", thread_id=None, rating="meh")


def test_sqlite_feedback_survives_reopening(tmp_path: Path) -> None:
    FeedbackStore(tmp_path).add(user_id="u", thread_id="t", rating="good", answer="x")
    assert FeedbackStore(tmp_path).list()[0].answer == "x"


def test_chunks_cited_in_answers_rated_bad_often_enough_are_penalised(tmp_path: Path) -> None:
    from stores.feedback import downweight

    store = FeedbackStore(tmp_path)
    for user, cited in (("u", ["a.md#0", "b.md#1"]), ("v", ["a.md#0", "a.md#0"]), ("u", ["c.md#2"])):
        store.add(user_id=user, thread_id="t", rating="bad", answer="…", reason="wrong", cited=cited)
    store.add(user_id="w", thread_id="t", rating="good", answer="…", cited=["b.md#1"])
    assert store.bad_citations(2) == {"a.md#0": 2}  # one count per bad answer, good ratings ignored
    assert store.bad_citations(1) == {"a.md#0": 2, "b.md#1": 1, "c.md#2": 1}
    store.add(user_id="u", thread_id="t", rating="bad", answer="…", cited=["b.md#1"])
    assert store.bad_citations(2) == {"a.md#0": 2, "b.md#1": 2}  # a new rating is seen at once
    assert [r.rating for r in store.list(rating="bad")] == ["bad"] * 4
    assert store.list(rating="bad")[0].cited == ("b.md#1",)

    passages = [{"id": "a.md#0", "score": 1.0}, {"id": "z.md#0", "score": 0.9}]
    ranked = downweight(passages, {"a.md#0": 7}, 0.8)
    assert [p["id"] for p in ranked] == ["z.md#0", "a.md#0"]
    assert ranked[1]["score"] == pytest.approx(0.8)  # applied once, however often it was rated bad
    assert downweight(passages, {"a.md#0": 7}, 1.0) == passages
    assert downweight(passages, {}, 0.5) == passages


def test_only_recorded_citations_from_enough_distinct_users_count(tmp_path: Path) -> None:
    """Ratings whose answer the agent did not record (text a caller wrote) weigh nothing, however many;
    one user's ratings never reach the distinct-user threshold alone."""
    store = FeedbackStore(tmp_path)
    for _ in range(5):
        store.add(user_id="mallory", thread_id="t", rating="bad", answer="forged [a.md#0] [b.md#0]")
        store.add(user_id="mallory", thread_id="t", rating="bad", answer="…", cited=["b.md#0"])
    assert store.bad_citations(2, min_users=1) == {"b.md#0": 5}
    assert store.bad_citations(2, min_users=2) == {}
    store.add(user_id="alice", thread_id="t2", rating="bad", answer="…", cited=["b.md#0"])
    assert store.bad_citations(2, min_users=2) == {"b.md#0": 6}
    assert store.list(user_id="mallory")[1].cited is None


def test_a_table_from_before_recorded_citations_gets_the_column(tmp_path: Path) -> None:
    import sqlite3

    with sqlite3.connect(tmp_path / "feedback.sqlite") as old:
        old.execute(
            "CREATE TABLE feedback (id INTEGER PRIMARY KEY, created_at TEXT NOT NULL, user_id TEXT NOT NULL, "
            "thread_id TEXT, rating TEXT NOT NULL, reason TEXT, question TEXT, answer TEXT)"
        )
        old.execute("INSERT INTO feedback VALUES (1, 'x', 'u', 't', 'bad', NULL, 'q', 'old [a.md#0]')")
    store = FeedbackStore(tmp_path)
    assert store.list()[0].cited is None and store.bad_citations(1) == {}  # parsed text no longer counts
    store.add(user_id="u", thread_id="t", rating="bad", answer="…", cited=["a.md#0"])
    assert store.bad_citations(1) == {"a.md#0": 1}
