"""The faster runs.wait poll that replaces Aegra's fixed 2 s sleep (cli/server_wait.py), on a fake clock."""

from __future__ import annotations

import asyncio

import pytest

from cli.server_wait import DB_EVERY, FIRST_DELAY, MAX_DELAY, wait_until_done
from tests.fixtures.fake_time import FakeTime


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_returns_at_the_first_look_after_the_key_is_set() -> None:
    ft = FakeTime()

    async def key_is_set() -> bool:
        return ft.t >= 0.3  # the run ended 0.3 s in

    async def never() -> bool:
        return False

    run(
        wait_until_done(
            "r", timeout=300, key_is_set=key_is_set, run_is_terminal=never, clock=ft.clock, sleep=ft.sleep
        )
    )
    assert ft.sleeps[0] == pytest.approx(FIRST_DELAY)
    assert max(ft.sleeps) <= MAX_DELAY
    assert ft.t < 0.3 + MAX_DELAY + 1e-9  # Aegra's loop would have answered at 2.0 s


def test_the_postgres_row_ends_the_wait_when_the_key_is_lost_or_redis_fails() -> None:
    ft = FakeTime()
    db_checks: list[float] = []

    async def redis_down() -> bool:
        raise ConnectionError("redis away")

    async def terminal() -> bool:
        db_checks.append(ft.t)
        return len(db_checks) == 2

    run(
        wait_until_done(
            "r", timeout=300, key_is_set=redis_down, run_is_terminal=terminal, clock=ft.clock, sleep=ft.sleep
        )
    )
    assert len(db_checks) == 2
    assert db_checks[0] >= DB_EVERY and db_checks[1] - db_checks[0] >= DB_EVERY  # the row is read rarely


def test_times_out_at_the_deadline() -> None:
    ft = FakeTime()

    async def never() -> bool:
        return False

    with pytest.raises(TimeoutError, match="r1"):
        run(
            wait_until_done(
                "r1", timeout=3.0, key_is_set=never, run_is_terminal=never, clock=ft.clock, sleep=ft.sleep
            )
        )
    assert ft.t == pytest.approx(3.0)

