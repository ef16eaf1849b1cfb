"""Several processes on one knowledge base (issue 11): what one writes, the others see at their next query.

Process A is this test process (it keeps the knowledge base open the way ``langgraph dev`` does); process B
is a real ``kb-agent`` subprocess. Embedded mode shares KB_AGENT_HOME; shared mode shares Postgres and a
Chroma server and gives each process its own home.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stores.embeddings import HashingEmbedder
from stores.knowledge import KnowledgeBase

ROOT = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def kb_agent(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a new process."""
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )


def retrievers(kb: KnowledgeBase, query: str) -> dict[str, list[str]]:
    """chunk id -> the retrievers that found it, for a hybrid query."""
    return {p["id"]: sorted(p["retrievers"]) for p in kb.search(query, top_k=10)}


def test_embedded_another_process_ingest_and_prune_are_seen_by_both_retrievers_without_restart(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    env = {"KB_AGENT_HOME": str(home), "KB_AGENT_EMBEDDER": "hashing"}
    write(tmp_path / "docs" / "a.md", "The merger plan with ACME closes in March.")
    assert kb_agent("ingest", str(tmp_path / "docs"), env=env).returncode == 0
    kb = KnowledgeBase(home, embedder=HashingEmbedder())  # A: open, and searching
    assert retrievers(kb, "merger plan ACME") == {"a.md#0": ["bm25", "vector"]}

    write(tmp_path / "more" / "b.md", "Quarterly revenue forecast for EMEA in version 5.2.")
    done = kb_agent("ingest", str(tmp_path / "more"), env=env)  # B
    assert done.returncode == 0, done.stderr
    assert retrievers(kb, "quarterly revenue forecast EMEA") == {"b.md#0": ["bm25", "vector"]}
    assert [p["id"] for p in kb.search("revenue forecast", mode="vector")] == ["b.md#0"]

    (tmp_path / "more" / "b.md").unlink()
    write(tmp_path / "more" / "c.md", "Cafeteria lunch is served from noon.")
    done = kb_agent("ingest", "--prune", str(tmp_path / "more"), env=env)  # B prunes b.md, adds c.md
    assert done.returncode == 0, done.stderr
    for mode in ("hybrid", "vector", "bm25"):
        found = {p["id"] for p in kb.search("quarterly revenue forecast EMEA cafeteria lunch", mode=mode)}
        assert "b.md#0" not in found, mode
    assert retrievers(kb, "cafeteria lunch noon") == {"c.md#0": ["bm25", "vector"]}
    assert kb.stats()["documents"] == 2


@pytest.mark.postgres
def test_shared_mode_one_process_ingests_another_with_its_own_home_sees_it_everywhere(
    tmp_path: Path, shared_backend: dict[str, str]
) -> None:
    a = {**shared_backend, "KB_AGENT_HOME": str(tmp_path / "a"), "KB_AGENT_EMBEDDER": "hashing"}
    b = {**shared_backend, "KB_AGENT_HOME": str(tmp_path / "b"), "KB_AGENT_EMBEDDER": "hashing"}
    write(tmp_path / "docs" / "release.md", "Version 5.2 ships the new export wizard.")
    write(tmp_path / "docs" / "leave.md", "Employees get ten days of annual leave.")
    done = kb_agent("ingest", str(tmp_path / "docs"), env=a)
    assert done.returncode == 0, done.stderr
    stats = kb_agent("stats", "--json", env=b)
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["documents"] == 2
    found = json.loads(kb_agent("search", "version 5.2 export wizard", "--json", env=b).stdout)
    assert found[0]["id"] == "release.md#0" and sorted(found[0]["retrievers"]) == ["bm25", "vector"]
    again = json.loads(kb_agent("ingest", "--json", str(tmp_path / "docs"), env=b).stdout)
    assert again["chunks_written"] == 0 and sorted(again["unchanged"]) == ["leave.md", "release.md"]

    # B stays open (a replica); A prunes a document; B's next query never returns it
    os.environ.update(shared_backend)
    try:
        kb = KnowledgeBase(tmp_path / "b", embedder=HashingEmbedder(), **_shared(shared_backend))
        assert retrievers(kb, "annual leave") == {"leave.md#0": ["bm25", "vector"]}
        (tmp_path / "docs" / "leave.md").unlink()
        write(tmp_path / "docs" / "lunch.md", "Cafeteria lunch is served from noon.")
        assert kb_agent("ingest", "--prune", str(tmp_path / "docs"), env=a).returncode == 0
        for mode in ("hybrid", "vector", "bm25"):
            assert "leave.md#0" not in {p["id"] for p in kb.search("annual leave days", mode=mode)}, mode
        assert retrievers(kb, "cafeteria lunch") == {"lunch.md#0": ["bm25", "vector"]}
        assert kb.stats()["documents"] == 2
    finally:
        for name in shared_backend:
            os.environ.pop(name, None)
    stats = json.loads(kb_agent("stats", "--json", env=b).stdout)
    assert stats["documents"] == 2


def _shared(backend: dict[str, str]) -> dict[str, str]:
    return {"chroma_url": backend["KB_AGENT_CHROMA_URL"], "database_url": backend["KB_AGENT_DATABASE_URL"]}


@pytest.mark.postgres
def test_shared_mode_two_ingests_of_one_folder_at_once_end_consistent(
    tmp_path: Path, shared_backend: dict[str, str]
) -> None:
    for n in range(30):
        write(tmp_path / "docs" / f"doc{n}.md", f"Document {n} talks about topic number {n} at length.")
    env = {**os.environ, "PYTHONPATH": str(ROOT), **shared_backend, "KB_AGENT_EMBEDDER": "hashing"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "cli", "ingest", "--json", str(tmp_path / "docs")],
            cwd=ROOT,
            env={**env, "KB_AGENT_HOME": str(tmp_path / name)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    assert sum(len(r["added"]) for r in reports) == 30  # one ingested, the other waited and found it done
    assert sum(r["chunks_written"] for r in reports) == 30
    kb = KnowledgeBase(tmp_path / "c", embedder=HashingEmbedder(), **_shared(shared_backend))
    ids = kb.index_ids()
    assert ids["chroma"] == ids["bm25"] == ids["manifest"] and len(ids["manifest"]) == 30


def test_an_unreachable_chroma_url_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    env = {"KB_AGENT_HOME": str(tmp_path), "KB_AGENT_CHROMA_URL": "http://127.0.0.1:1", "KB_AGENT_EMBEDDER": "hashing"}
    for args in (("stats",), ("search", "anything"), ("ingest", str(tmp_path))):
        done = kb_agent(*args, env=env)
        assert done.returncode == 1, (args, done.stderr)
        assert "KB_AGENT_CHROMA_URL" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.postgres
def test_an_unreachable_postgres_url_is_one_line_naming_the_setting(
    tmp_path: Path, shared_backend: dict[str, str]
) -> None:
    env = {
        **shared_backend,
        "KB_AGENT_HOME": str(tmp_path),
        "KB_AGENT_DATABASE_URL": "postgresql://kb:secret@127.0.0.1:1/kb",
        "KB_AGENT_EMBEDDER": "hashing",
    }
    for args in (("stats",), ("ingest", str(tmp_path))):
        done = kb_agent(*args, env=env)
        assert done.returncode == 1, (args, done.stderr)
        line = done.stderr.strip()
        assert "KB_AGENT_DATABASE_URL" in line and len(line.splitlines()) == 1, line
        assert "secret" not in line
