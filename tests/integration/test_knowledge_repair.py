"""The index repairs itself: orphan chunks after a killed ingest, `kb-agent repair`, and
a document from another ingest root is never replaced silently. On both storage backends (``store_backend``):
with Postgres and a Chroma server, a killed process also loses its in-memory BM25."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from stores.embeddings import HashingEmbedder
from stores.knowledge.knowledge_base import KnowledgeBase
from tests.integration.conftest import Backend

ROOT = Path(__file__).resolve().parents[2]

KILLED_INGEST = """
import os, signal, sys
from stores.embeddings import HashingEmbedder
from stores.knowledge.knowledge_base import KnowledgeBase
from stores.knowledge.manifest import Manifest

def killed(self, puts, removes):  # every chunk is in Chroma (and BM25), the manifest is not written yet
    os.kill(os.getpid(), signal.SIGKILL)

Manifest.apply = killed
backend = {"chroma_url": os.environ.get("KB_AGENT_CHROMA_URL", ""),
           "database_url": os.environ.get("KB_AGENT_DATABASE_URL", "")}
KnowledgeBase(sys.argv[1], embedder=HashingEmbedder(), **backend).ingest([sys.argv[2]])
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def kb_agent(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KB_AGENT_HOME": str(home), "KB_AGENT_EMBEDDER": "hashing"}
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=180, env=env
    )


def test_a_killed_ingest_leaves_no_chunk_that_search_serves_and_the_next_ingest_reconciles(
    tmp_path: Path, store_backend: Backend
) -> None:
    home = tmp_path / "home"
    write(tmp_path / "docs" / "keep.md", "The merger plan with ACME closes in March.")
    assert kb_agent("ingest", str(tmp_path / "docs"), home=home).returncode == 0
    paragraphs = "\n\n".join(
        f"Paragraph {n} of the orphan handbook about zebra migration." * 20 for n in range(30)
    )
    write(tmp_path / "docs" / "orphan.md", paragraphs)
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_INGEST, str(home), str(tmp_path / "docs")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=180,
    )
    assert killed.returncode == -signal.SIGKILL
    kb = KnowledgeBase(home, embedder=HashingEmbedder(), **store_backend.kwargs())
    ids = kb.index_ids()
    orphans = ids["chroma"] - ids["manifest"]
    assert orphans  # the kill left chunks the manifest does not know
    for mode in ("hybrid", "vector", "bm25"):  # search never serves them
        assert not {p["id"] for p in kb.search("zebra migration orphan handbook", mode=mode)} & orphans, mode

    shutil.move(tmp_path / "docs" / "orphan.md", tmp_path / "orphan.md")
    done = kb_agent("ingest", "--prune", str(tmp_path / "docs"), home=home)
    assert done.returncode == 0, done.stderr
    ids = kb.index_ids()
    assert ids["chroma"] == ids["bm25"] == ids["manifest"] == {"keep.md#0"}


def test_repair_command_reports_and_fixes_the_differences(tmp_path: Path, store_backend: Backend) -> None:
    home = tmp_path / "home"
    write(tmp_path / "docs" / "a.md", "The merger plan with ACME closes in March.")
    write(tmp_path / "docs" / "b.md", "Cafeteria lunch is served from noon.")
    assert kb_agent("ingest", str(tmp_path / "docs"), home=home).returncode == 0
    kb = KnowledgeBase(home, embedder=HashingEmbedder(), **store_backend.kwargs())
    kb.index.collection.add(
        ids=["stray.md#0"], documents=["stray"], embeddings=[kb.embedder.embed_query("stray")]
    )
    kb.index.collection.delete(ids=["b.md#0"])
    done = kb_agent("repair", "--json", home=home)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["stray_chunks"] == 1 and report["missing_chunks"] == 1 and report["forgotten"] == ["b.md"]
    ids = kb.index_ids()
    assert ids["chroma"] == ids["bm25"] == ids["manifest"] == {"a.md#0"}
    again = json.loads(kb_agent("repair", "--json", home=home).stdout)
    assert again["stray_chunks"] == again["missing_chunks"] == 0


def test_the_same_relative_path_from_another_root_is_refused_naming_both_roots(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(tmp_path / "docs2" / "leave.md", "Employees get ten days of annual leave.")
    write(tmp_path / "other" / "leave.md", "Contractors get no paid leave at all.")
    assert kb_agent("ingest", str(tmp_path / "docs2"), home=home).returncode == 0
    report = json.loads(kb_agent("ingest", "--json", str(tmp_path / "other"), home=home).stdout)
    assert report["updated"] == [] and report["added"] == []
    (skipped,) = report["skipped"]
    assert str(tmp_path / "docs2") in skipped["reason"] and str(tmp_path / "other") in skipped["reason"]
    kb = KnowledgeBase(home, embedder=HashingEmbedder())
    assert [p["id"] for p in kb.search("annual leave days")] == ["leave.md#0"]
    assert "ten days" in kb.search("annual leave days")[0]["text"]


def test_kill_9_at_random_points_of_ingests_leaves_nothing_searchable_and_nothing_orphaned(
    tmp_path: Path, store_backend: Backend
) -> None:
    """20 ingests killed at seeded-random moments; after each, search serves only manifest chunks, and
    the next ingest reconciles, so the three stores end equal to the folder's chunks."""
    import random
    import time

    rng = random.Random(1414)
    home, docs = tmp_path / "home", tmp_path / "docs"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KB_AGENT_HOME": str(home), "KB_AGENT_EMBEDDER": "hashing"}
    killed_inside, took = 0, None
    for round_ in range(20):
        for n in range(12):  # every round rewrites some files, so every ingest has work to do
            if rng.random() < 0.5:
                write(
                    docs / f"f{n}.md",
                    f"# File {n}\n\n" + f"Round {round_} notes about topic {n} and zebras. " * 60,
                )
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli", "ingest", str(docs)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if took is None:  # the first ingest runs to its end: how long one takes on this machine
            proc.wait(timeout=120)
            took = time.monotonic() - started
        else:  # later ones are killed at a random point of that span (they redo about half the files)
            time.sleep(rng.uniform(0.3, max(0.5, 0.8 * took)))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                killed_inside += 1
        proc.wait(timeout=60)
        kb = KnowledgeBase(home, embedder=HashingEmbedder(), **store_backend.kwargs())
        known = kb.index_ids()["manifest"]
        for mode in ("hybrid", "vector", "bm25"):
            served = {p["id"] for p in kb.search("notes about topic zebras", top_k=50, mode=mode)}
            assert served <= known, (round_, mode, served - known)
    assert killed_inside >= 5, "the kills should land inside ingests"
    assert kb_agent("ingest", "--prune", str(docs), home=home).returncode == 0
    ids = KnowledgeBase(home, embedder=HashingEmbedder(), **store_backend.kwargs()).index_ids()
    assert ids["chroma"] == ids["bm25"] == ids["manifest"]
    assert {cid.split("#")[0] for cid in ids["manifest"]} == {p.name for p in docs.iterdir()}
