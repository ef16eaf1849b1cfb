"""Everything ``kb-agent serve`` changes inside Aegra, in one place, against one exact Aegra release.

Aegra (``aegra-api``) is the LangGraph-API server ``kb-agent serve`` runs. Some of its behaviours lose
work or time, or act with rights nobody holds, and none has a setting, so they are replaced in the running
process:

- a run's end (``finalize_run``) is written once: a Postgres restart at that moment leaves the run "running"
  for good. It is written again with backoff (``cli.server_runs.patiently``);
- a worker leaving a run clears its lease even when the run is not final, so the lease reaper never hands it
  back. The lease is now cleared only for a final run;
- runs of one thread created together execute at once from the same checkpoint, and a confirmed turn is lost.
  Each run holds its thread's lock (``cli.server_runs.ThreadLocks``) for its whole execution;
- ``runs.wait`` / ``runs.join`` notice a run's end at the next hard-coded 2 s tick. They now watch the run's
  done-key with every other waiter, one Redis pipeline per 0.1 s (``cli.server_wait``);
- a cron fires for any owner id: one whose owner holds no token any more is now disabled instead (the run
  of a cron that does fire gets the rights its owner's tokens grant then: ``nodes.context.rights_now``);
- a cron fires whatever its owner already has running: 28 runs of one user at once against a limit of 2.
  A fired run now takes a slot of its owner's ``runs_per_user`` (``graph.limits``, shared with the edge,
  and the owner's pending and running runs in the database, which every replica writes); with none free it
  is not created, and the cron stays due: it fires at the first scheduler tick with a free slot;
- a cron is found by its creator only, so an administrator (``server:crons``) could not remove another
  user's. A delete the auth handler allowed as an administrator's (``nodes.tokens.CRON_ADMIN``) now finds
  the cron by its id.

Each replaced or wrapped function is fingerprinted (a hash of its source in :data:`AEGRA_VERSION`): when the
installed Aegra differs, nothing is patched, the server says so in its log, and
``tests/unit/cli/test_aegra_adapter.py`` fails, so the adapter is re-checked before a new release is pinned.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import logging
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from cli.server_done_keys import DoneKeys
from cli.server_runs import FIRST_DELAY, ThreadLocks, patiently
from cli.server_wait import wait_until_done

AEGRA_VERSION = "0.11.0"  # pyproject's [server] extra pins exactly this release
# What the patches rely on, as it reads in AEGRA_VERSION: (module, attribute path) -> sha256 of the source, cut.
FINGERPRINTS = {
    ("aegra_api.services.run_status", "finalize_run"): "9055aaf5ffc0bd89",
    ("aegra_api.services.run_executor", "execute_run"): "ba38cab2b819657d",
    ("aegra_api.services.worker_executor", "_release_lease"): "91824d750d526d2c",
    ("aegra_api.services.worker_executor", "_is_run_terminal"): "bdb4445ef3c9fac4",
    ("aegra_api.services.worker_executor", "WorkerExecutor.wait_for_completion"): "d64940b7ecb0726a",
    ("aegra_api.services.cron_scheduler", "_validate_cron_user"): "c96e57eebfffcc45",
    ("aegra_api.services.cron_scheduler", "CronScheduler._fire_cron"): "e63507e70cc9aee0",
    ("aegra_api.services.run_preparation", "_prepare_run"): "6fb453c1b1125b80",
    ("aegra_api.services.cron_service", "CronService.delete_cron"): "2de5438d19dfa56d",
    ("aegra_api.api.crons", "delete_cron"): "92eca045b011c411",
}

log = logging.getLogger("kb_agent.serve")


def installed_version() -> str | None:
    try:
        return version("aegra-api")
    except PackageNotFoundError:
        return None


def fingerprint(obj: Any) -> str:
    return hashlib.sha256(inspect.getsource(obj).encode("utf-8")).hexdigest()[:16]


def changed() -> list[str]:
    """What differs from the Aegra the patches were written against (empty: the same code)."""
    import importlib

    found = installed_version()
    problems = (
        []
        if found == AEGRA_VERSION
        else [f"aegra-api {found} installed, adapter written for {AEGRA_VERSION}"]
    )
    with contextlib.suppress(ImportError):
        importlib.import_module("aegra_api.main")  # in the order the server loads it (Aegra's own cycles)
    for (module_name, path), expected in FINGERPRINTS.items():
        try:
            obj: Any = importlib.import_module(module_name)
            for part in path.split("."):
                obj = getattr(obj, part)
            got = fingerprint(inspect.unwrap(obj))
        except (ImportError, AttributeError, OSError, TypeError) as exc:
            problems.append(f"{module_name}.{path}: {type(exc).__name__}")
            continue
        if got != expected:
            problems.append(f"{module_name}.{path} changed ({got}, expected {expected})")
    return problems


def install(executor: Any) -> bool:
    """Patch the running Aegra (run executor, worker executor, and ``executor``'s waits); False, with the
    reason logged, when Aegra is missing or not the release the patches were written against."""
    try:
        import aegra_api  # noqa: F401
    except ImportError:
        return False
    problems = changed()
    if problems:
        log.error(
            "kb-agent serve: Aegra is not the release its fixes were written for; none applied: %s", problems
        )
        return False
    _patch_runs()
    _patch_waits(executor)
    _patch_cron_owners()
    _patch_cron_admins()
    _patch_cron_limits()
    return True


async def cron_owner_holds_a_token(user_id: str) -> bool:
    """A cron fires only for an owner who still holds a token (on a deployment with tokens)."""
    from nodes.tokens import held_by, tokens_configured

    if not user_id:
        return False
    try:
        return not tokens_configured() or held_by(user_id) is not None
    except (OSError, ValueError):  # a token table that cannot be read: nobody is let in, no cron fires
        return False


def _patch_cron_owners() -> None:
    from aegra_api.services import cron_scheduler

    cron_scheduler._validate_cron_user = cron_owner_holds_a_token


def _patch_cron_limits() -> None:
    """A fired run counts against its owner's runs in flight. The scheduler builds each fired run with the
    ``_prepare_run`` it imported (the API's routes have their own), so that name is wrapped: over the limit
    it raises the 429 that ``_fire_cron`` logs, and ``_fire_cron`` then keeps the cron due (not advanced)."""
    from aegra_api.core.orm import Run as RunORM
    from aegra_api.core.orm import _get_session_maker
    from aegra_api.services import cron_scheduler
    from aegra_api.services.run_status import ACTIVE_RUN_STATES
    from fastapi import HTTPException
    from sqlalchemy import func, select

    from graph.limits import process_limits
    from nodes.settings import Settings
    from nodes.tokens import tokens_configured

    prepare = cron_scheduler._prepare_run

    async def still_active(run_id: str) -> bool:
        try:
            async with _get_session_maker()() as session:
                status = await session.scalar(select(RunORM.status).where(RunORM.run_id == run_id))
        except Exception:  # the database away: the run keeps its slot until it can be asked
            return True
        return status in ACTIVE_RUN_STATES

    async def prepare_in_a_free_slot(session: Any, thread_id: str, request: Any, user: Any, **kwargs: Any) -> Any:
        if not tokens_configured():  # nobody is told apart: no per-caller limits, as at the edge
            return await prepare(session, thread_id, request, user, **kwargs)
        owner, limit = str(user.identity), Settings.current().runs_per_user
        active = await session.scalar(
            select(func.count()).select_from(RunORM).where(
                RunORM.user_id == owner, RunORM.status.in_(ACTIVE_RUN_STATES)
            )
        )
        limits = process_limits()
        if not await limits.admit(owner, limit, seen=int(active or 0)):
            detail = (
                f"{owner!r} has {max(limits.in_flight(owner), int(active or 0))} runs in flight, the most "
                f"allowed (runs_per_user={limit}): this cron fires at the first tick with a free slot"
            )
            log.warning("scheduled run not started yet: %s", detail)
            raise HTTPException(429, detail)
        try:
            run_id, run, job = await prepare(session, thread_id, request, user, **kwargs)
            limits.track(owner, [lambda: still_active(run_id)])
        finally:
            limits.release(owner, 1)
        return run_id, run, job

    cron_scheduler._prepare_run = prepare_in_a_free_slot


def _patch_cron_admins() -> None:
    """An administrator's delete finds the cron by id, whoever created it (the route ran our auth handler
    first, which marked this request an administrator's; anyone else's delete is unchanged)."""
    from aegra_api.core.orm import Cron as CronORM
    from aegra_api.services.cron_service import CronService
    from sqlalchemy import select

    from nodes.tokens import CRON_ADMIN

    original = CronService.delete_cron

    async def delete_cron(self: Any, cron_id: str, user_identity: str) -> None:
        if CRON_ADMIN.get():
            owner = await self.session.scalar(select(CronORM.user_id).where(CronORM.cron_id == cron_id))
            if owner is not None:
                user_identity = owner
        await original(self, cron_id, user_identity)

    CronService.delete_cron = delete_cron


def _patch_runs() -> None:
    from aegra_api.core.orm import Run as RunORM
    from aegra_api.core.redis_manager import redis_manager
    from aegra_api.services import run_executor as rx
    from aegra_api.services import run_status
    from aegra_api.services import worker_executor as wx
    from aegra_api.settings import settings
    from sqlalchemy import update

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

    lease = settings.worker.LEASE_DURATION_SECONDS
    shared = redis_manager.get_client if settings.redis.REDIS_BROKER_ENABLED else None
    locks = ThreadLocks(shared, ttl=min(15.0, max(2.0, lease / 2)))
    execute_run = rx.execute_run

    async def execute_run_alone(job: Any) -> None:
        async with locks.hold(job.identity.thread_id, job.identity.run_id):
            await execute_run(job)

    rx.execute_run = execute_run_alone  # the local executor imports it from here at each run
    wx.execute_run = execute_run_alone
    rx.finalize_run = finalize_patiently
    wx.finalize_run = finalize_patiently
    wx._release_lease = release_if_final
    log.info(
        "kb-agent serve: one run per thread at a time (%s); a run's end is retried for %.1f s; unfinished "
        "runs keep their lease",
        "across replicas" if shared else "this process",
        patience,
    )


def _patch_waits(executor: Any) -> bool:
    """Give Aegra's Redis worker executor the faster wait; False (nothing changed) for any other executor."""
    import asyncio

    from aegra_api.services import worker_executor as wx
    from aegra_api.settings import settings

    if not isinstance(executor, wx.WorkerExecutor):
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
