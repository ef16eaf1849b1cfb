"""Several processes on one knowledge base: what one writes, the others see at their next query.

Processes are real ``kb-agent`` subprocesses, and this test process keeps a knowledge base open the way
``langgraph dev`` or a replica does. Every test runs on both backends (``store_backend``): embedded,
where the processes share KB_AGENT_HOME, and shared, where they share Postgres and a Chroma server and
each has its own home.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stores.embeddings import HashingEmbedder
from stores.knowledge.knowledge_base import KnowledgeBase
from tests.integration.conftest import Backend

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


def started_in(home_dirs: tuple[Path, Path], env: dict[str, str], *args: str) -> list[subprocess.Popen[str]]:
    """The real CLI started at once in each data dir (two processes racing for one knowledge base)."""
    return [
        subprocess.Popen(
            [sys.executable, "-m", "cli", *args],
            cwd=ROOT,
            env={**env, "KB_AGENT_HOME": str(home)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for home in home_dirs
    ]


def first_line(proc: subprocess.Popen[str], seconds: float) -> str:
    """The next line of ``proc``'s stderr, or "" when none comes within ``seconds``."""
    import selectors

    assert proc.stderr is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stderr, selectors.EVENT_READ)
        return proc.stderr.readline() if selector.select(seconds) else ""


def retrievers(kb: KnowledgeBase, query: str) -> dict[str, list[str]]:
    """chunk id -> the retrievers that found it, for a hybrid query."""
    return {p["id"]: sorted(p["retrievers"]) for p in kb.search(query, top_k=10)}


def found_first_by_both(kb: KnowledgeBase, query: str) -> str:
    """The best passage for ``query``, checked to be found by both retrievers (the hashing embedder's
    buckets collide, so another document may come second on the vector side alone)."""
    found = retrievers(kb, query)
    first = next(iter(found), "")
    assert found.get(first) == ["bm25", "vector"], found
    return first


def homes(tmp_path: Path, backend: Backend) -> tuple[Path, Path]:
    """A's and B's data dirs: one for both when embedded (one machine), their own when shared (replicas)."""
    return (tmp_path / "a", tmp_path / "b") if backend.shared else (tmp_path / "home", tmp_path / "home")


def test_what_one_process_ingests_or_prunes_every_other_sees_in_both_retrievers_without_restart(
    tmp_path: Path, store_backend: Backend
) -> None:
    home_a, home_b = homes(tmp_path, store_backend)
    a = {"KB_AGENT_HOME": str(home_a), "KB_AGENT_EMBEDDER": "hashing"}
    b = {"KB_AGENT_HOME": str(home_b), "KB_AGENT_EMBEDDER": "hashing"}
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

    # B stays open and searching (a replica, or `langgraph dev`); A writes; B's next query sees it
    kb = KnowledgeBase(home_b, embedder=HashingEmbedder(), **store_backend.kwargs())
    assert found_first_by_both(kb, "annual leave") == "leave.md#0"
    write(tmp_path / "more" / "forecast.md", "Quarterly revenue forecast for EMEA in version 5.3.")
    done = kb_agent("ingest", str(tmp_path / "more"), env=a)
    assert done.returncode == 0, done.stderr
    assert found_first_by_both(kb, "quarterly revenue forecast EMEA") == "forecast.md#0"
    assert kb.search("quarterly revenue forecast", mode="vector")[0]["id"] == "forecast.md#0"

    (tmp_path / "docs" / "leave.md").unlink()
    write(tmp_path / "docs" / "lunch.md", "Cafeteria lunch is served from noon.")
    done = kb_agent("ingest", "--prune", str(tmp_path / "docs"), env=a)  # prunes leave.md, adds lunch.md
    assert done.returncode == 0, done.stderr
    for mode in ("hybrid", "vector", "bm25"):
        assert "leave.md#0" not in {p["id"] for p in kb.search("annual leave days", mode=mode)}, mode
    assert found_first_by_both(kb, "cafeteria lunch noon") == "lunch.md#0"
    assert kb.stats()["documents"] == 3
    assert json.loads(kb_agent("stats", "--json", env=b).stdout)["documents"] == 3


def test_ingests_of_one_folder_at_once_wait_for_each_other_saying_so_and_end_consistent(
    tmp_path: Path, store_backend: Backend
) -> None:
    for n in range(30):
        write(tmp_path / "docs" / f"doc{n}.md", f"Document {n} talks about topic number {n} at length.")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KB_AGENT_EMBEDDER": "hashing"}
    home_a, home_b = homes(tmp_path, store_backend)
    kb = KnowledgeBase(
        tmp_path / "c" if store_backend.shared else home_a,
        embedder=HashingEmbedder(),
        **store_backend.kwargs(),
    )
    with kb.manifest.lock():  # a third writer holds the knowledge base while both ingests start
        procs = started_in((home_a, home_b), env, "ingest", "--json", str(tmp_path / "docs"))
        for proc in procs:
            line = first_line(proc, 120)
            assert "another process is writing this knowledge base" in line and "waiting" in line, line
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    assert sum(len(r["added"]) for r in reports) == 30  # one ingested, the other waited and found it done
    assert sum(r["chunks_written"] for r in reports) == 30
    assert sorted(len(r["unchanged"]) for r in reports) == [0, 30]
    ids = kb.index_ids()
    assert ids["chroma"] == ids["bm25"] == ids["manifest"] and len(ids["manifest"]) == 30


