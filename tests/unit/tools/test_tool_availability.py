"""A tool whose feature is switched off for a run is neither offered to the model nor run if asked for.

With long-term memory off, ``remember``/``forget``/``search_memories`` would keep or look up memories no
turn recalls: they are left out of the request (smaller too: every tool's schema is sent each round),
and a call that names one anyway gets an error saying why.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import HumanMessage

from graph.builder import default_registry
from nodes.settings import Settings
from nodes.tool_choice import offered_tools
from tests.fixtures.tool_rounds import Call, Calls
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
    assert {"calculator", "search_knowledge"} <= off


def test_a_call_to_a_switched_off_tool_is_an_error_that_says_why(tmp_path: Path) -> None:
    off = settings(tmp_path, False)
    context = ToolContext(user_id="alice", settings=off, history=(HumanMessage("remember I like tea"),))
    call = Call(id="c1", name="remember", args={"content": "The user likes tea"})
    (outcome,) = Calls(default_registry()).run([call], context)
    assert outcome.status == "error"
    assert "long-term memory is off" in outcome.content
