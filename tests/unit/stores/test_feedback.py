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
    for answer in ("见 [a.md#0] 和 [b.md#1]。", "again [a.md#0] [a.md#0]", "fine [c.md#2]"):
        store.add(user_id="u", thread_id="t", rating="bad", answer=answer, reason="wrong")
    store.add(user_id="u", thread_id="t", rating="good", answer="[b.md#1]")
    assert store.bad_citations(2) == {"a.md#0": 2}  # one count per bad answer, good ratings ignored
    assert store.bad_citations(1) == {"a.md#0": 2, "b.md#1": 1, "c.md#2": 1}
    store.add(user_id="u", thread_id="t", rating="bad", answer="[b.md#1]")
    assert store.bad_citations(2) == {"a.md#0": 2, "b.md#1": 2}  # a new rating is seen at once
    assert [r.rating for r in store.list(rating="bad")] == ["bad"] * 4

    passages = [{"id": "a.md#0", "score": 1.0}, {"id": "z.md#0", "score": 0.9}]
    ranked = downweight(passages, {"a.md#0": 7}, 0.8)
    assert [p["id"] for p in ranked] == ["z.md#0", "a.md#0"]
    assert ranked[1]["score"] == pytest.approx(0.8)  # applied once, however often it was rated bad
    assert downweight(passages, {"a.md#0": 7}, 1.0) == passages
    assert downweight(passages, {}, 0.5) == passages
