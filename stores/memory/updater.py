"""Memory updates off the answer path: one worker thread runs extraction for finished turns, in order, so
a slow, failing or hanging extraction never delays, loses or changes the saved answer. With an outbox
(:mod:`stores.memory.outbox`) each turn is written durably before ``update_from_turn`` returns and a
restarted process finishes what a dead one left."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from stores.base import MemoryRecord, MemoryStore
from stores.memory.outbox import MemoryOutbox

log = logging.getLogger("kb_agent.memory")


class BackgroundMemoryUpdater:
    """A :class:`MemoryStore` whose updates run on one worker thread, in submission order.

    ``recall`` passes through; ``update_from_turn`` queues the turn and returns 0 at once, so the graph's
    ``update_memory`` node finishes immediately. Failures are logged and counted, never raised.
    """

    def __init__(
        self, store: MemoryStore, *, name: str = "kb-agent-memory", outbox: MemoryOutbox | None = None
    ) -> None:
        self.store = store
        self.name = name
        self.outbox = outbox
        self._queue: queue.Queue[tuple[str, str | None, list[BaseMessage], int | None] | None] = queue.Queue()
        self._done = threading.Condition()
        self._pending = 0
        self._thread: threading.Thread | None = None
        self.completed = self.failed = self.applied = 0
        self.last_error: str | None = None
        if outbox is not None:
            for job in outbox.claim_orphans():  # turns a dead process answered but never extracted
                self._enqueue(job.user_id, job.thread_id, job.messages, job.id)

    def recall(self, user_id: str, query: str, top_k: int = 5) -> list[MemoryRecord]:
        return self.store.recall(user_id, query, top_k)

    def update_from_turn(self, user_id: str, thread_id: str | None, messages: Sequence[BaseMessage]) -> int:
        self.submit(user_id, thread_id, messages)
        return 0

    def submit(self, user_id: str, thread_id: str | None, messages: Sequence[BaseMessage]) -> None:
        """Queue one finished turn for extraction (written to the outbox first, when there is one)."""
        job_id = self.outbox.add(user_id, thread_id, list(messages)) if self.outbox is not None else None
        self._enqueue(user_id, thread_id, list(messages), job_id)

    def _enqueue(
        self, user_id: str, thread_id: str | None, messages: list[BaseMessage], job_id: int | None
    ) -> None:
        with self._done:
            self._pending += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
                self._thread.start()
        self._queue.put((user_id, thread_id, messages, job_id))

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued turn is processed; False if ``timeout`` seconds passed first."""
        with self._done:
            return self._done.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float | None = 10.0) -> bool:
        """Drain, then stop the worker; what is still queued after ``timeout`` is logged as lost."""
        drained = self.drain(timeout)
        if not drained:
            log.warning(
                "memory updates still pending after %s s: %d turn(s) not processed", timeout, self._pending
            )
        self._queue.put(None)
        return drained

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            user_id, thread_id, messages, job_id = job
            try:
                self.applied += self.store.update_from_turn(user_id, thread_id, messages)
                self.completed += 1
                if job_id is not None and self.outbox is not None:
                    self.outbox.done(job_id)
            except Exception as exc:
                self.failed += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception(
                    "memory update failed for user=%s thread=%s; the answer is kept", user_id, thread_id
                )
            finally:
                with self._done:
                    self._pending -= 1
                    self._done.notify_all()
