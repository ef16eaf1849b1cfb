"""A slow endpoint (10 s) or one that drops the connection mid-answer, under concurrency.

Several conversations run at once against the loopback server; the question decides how the endpoint
treats each one. A bad run fails alone with a clear ModelError (its own timeout, or the dropped
connection) or, when the turn's wall time runs out first, ends with the budget's time message; the
good runs answer; and no run waits for the 10 s reply (the whole batch is bounded well below it).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import build_graph
from models.errors import ModelError
from models.offline.request_reading import split_appended
from nodes.settings import Settings
from tests.fixtures.openai_server import OpenAIServer, ScriptedReply
from tools.builtin import builtin_registry

pytestmark = pytest.mark.timeout(60)

SLOW = 10.0
HANG_GUARD = 7.0  # far below SLOW: a run that waited for a slow reply cannot finish inside it
# (question, model_timeout s, max_seconds s): what each concurrent conversation asks, and its limits
RUNS = [
    ("good 1", 10, 300),
    ("slow 1", 1, 300),  # the client's own timeout fires first: ModelError
    ("good 2", 10, 300),
    ("drop 1", 10, 300),  # reset after part of the answer: ModelError
    ("slow 2", 60, 1),  # the turn's wall time runs out first: the budget's time message
    ("good 3", 10, 300),
    ("drop 2", 10, 300),
    ("good 4", 10, 300),
]


def _reply(body: dict[str, Any]) -> ScriptedReply:
    sent = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    question, _blocks = split_appended(sent)  # the turn's budget note travels after the question
    if question.startswith("slow"):
        return ScriptedReply(content="too late", delay=SLOW)
    if question.startswith("drop"):
        return ScriptedReply(content="this answer is cut off in the middle", drop=True)
    return ScriptedReply(content=f"answer to {question}")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("KB_AGENT_API_KEY", "test-key")
    with OpenAIServer(script=_reply, model="scripted-gpt") as srv:
        yield srv


def _ctx(server: OpenAIServer, model_timeout: float, max_seconds: float) -> Settings:
    return Settings(
        base_url=server.base_url,
        model="scripted-gpt",
        model_max_retries=0,
        model_timeout=model_timeout,
        max_seconds=max_seconds,
    )


def _check(outcomes: list[Any]) -> None:
    """Each run's outcome is what its question asked for; a failure names the endpoint's problem."""
    for (question, _, max_seconds), outcome in zip(RUNS, outcomes, strict=True):
        if question.startswith("good"):
            assert isinstance(outcome, dict), f"{question}: {outcome!r}"
            assert outcome["messages"][-1].content == f"answer to {question}"
        elif question.startswith("drop"):
            assert isinstance(outcome, ModelError), f"{question}: {outcome!r}"
            assert "dropped the connection before its answer was complete" in str(outcome)
        elif max_seconds < SLOW:  # the wall-time budget: a message, never an exception
            assert isinstance(outcome, dict), f"{question}: {outcome!r}"
            last = outcome["messages"][-1]
            assert isinstance(last, AIMessage) and last.response_metadata["kb_agent_stop"] == "time"
            assert outcome["stop_reason"] == "time"
        else:
            assert isinstance(outcome, ModelError), f"{question}: {outcome!r}"
            assert "did not answer within 1 s" in str(outcome)


def test_concurrent_ainvoke_runs_fail_one_by_one_and_the_others_answer(server: OpenAIServer) -> None:
    graph = build_graph(InMemorySaver(), registry=builtin_registry(), knowledge=None)

    async def one(i: int, question: str, timeout: float, seconds: float) -> Any:
        config = {"configurable": {"thread_id": f"bad-{i}"}}
        return await graph.ainvoke(
            {"messages": [HumanMessage(question)]}, config, context=_ctx(server, timeout, seconds)
        )

    async def all_runs() -> list[Any]:
        runs = (one(i, *run) for i, run in enumerate(RUNS))
        return await asyncio.wait_for(asyncio.gather(*runs, return_exceptions=True), HANG_GUARD)

    _check(asyncio.run(all_runs()))


def test_a_connection_dropped_mid_stream_fails_that_astream_alone(server: OpenAIServer) -> None:
    graph = build_graph(InMemorySaver(), registry=builtin_registry(), knowledge=None)

    async def streamed(i: int, question: str) -> list[str]:
        config = {"configurable": {"thread_id": f"stream-{i}"}}
        tokens = []
        async for chunk, _ in graph.astream(
            {"messages": [HumanMessage(question)]},
            config,
            context=_ctx(server, 10, 300),
            stream_mode="messages",
        ):
            tokens.append(chunk.content)
        return tokens

    async def both() -> list[Any]:
        runs = [streamed(0, "good streamed"), streamed(1, "drop streamed")]
        return await asyncio.wait_for(asyncio.gather(*runs, return_exceptions=True), HANG_GUARD)

    good, dropped = asyncio.run(both())
    assert "".join(t for t in good if isinstance(t, str)) == "answer to good streamed"
    assert isinstance(dropped, ModelError) and "dropped the connection" in str(dropped)


def test_concurrent_invoke_threads_behave_the_same(server: OpenAIServer) -> None:
    graph = build_graph(InMemorySaver(), registry=builtin_registry(), knowledge=None)

    def one(i: int, question: str, timeout: float, seconds: float) -> Any:
        config = {"configurable": {"thread_id": f"sync-bad-{i}"}}
        try:
            return graph.invoke(
                {"messages": [HumanMessage(question)]}, config, context=_ctx(server, timeout, seconds)
            )
        except ModelError as exc:
            return exc

    with ThreadPoolExecutor(len(RUNS)) as pool:
        futures = [pool.submit(one, i, *run) for i, run in enumerate(RUNS)]
        _, late = wait(futures, timeout=HANG_GUARD)
        assert not late, f"{len(late)} run(s) still waiting on the endpoint"
    _check([f.result() for f in futures])
