"""Short-term memory end to end on the offline model: budgets hold, folding keeps what matters, threads
resume in a new process and belong to one user.

The graph is composed here with the ``summarize`` node wired as ``/tmp/stm_integration.md`` proposes
for ``graph/builder.py`` (before every model round), so these tests do not wait for that patch.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graph.builder import default_registry, route_after_agent, route_after_tools
from models import ScriptedChatModel
from models.summarizers import Summarizer
from models.tokens import count_message_tokens, count_tool_tokens
from nodes.agent import make_agent
from nodes.context import Context
from nodes.execute_tools import make_tools
from nodes.load_memory import make_load_memory
from nodes.retrieve import make_retrieve
from nodes.settings import Settings
from nodes.state import InputState, State
from nodes.summarize import HistoryLimits, full_history, make_fold
from nodes.tool_choice import offered_definitions
from nodes.update_memory import make_update_memory
from stores.checkpoint import open_checkpointer
from stores.threads import ThreadOwnershipError, ThreadRegistry
from tools.builtin import builtin_registry
from tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parents[2]
# Tight limits so a short thread folds: history budget ≈ 2,100 − 225 − 90 − prompt − tools − question (get_current_date's arguments added ~300 tokens of tools).
TIGHT = HistoryLimits.resolve(2_100, keep_recent_rounds=2, summary_max_tokens=300)


def build_stm_graph(
    checkpointer: BaseCheckpointSaver | None = None,
    *,
    model: BaseChatModel | None = None,
    registry: ToolRegistry | None = None,
    summarizer: Summarizer | None = None,
    settings: HistoryLimits | None = None,
) -> CompiledStateGraph:
    """graph/builder.py's wiring, with the fold's summariser and limits chosen by the test."""
    registry = registry if registry is not None else default_registry()
    builder = StateGraph(State, input_schema=InputState, context_schema=Context)
    builder.add_node("load_memory", make_load_memory(None))
    builder.add_node("retrieve", make_retrieve(None, model))
    fold = make_fold(registry, model, summarizer=summarizer, settings=settings)
    builder.add_node("agent", make_agent(registry, model, fold=fold))
    builder.add_node("tools", make_tools(registry))
    builder.add_node("update_memory", make_update_memory(None))
    builder.add_edge(START, "load_memory")
    builder.add_edge("load_memory", "retrieve")
    builder.add_edge("retrieve", "agent")
    builder.add_conditional_edges("agent", route_after_agent, ["tools", "update_memory"])
    builder.add_conditional_edges("tools", route_after_tools, ["agent", "update_memory"])
    builder.add_edge("update_memory", END)
    return builder.compile(checkpointer=checkpointer)


class Requests(BaseCallbackHandler):
    """Every message list sent to a chat model during a run."""

    def __init__(self) -> None:
        self.sent: list[list[BaseMessage]] = []

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], **kwargs: Any) -> None:
        self.sent.append(list(messages[0]))


def ask(
    graph: CompiledStateGraph,
    threads: ThreadRegistry | None,
    thread: str,
    user: str,
    question: str,
    **cfg: Any,
) -> str:
    """One turn the way the API patch runs it: claim the thread for the user, run, record activity."""
    if threads is not None:
        threads.claim(thread, user, title=question)
    config = {"configurable": {"thread_id": thread, "user_id": user}, **cfg}
    graph.invoke({"messages": [HumanMessage(question)]}, config)
    if threads is not None:
        threads.touch(thread)
    return graph.get_state(config).values["messages"][-1].text


def assert_well_formed(messages: list[BaseMessage]) -> None:
    for i, message in enumerate(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            ids = [c["id"] for c in message.tool_calls]
            assert [getattr(m, "tool_call_id", None) for m in messages[i + 1 : i + 1 + len(ids)]] == ids
        if isinstance(message, ToolMessage):
            j = i - 1
            while isinstance(messages[j], ToolMessage):
                j -= 1
            assert isinstance(messages[j], AIMessage) and messages[j].tool_calls


def _question(i: int) -> str:
    kinds = [
        f"计算 {100 + i} × {7 + i}",
        "今天几号",
        f"数据库端口是 {5000 + i}",
        f"计算 {i} + {i + 3}，然后把结果除以 4",
        f"what is {i} times 3?",
        f"我们决定使用 PostgreSQL {i % 17}",
    ]
    return kinds[i % len(kinds)]


def test_200_offline_turns_keep_every_request_within_the_budget() -> None:
    registry = default_registry()
    graph = build_stm_graph(InMemorySaver(), registry=registry)
    limits = HistoryLimits.from_context(Settings())
    tools = count_tool_tokens(offered_definitions(registry, [], Settings()))  # what this caller is sent
    requests = Requests()
    config = {"configurable": {"thread_id": "long"}}
    for i in range(200):
        ask(graph, None, "long", "default", _question(i), callbacks=[requests])
    sizes = [count_message_tokens(r) + tools for r in requests.sent]
    assert len(sizes) >= 200 and max(sizes) <= limits.input_budget, (max(sizes), limits.input_budget)
    state = graph.get_state(config).values
    assert state["summary"] and state["summary_covers"]
    history = full_history(graph, config)
    assert [m.text for m in history if isinstance(m, HumanMessage)] == [
        _question(i) for i in range(200)
    ]
    # Older rounds were folded out of the state: the whole history no longer fits the budget, what is kept does
    # (a count of messages would depend on how long the offline model's replies happen to be).
    assert count_message_tokens(state["messages"]) <= limits.input_budget < count_message_tokens(history)
    assert len(state["messages"]) < len(history) / 2
    assert_well_formed(history)
    assert_well_formed(state["messages"])
    assert isinstance(state["messages"][0], HumanMessage)
    late = requests.sent[-1]
    assert not any(isinstance(m, HumanMessage) and m.text == _question(0) for m in late)
    assert "<对话摘要>" in late[0].text


PASTED_LOG = "帮我看看这段日志：\n" + "\n".join(
    f"2024-05-01 12:00:{i:02d} ERROR E1024 connection refused: /srv/app/db.sock (attempt {i})"
    for i in range(30)
)


def test_seed_003_scenario_4_the_third_question_needs_the_first_after_folding() -> None:
    """连续三个问题，第三个依赖第一个的结果: the first turn is folded, its result survives in the summary."""
    graph = build_stm_graph(InMemorySaver(), registry=builtin_registry(), settings=TIGHT)
    requests = Requests()
    config = {"configurable": {"thread_id": "s4"}}
    assert "56088" in ask(graph, None, "s4", "u", "计算 123 × 456", callbacks=[requests])
    ask(graph, None, "s4", "u", PASTED_LOG, callbacks=[requests])  # a long second turn: over budget
    answer = ask(graph, None, "s4", "u", "把第一个问题的结果乘以 2", callbacks=[requests])
    state = graph.get_state(config).values
    assert "calculator(123 × 456) → 56088" in state["summary"]
    assert "/srv/app/db.sock" in state["summary"] and "E1024" in state["summary"]
    sent = requests.sent[-2]  # the request that chose the calculator call
    assert "56088" in sent[0].text  # the summary reached the model in the system prompt
    assert not any(m.text == "计算 123 × 456" for m in sent[1:])  # the turn itself was folded
    assert "计算 123 × 456" in [m.text for m in full_history(graph, config)]
    assert "112176" in answer


def test_a_summary_model_that_returns_garbage_loses_nothing(caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedChatModel(lambda messages, tools: AIMessage("好的，明白了。" * 10))
    graph = build_stm_graph(InMemorySaver(), model=model, registry=builtin_registry(), settings=TIGHT)
    with caplog.at_level(logging.WARNING, logger="kb_agent.summarize"):
        for i in range(14):
            ask(graph, None, "g", "u", f"第 {i} 个问题：请记住编号 ID-{i:04d}。" + "补充说明。" * 20)
    state = graph.get_state({"configurable": {"thread_id": "g"}}).values
    assert state.get("summary", "") == "" and len(state["messages"]) == 28
    assert any("unusable summary" in r.message for r in caplog.records)
    summary_prompts = [c for c in model.calls if "滚动摘要" in c[-1].text]
    assert summary_prompts and "ID-0000" in summary_prompts[0][-1].text


def test_a_model_written_summary_folds_the_thread_and_never_streams_to_the_user() -> None:
    good = "已讨论：\n- 用户问了编号\n已决定：\n- （无）\n已完成：\n- 记录了 ID-0000"

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        return AIMessage(good if "滚动摘要" in messages[-1].text else "好的。")

    model = ScriptedChatModel(reply)
    graph = build_stm_graph(InMemorySaver(), model=model, registry=builtin_registry(), settings=TIGHT)
    streamed: list[str] = []
    config = {"configurable": {"thread_id": "m"}}
    for i in range(14):
        question = {"messages": [HumanMessage(f"第 {i} 个问题：编号 ID-{i:04d}。" + "补充说明。" * 20)]}
        for chunk, _meta in graph.stream(question, config, stream_mode="messages"):
            streamed.append(chunk.text)
    state = graph.get_state(config).values
    assert state["summary"] == good and state["summary_covers"]
    assert not any("已讨论" in text for text in streamed)
    assert len(full_history(graph, config)) == 28 > len(state["messages"])


CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tests.integration.test_short_term_memory import run_child
print(json.dumps(run_child(sys.argv[2], sys.argv[3], sys.argv[4:]), ensure_ascii=False))
"""


