"""A run's end survives a short Postgres outage (Aegra 0.11's worker executor, ``kb-agent serve``).

Found by ``tests/integration/test_serve_postgres_restart.py`` in CI: after a 4 s restart of Postgres under
load, two runs stayed "running" for good. Aegra writes a run's end (``finalize_run``) once. When Postgres is
away at that moment the write raises, the worker logs it, and then clears the run's lease (``_release_lease``),
which by then succeeds. A "running" row without a lease is one the lease reaper never looks at (it recovers
expired leases only), so nothing ever ends it, and every ``runs.join`` on it waits until its timeout.

``install`` changes two things and nothing else:

- ``finalize_patiently``: the end is written again, with backoff, for up to 2/3 of the lease (20 s by
  default; past the lease the reaper would take the run anyway), so a restart of a few seconds loses no status;
- ``release_if_final``: a worker leaving a run that is still pending/running in the database keeps its
  lease instead of clearing it. The lease then expires and the reaper hands the run back, to be resumed
  from its checkpoint or failed after ``BG_JOB_MAX_RETRIES``: the recovery of a killed process, with the
  same bound (lease + reaper interval + the run).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

FINALIZE_PATIENCE = 20.0  # seconds by default: 2/3 of Aegra's 30 s lease (``install`` scales it to the lease)
FIRST_DELAY = 0.25
MAX_DELAY = 2.0

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


def install() -> bool:
    """Patch Aegra's run executor and worker executor in place; False (nothing changed) without Aegra."""
    try:
        from aegra_api.core.orm import Run as RunORM
        from aegra_api.services import run_executor as rx
        from aegra_api.services import run_status
        from aegra_api.services import worker_executor as wx
        from aegra_api.settings import settings
        from sqlalchemy import update
    except ImportError:
        return False
    if not all(
        hasattr(m, n) for m, n in ((rx, "finalize_run"), (wx, "finalize_run"), (wx, "_release_lease"))
    ):
        return False  # another Aegra than the one these patches were written against: leave it alone
    original = run_status.finalize_run
    patience = max(FIRST_DELAY, settings.worker.LEASE_DURATION_SECONDS * 2 / 3)

    async def finalize_patiently(run_id: str, thread_id: str, **kwargs: Any) -> bool:
        return await patiently(
            lambda: original(run_id, thread_id, **kwargs),
            what=f"recording the end of run {run_id}",
            patience=patience,
        )

    async def release_if_final(run_id: str, worker_name: str) -> None:
        async with wx._get_session_maker()() as session:
            result = await session.execute(
                update(RunORM)
                .where(
                    RunORM.run_id == run_id,
                    RunORM.claimed_by == worker_name,
                    RunORM.status.not_in(run_status.ACTIVE_RUN_STATES),
                )
                .values(claimed_by=None, lease_expires_at=None)
            )
            await session.commit()
        if not result.rowcount:  # type: ignore[attr-defined]
            # Not final (its lease runs out and the reaper takes it), or already another worker's.
            log.warning("run %s: lease not released (run not final, or no longer this worker's)", run_id)

    rx.finalize_run = finalize_patiently
    wx.finalize_run = finalize_patiently
    wx._release_lease = release_if_final
    log.info(
        "kb-agent serve: a run's end is retried for %.0f s; unfinished runs keep their lease",
        FINALIZE_PATIENCE,
    )
    return True
