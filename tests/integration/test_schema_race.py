"""Stores opened at the same instant on a fresh Postgres database all create their tables and indexes.

Two processes running ``CREATE TABLE/INDEX IF NOT EXISTS`` at once collide in Postgres's catalog
("duplicate key value violates unique constraint pg_class_relname_nsp_index"): replicas or commands
started together on a new database failed to open their stores.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stores.audit import AuditStore
from stores.feedback import FeedbackStore
from stores.tool_effects import ToolEffectLog
from tests.fixtures.serve import POSTGRES_URL, private_database

OPENERS: dict[str, Callable[[Path, str], Any]] = {
    "audit": lambda home, url: AuditStore(home, url),
    "feedback": lambda home, url: FeedbackStore(home, url),
    "tool effects": lambda home, url: ToolEffectLog(home, url),
}


@pytest.mark.parametrize("store", list(OPENERS))
def test_eight_openers_of_a_fresh_database_at_once_all_succeed(tmp_path: Path, store: str) -> None:
    if not POSTGRES_URL:
        pytest.skip("KB_TEST_POSTGRES_URL is not set (.ci/run starts Postgres and sets it)")
    for _round in range(3):
        with private_database() as url:
            start, errors, opened = threading.Barrier(8), [], []

            def open_one(start: threading.Barrier = start, errors: list = errors, opened: list = opened) -> None:
                start.wait()
                try:
                    opened.append(OPENERS[store](tmp_path, url))
                except Exception as exc:  # collected: the assertion shows every failure
                    errors.append(f"{type(exc).__name__}: {exc}")

            threads = [threading.Thread(target=open_one) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            for each in opened:
                each.close()
            assert errors == []
            assert len(opened) == 8
