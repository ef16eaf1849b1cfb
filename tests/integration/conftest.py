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
