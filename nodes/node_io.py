"""One body of logic per node, run by ``graph.invoke`` and ``graph.ainvoke`` alike.

Under ``langgraph dev`` and the production server a synchronous node runs on a small thread pool (about
six workers on two cores), so a node that waits on a model holds one of those threads for the whole call
and caps how many model calls are in flight. A node that does I/O therefore has an async path; the sync
path must keep working for ``graph.invoke`` with the same results.

A node's body is a generator: it yields each piece of I/O as an :class:`IO` and receives its result (or
its exception, thrown back in at the ``yield``). :func:`dual_node` runs the body blocking under
``invoke`` and awaiting under ``ainvoke`` — there a blocking call with no async twin and the code between
two IOs run on a worker thread, one hop per await — and hands LangGraph both as one :class:`DualNode` runnable, which
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


Steps = Generator[IO[Any], Any, dict[str, Any]]
NodeBody = Callable[[State, Runtime[Context]], Steps]


def _advance(
    steps: Steps, step: Callable[[Any], IO[Any]], value: Any, *, to_await: bool = True
) -> tuple[bool, Any]:
    """Run the body, and the blocking call of every IO it yields, up to its next awaitable IO (returned;
    with ``to_await`` false there is none) or its end (its result). StopIteration cannot cross a thread's
    future, hence the flag."""
    while True:
        try:
            pending = step(value)
        except StopIteration as done:
            return True, done.value
        if to_await and pending.acall is not None:
            return False, pending
        try:
            value, step = pending.call(), steps.send
        except Exception as exc:
            value, step = exc, steps.throw


def run_steps(steps: Steps) -> dict[str, Any]:
    """Drive a node body under ``invoke``: each IO's blocking call, in place."""
    return _advance(steps, steps.send, None, to_await=False)[1]


async def arun_steps(steps: Steps) -> dict[str, Any]:
    """Drive a node body under ``ainvoke``: each awaitable IO on the event loop, everything else on a
    worker thread, in one hop per await.

    The code between two IOs is short, but it may still touch a file (opening a store, an SSL context on
    a client's first use, a log): on the event loop that would stall every other run, and ``langgraph
    dev`` refuses it outright. Blocking IOs (Chroma, bm25s, SQLite) run in the same hop as the code
    around them: under 50 conversations the default executor's queue, not the work, is what a hop costs.
    """
    done, value = await asyncio.to_thread(_advance, steps, steps.send, None)
    while not done:
        try:
            result = await value.acall()
        except Exception as exc:
            done, value = await asyncio.to_thread(_advance, steps, steps.throw, exc)
        else:
            done, value = await asyncio.to_thread(_advance, steps, steps.send, result)
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