def test_an_unreachable_chroma_url_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    env = {
        "KB_AGENT_HOME": str(tmp_path),
        "KB_AGENT_CHROMA_URL": "http://127.0.0.1:1",
        "KB_AGENT_EMBEDDER": "hashing",
    }
    for args in (("stats",), ("search", "anything"), ("ingest", str(tmp_path))):
        done = kb_agent(*args, env=env)
        assert done.returncode == 1, (args, done.stderr)
        assert "KB_AGENT_CHROMA_URL" in done.stderr and len(done.stderr.strip().splitlines()) == 1, (
            done.stderr
        )


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


@pytest.mark.postgres
def test_the_database_going_away_mid_ingest_fails_in_one_line_and_a_rerun_leaves_nothing_half_indexed(
    tmp_path: Path, shared_backend: dict[str, str]
) -> None:
    import psycopg

    for n in range(3):
        write(tmp_path / "docs" / f"doc{n}.md", f"Document {n} is about the zanzibar project, part {n}.")
    env = {**shared_backend, "KB_AGENT_HOME": str(tmp_path / "a"), "KB_AGENT_EMBEDDER": "hashing"}
    go = tmp_path / "go"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.paused_ingest_cli", "ingest", str(tmp_path / "docs")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env, "KB_TEST_INGEST_GO": str(go)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert first_line(proc, 120).strip() == "embedding"  # inside the ingest
    with psycopg.connect(shared_backend["KB_AGENT_DATABASE_URL"], autocommit=True) as conn:
        killed = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert killed and killed[0] >= 1  # the ingest's lock session, and its manifest connection
    go.touch()
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err
    assert "KB_AGENT_DATABASE_URL" in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err

    kb = KnowledgeBase(
        tmp_path / "b", embedder=HashingEmbedder(), **Backend("shared", shared_backend).kwargs()
    )
    assert kb.search("zanzibar project") == []  # nothing of the failed ingest is served
    done = kb_agent("ingest", "--json", str(tmp_path / "docs"), env=env)  # the re-run
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["added"]) == ["doc0.md", "doc1.md", "doc2.md"]
    ids = kb.index_ids()
    assert ids["chroma"] == ids["bm25"] == ids["manifest"] == {"doc0.md#0", "doc1.md#0", "doc2.md#0"}
    assert retrievers(kb, "zanzibar project part 1")["doc1.md#0"] == ["bm25", "vector"]


def test_a_reopened_replica_fetches_only_what_changed_and_rebuilds_a_broken_local_copy(
    tmp_path: Path, store_backend: Backend
) -> None:
    if not store_backend.shared:
        pytest.skip("only a replica (shared mode) builds its keyword index from another store's texts")

    def open_kb(home: str) -> KnowledgeBase:
        return KnowledgeBase(tmp_path / home, embedder=HashingEmbedder(), **store_backend.kwargs())

    docs = tmp_path / "docs"
    write(docs / "release.md", "Version 5.2 ships the new export wizard.")
    write(docs / "leave.md", "Employees get ten days of annual leave.")
    write(docs / "travel.md", "Travel expenses are reimbursed within a month.")
    a = open_kb("a")
    a.ingest(docs)
    assert open_kb("b").index.texts_fetched == 3  # the first open reads everything
    b = open_kb("b")  # a restart: the local copy is current
    assert b.index.texts_fetched == 0
    assert retrievers(b, "annual leave") == {"leave.md#0": ["bm25", "vector"]}

    # while B is down, A changes one document, prunes one, adds one and regroups one
    write(docs / "release.md", "Version 5.3 ships the new import wizard.")
    (docs / "travel.md").unlink()
    write(docs / "lunch.md", "Cafeteria lunch is served from noon.")
    a.ingest(docs, prune=True)
    a.ingest(docs / "leave.md", groups=["hr"])
    b = open_kb("b")
    assert b.index.texts_fetched == 3  # release, lunch and leave (its groups): not the unchanged rest
    assert b.search("travel expenses reimbursed", mode="bm25") == []
    assert b.search("annual leave", mode="bm25") == []  # public no longer sees it
    assert [p["id"] for p in b.search("annual leave", mode="bm25", groups=["hr"])] == ["leave.md#0"]
    assert retrievers(b, "import wizard 5.3") == {"release.md#0": ["bm25", "vector"]}

    # B stays open; A deletes and adds: B's next query fetches the one new text
    write(docs / "parking.md", "Parking permits are issued by facilities.")
    a.ingest(docs / "parking.md")
    a.delete_document("lunch.md")
    assert retrievers(b, "parking permits facilities") == {"parking.md#0": ["bm25", "vector"]}
    assert b.index.texts_fetched == 4
    assert "lunch.md#0" not in {p["id"] for p in b.search("cafeteria lunch noon", mode="bm25")}

    # a damaged local copy is rebuilt from the shared stores, with no error
    local = tmp_path / "b" / "knowledge" / "bm25" / "bm25.sqlite3"
    for extra in ("-wal", "-shm"):
        Path(f"{local}{extra}").unlink(missing_ok=True)
    local.write_bytes(b"not a database" * 100)
    b = open_kb("b")
    assert b.index.texts_fetched == 3
    assert retrievers(b, "parking permits facilities") == {"parking.md#0": ["bm25", "vector"]}
    assert b.index_ids()["bm25"] == b.index_ids()["manifest"]
    local.write_bytes(b"not a database" * 100)
    KnowledgeBase.drop(tmp_path / "b", **store_backend.kwargs())  # the first step of a re-index: no error
    assert open_kb("b").index_ids() == {"chroma": set(), "bm25": set(), "manifest": set()}
