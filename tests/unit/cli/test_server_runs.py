"""cli/server_runs.py: a run's end written again through a short Postgres outage (fake clock); one run per thread."""

from __future__ import annotations

import asyncio

import pytest

from cli import server_runs
from cli.server_runs import FIRST_DELAY, MAX_DELAY, patiently
from tests.fixtures.fake_time import FakeTime


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


def test_runs_of_one_thread_take_turns_and_other_threads_do_not_wait() -> None:
    locks, inside, most, order = server_runs.ThreadLocks(), {"t1": 0, "t2": 0}, {"t1": 0, "t2": 0}, []

    async def run(thread: str, run_id: str) -> None:
        async with locks.hold(thread, run_id):
            inside[thread] += 1
            most[thread] = max(most[thread], inside[thread])
            order.append(run_id)
            await asyncio.sleep(0)  # give every other run the chance to step in
            await asyncio.sleep(0)
            inside[thread] -= 1

    async def main() -> None:
        await asyncio.gather(*(run("t1", f"a{i}") for i in range(5)), *(run("t2", f"b{i}") for i in range(5)))

    asyncio.run(main())
    assert most == {"t1": 1, "t2": 1}  # never two runs of one thread at once
    assert order[:2] == ["a0", "b0"]  # the other thread's first run did not wait for the first thread
    assert locks._local == {} and locks._users == {}  # nothing left behind once nobody waits


def test_a_run_cancelled_while_waiting_takes_nothing_and_the_next_one_goes_on() -> None:
    locks, ran = server_runs.ThreadLocks(), []

    async def main() -> None:
        release = asyncio.Event()

        async def holder() -> None:
            async with locks.hold("t", "first"):
                await release.wait()
                ran.append("first")

        async def waiter(run_id: str) -> None:
            async with locks.hold("t", run_id):
                ran.append(run_id)

        first = asyncio.create_task(holder())
        await asyncio.sleep(0)
        doomed, last = asyncio.create_task(waiter("doomed")), asyncio.create_task(waiter("last"))
        await asyncio.sleep(0)
        doomed.cancel()  # a lease lost, a shutdown: while it waits for the thread
        release.set()
        await asyncio.gather(first, last)
        with pytest.raises(asyncio.CancelledError):
            await doomed

    asyncio.run(main())
    assert ran == ["first", "last"]
    assert locks._local == {} and locks._users == {}
