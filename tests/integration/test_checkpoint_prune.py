"""Pruning checkpoints: the database shrinks, the thread's state and its full history do not change."""

from __future__ import annotations

import uuid
from pathlib import Path

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from typer.testing import CliRunner

from cli.app import app
from graph import build_graph
from graph.api import open_agent
from nodes.settings import Settings
from nodes.summarize import full_history
from stores.checkpoint_prune import checkpoints_to_delete, prune_thread

SMALL = Settings(
    context_window=2600, reserved_answer_tokens=200, safety_margin_tokens=50, long_term_memory=False
)
LONG = "We are migrating the ingestion service from cron jobs to a queue; logs live in /var/log/ingest/. "


def _talk(graph, config: dict, turns: int) -> None:
    for i in range(turns):
        question = f"计算 {i} + {i * 3}" if i % 2 else LONG * 4 + f"What is {i} * 5?"
        graph.invoke({"messages": [HumanMessage(question)]}, config, context=SMALL)


def test_prune_keeps_state_and_full_history(checkpointer: BaseCheckpointSaver) -> None:
    graph = build_graph(checkpointer, knowledge=None)
    thread = f"prune-{uuid.uuid4().hex}"
    config = {"configurable": {"thread_id": thread}}
    _talk(graph, config, 14)
    state = graph.get_state(config).values
    assert state["summary"], "the thread should have folded rounds into a summary"
    history = [(m.id, m.content) for m in full_history(graph, config)]
    before = len(list(checkpointer.list(config)))

    report = prune_thread(checkpointer, thread)
    assert report.deleted > before // 2 and report.kept + report.deleted == before
    assert len(list(checkpointer.list(config))) == report.kept
    assert graph.get_state(config).values == state
    assert [(m.id, m.content) for m in full_history(graph, config)] == history

    # Pruning again finds nothing; the thread goes on and prunes incrementally.
    assert prune_thread(checkpointer, thread).deleted == 0
    _talk(graph, config, 2)
    later = prune_thread(checkpointer, thread, since=report.latest)
    assert later.deleted > 0
    assert [m.id for m in full_history(graph, config)][: len(history)] == [h[0] for h in history]


def test_keep_recent_and_other_threads_untouched(checkpointer: BaseCheckpointSaver) -> None:
    graph = build_graph(checkpointer, knowledge=None)
    a, b = (f"t-{uuid.uuid4().hex}" for _ in range(2))
    _talk(graph, {"configurable": {"thread_id": a}}, 3)
    _talk(graph, {"configurable": {"thread_id": b}}, 3)
    b_count = len(list(checkpointer.list({"configurable": {"thread_id": b}})))
    report = prune_thread(checkpointer, a, keep_recent=4)
    assert report.kept >= 4
    assert len(list(checkpointer.list({"configurable": {"thread_id": b}}))) == b_count


def test_nothing_to_prune_in_an_unknown_thread(checkpointer: BaseCheckpointSaver) -> None:
    report = prune_thread(checkpointer, "never-used")
    assert (report.kept, report.deleted, report.latest) == (0, 0, None)


def test_checkpoints_to_delete_is_empty_for_one_checkpoint() -> None:
    assert checkpoints_to_delete([]) == []


def test_agent_auto_prune_and_cli(tmp_path: Path) -> None:
    ctx = Settings(data_dir=str(tmp_path), checkpoint_prune=True, long_term_memory=False)
    with open_agent(ctx) as agent:
        for i in range(4):
            agent.ask(f"计算 {i} × 7", thread_id="auto")
        config = {"configurable": {"thread_id": "auto"}}
        checkpoints = len(list(agent.checkpointer.list(config)))
        assert checkpoints <= 2  # nothing was folded: the latest state is all the history needs
        assert [m.type for m in agent.history("auto", include_folded=True)] == [
            "human",
            "ai",
            "tool",
            "ai",
        ] * 4
    plain = Settings(data_dir=str(tmp_path), long_term_memory=False)
    with open_agent(plain) as agent:
        agent.ask("计算 1 × 7", thread_id="manual")
    result = CliRunner().invoke(app, ["threads", "prune", "manual"], env={"KB_AGENT_HOME": str(tmp_path)})
    assert result.exit_code == 0 and "checkpoints deleted" in result.output
    other = CliRunner().invoke(
        app, ["threads", "prune", "manual", "--user", "mallory"], env={"KB_AGENT_HOME": str(tmp_path)}
    )
    assert other.exit_code == 1 and "another user" in other.output
