"""A run's end written again through a short Postgres outage (cli/server_runs.py), on a fake clock."""

from __future__ import annotations

import asyncio

import pytest

from cli import server_runs
from cli.server_runs import FIRST_DELAY, MAX_DELAY, patiently


class FakeTime:
    """A clock that only moves when the retry sleeps."""

    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


class DatabaseAway(OSError):
    """What a write raises while Postgres restarts."""


def test_the_end_is_written_once_postgres_is_back() -> None:
    ft, attempts = FakeTime(), []

    async def finalize() -> bool:
        attempts.append(ft.t)
        if ft.t < 4.0:  # Postgres is down for the first 4 s
            raise DatabaseAway("connection refused")
        return True

    assert asyncio.run(patiently(finalize, what="end", clock=ft.clock, sleep=ft.sleep)) is True
    assert attempts[-1] >= 4.0 and len(attempts) > 2
    assert ft.sleeps[0] == FIRST_DELAY and max(ft.sleeps) <= MAX_DELAY  # backoff, capped
    assert ft.sleeps == sorted(ft.sleeps)


def test_a_first_success_is_not_retried() -> None:
    ft, calls = FakeTime(), []

    async def finalize() -> bool:
        calls.append(1)
        return False  # "already terminal" is an answer, not an error

    assert asyncio.run(patiently(finalize, what="end", clock=ft.clock, sleep=ft.sleep)) is False
    assert calls == [1] and ft.sleeps == []


def test_the_last_error_is_raised_when_patience_runs_out() -> None:
    ft = FakeTime()

    async def finalize() -> bool:
        raise DatabaseAway(f"still down at {ft.t:.2f}")

    with pytest.raises(DatabaseAway, match="still down"):
        asyncio.run(patiently(finalize, what="end", patience=10.0, clock=ft.clock, sleep=ft.sleep))
    assert sum(ft.sleeps) == pytest.approx(10.0)  # it waited its whole patience, no more


def test_a_cancellation_is_never_retried() -> None:
    ft, calls = FakeTime(), []

    async def finalize() -> bool:
        calls.append(1)
        raise asyncio.CancelledError  # the heartbeat saw the lease taken: stop at once

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(patiently(finalize, what="end", clock=ft.clock, sleep=ft.sleep))
    assert calls == [1]


def test_install_without_aegra_changes_nothing() -> None:
    try:
        import aegra_api  # noqa: F401
    except ImportError:
        assert server_runs.install() is False
    else:
        pytest.skip("aegra_api is installed here: the live server tests cover the patched executor")
