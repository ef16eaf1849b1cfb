"""The model client's async connections: one pool per running event loop, made once per loop."""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import openai
import pytest

from models import http_clients
from models.http_clients import LoopLocalAsyncClient

# the HTTP library the installed SDK is built on (httpx2 for openai 3, httpx before)
HTTPX = importlib.import_module(openai.DefaultAsyncHttpxClient.__mro__[1].__module__.split(".")[0])


def test_concurrent_first_requests_of_a_loop_share_one_pool_and_closed_loops_are_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[Any] = []
    real = openai.DefaultAsyncHttpxClient

    def counted(**settings: Any) -> Any:
        made.append(settings)
        return real(**settings)

    monkeypatch.setattr(http_clients.openai, "DefaultAsyncHttpxClient", counted)
    transport = HTTPX.MockTransport(lambda request: HTTPX.Response(200, json={"ok": True}))
    client = LoopLocalAsyncClient(transport=transport)

    async def many() -> list[int]:
        requests = [client.build_request("GET", f"http://model.test/{n}") for n in range(20)]
        return [r.status_code for r in await asyncio.gather(*(client.send(q) for q in requests))]

    assert asyncio.run(many()) == [200] * 20
    assert len(made) == 1 and client.pools() == 1
    assert asyncio.run(many()) == [200] * 20  # a new loop: a pool of its own, the closed loop's forgotten
    assert len(made) == 2 and client.pools() == 1
