"""The shared done-key poll (cli/server_done_keys.py): one Redis round trip per tick for all waiters."""

from __future__ import annotations

import asyncio
from typing import Any

from cli.server_done_keys import DoneKeys


class FakeRedis:
    """Counts round trips (pipelines) and commands; ``present`` holds the keys that exist."""

    def __init__(self) -> None:
        self.present: set[str] = set()
        self.round_trips = 0
        self.commands = 0
        self.down = False

    def pipeline(self, transaction: bool = True) -> FakePipeline:
        assert transaction is False
        return FakePipeline(self)


class FakePipeline:
    def __init__(self, redis: FakeRedis) -> None:
        self.redis = redis
        self.keys: list[str] = []

    async def __aenter__(self) -> FakePipeline:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        return None

    def exists(self, key: str) -> FakePipeline:
        self.keys.append(key)
        return self

    async def execute(self) -> list[int]:
        self.redis.round_trips += 1
        self.redis.commands += len(self.keys)
        if self.redis.down:
            raise ConnectionError("redis away")
        return [int(k in self.redis.present) for k in self.keys]


def test_fifty_waiters_share_one_round_trip_per_tick() -> None:
    redis = FakeRedis()

    async def scenario() -> None:
        keys = DoneKeys(lambda: redis, tick=0.01)

        async def waiter(i: int) -> None:
            with keys.watch(f"done:{i}") as done:
                await done.wait()

        tasks = [asyncio.create_task(waiter(i)) for i in range(50)]
        while redis.round_trips < 3:  # a few ticks, nothing done yet
            await asyncio.sleep(0.005)
        assert redis.commands == 50 * redis.round_trips  # one round trip per tick, not one per waiter
        assert not any(t.done() for t in tasks)
        redis.present.update(f"done:{i}" for i in range(50))
        await asyncio.wait_for(asyncio.gather(*tasks), 5.0)
        assert keys._task is not None
        await asyncio.wait_for(keys._task, 5.0)  # nobody waits any more: the poll ends

    asyncio.run(scenario())


def test_only_the_finished_run_wakes_and_shared_keys_stay_watched() -> None:
    redis = FakeRedis()

    async def scenario() -> None:
        keys = DoneKeys(lambda: redis, tick=0.01)
        with keys.watch("done:a") as a, keys.watch("done:b") as b:
            with keys.watch("done:a") as a_again:  # runs.join and runs.wait on the same run
                assert a_again is a
            redis.present.add("done:a")
            await asyncio.wait_for(a.wait(), 5.0)
            assert not b.is_set()
            assert "done:a" in keys._watched  # the first waiter still holds it
        assert keys._watched == {}

    asyncio.run(scenario())


def test_redis_failures_set_nothing_and_the_poll_goes_on() -> None:
    redis = FakeRedis()

    async def scenario() -> None:
        keys = DoneKeys(lambda: redis, tick=0.01)
        with keys.watch("done:a") as a:
            redis.down = True
            redis.present.add("done:a")
            failed = redis.round_trips
            while redis.round_trips < failed + 3:
                await asyncio.sleep(0.005)
            assert not a.is_set()  # the waiter's Postgres fallback decides meanwhile
            redis.down = False
            await asyncio.wait_for(a.wait(), 5.0)

    asyncio.run(scenario())
