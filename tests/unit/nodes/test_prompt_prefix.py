"""Consecutive model requests share a long prefix: a provider's prompt cache reuses it.

What changes least comes first: rules and summary, history, the question with this turn's memories and
passages, the turn's tool calls, and last the budget note, the one part that changes every round.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from models import ScriptedChatModel, tool_call
from nodes.settings import Settings
from stores.base import MemoryRecord, Passage

CONFIG = {"configurable": {"thread_id": "t1", "user_id": "alice"}}
NOTE = "Budget left this turn"


class Knowledge:
    def search(self, query: str, *, user_id: str, groups: Sequence[str], top_k: int = 5) -> list[Passage]:
        return [Passage(id="docs/a.md#0", text="Threads are kept in SQLite.", source="docs/a.md", score=0.9)]


class Memory:
    def recall(self, user_id: str, query: str, top_k: int = 5) -> list[MemoryRecord]:
        return [MemoryRecord(id="m1", user_id=user_id, memory_type="semantic", content="Likes short answers")]

    def update_from_turn(self, user_id: str, thread_id: str | None, messages: Sequence[BaseMessage]) -> int:
        return 0


def wire(messages: list[BaseMessage]) -> str:
    """A request serialised in order, roughly as a provider's prefix cache sees it."""
    rows: list[dict[str, Any]] = []
    for m in messages:
        calls = [[c["id"], c["name"], c["args"]] for c in getattr(m, "tool_calls", [])]
        rows.append(
            {"role": m.type, "content": m.text, "calls": calls, "call_id": getattr(m, "tool_call_id", "")}
        )
    return json.dumps(rows, ensure_ascii=False)


def shared_prefix(a: str, b: str) -> str:
    n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return a[:n]


def graph_for(model: ScriptedChatModel) -> Any:
    plain = Settings(
        rewrite_query=False, decompose_query=False
    )  # one model call per round, no query planning
    return build_graph(InMemorySaver(), model=model, knowledge=Knowledge(), memory=Memory(), settings=plain)


def test_a_turns_next_round_repeats_the_request_up_to_the_budget_note() -> None:
    model = ScriptedChatModel(
        [AIMessage("", tool_calls=[tool_call("calculator", {"expression": "6*7"})]), "42"]
    )
    graph_for(model).invoke({"messages": [HumanMessage("Where are threads kept? And what is 6*7?")]}, CONFIG)
    first, second = model.calls
    shared = shared_prefix(wire(first), wire(second))
    # Rules, the question, this turn's memories and passages: all before the note, all repeated.
    for part in (
        "You are kb-agent",
        "Where are threads kept?",
        "Likes short answers",
        "Threads are kept in SQLite",
    ):
        assert part in shared, part
    assert NOTE in wire(first)[len(shared) :]  # what the first request has beyond it is the note alone
    assert model.tools_seen[0] == model.tools_seen[1]
    # The round's only new messages are the call, its result and the note, which comes last.
    assert [m.type for m in second[-3:]] == ["ai", "tool", "human"]
    assert second[-2].content == "42"  # the tool result goes out verbatim, the note apart from it
    assert NOTE in second[-1].text and "SQLite" not in second[-1].text and "6*7" not in second[-1].text


def test_every_request_has_one_system_message_first() -> None:
    """Several chat templates (Qwen3.5+, Gemma…) reject a system message anywhere but first."""
    model = ScriptedChatModel(
        [AIMessage("", tool_calls=[tool_call("calculator", {"expression": "6*7"})]), "42"]
    )
    graph_for(model).invoke({"messages": [HumanMessage("What is 6*7?")]}, CONFIG)
    for call in model.calls:
        assert isinstance(call[0], SystemMessage)
        assert not any(isinstance(m, SystemMessage) for m in call[1:])
        users = [i for i, m in enumerate(call) if isinstance(m, HumanMessage)]
        assert all(b - a > 1 for a, b in itertools.pairwise(users))  # never two user messages in a row


def test_a_new_turn_repeats_the_previous_request_through_the_previous_question() -> None:
    model = ScriptedChatModel(["它们保存在 SQLite 里。", "They are in Chroma."])
    graph = graph_for(model)
    graph.invoke({"messages": [HumanMessage("线程存在哪里？")]}, CONFIG)
    graph.invoke({"messages": [HumanMessage("And where are memories kept?")]}, CONFIG)  # another language
    first, second = model.calls
    assert second[0] == first[0]  # the rules stay in the thread's language: the leading message is reused
    through_question = wire(first)[: wire(first).index("线程存在哪里？") + len("线程存在哪里？")]
    assert wire(second).startswith(through_question)
    assert model.tools_seen[0] == model.tools_seen[1]
