"""No lost extractions: a turn's memory work is durable before the answer returns."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from stores.embeddings import HashingEmbedder
from stores.memory.outbox import MemoryOutbox
from stores.memory.store import ChromaMemoryStore
from stores.memory.updater import BackgroundMemoryUpdater
from tests.integration.conftest import Backend

ROOT = Path(__file__).resolve().parents[2]

CRASHING = """
import os, signal, sys, time
from langchain_core.messages import AIMessage, HumanMessage
from stores.embeddings import HashingEmbedder
from stores.memory.outbox import MemoryOutbox
from stores.memory.store import ChromaMemoryStore
from stores.memory.updater import BackgroundMemoryUpdater
from stores.memory.extraction import OfflineExtractor

home, url, when = sys.argv[1], sys.argv[2], sys.argv[3]

def hang(request):
    time.sleep(600)  # killed mid-extraction

class CrashAfterWrite(ChromaMemoryStore):
    def update_from_turn(self, *args):
        super().update_from_turn(*args)
        os.kill(os.getpid(), signal.SIGKILL)  # the memory is written, the outbox row is not cleared

kind = CrashAfterWrite if when == "after-write" else ChromaMemoryStore
store = kind(home, embedder=HashingEmbedder(), database_url=url,
             chroma_url=os.environ.get("KB_AGENT_CHROMA_URL", ""),
             extractor=hang if when == "mid-extraction" else OfflineExtractor())
updater = BackgroundMemoryUpdater(store, outbox=MemoryOutbox(home, url))
updater.update_from_turn("alice", "t1", [HumanMessage("记住：我喜欢喝乌龙茶"), AIMessage("好的")])
print("answered", flush=True)
time.sleep(600)
"""


@pytest.fixture
def database_url(store_backend: Backend) -> str:
    """The outbox's database on each storage backend: SQLite under the data dir, or Postgres."""
    return store_backend.kwargs()["database_url"]


@pytest.mark.parametrize("when", ["mid-extraction", "after-write"])
def test_a_killed_process_loses_no_extraction_and_a_restart_writes_the_memory_exactly_once(
    tmp_path: Path, database_url: str, when: str
) -> None:
    home = tmp_path / "home"
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASHING, str(home), database_url, when],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "answered"
    if when == "mid-extraction":
        os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=120) == -signal.SIGKILL

    store = ChromaMemoryStore(
        home,
        embedder=HashingEmbedder(),
        database_url=database_url,
        chroma_url=os.environ.get("KB_AGENT_CHROMA_URL", ""),
    )
    outbox = MemoryOutbox(home, database_url)
    assert len(outbox.pending()) == 1  # durable before the answer returned, still there after the kill
    updater = BackgroundMemoryUpdater(store, outbox=outbox)  # the restarted process finishes it
    assert updater.drain(60)
    memories = store.list("alice")
    assert [m["content"] for m in memories] == ["用户喜欢喝乌龙茶"]
    assert outbox.pending() == []
    updater.close()


def test_a_submitted_turn_is_in_the_outbox_until_it_is_processed(tmp_path: Path) -> None:
    store = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder())
    outbox = MemoryOutbox(tmp_path)
    updater = BackgroundMemoryUpdater(store, outbox=outbox)
    updater.update_from_turn("bob", "t", [HumanMessage("remember: I prefer green tea"), AIMessage("ok")])
    assert updater.drain(30)
    assert outbox.pending() == [] and [m["content"] for m in store.list("bob")] == [
        "The user prefers green tea"
    ]
