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


def _checkpoint(saver: object, thread_id: str) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})  # type: ignore[attr-defined]


def test_the_checkpointer_and_its_neighbours_are_opened_once_per_deployment(tmp_path: Path) -> None:
    root = Root()
    services = root.services(Settings(data_dir=str(tmp_path)))
    saver = services.checkpointer()
    assert services.checkpointer() is saver and services.threads() is services.threads()
    assert root.services(Settings(data_dir=str(tmp_path), user_id="bob")).checkpointer() is saver
    _checkpoint(saver, "t1")
    assert saver.get_tuple({"configurable": {"thread_id": "t1"}}) is not None
    root.close()
    with pytest.raises(sqlite3.ProgrammingError):  # closing the root closed its connection
        _checkpoint(saver, "t2")
    reopened = root.services(Settings(data_dir=str(tmp_path))).checkpointer()
    assert reopened is not saver and reopened.get_tuple({"configurable": {"thread_id": "t1"}}) is not None
    root.close()


@pytest.mark.postgres
def test_a_postgres_checkpointer_shares_the_pool_and_survives_dropped_connections(tmp_path: Path) -> None:
    url = os.environ.get("KB_TEST_POSTGRES_URL", "")
    if not url:
        pytest.skip("KB_TEST_POSTGRES_URL is not set (.ci/run starts Postgres and sets it)")
    import psycopg

    root = Root()
    services = root.services(Settings(data_dir=str(tmp_path), database_url=url, checkpoint_url=url))
    saver = services.checkpointer()
    assert saver.conn is root.pool(url) and services.threads()._db.pool is root.pool(url)
    thread_id = f"t-{uuid.uuid4().hex[:8]}"
    _checkpoint(saver, thread_id)
    pool = root.pool(url)
    with pool.connection() as conn:  # the idle connection the next operation would borrow
        pid = conn.info.backend_pid
    with psycopg.connect(url, autocommit=True) as admin:  # as a database restart does to it
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    _checkpoint(saver, thread_id)  # a checked connection from the pool, not the dead one
    assert saver.get_tuple({"configurable": {"thread_id": thread_id}}) is not None
    root.close()
