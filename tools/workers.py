"""Where tool handlers run: blocking handlers on reused daemon threads, and the synchronous entry
point's coroutines on one event loop per thread.

Before, every blocking call started its own daemon thread and every ``graph.invoke`` tools round built a
fresh event loop with ``asyncio.run``; together about half a millisecond a round, the largest cost the
loop added over ``create_agent`` (bench/loop_overhead.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class DaemonWorkers:
    """Daemon threads reused across tool calls, so a call pays a hand-off, not a thread start.

    A handler that hangs keeps its thread (a daemon: it never blocks interpreter exit) while the next
    call gets another; threads idle for ``idle_seconds`` exit.
    """

    def __init__(self, idle_seconds: float = 30.0) -> None:
        self.idle_seconds = idle_seconds
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0  # threads waiting for a job and not yet promised one
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1  # that waiting thread is promised this job
        if spawn:
            threading.Thread(target=self._work, name="kb-agent-tool", daemon=True).start()
        self._jobs.put(job)

    def _work(self) -> None:
        job = self._jobs.get()
        while True:
            job()
            with self._lock:
                self._idle += 1
            while True:
                try:
                    job = self._jobs.get(timeout=self.idle_seconds)
                    break
                except queue.Empty:
                    with self._lock:
                        if self._idle > 0:  # not promised a job: leave
                            self._idle -= 1
                            return
                    # promised a job that is on its way: wait for it


_workers = DaemonWorkers()


async def run_on_daemon_worker(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Run a blocking handler on a daemon worker, so a hang cannot block the event loop or its shutdown."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    ctx = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            future.set_result(value) if ok else future.set_exception(value)

    def work() -> None:
        try:
            result, ok = ctx.run(fn, **kwargs), True
        except BaseException as exc:  # handed to the awaiting coroutine, not swallowed
            result, ok = exc, False
        # RuntimeError: the turn already moved on (timeout) and its loop is closed.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, ok, result)

    _workers.submit(work)
    return await future


class _LoopOfThread:
    """A thread's event loop, closed when the thread ends (its thread-local slot is dropped then).

    Graph runs call the synchronous entry point from short-lived pool threads, so a loop that outlived
    its thread would leak an epoll descriptor, a socket pair and its default executor's thread per run.
    It is made in an empty context: the loop's own callbacks copy the context they are made in, and the
    run's (its config, so its whole state) must not live as long as the loop.
    """

    def __init__(self) -> None:
        self.loop = contextvars.Context().run(asyncio.new_event_loop)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: the loop may be half torn down
            if not self.loop.is_closed() and not self.loop.is_running():
                self.loop.close()


class _ThreadLoop(threading.local):
    """One event loop per thread for the synchronous entry point: ``asyncio.run`` builds and tears
    down a loop on every call (about 0.3 ms, the biggest per-round cost of ``graph.invoke``)."""

    holder: _LoopOfThread | None = None

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        if self.holder is None or self.holder.loop.is_closed():
            self.holder = _LoopOfThread()
        return self.holder.loop.run_until_complete(work)


_thread_loop = _ThreadLoop()


def run_on_thread_loop(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` to completion on the calling thread's own event loop (there must be none running)."""
    return _thread_loop.run(work)


def run_with_deadline(fn: Callable[[], T], seconds: float) -> T:
    """Run a blocking call on a daemon worker and wait at most ``seconds``: a call that hangs is left on
    its worker (which never blocks interpreter exit) and the caller gets ``TimeoutError``."""
    done = threading.Event()
    box: dict[str, Any] = {}
    ctx = contextvars.copy_context()

    def work() -> None:
        try:
            box["result"] = ctx.run(fn)
        except BaseException as exc:  # re-raised in the caller's thread below
            box["error"] = exc
        done.set()

    _workers.submit(work)
    if not done.wait(seconds):
        raise TimeoutError(f"no result within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["result"]
