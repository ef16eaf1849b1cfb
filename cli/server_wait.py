"""A faster ``runs.wait`` / ``runs.join`` for Aegra's Redis worker executor.

Aegra 0.11's ``WorkerExecutor.wait_for_completion`` (the API side of ``runs.wait`` and ``runs.join`` when
runs go through Redis) checks the run's Redis done-key, then sleeps a hard-coded 2.0 s, and looks at the
run's row in Postgres every second check. No setting changes that sleep. A run that takes 0.2 s is answered
at the next 2 s tick, so on an idle server every turn took about 2 s, and under load every turn paid a
median 1 s on top of its work (bench/README.md, "where the 2 s floor goes").

``cli.aegra_adapter`` replaces that method on the executor instance with one built on ``wait_until_done``: the same two checks
(done-key, then the Postgres row as the fallback for a lost key). The done-keys of all waiting requests are
looked at together, one Redis pipeline every 0.1 s (``cli.server_done_keys``); each request wakes on its own
key and reads its row every 4 s as before. The run itself, its lease and its recovery are untouched; only how
soon a waiting request notices the end changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

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

