"""A tool whose feature is switched off for a run is neither offered to the model nor run if asked for.

With long-term memory off, ``remember``/``forget``/``search_memories`` would keep or look up memories no
turn recalls; with nothing ingested, ``search_knowledge``/``generate_summary`` can only come back empty.
They are left out of the request (smaller too: every tool's schema is sent each round), and a call that
names one anyway gets an error saying why.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import HumanMessage

from graph.builder import default_registry
from nodes.settings import Settings
from nodes.tool_choice import offered_tools
from tools.executor import ToolCallRequest, ToolExecutor
from tools.registry import ToolContext

MEMORY_TOOLS = {"remember", "forget", "search_memories"}


def settings(tmp_path: Path, memory: bool) -> Settings:
    return Settings(data_dir=str(tmp_path), embedder="hashing", long_term_memory=memory)


def test_memory_tools_are_offered_only_to_runs_with_long_term_memory(tmp_path: Path) -> None:
    registry = default_registry()
    question = [HumanMessage("remember that I prefer green tea")]
    on = {spec.name for spec in offered_tools(registry, question, settings(tmp_path, True))}
    off = {spec.name for spec in offered_tools(registry, question, settings(tmp_path, False))}
    assert on >= MEMORY_TOOLS
    assert not MEMORY_TOOLS & off
    assert {"calculator", "knowledge_stats"} <= off


def test_a_call_to_a_switched_off_tool_is_an_error_that_says_why(tmp_path: Path) -> None:
    off = settings(tmp_path, False)
    context = ToolContext(user_id="alice", settings=off, history=(HumanMessage("remember I like tea"),))
    call = ToolCallRequest(id="c1", name="remember", args={"content": "The user likes tea"})
    (outcome,) = ToolExecutor(default_registry()).run([call], context)
    assert outcome.status == "error"
    assert "long-term memory is off" in outcome.content


KB_SEARCH_TOOLS = {"search_knowledge", "generate_summary"}


def test_knowledge_search_is_offered_once_something_is_ingested(tmp_path: Path) -> None:
    from graph.services import ROOT

    registry = default_registry()
    question = [HumanMessage("what does the handbook say about leave?")]
    run = settings(tmp_path, False)
    empty = {spec.name for spec in offered_tools(registry, question, run)}
    assert not KB_SEARCH_TOOLS & empty
    assert {"calculator", "knowledge_stats"} <= empty  # "what is in the knowledge base?" still has an answer

    context = ToolContext(user_id="alice", settings=run, history=tuple(question))
    call = ToolCallRequest(id="c1", name="search_knowledge", args={"query": "leave"})
    (outcome,) = ToolExecutor(registry).run([call], context)
    assert outcome.status == "error" and "nothing has been ingested" in outcome.content

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "handbook.md").write_text("# Handbook\n\nEmployees get ten days of annual leave.", "utf-8")
    ROOT.services(run).knowledge(create=True).ingest([docs])
    ingested = {spec.name for spec in offered_tools(registry, question, run)}
    assert ingested >= KB_SEARCH_TOOLS  # the next round of the same deployment, no restart
    (outcome,) = ToolExecutor(registry).run([call], context)
    assert outcome.status == "success" and "handbook.md#0" in outcome.content
