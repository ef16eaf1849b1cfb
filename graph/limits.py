"""Limits per server caller, kept in each server process (:func:`process_limits`): by the edge
(``graph.edge``) for the runs callers ask for, and by the runtime's own hooks for the runs it starts itself
(a cron's: ``graph.auth`` on ``langgraph dev``, ``cli.aegra_adapter`` on ``kb-agent serve``).

- A request rate per caller (a token bucket of ``requests_per_minute``): beyond it, a 429 with Retry-After.
- Runs in flight per caller (``runs_per_user``): a run-creating request past them waits in the caller's
  queue for a free slot (``run_queue_per_user`` of them), and beyond the queue is a 429. So one caller's
  flood occupies at most their own slots of the server's workers, and everyone else's questions start at once.
- A run the runtime starts on its own starts only in a free slot of its owner (:meth:`CallerLimits.admit`);
  otherwise it does not start now, and the hook says so.

A run is in flight while its waiting or streaming request is open, and from its creation until the runtime
says it is no longer pending or running (asked only when its owner is at their limit): a background run
(``POST .../runs``), a stream whose caller hung up, a cron's first run, a run a cron fired.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

Alive = Callable[[], Awaitable[bool]]  # whether one tracked run is still pending or running
# (status, JSON body) of a request to the server's own API with the given headers: (headers, path, method, body)
Ask = Callable[[dict[str, str], str, str, Any], Awaitable[tuple[int, Any]]]
# Set for every request the edge passes on: a run created outside one was started by the runtime itself.
THROUGH_EDGE: contextvars.ContextVar[bool] = contextvars.ContextVar("kb_agent_through_edge", default=False)
REFRESH_EVERY = 0.5  # seconds between two looks at a caller's background runs while they wait


class Busy(Exception):
    """A request over the caller's limits: a 429 naming the limit, with when to try again."""

    def __init__(self, detail: str, retry_after: float) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retry_after = max(1, math.ceil(retry_after))


@dataclass
class _Caller:
    tokens: float = 0.0
    refilled: float = 0.0
    open: int = 0  # waiting or streaming run requests
    background: list[Alive] = field(default_factory=list)
    queued: int = 0
    looked: float = 0.0
    freed: asyncio.Event = field(default_factory=asyncio.Event)


class CallerLimits:
    """The rate and the run slots of every caller this process has seen (a few bytes each)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.callers: dict[str, _Caller] = {}
        self.ask: Ask | None = None  # the edge's way to the runtime's API (set by ``graph.edge.Edge``)

    def _caller(self, user: str) -> _Caller:
        caller = self.callers.get(user)
        if caller is None:
            caller = self.callers[user] = _Caller(refilled=self.clock())
            caller.tokens = -1.0  # marks a new bucket: filled on first use
        return caller

    def take_request(self, user: str, per_minute: int) -> None:
        """Count one request; :class:`Busy` when the caller's bucket is empty."""
        caller, now = self._caller(user), self.clock()
        if caller.tokens < 0:
            caller.tokens = float(per_minute)
        caller.tokens = min(float(per_minute), caller.tokens + (now - caller.refilled) * per_minute / 60.0)
        caller.refilled = now
        if caller.tokens < 1.0:
            raise Busy(
                f"more than {per_minute} requests a minute from you (requests_per_minute); slow down",
                (1.0 - caller.tokens) * 60.0 / per_minute,
            )
        caller.tokens -= 1.0

    def in_flight(self, user: str) -> int:
        caller = self.callers.get(user)
        return 0 if caller is None else caller.open + len(caller.background)

    async def acquire(self, user: str, need: int, limit: int, queue: int) -> None:
        """Take ``need`` run slots, waiting in the caller's queue for them; :class:`Busy` past the queue."""
        if need > limit:
            raise Busy(f"{need} runs at once is more than the {limit} you may have in flight (runs_per_user)", 1)
        caller = self._caller(user)
        if self.in_flight(user) + need > limit:
            await self._look(caller, force=True)
        if self.in_flight(user) + need <= limit:
            caller.open += need
            return
        if caller.queued >= queue:
            raise Busy(
                f"you have {self.in_flight(user)} runs in flight and {caller.queued} waiting, the most allowed "
                "(runs_per_user, run_queue_per_user); try again when one has finished",
                REFRESH_EVERY * 4,
            )
        caller.queued += 1
        try:
            while self.in_flight(user) + need > limit:
                caller.freed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(caller.freed.wait(), REFRESH_EVERY)
                await self._look(caller)
            caller.open += need
        finally:
            caller.queued -= 1

    async def admit(self, user: str, limit: int, seen: int = 0) -> bool:
        """Take one run slot for a run the runtime starts on its own, only if one is free now (never waits:
        the runtime's scheduler would wait for everyone). ``seen``: runs of the user the runtime itself
        counts, which may include ones of other processes. Once the run exists, :meth:`track` it and
        :meth:`release` the slot; if it is not created, just release it."""
        caller = self._caller(user)
        if max(self.in_flight(user), seen) + 1 > limit:
            await self._look(caller, force=True)
        if max(self.in_flight(user), seen) + 1 > limit:
            return False
        caller.open += 1
        return True

    def release(self, user: str, count: int) -> None:
        caller = self._caller(user)
        caller.open = max(0, caller.open - count)
        caller.freed.set()

    def track(self, user: str, runs: list[Alive]) -> None:
        """Runs of the user that now exist: in flight until their check says they are not."""
        caller = self._caller(user)
        caller.background.extend(runs)

    async def _look(self, caller: _Caller, force: bool = False) -> None:
        """Drop the caller's background runs that are no longer pending or running."""
        now = self.clock()
        if not caller.background or (not force and now - caller.looked < REFRESH_EVERY):
            return
        caller.looked = now
        looked_at = list(caller.background)  # others may track or drop runs while we wait for answers
        running = await asyncio.gather(*(alive() for alive in looked_at), return_exceptions=True)
        ended = {id(entry) for entry, alive in zip(looked_at, running, strict=True) if alive is False}
        if ended:
            caller.background = [entry for entry in caller.background if id(entry) not in ended]
            caller.freed.set()


_PROCESS: CallerLimits | None = None


def process_limits() -> CallerLimits:
    """This process's limits, one for the edge and the runtime's hooks alike (every run counts once)."""
    global _PROCESS
    if _PROCESS is None:
        _PROCESS = CallerLimits()
    return _PROCESS


def created_runs(body: bytes) -> list[tuple[str, str]]:
    """``(thread_id, run_id)`` of the runs a run-creating response describes (one run, or a batch)."""
    import json

    try:
        value: Any = json.loads(body)
    except ValueError:
        return []
    runs = value if isinstance(value, list) else [value]
    return [
        (str(r.get("thread_id")), str(r["run_id"]))
        for r in runs
        if isinstance(r, dict) and r.get("run_id") and r.get("thread_id")
    ]
