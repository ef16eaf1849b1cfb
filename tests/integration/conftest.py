"""Fixtures shared by the integration tests: every checkpointer backend, and a small real knowledge base."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from graph.services import open_knowledge_base
from nodes.settings import Settings
from stores.checkpoint import open_checkpointer
from tests.fixtures.browser import browser  # noqa: F401  (the chat page tests' browser, a fixture)

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
def kb_home(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data dir whose knowledge base holds tests/fixtures/rag (hashing embedder: no model to load); on
    both backends when the test also uses ``store_backend`` (on the embedded one otherwise)."""
    if "store_backend" in request.fixturenames:
        request.getfixturevalue("store_backend")  # its settings first: the ingest below goes there
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


@pytest.fixture(scope="session")
def shared_database() -> Iterator[str]:
    """A Postgres database of this session's own (created from KB_TEST_POSTGRES_URL, dropped at the end):
    the shared-mode tables are emptied between tests, so other test runs on the same server must not see them."""
    if not POSTGRES_URL:
        pytest.skip("KB_TEST_POSTGRES_URL is not set (.ci/run starts Postgres and sets it)")
    import psycopg

    name = f"kbagent_shared_{os.getpid()}"
    try:
        with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"CREATE DATABASE {name}")
    except psycopg.Error as exc:
        pytest.skip(f"cannot create a test database on KB_TEST_POSTGRES_URL: {exc}")
    url = urlunsplit(urlsplit(POSTGRES_URL)._replace(path=f"/{name}"))
    try:
        yield url
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def shared_backend(chroma_server: str, shared_database: str) -> Iterator[dict[str, str]]:
    """Settings for the shared mode (Postgres + the Chroma server), emptied before and after each test."""
    import chromadb
    import psycopg

    def empty() -> None:
        client = chromadb.HttpClient(host="127.0.0.1", port=int(chroma_server.rsplit(":", 1)[1]))
        for collection in client.list_collections():
            client.delete_collection(collection.name)
        with psycopg.connect(shared_database, autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")

    empty()
    yield {"KB_AGENT_DATABASE_URL": shared_database, "KB_AGENT_CHROMA_URL": chroma_server}
    empty()


@dataclass(frozen=True)
class Backend:
    """Where a test's knowledge base and memories live: ``embedded`` (SQLite + Chroma on disk under each
    process's data dir) or ``shared`` (Postgres + a Chroma server, so processes need not share a data dir)."""

    name: str
    env: dict[str, str]

    @property
    def shared(self) -> bool:
        return self.name == "shared"

    def kwargs(self) -> dict[str, str]:
        """The store constructors' arguments: ``KnowledgeBase(home, embedder=..., **backend.kwargs())``."""
        return {
            "chroma_url": self.env.get("KB_AGENT_CHROMA_URL", ""),
            "database_url": self.env.get("KB_AGENT_DATABASE_URL", ""),
        }


@pytest.fixture(params=["embedded", pytest.param("shared", marks=pytest.mark.postgres)])
def store_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    """The same test on both storage backends. Its settings are put in this process's
    environment, so ``Settings()`` and every child process started with ``os.environ`` use them too.
    The shared variant skips when Postgres (KB_TEST_POSTGRES_URL) or the ``chroma`` CLI is missing."""
    env: dict[str, str] = request.getfixturevalue("shared_backend") if request.param == "shared" else {}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Backend(request.param, env)
