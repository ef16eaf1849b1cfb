"""Driving a node body: the same result blocking and awaiting, no node code on the event loop, and one
worker-thread hop per await rather than one per piece of the body."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from nodes.node_io import IO, Steps, arun_steps, run_steps


class Boom(RuntimeError):
    pass


def body(where: list[tuple[str, int]]) -> Steps:
    """Blocking I/O twice, a failing blocking call caught, an awaitable call, then more blocking I/O."""
    where.append(("start", threading.get_ident()))
    first = yield IO(lambda: 2)
    where.append(("after first", threading.get_ident()))
    second = yield IO(lambda: first * 3)
    try:
        yield IO(lambda: (_ for _ in ()).throw(Boom("no")))
    except Boom as exc:
        caught = str(exc)

    async def answer() -> int:
        where.append(("awaited", threading.get_ident()))
        return 7

    answered = yield IO(lambda: 7, answer)
    where.append(("after await", threading.get_ident()))
    last = yield IO(lambda: answered + 1)
    return {"values": [first, second, answered, last], "caught": caught}


EXPECTED = {"values": [2, 6, 7, 8], "caught": "no"}


def test_blocking_and_awaiting_give_the_same_result() -> None:
    assert run_steps(body([])) == EXPECTED
    assert asyncio.run(arun_steps(body([]))) == EXPECTED


def test_node_code_never_runs_on_the_event_loop_and_hops_once_per_await(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hops = 0
    real = asyncio.to_thread

    async def counted(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        nonlocal hops
        hops += 1
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    where: list[tuple[str, int]] = []

    async def main() -> tuple[dict[str, Any], int]:
        return await arun_steps(body(where)), threading.get_ident()

    result, loop_thread = asyncio.run(main())
    assert result == EXPECTED
    on_loop = {name for name, ident in where if ident == loop_thread}
    assert on_loop == {"awaited"}, where
    assert hops == 2  # up to the awaitable call, then the rest: the blocking calls ride along


def test_an_exception_a_body_does_not_catch_reaches_the_caller() -> None:
    def failing() -> Steps:
        yield IO(lambda: 1)
        raise Boom("from the body")

    with pytest.raises(Boom, match="from the body"):
        run_steps(failing())
    with pytest.raises(Boom, match="from the body"):
        asyncio.run(arun_steps(failing()))
