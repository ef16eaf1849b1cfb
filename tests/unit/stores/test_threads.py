"""The thread registry: first user owns a thread, nobody else opens, renames or deletes it."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from stores.checkpoint import CheckpointConfigError, open_checkpointer
from stores.threads import ThreadInfo, ThreadOwnershipError, ThreadRegistry, title_for

POSTGRES_URL = os.environ.get("KB_TEST_POSTGRES_URL", "")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def registry(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ThreadRegistry]:
    if request.param == "postgres":
        if not POSTGRES_URL:
            pytest.skip("KB_TEST_POSTGRES_URL is not set (.ci/run starts Postgres and sets it)")
        reg = ThreadRegistry(tmp_path, POSTGRES_URL)
    else:
        reg = ThreadRegistry(tmp_path)
    with reg:
        yield reg


def _id() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def test_the_first_user_owns_the_thread_and_another_user_is_refused(registry: ThreadRegistry) -> None:
    thread = _id()
    registry.claim(thread, "alice", title="计算 123 × 456")
    registry.claim(thread, "alice")  # re-opening one's own thread is fine
    with pytest.raises(ThreadOwnershipError) as refused:
        registry.claim(thread, "bob", title="let me in")
    message = str(refused.value)
    assert thread in message and "bob" in message and "another user" in message
    assert "alice" not in message  # the owner is not disclosed
    assert registry.owner(thread) == "alice"
    assert registry.get(thread).title == "计算 123 × 456"  # type: ignore[union-attr]


def test_list_shows_only_the_users_threads_most_recent_first(registry: ThreadRegistry) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    a, b, other = _id(), _id(), _id()
    registry.claim(a, user, title="first thread")
    registry.claim(b, user, title="second thread")
    registry.claim(other, "someone-else", title="not yours")
    assert [t.thread_id for t in registry.list(user)] == [b, a]
    registry.touch(a)
    listed = registry.list(user)
    assert [t.thread_id for t in listed] == [a, b]
    assert isinstance(listed[0], ThreadInfo) and listed[0].last_activity > listed[0].created_at
    assert other not in {t.thread_id for t in listed}


def test_title_is_the_first_questions_first_40_characters(registry: ThreadRegistry) -> None:
    thread = _id()
    question = (
        "  请帮我   总结一下知识库里关于检索增强生成（RAG）的所有文档，并列出每篇文档的要点和出处，谢谢  "
    )
    registry.claim(thread, "alice", title=question)
    registry.claim(thread, "alice", title="a later question does not rename it")
    title = registry.get(thread).title  # type: ignore[union-attr]
    assert title == title_for(question) and len(title) == 40 and title.startswith("请帮我 总结")
    untitled = _id()
    registry.claim(untitled, "alice")
    registry.claim(untitled, "alice", title="named by its first question")
    assert registry.get(untitled).title == "named by its first question"  # type: ignore[union-attr]


def test_rename_and_delete_need_the_owner(registry: ThreadRegistry) -> None:
    thread = _id()
    registry.claim(thread, "alice", title="old")
    with pytest.raises(ThreadOwnershipError):
        registry.rename(thread, "bob", "mine now")
    with pytest.raises(ThreadOwnershipError):
        registry.delete(thread, "bob")
    registry.rename(thread, "alice", "新的标题")
    assert registry.get(thread).title == "新的标题"  # type: ignore[union-attr]
    with pytest.raises(KeyError, match="no thread"):
        registry.rename(_id(), "alice", "x")
    assert registry.delete(thread, "alice") is True
    assert registry.get(thread) is None and registry.delete(thread, "alice") is False
    registry.claim(thread, "bob")  # a deleted id is free again
    assert registry.owner(thread) == "bob"


def test_empty_ids_are_refused(registry: ThreadRegistry) -> None:
    with pytest.raises(ValueError, match="non-empty"):
        registry.claim("", "alice")
    with pytest.raises(ValueError, match="non-empty"):
        registry.claim(_id(), "")


def test_racing_claims_have_exactly_one_winner(registry: ThreadRegistry) -> None:
    thread = _id()
    winners: list[str] = []
    barrier = threading.Barrier(8)

    def claim(user: str) -> None:
        barrier.wait()
        try:
            registry.claim(thread, user)
            winners.append(user)
        except ThreadOwnershipError:
            pass

    workers = [threading.Thread(target=claim, args=(f"user-{i}",)) for i in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(winners) == 1 and registry.owner(thread) == winners[0]


def test_ownership_survives_reopening_and_shares_the_threads_file(tmp_path: Path) -> None:
    with ThreadRegistry(tmp_path) as first:
        first.claim("kept", "alice", title="hello")
    with open_checkpointer(tmp_path) as saver, ThreadRegistry(tmp_path) as again:
        assert saver is not None and (tmp_path / "threads.sqlite").exists()
        assert again.owner("kept") == "alice"
        with pytest.raises(ThreadOwnershipError):
            again.claim("kept", "bob")


def test_sqlite_url_and_unsupported_url(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "t.sqlite"
    with ThreadRegistry(tmp_path, f"sqlite:///{target}") as reg:
        reg.claim("x", "alice")
    assert target.exists()
    with pytest.raises(CheckpointConfigError, match="unsupported"):
        ThreadRegistry(tmp_path, "mysql://nope")
