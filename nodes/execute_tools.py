"""``tools``: run the calls the model asked for, through the platform's checks, and report each one.

Calls the caller's roles do not permit are refused before their handler; high-impact calls wait for a
person's approval (an ``interrupt``) before anything of the round runs. Every call gets exactly one ToolMessage with its ``tool_call_id``, right after the assistant message
: results of calls with unparseable arguments, calls past the tool-call budget, and failed
calls included. Status events go to the ``custom`` stream as they happen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from nodes.agent import final_message
from nodes.budget import Budget
from nodes.context import Context, run_settings
from nodes.conversation import current_question, language, run_label
from nodes.node_io import IO, Node, Steps, dual_node
from nodes.settings import Settings
from nodes.state import State
from stores.tool_effects import ToolEffectLog
from tools.approval import interrupt_approver
from tools.executor import ToolCallRequest, ToolExecutor
from tools.permissions import grant_for
from tools.registry import ToolContext, ToolRegistry


def pending_calls(message: AIMessage) -> list[ToolCallRequest]:
    """The calls of an assistant message, malformed ones (``invalid_tool_calls``) included."""
    calls = [ToolCallRequest(c["id"] or "", c["name"], c["args"]) for c in message.tool_calls]
    for bad in message.invalid_tool_calls:
        # LangChain's parser message repeats the raw arguments and a docs link: the first line is the point.
        reason = (bad.get("error") or "malformed JSON").strip().splitlines()[0]
        calls.append(
            ToolCallRequest(bad.get("id") or "", bad.get("name") or "unknown", bad.get("args"), error=reason)
        )
    return calls


def _thread_id() -> str | None:
    try:
        return get_config().get("configurable", {}).get("thread_id")
    except RuntimeError:
        return None


def _step_scope(thread_id: str | None) -> str | None:
    """Thread and task of this tools step: the same when LangGraph re-runs the step on resume."""
    if thread_id is None:
        return None  # no checkpointer: nothing is ever resumed
    try:
        task = get_config().get("configurable", {}).get("checkpoint_ns", "")
    except RuntimeError:
        return None
    return f"{thread_id}|{task}"


def make_tools(
    registry: ToolRegistry,
    deployment: Settings | None = None,
    effects: Callable[[Settings], ToolEffectLog] | None = None,
) -> Node:
    """The tools node; ``effects`` opens the record of side-effecting calls for a run's settings."""

    def tools(state: State, runtime: Runtime[Context]) -> Steps:
        ctx = run_settings(runtime, deployment)
        budget = Budget.from_context(ctx)
        last = state.messages[-1]
        assert isinstance(last, AIMessage), "the tools node runs only after an assistant message"
        question, turn_id = current_question(state.messages)
        counters = budget.counters_for(state.budget, turn_id)
        calls = pending_calls(last)
        allowance = max(0, budget.max_tool_calls - counters["tool_calls"])
        to_run, refused = calls[:allowance], calls[allowance:]

        executor = ToolExecutor(registry, concurrency=ctx.tool_concurrency, timeout=ctx.tool_timeout)
        thread_id = _thread_id()
        scope = _step_scope(thread_id)
        tool_ctx = ToolContext(
            user_id=ctx.user_id,
            thread_id=thread_id,
            effects=effects(ctx).step(scope) if effects is not None and scope is not None else None,
            timezone=ctx.timezone,
            settings=ctx,
            run_id=run_label(runtime, turn_id),
            history=tuple(state.messages),
            answers=dict(state.answers),
            grant=grant_for(ctx),
        )
        # High-impact calls pause the graph here (interrupt) until a person answers; nothing has run yet.
        reviewed = executor.review(to_run, tool_ctx, interrupt_approver, runtime.stream_writer)
        outcomes = yield IO(
            lambda: executor.run(to_run, tool_ctx, emit=runtime.stream_writer, reviewed=reviewed),
            lambda: executor.arun(to_run, tool_ctx, emit=runtime.stream_writer, reviewed=reviewed),
        )
        messages: list[Any] = [
            ToolMessage(content=o.content, tool_call_id=o.call_id, name=o.name, status=o.status)
            for o in outcomes
        ]
        for call in refused:
            text = f"Error: not run: this turn's budget of {budget.max_tool_calls} tool calls is spent"
            messages.append(ToolMessage(content=text, tool_call_id=call.id, name=call.name, status="error"))
        counters["tool_calls"] += len(to_run)

        reason = budget.spent(counters)
        if reason:
            messages.append(final_message(budget.stop_message(reason, language(question) == "zh"), reason))
        return {"messages": messages, "budget": counters, "stop_reason": reason}

    return dual_node(tools, "tools")
