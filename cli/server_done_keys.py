"""One Redis round trip per tick for every waiting ``runs.wait`` / ``runs.join``, not one per request.

``cli.server_wait`` made each waiting request look at its run's done-key itself, every 50–250 ms: with 50
requests waiting that was about 200 separate ``EXISTS`` round trips a second through redis-py, about a tenth
of the server's busy time in ``bench/server_concurrency.py --only serve-slow`` (bench/README.md, "where the
CPU goes"). ``DoneKeys`` keeps the keys being waited for and looks at all of them in one pipeline every
``TICK`` seconds while any are watched; a waiter only reads its ``asyncio.Event``. A failing round trip sets
nothing (Redis away counts as "not yet"), so each waiter's Postgres fallback still ends its wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

TICK = 0.1  # seconds between two looks at all watched keys; a run's end is noticed 50 ms later on average

log = logging.getLogger("kb_agent.serve")


class DoneKeys:
    """The done-keys some request is waiting for, checked together by one task on the running loop.

    Meant for one event loop, the API's, where ``runs.wait``/``join`` wait (uvicorn runs one).
    """

    def __init__(self, client: Callable[[], Any], tick: float = TICK) -> None:
        self._client = client  # called every tick: the broker may have reconnected since
        self.tick = tick
        self._watched: dict[str, tuple[asyncio.Event, int]] = {}
        self._task: asyncio.Task[None] | None = None

    @contextlib.contextmanager
    def watch(self, key: str) -> Iterator[asyncio.Event]:
        """An event set once ``key`` exists; watched until the block ends (shared by waiters of one key)."""
        event, count = self._watched.get(key, (asyncio.Event(), 0))
        self._watched[key] = (event, count + 1)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._poll(), name="kb-agent done-keys")
        try:
            yield event
        finally:
            event, count = self._watched[key]
            if count > 1:
                self._watched[key] = (event, count - 1)
            else:
                del self._watched[key]

    async def _poll(self) -> None:
        while self._watched:
            keys = list(self._watched)
            try:
                found = await self._exists(keys)
            except Exception as exc:  # Redis away: every waiter falls back to its run's row
                log.debug("done-key poll failed: %s", exc)
                found = [False] * len(keys)
            for key, present in zip(keys, found, strict=True):
                if present and key in self._watched:
                    self._watched[key][0].set()
            await asyncio.sleep(self.tick)

    async def _exists(self, keys: list[str]) -> list[bool]:
        async with self._client().pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.exists(key)
            return [bool(n) for n in await pipe.execute()]
