"""An async HTTP client for the OpenAI SDK whose connections belong to the event loop that uses them.

A connection pooled by an async client is bound to the loop that opened it. One process often runs
several loops in turn (a script calling ``asyncio.run`` per question, a notebook, a test suite), and
langchain-openai shares one default async client per endpoint across all of them, so the first request
on a new loop picks a connection of a closed one and fails with "Event loop is closed". This client
keeps one pool per running loop, forgets the pools of loops that have closed, and is otherwise the
SDK's default client (its timeouts, limits and proxy settings from the environment).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import openai


class LoopLocalAsyncClient(openai.DefaultAsyncHttpxClient):  # type: ignore[misc, valid-type]
    """``openai.DefaultAsyncHttpxClient`` sending each request through a pool of the running loop's own.

    The SDK builds requests with this client and sends them with ``send``: only sending is per loop.
    """

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self._settings = settings
        # per loop, the task making its client: the first requests of a loop all wait for the one client
        self._pools: dict[asyncio.AbstractEventLoop, asyncio.Task[Any]] = {}
        self._guard = threading.Lock()

    async def _pool(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._guard:
            for closed in [other for other in self._pools if other.is_closed()]:
                del self._pools[closed]  # its connections died with it
            made = self._pools.get(loop)
            if made is None:  # off the loop: a new client reads the system's certificates
                made = self._pools[loop] = loop.create_task(
                    asyncio.to_thread(openai.DefaultAsyncHttpxClient, **self._settings)
                )
        try:
            return await asyncio.shield(made)  # a cancelled request does not cancel the others' client
        except Exception:
            with self._guard:
                if self._pools.get(loop) is made:
                    del self._pools[loop]  # the next request tries again
            raise

    async def send(self, request: Any, **kwargs: Any) -> Any:
        return await (await self._pool()).send(request, **kwargs)

    async def aclose(self) -> None:
        with self._guard:
            made = self._pools.pop(asyncio.get_running_loop(), None)
        if made is not None and made.done() and not made.cancelled() and made.exception() is None:
            await made.result().aclose()
        await super().aclose()

    def pools(self) -> int:
        """How many loops have a pool (closed loops are forgotten on the next request)."""
        with self._guard:
            return len(self._pools)
