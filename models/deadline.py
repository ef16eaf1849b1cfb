"""A model call with a deadline: the one helper the reranker, query planning, the summarizer and memory
extraction share.

A hung blocking HTTP call cannot be cancelled, so it runs in a daemon thread that at least never blocks
interpreter exit; the caller stops waiting after the deadline, or at once when the process is being
stopped (:func:`stop_waiting`: Ctrl-C or SIGTERM in the command line, whose turn then rolls back instead of
waiting for a model that may take minutes). An awaited call is simply cancelled.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from models.stopping import POLL_SECONDS, interruptible, stop_waiting, stopping

__all__ = ["ModelTimeout", "call_with_deadline", "interruptible", "stop_waiting", "stopping"]

T = TypeVar("T")


class ModelTimeout(TimeoutError):
    """The model did not answer within the allowed time."""


def call_with_deadline(
    fn: Callable[[], T], seconds: float, *, what: str = "the model", inherit_run: bool = True
) -> T:
    """``fn()`` bounded by ``seconds``; raises :class:`ModelTimeout` naming ``what`` when it is late.

    ``inherit_run=True`` runs it in the caller's context, so tracing nests and tokens stream with the run;
    background work (memory extraction) passes False so nothing it does streams into the user's answer.
    """
    box: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context() if inherit_run else contextvars.Context()

    def work() -> None:
        try:
            box["value"] = context.run(fn)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc
        finally:
            done.set()

    if stopping():
        raise KeyboardInterrupt("the process is stopping")
    threading.Thread(target=work, name="kb-agent-model-call", daemon=True).start()
    deadline = time.monotonic() + seconds
    while not done.wait(max(0.0, min(POLL_SECONDS, deadline - time.monotonic()))):
        if stopping():
            raise KeyboardInterrupt(f"the process is stopping: {what} was left unanswered")
        if time.monotonic() >= deadline:
            raise ModelTimeout(f"{what} did not answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


async def await_with_deadline(work: Awaitable[T], seconds: float, *, what: str = "the model") -> T:
    """The async twin of :func:`call_with_deadline`: ``work`` is cancelled (its HTTP call closed) when late."""
    try:
        return await asyncio.wait_for(work, timeout=max(seconds, 0.0))
    except TimeoutError as exc:
        raise ModelTimeout(f"{what} did not answer within {seconds:g} s") from exc


def invoke_with_timeout(
    model: BaseChatModel,
    messages: list[BaseMessage],
    timeout: float,
    *,
    config: RunnableConfig | None = None,
    inherit_run: bool = True,
) -> AIMessage:
    """``model.invoke(messages)`` bounded by ``timeout`` seconds, always as an ``AIMessage``."""
    reply = call_with_deadline(
        lambda: model.invoke(messages, config=config), timeout, inherit_run=inherit_run
    )
    return reply if isinstance(reply, AIMessage) else AIMessage(content=str(getattr(reply, "content", reply)))


async def ainvoke_with_timeout(
    model: BaseChatModel, messages: list[BaseMessage], timeout: float, *, config: RunnableConfig | None = None
) -> AIMessage:
    """``await model.ainvoke(messages)`` bounded by ``timeout`` seconds, always as an ``AIMessage``."""
    reply = await await_with_deadline(model.ainvoke(messages, config=config), timeout)
    return reply if isinstance(reply, AIMessage) else AIMessage(content=str(getattr(reply, "content", reply)))
