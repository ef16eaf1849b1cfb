"""A run's end survives a short Postgres outage (Aegra's worker executor, ``kb-agent serve``).

Found by ``tests/integration/test_serve_postgres_restart.py`` in CI: after a 4 s restart of Postgres under
load, two runs stayed "running" for good. Aegra writes a run's end (``finalize_run``) once. When Postgres is
away at that moment the write raises, the worker logs it, and then clears the run's lease (``_release_lease``),
which by then succeeds. A "running" row without a lease is one the lease reaper never looks at (it recovers
expired leases only), so nothing ever ends it, and every ``runs.join`` on it waits until its timeout.

``cli.aegra_adapter`` installs these into Aegra; this module holds the behaviour, with no Aegra import:

- ``finalize_patiently``: the end is written again, with backoff, for up to 2/3 of the lease (20 s by
  default; past the lease the reaper would take the run anyway), so a restart of a few seconds loses no status;
- ``release_if_final``: a worker leaving a run that is still pending/running in the database keeps its
  lease instead of clearing it. The lease then expires and the reaper hands the run back, to be resumed
  from its checkpoint or failed after ``BG_JOB_MAX_RETRIES``: the recovery of a killed process, with the
  same bound (lease + reaper interval + the run);
- ``ThreadLocks``: one run per thread at a time. Aegra keeps a run's ``multitask_strategy`` but does not
  enforce it, so runs of one thread created together (a double submit; a retry after a create whose answer a
  kill cut off, while the first one still ran later) executed at once from the same checkpoint, and the thread
  kept one branch: a turn whose success the client saw was gone from it (found by the kill -9 test). Each run
  now holds its thread's lock from before LangGraph reads the state until its end is written: an asyncio lock
  in the process, and with Redis a lock shared by every replica whose time-to-live a live holder renews, so a
  holder killed with -9 frees it within that time (well inside the lease the killed run waits out anyway).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

FINALIZE_PATIENCE = 20.0  # seconds by default: 2/3 of Aegra's 30 s lease (``install`` scales it to the lease)
FIRST_DELAY = 0.25
MAX_DELAY = 2.0
LOCK_POLL = 0.05  # seconds between two tries of a taken thread lock in Redis
LOCK_PREFIX = "kb-agent:thread-lock:"

log = logging.getLogger("kb_agent.serve")

T = TypeVar("T")


async def patiently(
    write: Callable[[], Awaitable[T]],
    *,
    what: str,
    patience: float = FINALIZE_PATIENCE,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> T:
    """``write()``, tried again with backoff while it raises, until ``patience`` seconds have passed.

    The last error is raised when patience runs out; a cancellation (lease lost, shutdown) is never retried.
    """
    now = clock or asyncio.get_running_loop().time
    deadline = now() + patience
    delay = FIRST_DELAY
    attempt = 1
    while True:
        try:
            return await write()
        except Exception as exc:
            left = deadline - now()
            if left <= 0:
                log.error("%s: gave up after %d attempts (%s: %s)", what, attempt, type(exc).__name__, exc)
                raise
            log.warning("%s failed (%s: %s); trying again in %.2f s", what, type(exc).__name__, exc, delay)
            await sleep(min(delay, left))
            delay = min(delay * 2, MAX_DELAY)
            attempt += 1


class ThreadLocks:
    """One run per thread at a time: in this process, and across replicas when ``redis`` (a factory of
    Aegra's async Redis client) is given. ``ttl`` bounds how long a dead holder keeps a thread locked."""

    def __init__(self, redis: Callable[[], Any] | None = None, *, ttl: float = 10.0) -> None:
        self.redis = redis
        self.ttl = ttl
        self._local: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    @contextlib.asynccontextmanager
    async def hold(self, thread_id: str, run_id: str) -> AsyncIterator[None]:
        """Wait for the thread, hold it for the body; a cancellation while waiting takes nothing."""
        self._users[thread_id] = self._users.get(thread_id, 0) + 1
        local = self._local.setdefault(thread_id, asyncio.Lock())
        try:
            async with local, self._shared(thread_id, run_id):
                yield
        finally:
            self._users[thread_id] -= 1
            if not self._users[thread_id]:  # nobody holds or waits: the lock object goes
                del self._users[thread_id]
                del self._local[thread_id]

    @contextlib.asynccontextmanager
    async def _shared(self, thread_id: str, run_id: str) -> AsyncIterator[None]:
        if self.redis is None:
            yield
            return
        from redis.exceptions import LockError, RedisError

        lock = self.redis().lock(
            LOCK_PREFIX + thread_id, timeout=self.ttl, sleep=LOCK_POLL, blocking=True, thread_local=False
        )
        try:
            await lock.acquire(token=run_id)
        except (
            RedisError
        ) as exc:  # Redis away: runs come from Aegra's Postgres poll; this process's lock holds
            log.warning("thread lock for run %s not shared (%s); this process's lock only", run_id, exc)
            yield
            return
        renew = asyncio.create_task(self._renew(lock, run_id))
        try:
            yield
        finally:
            renew.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renew
            with contextlib.suppress(LockError, RedisError):  # expired or Redis away: it frees itself
                await lock.release()

    async def _renew(self, lock: Any, run_id: str) -> None:
        """Keep a live holder's lock from expiring; a lock already lost is logged once."""
        from redis.exceptions import LockError, RedisError

        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                await lock.reacquire()
            except LockError:
                log.warning("run %s lost its thread lock (it stalled past %.1f s)", run_id, self.ttl)
                return
            except RedisError as exc:
                log.warning("run %s could not renew its thread lock: %s", run_id, exc)

