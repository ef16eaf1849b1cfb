"""Long-term memory across processes: one record per fact, however many processes add it.

On both backends (``store_backend``): embedded, where the processes share one data dir, and shared, where
each has its own data dir and they meet in the Chroma server and Postgres.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from stores.embeddings import HashingEmbedder
from stores.memory.store import ChromaMemoryStore
from tests.integration.conftest import Backend

ROOT = Path(__file__).resolve().parents[2]
FACTS = [f"I prefer meeting room number {n} on floor {n % 5}" for n in range(20)]

ADD_FACTS = """
import os, sys, time
from pathlib import Path
from stores.embeddings import HashingEmbedder
from stores.memory.store import ChromaMemoryStore
backend = {"chroma_url": os.environ.get("KB_AGENT_CHROMA_URL", ""),
           "database_url": os.environ.get("KB_AGENT_DATABASE_URL", "")}
home, go, facts = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
store = ChromaMemoryStore(home, embedder=HashingEmbedder(), **backend)
while not go.exists():
    time.sleep(0.01)
print(sum(store.add("alice", "semantic", fact)[1] for fact in facts))
"""


def homes(tmp_path: Path, backend: Backend) -> list[Path]:
    """Each process's data dir: one for all when embedded, one of its own each when shared."""
    return [tmp_path / name for name in (("a", "b") if backend.shared else ("home", "home"))]


def run_together(script: str, homes: list[Path], *args: str, go: Path) -> list[str]:
    """Start one copy of ``script`` per data dir in ``homes``, release them at once, return their outputs."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(home), str(go), *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for home in homes
    ]
    time.sleep(3)  # both have opened the store (imports take ~2 s); then they start together
    go.touch()
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        outs.append(out.strip())
    return outs


def test_two_processes_adding_the_same_twenty_facts_at_once_keep_twenty_records(
    tmp_path: Path, store_backend: Backend
) -> None:
    first, second = homes(tmp_path, store_backend)
    run_together(ADD_FACTS, [first, second], *FACTS, go=tmp_path / "go")
    store = ChromaMemoryStore(second, embedder=HashingEmbedder(), **store_backend.kwargs())
    records = store.list("alice")
    assert len(records) == 20
    assert sorted(r["content"] for r in records) == sorted(FACTS)


def test_a_memory_id_is_the_same_in_every_process_for_one_user_type_and_fact(tmp_path: Path) -> None:
    one = ChromaMemoryStore(tmp_path / "a", embedder=HashingEmbedder())
    two = ChromaMemoryStore(tmp_path / "b", embedder=HashingEmbedder())
    first, _ = one.add("alice", "semantic", "I prefer tea.")
    second, _ = two.add("alice", "semantic", "i  prefer TEA")  # the same fact, normalised
    assert first["id"] == second["id"]
    assert two.add("bob", "semantic", "I prefer tea.")[0]["id"] != first["id"]
    assert two.add("alice", "episodic", "I prefer tea.")[0]["id"] != first["id"]


CONCURRENT_UPDATES = """
import os, sys, time
from pathlib import Path
from stores.embeddings import HashingEmbedder
from stores.memory.store import ChromaMemoryStore
backend = {"chroma_url": os.environ.get("KB_AGENT_CHROMA_URL", ""),
           "database_url": os.environ.get("KB_AGENT_DATABASE_URL", "")}
home, go, target, name = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
store = ChromaMemoryStore(home, embedder=HashingEmbedder(), **backend)
while not go.exists():
    time.sleep(0.01)
for n in range(10):
    store.manage("alice", "UPDATE", content=f"I prefer the {name} room, take {n}", memory_id=target)
"""


def test_update_races_between_processes_keep_one_record_and_the_audit_records_every_write(
    tmp_path: Path, store_backend: Backend
) -> None:
    first, second = homes(tmp_path, store_backend)
    store = ChromaMemoryStore(first, embedder=HashingEmbedder(), **store_backend.kwargs())
    target = store.add("alice", "semantic", "I prefer the blue room")[0]["id"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT_UPDATES, str(home), str(go), target, name],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for home, name in ((first, "north"), (second, "south"))
    ]
    time.sleep(3)
    go.touch()
    for proc in procs:
        assert proc.wait(timeout=180) == 0, proc.stderr.read() if proc.stderr else ""
    records = ChromaMemoryStore(second, embedder=HashingEmbedder(), **store_backend.kwargs()).list("alice")
    applied = [e for e in store.audit.list(user_id="alice", memory_id=target) if e.action == "UPDATE"]
    assert len(records) == 1 and records[0]["id"] == target  # last writer wins: still one record
    assert records[0]["content"] in {e.new_content for e in applied}
    assert len([e for e in applied if e.status == "applied"]) == 20  # both processes' writes are audited
