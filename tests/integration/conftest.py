"""Fixtures shared by the integration tests: every checkpointer backend, and a small real knowledge base."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from graph.open_stores import open_knowledge_base
from graph.settings import Settings
from stores.checkpoint import open_checkpointer

POSTGRES_URL = os.environ.get("KB_TEST_POSTGRES_URL", "")
RAG_DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "rag"


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def checkpointer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCheckpointSaver]:
    """The same test against memory, SQLite and Postgres (skipped without KB_TEST_POSTGRES_URL)."""
    if request.param == "memory":
        yield InMemorySaver()
    elif request.param == "sqlite":
        with open_checkpointer(tmp_path) as saver:
            yield saver
    else:
        if not POSTGRES_URL:
            pytest.skip("KB_TEST_POSTGRES_URL is not set (.ci/run starts Postgres and sets it)")
        with open_checkpointer(tmp_path, POSTGRES_URL) as saver:
            yield saver


@pytest.fixture
def kb_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data dir whose knowledge base holds tests/fixtures/rag (hashing embedder: no model to load)."""
    home = tmp_path / "home"
    monkeypatch.setenv("KB_AGENT_HOME", str(home))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    docs = tmp_path / "docs"
    shutil.copytree(RAG_DOCS, docs)
    report = open_knowledge_base(Settings(), create=True).ingest([docs])
    assert sorted(report.added) == ["agents.md", "rag.md", "salary.md"]
    return home


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``chroma run`` on loopback for the session (skipped when the binary is missing)."""
    import subprocess
    import sys
    import time
    import urllib.request

    binary = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    if not Path(binary).exists():
        pytest.skip("the chroma CLI is not installed: the Chroma-server tests need `chroma run`")
    port = _free_port()
    path = tmp_path_factory.mktemp("chroma-server")
    proc = subprocess.Popen(
        [binary, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.skip(f"chroma run exited with {proc.returncode}")
                time.sleep(0.1)
        else:
            pytest.skip("chroma run did not answer within 30 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def shared_backend(chroma_server: str) -> Iterator[dict[str, str]]:
    """Settings for the shared mode (Postgres + the Chroma server), emptied before each test."""
    if not POSTGRES_URL:
        pytest.skip("KB_TEST_POSTGRES_URL is not set (.ci/run starts Postgres and sets it)")
    import chromadb
    import psycopg

    def empty() -> None:
        client = chromadb.HttpClient(host="127.0.0.1", port=int(chroma_server.rsplit(":", 1)[1]))
        for collection in client.list_collections():
            client.delete_collection(collection.name)
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            for table in ("kb_knowledge_files", "kb_knowledge_meta", "memory_outbox"):
                conn.execute(f"DROP TABLE IF EXISTS {table}")

    empty()
    yield {"KB_AGENT_DATABASE_URL": POSTGRES_URL, "KB_AGENT_CHROMA_URL": chroma_server}
    empty()
