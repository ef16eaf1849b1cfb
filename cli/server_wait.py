"""A faster ``runs.wait`` / ``runs.join`` for Aegra's Redis worker executor.

Aegra 0.11's ``WorkerExecutor.wait_for_completion`` (the API side of ``runs.wait`` and ``runs.join`` when
runs go through Redis) checks the run's Redis done-key, then sleeps a hard-coded 2.0 s, and looks at the
run's row in Postgres every second check. No setting changes that sleep. A run that takes 0.2 s is answered
at the next 2 s tick, so on an idle server every turn took about 2 s, and under load every turn paid a
median 1 s on top of its work (bench/README.md, "where the 2 s floor goes").

``install`` replaces that method on the executor instance with ``wait_until_done``: the same two checks
(done-key, then the Postgres row as the fallback for a lost key). The done-keys of all waiting requests are
looked at together, one Redis pipeline every 0.1 s (``cli.server_done_keys``); each request wakes on its own
key and reads its row every 4 s as before. The run itself, its lease and its recovery are untouched; only how
soon a waiting request notices the end changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from cli.server_done_keys import DoneKeys

FIRST_DELAY = 0.05  # seconds before a waiter first re-reads its own key (a local event, no Redis)
MAX_DELAY = 0.25  # the longest a waiter sleeps between two looks at its event, deadline and row
BACKOFF = 1.5
DB_EVERY = 4.0  # Aegra's own fallback cadence (every second 2 s tick): the row, when the key was lost

log = logging.getLogger("kb_agent.serve")


async def wait_until_done(
    run_id: str,
    *,
    timeout: float,
    key_is_set: Callable[[], Awaitable[bool]],
    run_is_terminal: Callable[[], Awaitable[bool]],
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> None:
    """Return once the done-key is set or the run's row is terminal; TimeoutError after ``timeout`` s.

    A failing key check (Redis away) counts as "not yet", as in Aegra: the Postgres row still ends the wait.
    """
    now = clock or asyncio.get_running_loop().time
    deadline = now() + timeout
    next_db = now() + DB_EVERY
    delay = FIRST_DELAY
    while now() < deadline:
        try:
            if await key_is_set():
                return
        except Exception:  # Redis errors: fall back to the row, as Aegra does
            pass
        if now() >= next_db:
            if await run_is_terminal():
                return
            next_db = now() + DB_EVERY
        await sleep(max(0.0, min(delay, deadline - now())))
        delay = min(delay * BACKOFF, MAX_DELAY)
    raise TimeoutError(f"Run {run_id} did not complete within {timeout}s")


def install(executor: Any) -> bool:
    """Give Aegra's Redis worker executor the faster wait; False (nothing changed) for any other executor."""
    try:
        from aegra_api.services import worker_executor as wx
        from aegra_api.settings import settings
    except ImportError:
        return False
    if not isinstance(executor, wx.WorkerExecutor) or not hasattr(wx, "_is_run_terminal"):
        return False

    keys = DoneKeys(wx.redis_manager.get_client)

    async def wait_for_completion(run_id: str, *, timeout: float = 300.0) -> None:
        done_key = f"{settings.redis.REDIS_CHANNEL_PREFIX}done:{run_id}"

        async def run_is_terminal() -> bool:
            return bool(await wx._is_run_terminal(run_id))

        with keys.watch(done_key) as done:

            async def key_is_set() -> bool:
                return done.is_set()

            async def sleep(seconds: float) -> None:  # woken early by the shared poll
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), seconds)

            await wait_until_done(
                run_id, timeout=timeout, key_is_set=key_is_set, run_is_terminal=run_is_terminal, sleep=sleep
            )

    executor.wait_for_completion = wait_for_completion
    log.info("kb-agent serve: runs.wait/join look at their done-keys together every %.2f s", keys.tick)
    return True
