"""One process, several event loops: each ``asyncio.run(graph.ainvoke(...))`` talks to the model afresh.

A script, a notebook or a test suite runs its turns on one loop after another. A model client whose
pooled connections belong to a loop that has since closed fails the next loop's request with "Event
loop is closed"; each loop must get connections of its own, and the sync path keeps working beside them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from graph.services import RunMemory
from tests.fixtures.openai_server import OpenAIServer, ScriptedReply


def calculator_then_answer(body: dict[str, Any]) -> ScriptedReply:
    messages = body["messages"]
    asked = max(i for i, m in enumerate(messages) if m.get("role") == "user" and "21 * 2" in str(m.get("content")))
    results = [m for m in messages[asked:] if m.get("role") == "tool"]  # a budget note may follow them
    if results:
        return ScriptedReply(content=f"The answer is {results[-1].get('content')}")
    return ScriptedReply(tool_calls=[{"name": "calculator", "arguments": {"expression": "21 * 2"}}])


@pytest.fixture
def endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    # keep-alive, as a provider: the client pools its connections between requests
    with OpenAIServer(script=calculator_then_answer, api_key="k", keep_alive=True) as server:
        for name, value in {
            "KB_AGENT_HOME": str(tmp_path),
            "KB_AGENT_EMBEDDER": "hashing",
            "KB_AGENT_MODEL": server.model,
            "KB_AGENT_BASE_URL": server.base_url,
            "KB_AGENT_API_KEY": "k",
            "KB_AGENT_LONG_TERM_MEMORY": "false",
            "KB_AGENT_REWRITE_QUERY": "false",
        }.items():
            monkeypatch.setenv(name, value)
        yield server


def test_turns_on_successive_event_loops_and_the_sync_path_all_answer(endpoint: OpenAIServer) -> None:
    graph = build_graph(InMemorySaver(), memory=RunMemory())
    answers = []
    for n in range(3):
        config = {"configurable": {"thread_id": f"loop-{n}"}}
        out = asyncio.run(graph.ainvoke({"messages": [HumanMessage("what is 21 * 2?")]}, config))
        answers.append(out["messages"][-1].content)
        out = graph.invoke({"messages": [HumanMessage("and 21 * 2 again?")]}, config)
        answers.append(out["messages"][-1].content)
    assert answers == ["The answer is 42"] * 6
