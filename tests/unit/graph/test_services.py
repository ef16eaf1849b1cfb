"""The composition root: one set of services per deployment, one pool per database, all closed together."""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path

import pytest

from graph.services import Root, RunMemory
from nodes.settings import Settings


def test_runs_of_one_deployment_share_its_services_whatever_their_caller_or_budget(tmp_path: Path) -> None:
    root = Root()
    base = Settings(data_dir=str(tmp_path / "a"))
    same = root.services(base)
    assert root.services(Settings(data_dir=str(tmp_path / "a"), user_id="bob", max_rounds=2, roles="admin")) is same
    assert root.services(Settings(data_dir=str(tmp_path / "a" / ".." / "a"))) is same  # one data dir, spelled twice
    other = root.services(Settings(data_dir=str(tmp_path / "b")))
    assert other is not same
    assert same.feedback() is same.feedback() and same.tool_effects() is same.tool_effects()
    root.close()


def test_closing_the_root_closes_every_store_it_opened(tmp_path: Path) -> None:
    root = Root()
    services = root.services(Settings(data_dir=str(tmp_path)))
    feedback, effects = services.feedback(), services.tool_effects()
    memory = services.memory()
    root.close()
    for store in (feedback, effects, memory.outbox):
        with pytest.raises(sqlite3.ProgrammingError):  # a closed SQLite connection
            store._db.execute("SELECT 1")
    # the next use opens a fresh set rather than handing out closed stores
    assert root.services(Settings(data_dir=str(tmp_path))).feedback() is not feedback
    root.close()


def test_a_run_without_long_term_memory_gets_none(tmp_path: Path) -> None:
    root = Root()
    memory = RunMemory(root)
    assert memory.for_run(Settings(data_dir=str(tmp_path), long_term_memory=False)) is None
    root.close()


def test_nothing_ingested_means_no_knowledge_base_until_asked_to_create_one(tmp_path: Path) -> None:
    root = Root()
    services = root.services(Settings(data_dir=str(tmp_path), embedder="hashing"))
    assert services.knowledge() is None
    assert services.knowledge(create=True) is services.knowledge()
    root.close()


@pytest.mark.postgres
def test_every_store_on_one_database_borrows_from_one_pool(tmp_path: Path) -> None:
    url = os.environ.get("KB_TEST_POSTGRES_URL", "")
    if not url:
        pytest.skip("KB_TEST_POSTGRES_URL is not set (.ci/run starts Postgres and sets it)")
    root = Root()
    settings = Settings(data_dir=str(tmp_path), database_url=url, checkpoint_url=url)
    services = root.services(settings)
    pool = root.pool(url)
    feedback, effects, memory = services.feedback(), services.tool_effects(), services.memory()
    assert feedback._db.pool is pool and effects._db.pool is pool and memory.outbox._db.pool is pool
    # a second deployment on the same database shares the pool too
    other = root.services(Settings(data_dir=str(tmp_path / "other"), database_url=url))
    assert other.feedback()._db.pool is pool
    feedback.add(user_id=f"u-{uuid.uuid4().hex[:8]}", thread_id="t", question="q", answer="a", rating="good")
    root.close()
    assert pool.closed


def test_a_run_choosing_another_model_shares_the_knowledge_base_and_extracts_with_its_model(tmp_path: Path) -> None:
    root = Root()
    deployment = Settings(data_dir=str(tmp_path), embedder="hashing")
    offline_run = Settings(data_dir=str(tmp_path), embedder="hashing", model="offline", base_url="http://127.0.0.1:9/v1")
    assert root.services(offline_run) is root.services(deployment)  # one knowledge base per directory
    services = root.services(deployment)
    assert services.knowledge(create=True) is root.services(offline_run).knowledge()
    assert services.memory(offline_run) is services.memory(offline_run)
    assert services.memory(offline_run).outbox is services.memory(deployment).outbox  # one durable outbox
    root.close()


def test_no_settings_opens_nothing() -> None:
    with pytest.raises(TypeError, match="settings are needed"):
        Root().services(None)  # type: ignore[arg-type]