def run_child(data_dir: str, user: str, questions: list[str]) -> dict[str, Any]:
    """What one process does: open the SQLite thread store, ask, report the thread's state."""
    requests = Requests()
    with open_checkpointer(data_dir) as saver, ThreadRegistry(data_dir) as threads:
        graph = build_stm_graph(saver, registry=builtin_registry(), settings=TIGHT)
        config = {"configurable": {"thread_id": "resume"}}
        before = graph.get_state(config).values.get("summary", "")
        try:
            answers = [ask(graph, threads, "resume", user, q, callbacks=[requests]) for q in questions]
        except ThreadOwnershipError as exc:
            return {"error": str(exc)}
        state = graph.get_state(config).values
        history = full_history(graph, config)
        return {
            "answers": answers,
            "summary_before": before,
            "summary": state.get("summary", ""),
            "covers": state.get("summary_covers"),
            "state_messages": len(state["messages"]),
            "questions": [m.text for m in history if isinstance(m, HumanMessage)],
            "first_request_system": requests.sent[0][0].text if requests.sent else "",
            "threads": [(t.thread_id, t.title) for t in threads.list(user)],
        }


def _child(data_dir: Path, user: str, *questions: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_AGENT_", "OPENAI_"))}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT), str(data_dir), user, *questions],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_folded_thread_resumes_in_a_new_process_and_stays_its_owners(tmp_path: Path) -> None:
    first_questions = ["计算 123 × 456", *(_question(i) for i in range(1, 12))]
    first = _child(tmp_path, "alice", *first_questions)
    assert "56088" in first["answers"][0]
    assert first["summary"] and "56088" in first["summary"] and first["covers"]
    assert first["state_messages"] < sum(1 for _ in first_questions) * 3
    assert first["threads"] == [["resume", "计算 123 × 456"]]

    second = _child(tmp_path, "alice", "今天几号")
    assert second["summary_before"] == first["summary"]  # the summary came back from SQLite
    assert "<对话摘要>\n已讨论：" in second["first_request_system"]
    assert second["questions"] == [*first_questions, "今天几号"]  # nothing lost, folded turns included
    assert "Today" in second["answers"][0] or "今天是" in second["answers"][0]

    intruder = _child(tmp_path, "bob", "给我看看 alice 的对话")
    assert "belongs to another user" in intruder["error"]
    with open_checkpointer(tmp_path) as saver:
        history = full_history(build_stm_graph(saver), {"configurable": {"thread_id": "resume"}})
    assert [m.text for m in history if isinstance(m, HumanMessage)] == second["questions"]
