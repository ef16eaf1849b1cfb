"""Blocking tool handlers run on reused daemon workers; the sync entry point keeps one loop per thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from tools.workers import DaemonWorkers, run_on_thread_loop


def _run(workers: DaemonWorkers, job: Callable[[], object]) -> threading.Event:
    done = threading.Event()

    def wrapped() -> None:
        job()
        done.set()

    workers.submit(wrapped)
    return done


def test_a_finished_worker_takes_the_next_job_instead_of_a_new_thread() -> None:
    workers, names = DaemonWorkers(idle_seconds=5), []
    for _ in range(5):
        assert _run(workers, lambda: names.append(threading.current_thread().ident)).wait(5)
    assert len(set(names)) == 1
    assert all(t.daemon for t in threading.enumerate() if t.ident in names)


def test_a_hung_job_keeps_its_worker_and_the_next_job_gets_another() -> None:
    workers, release = DaemonWorkers(idle_seconds=5), threading.Event()
    try:
        _run(workers, lambda: release.wait(30))
        assert _run(workers, lambda: None).wait(5), "the second job waited behind the hung one"
    finally:
        release.set()


def test_idle_workers_leave_and_a_later_job_still_runs() -> None:
    workers = DaemonWorkers(idle_seconds=0.05)
    threads: list[threading.Thread] = []
    assert _run(workers, lambda: threads.append(threading.current_thread())).wait(5)
    threads[0].join(5)
    assert not threads[0].is_alive()
    assert _run(workers, lambda: None).wait(5)


def test_the_sync_entry_point_reuses_its_threads_loop() -> None:
    async def current() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    first, second = run_on_thread_loop(current()), run_on_thread_loop(current())
    assert first is second and not first.is_closed()
    other: list[asyncio.AbstractEventLoop] = []
    worker = threading.Thread(target=lambda: other.append(run_on_thread_loop(current())))
    worker.start()
    worker.join()
    assert other[0] is not first


def test_a_threads_loop_closes_when_the_thread_ends_and_keeps_no_run_alive() -> None:
    """Graph runs call the sync entry point from short-lived pool threads: each such thread's loop (an
    epoll descriptor and a socket pair, and the default executor's thread once a handler ran there) must
    go with the thread, and must not hold the context it was made in (a run's config, so its state)."""
    import contextvars
    import gc
    import os

    run_state: contextvars.ContextVar[object] = contextvars.ContextVar("run_state")

    class State:  # stands for a run's channels
        pass

    async def uses_the_default_executor() -> asyncio.AbstractEventLoop:
        await asyncio.to_thread(lambda: None)
        return asyncio.get_running_loop()

    def one_run(loops: list[asyncio.AbstractEventLoop]) -> None:
        run_state.set(State())
        loops.append(run_on_thread_loop(uses_the_default_executor()))

    def open_descriptors() -> int:
        return len(os.listdir(f"/proc/{os.getpid()}/fd"))

    loops: list[asyncio.AbstractEventLoop] = []
    for _ in range(3):  # warm: the executor's first thread, lazily made objects
        worker = threading.Thread(target=one_run, args=(loops,))
        worker.start()
        worker.join()
    gc.collect()
    before = open_descriptors()
    for _ in range(20):
        worker = threading.Thread(target=contextvars.copy_context().run, args=(one_run, loops))
        worker.start()
        worker.join()
    gc.collect()
    assert all(loop.is_closed() for loop in loops)
    assert open_descriptors() <= before
    assert not [o for o in gc.get_objects() if type(o) is State]  # type(): a dead weak proxy raises on isinstance
