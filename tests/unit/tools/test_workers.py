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
