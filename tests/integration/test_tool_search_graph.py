"""Tool search inside the graph: with 500 application tools only a few are bound per round, find_tools
loads more for the next round, permissions filter before the search, and small catalogs skip it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from graph.builder import default_registry
from models.scripted import ScriptedChatModel, tool_call
from nodes.settings import Settings
from tests.fixtures.tool_catalog import catalog_500
from tools.registry import ToolRegistry
from tools.tool_search import FIND_TOOLS

# BM25 + domain routing (no model to load in a unit run), as a user whose role opens the app's tools.
KEYWORDS = Settings(
    tool_search_embedder="", roles="user,staff", role_permissions='{"staff": ["*:read", "*:write"]}'
)


def _registry(extra: int = 500, **changes: object) -> ToolRegistry:
    registry = default_registry()
    for spec in catalog_500()[:extra]:
        registry.register(spec)
    return registry


def _names(definitions: list[dict]) -> list[str]:
    return [d["function"]["name"] for d in definitions]


def test_a_big_catalog_binds_builtins_find_tools_and_eight_matches() -> None:
    registry = _registry()
    model = ScriptedChatModel(["ok"])
    build_graph(InMemorySaver(), model=model, registry=registry).invoke(
        {"messages": [HumanMessage("Please assign ticket 4521 to the billing team")]},
        {"configurable": {"thread_id": "t"}},
        context=KEYWORDS,
    )
    bound = _names(model.tools_seen[0])
    builtins = [s.name for s in default_registry()]
    searched = [n for n in bound if n not in builtins and n != FIND_TOOLS]
    assert FIND_TOOLS in bound and len(searched) == 8
    assert set(builtins) - {"delete_document"} <= set(bound)  # always on (delete needs kb:admin)
    assert "support_assign_ticket" in searched
    assert sum(n.startswith("support_") for n in searched) >= 5  # domain routing


def test_find_tools_loads_a_tool_for_the_next_round() -> None:
    registry = _registry()
    wanted = "support_escalate_customer_complaint"

    def second(messages: list, tools: list) -> AIMessage:
        found = json.loads(next(m for m in messages if isinstance(m, ToolMessage)).content)["tools"]
        assert wanted in [t["name"] for t in found]
        return AIMessage("", tool_calls=[tool_call(wanted, {"id": "c-17"})])

    model = ScriptedChatModel(
        [
            AIMessage("", tool_calls=[tool_call(FIND_TOOLS, {"query": "escalate customer complaint"})]),
            second,
            "done",
        ]
    )
    result = build_graph(InMemorySaver(), model=model, registry=registry).invoke(
        {"messages": [HumanMessage("what is 2+2")]},  # a question that searches to nothing relevant
        {"configurable": {"thread_id": "t"}},
        context=KEYWORDS,
    )
    assert wanted not in _names(model.tools_seen[0])
    assert wanted in _names(model.tools_seen[1]) and wanted in _names(model.tools_seen[2])
    called = [m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == wanted]
    assert called and called[0].status == "success"


def test_permission_filter_runs_before_the_search() -> None:
    registry = _registry()
    restricted = registry.get("support_escalate_ticket")
    # Re-register the best match with a permission nobody has: it must never be offered.
    rebuilt = ToolRegistry([s for s in registry if s.name != restricted.name])
    rebuilt.register(replace(restricted, permissions=("support:admin",)))
    question = "把这个工单升级处理"
    open_model = ScriptedChatModel(["ok"])
    build_graph(InMemorySaver(), model=open_model, registry=registry).invoke(
        {"messages": [HumanMessage(question)]}, {"configurable": {"thread_id": "t"}}, context=KEYWORDS
    )
    assert restricted.name in _names(open_model.tools_seen[0])  # the best match when permitted
    model = ScriptedChatModel(["ok"])
    build_graph(InMemorySaver(), model=model, registry=rebuilt).invoke(
        {"messages": [HumanMessage(question)]},
        {"configurable": {"thread_id": "t"}},
        context=KEYWORDS,
    )
    assert restricted.name not in _names(model.tools_seen[0])
    assert len([n for n in _names(model.tools_seen[0]) if n.startswith("support_")]) >= 1


@pytest.mark.parametrize("extra", [0, 8])
def test_a_small_catalog_is_bound_whole_without_find_tools(extra: int) -> None:
    registry = _registry(extra)
    model = ScriptedChatModel(["ok"])
    build_graph(InMemorySaver(), model=model, registry=registry).invoke(
        {"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "t"}}, context=KEYWORDS
    )
    bound = _names(model.tools_seen[0])
    assert FIND_TOOLS not in bound and FIND_TOOLS not in registry
    assert len(bound) == len(registry) - 1  # everything but delete_document (kb:admin)
