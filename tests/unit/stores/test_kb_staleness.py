"""``bm25_staleness``: a search may use a keyword index a little behind another process's write.

Two ``KnowledgeBase`` instances on one data dir stand for two processes (a writer A, a server B). B's
catch-up is held at the point where it has taken the refresh lock, so what each query does while B lags is
seen, not timed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stores.embeddings import HashingEmbedder
from stores.knowledge.knowledge_base import KnowledgeBase
from tests.unit.stores.test_knowledge import write

CATCH_UP = "kb-index-catch-up"


@pytest.fixture
def held() -> Iterator[threading.Event]:
    """Set it to let B's background catch-up go on."""
    release = threading.Event()
    yield release
    release.set()


def writer_and_server(tmp_path: Path, staleness: float, release: threading.Event) -> tuple[KnowledgeBase, KnowledgeBase]:
    embedder = HashingEmbedder()
    a = KnowledgeBase(tmp_path / "data", embedder=embedder)
    write(tmp_path / "docs" / "alpha.md", "Alpha policy: badges are renewed every spring.")
    a.ingest([tmp_path / "docs"])
    b = KnowledgeBase(tmp_path / "data", embedder=embedder, bm25_staleness=staleness)
    assert ids(b, "alpha policy badges") == ["alpha.md#0"]
    refresh = b.index._refresh

    def held_refresh() -> None:
        if threading.current_thread().name == CATCH_UP:
            assert release.wait(30)  # holding the refresh lock, as a long rebuild would
        refresh()

    b.index._refresh = held_refresh  # type: ignore[method-assign]
    return a, b


def ids(kb: KnowledgeBase, query: str) -> list[str]:
    return [p["id"] for p in kb.search(query, mode="bm25", top_k=5)]


def in_thread(call: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    return thread, out


def a_writes(a: KnowledgeBase, tmp_path: Path) -> None:
    """A adds beta.md and deletes alpha.md."""
    write(tmp_path / "docs2" / "beta.md", "Beta rules: parking permits are renewed every autumn.")
    a.ingest([tmp_path / "docs2"])
    a.delete_document("alpha.md")


def test_within_the_staleness_a_query_uses_the_index_it_has_and_never_a_deleted_chunk(
    tmp_path: Path, held: threading.Event
) -> None:
    a, b = writer_and_server(tmp_path, 60.0, held)
    a_writes(a, tmp_path)
    thread, out = in_thread(lambda: ids(b, "alpha policy badges beta rules permits"))
    thread.join(20)
    assert not thread.is_alive(), "the query waited for the catch-up"
    assert out == [[]]  # alpha.md is deleted (the manifest is read at once); beta.md is not in B's BM25 yet
    catching_up = b.index._catching_up
    assert catching_up is not None and catching_up.is_alive()
    held.set()
    catching_up.join(20)
    assert ids(b, "beta rules permits") == ["beta.md#0"]
    assert ids(b, "alpha policy badges") == []


def test_past_the_staleness_a_query_reloads_first(tmp_path: Path, held: threading.Event) -> None:
    a, b = writer_and_server(tmp_path, 0.2, held)
    a_writes(a, tmp_path)
    assert ids(b, "beta rules permits") == []  # lagging: the catch-up starts, and is held
    time.sleep(0.3)  # past the staleness since B first saw the new version
    thread, out = in_thread(lambda: ids(b, "beta rules permits"))
    thread.join(1.0)
    assert thread.is_alive(), "a query past the staleness must wait for the index to catch up"
    held.set()
    thread.join(20)
    assert out == [["beta.md#0"]]


def test_without_staleness_a_query_reloads_at_once(tmp_path: Path, held: threading.Event) -> None:
    a, b = writer_and_server(tmp_path, 0.0, held)
    a_writes(a, tmp_path)
    assert ids(b, "beta rules permits") == ["beta.md#0"]
    assert b.index._catching_up is None


def test_a_query_while_the_catch_up_rebuilds_uses_the_old_index_and_does_not_rebuild(
    tmp_path: Path, held: threading.Event
) -> None:
    """The catch-up adopts the new version before its rebuild ends; a query then must not take the
    version as current and rebuild the keyword index itself (what the 10k bench showed: 436 ms)."""
    a, b = writer_and_server(tmp_path, 60.0, held)
    bm25 = b.index.bm25
    warm, reached = bm25.warm, threading.Event()

    def held_warm() -> None:
        if threading.current_thread().name == CATCH_UP:
            reached.set()
            assert held.wait(30)
        warm()

    bm25.warm = held_warm  # type: ignore[method-assign]
    b.index._refresh = type(b.index)._refresh.__get__(b.index)  # only the rebuild is held here
    a_writes(a, tmp_path)
    assert ids(b, "beta rules permits") == []  # lagging: the catch-up starts
    assert reached.wait(20)  # it has read the new version and waits to rebuild
    rebuilds = bm25.rebuilds
    assert ids(b, "beta rules permits alpha policy badges") == []
    assert bm25.rebuilds == rebuilds, "the query rebuilt the keyword index itself"
    held.set()
    catching_up = b.index._catching_up
    assert catching_up is not None
    catching_up.join(20)
    assert ids(b, "beta rules permits") == ["beta.md#0"]
