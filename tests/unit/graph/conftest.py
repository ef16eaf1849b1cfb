"""What every graph/ unit test shares."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def fresh_process_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's edges and handlers count runs afresh (a server process keeps one count per user)."""
    monkeypatch.setattr("graph.limits._PROCESS", None)
