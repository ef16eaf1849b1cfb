"""Turns run side by side on one event loop keep their model requests in flight together.

``langgraph dev`` runs every run as a task on one shared event loop, with blockbuster raising on any
blocking call made there; ``kb-agent serve`` does the same per worker. A node that blocked that loop (a sync
HTTP call, ``time.sleep``, a sync store or lock) would make concurrent turns take turns at the model. The
endpoint here counts the requests it is answering at once, and holds each first-round request until all
turns' first rounds have arrived (or a generous wait ran out): counted, not timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import build_graph
from graph.services import RunMemory
from models.offline.request_reading import split_appended
from tests.fixtures.in_flight import InFlight
from tests.fixtures.openai_server import OpenAIServer, ScriptedReply

TURNS = 4
API_KEY = "test-key"
GATHER_WAIT = 20.0  # seconds a first-round request waits for the others (only reached when they are serialized)


class InFlightEndpoint:
    """A calculator-then-answer script that records how many requests it is answering at once."""

    def __init__(self, parties: int) -> None:
        self.gather = threading.Barrier(parties, timeout=GATHER_WAIT)
        self.in_flight = InFlight()

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        with self.in_flight.request():
            return self.reply(body)

    def reply(self, body: dict[str, Any]) -> ScriptedReply:
        # after a tool result the budget note comes alone, as a user message: read past it
        said = [(m, split_appended(f"\n\n{m.get('content') or ''}")[0].strip()) for m in body["messages"]]
        last, question = next((m, text) for m, text in reversed(said) if m.get("role") != "user" or text)
        if last.get("role") == "tool":
            return ScriptedReply(content=f"结果是 {last.get('content')}")
        with contextlib.suppress(threading.BrokenBarrierError):  # serialized: the peak tells
            self.gather.wait()  # released once every turn's first request is in flight
        a, b = re.findall(r"\d+", question)[-2:]
        return ScriptedReply(tool_calls=[{"name": "calculator", "arguments": {"expression": f"{a} * {b}"}}])


@pytest.fixture
def endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    script = InFlightEndpoint(TURNS)
    with OpenAIServer(script=script, api_key=API_KEY, model="scripted-gpt") as server:
        for name, value in {
            "KB_AGENT_HOME": str(tmp_path),
            "KB_AGENT_EMBEDDER": "hashing",
            "KB_AGENT_MODEL": server.model,
            "KB_AGENT_BASE_URL": server.base_url,
            "KB_AGENT_API_KEY": API_KEY,
            "KB_AGENT_LONG_TERM_MEMORY": "false",  # one model request per round, none in the background
            "KB_AGENT_REWRITE_QUERY": "false",
        }.items():
            monkeypatch.setenv(name, value)
        yield script
        script.gather.abort()  # never leave a server thread waiting


def test_concurrent_turns_on_one_event_loop_have_their_model_requests_in_flight_together(
    endpoint: InFlightEndpoint,
) -> None:
    blockbuster = pytest.importorskip("blockbuster")
    graph = build_graph(InMemorySaver(), memory=RunMemory())  # as graph/builder.py's server graph
    questions = [(f"计算 {100 + i} × {3 + i}", str((100 + i) * (3 + i))) for i in range(TURNS)]

    async def turn(i: int) -> list[Any]:
        config = {"configurable": {"thread_id": f"t{i}"}}
        stream = graph.astream(  # the server's stream modes
            {"messages": [HumanMessage(questions[i][0])]}, config, stream_mode=["values", "messages", "custom"]
        )
        return [chunk async for mode, chunk in stream if mode == "values"]

    async def all_turns() -> list[Any]:
        guard = blockbuster.BlockBuster(excluded_modules=[])  # what langgraph dev turns on for its loop
        guard.activate()
        try:
            return await asyncio.gather(*(turn(i) for i in range(TURNS)), return_exceptions=True)
        finally:
            guard.deactivate()

    results = asyncio.run(all_turns())
    for (_, product), values in zip(questions, results, strict=True):
        assert not isinstance(values, BaseException), repr(values)
        last = values[-1]["messages"][-1]
        assert isinstance(last, AIMessage) and product in last.text
    assert endpoint.in_flight.peak == TURNS
