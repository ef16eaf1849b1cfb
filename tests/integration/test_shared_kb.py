"""Several processes on one knowledge base (issue 11): what one writes, the others see at their next query.

Process A is this test process (it keeps the knowledge base open the way ``langgraph dev`` does); process B
is a real ``kb-agent`` subprocess. Embedded mode shares KB_AGENT_HOME; shared mode shares Postgres and a
Chroma server and gives each process its own home.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
