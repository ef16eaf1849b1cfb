"""One body of logic per node, run by ``graph.invoke`` and ``graph.ainvoke`` alike.

Under ``langgraph dev`` and the production server a synchronous node runs on a small thread pool (about
six workers on two cores), so a node that waits on a model holds one of those threads for the whole call
and caps how many model calls are in flight. A node that does I/O therefore has an async path; the sync
path must keep working for ``graph.invoke`` with the same results.

A node's body is a generator: it yields each piece of I/O as an :class:`IO` and receives its result (or
its exception, thrown back in at the ``yield``). :func:`dual_node` runs the body blocking under
``invoke`` and awaiting under ``ainvoke`` — a blocking call with no async twin goes to a worker thread,
and so does the code between two IOs — and hands LangGraph both as one :class:`DualNode` runnable, which
finds the run's ``Runtime`` with LangGraph's public ``get_runtime()``. What matters is that no thread is
held while a model answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.runtime import Runtime, get_runtime

from nodes.context import Context
from nodes.state import State

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class IO(Generic[T]):
    """One piece of I/O: the blocking call, and its async twin when the library has one."""

    call: Callable[[], T]
    acall: Callable[[], Awaitable[T]] | None = None

    async def run_async(self) -> T:
        if self.acall is not None:
            return await self.acall()
        return await asyncio.to_thread(self.call)  # Chroma, bm25s, SQLite: off the event loop


Steps = Generator[IO[Any], Any, dict[str, Any]]
NodeBody = Callable[[State, Runtime[Context]], Steps]


def run_steps(steps: Steps) -> dict[str, Any]:
    """Drive a node body under ``invoke``: each IO's blocking call, in place."""
    try:
        pending = next(steps)
        while True:
            try:
                result = pending.call()
            except Exception as exc:
                pending = steps.throw(exc)
            else:
                pending = steps.send(result)
    except StopIteration as done:
        return done.value


def _advance(step: Callable[[Any], IO[Any]], value: Any) -> tuple[bool, Any]:
    """Run the body to its next IO (or its end): StopIteration cannot cross a thread's future."""
    try:
        return False, step(value)
    except StopIteration as done:
        return True, done.value


async def arun_steps(steps: Steps) -> dict[str, Any]:
    """Drive a node body under ``ainvoke``: each IO awaited, the code between them on a worker thread.

    The code between two IOs is short, but it may still touch a file (opening a store, an SSL context on
    a client's first use, a log): on the event loop that would stall every other run, and ``langgraph
    dev`` refuses it outright. So only the awaiting happens on the loop.
    """
    done, value = await asyncio.to_thread(_advance, steps.send, None)
    while not done:
        try:
            result = await value.run_async()
        except Exception as exc:
            done, value = await asyncio.to_thread(_advance, steps.throw, exc)
        else:
            done, value = await asyncio.to_thread(_advance, steps.send, result)
    return value


class DualNode(Runnable[State, dict[str, Any]]):
    """A node with a blocking and an awaiting implementation of one body: LangGraph calls ``invoke``
    under ``graph.invoke`` and ``ainvoke`` under ``graph.ainvoke``. The run's ``Runtime`` comes from
    LangGraph (``get_runtime()``, inside a run) or, in tests, from the ``runtime`` keyword."""

    def __init__(self, body: NodeBody, name: str) -> None:
        self.body = body
        self.name = name

    def invoke(
        self, input: State, config: RunnableConfig | None = None, *, runtime: Runtime[Context] | None = None, **_: Any
    ) -> dict[str, Any]:
        return run_steps(self.body(input, runtime if runtime is not None else get_runtime()))

    async def ainvoke(
        self, input: State, config: RunnableConfig | None = None, *, runtime: Runtime[Context] | None = None, **_: Any
    ) -> dict[str, Any]:
        return await arun_steps(self.body(input, runtime if runtime is not None else get_runtime()))


Node = DualNode  # what make_<node>() returns


def dual_node(body: NodeBody, name: str) -> Node:
    """The node LangGraph runs: ``body`` driven blocking under ``invoke``, awaited under ``ainvoke``.

    Call it directly in tests with ``node.invoke(state, runtime=Runtime(...))`` (or ``ainvoke``).
    """
    return DualNode(body, name)
