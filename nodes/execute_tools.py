"""``tools``: run the calls the model asked for with LangGraph's ``ToolNode``, and report each one.

Before any call of the round runs, this node settles what is not the tools' business: calls past the
turn's tool-call budget and calls whose arguments were not even JSON are answered here, and calls that
need a person are put to one (an ``interrupt``), all questions first so a pause never follows a side
effect. The remaining calls go to a ``ToolNode`` whose wrappers are the platform's policies
(``tools.policies``: permissions, approval bound to the call shown, run-once side effects, timeouts, the
cap on calls at once, the audit). Every call gets exactly one ToolMessage with its ``tool_call_id``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
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
from tools.approval import (
    Approver,
    interrupt_approver,
)
from tools.permissions import grant_for
from tools.policies import ToolStep
from tools.registry import ToolContext, ToolRegistry
from tools.rounds import ToolRounds, malformed

log = logging.getLogger("kb_agent.tools")


def _config() -> RunnableConfig:
    try:
        return get_config()
    except RuntimeError:
        return {}


def _step_scope(config: RunnableConfig) -> str | None:
    """Thread and task of this tools step: the same when LangGraph re-runs the step on resume."""
    configurable = config.get("configurable", {})
    thread_id = configurable.get("thread_id")
    if thread_id is None:
        return None  # no checkpointer: nothing is ever resumed
    return f"{thread_id}|{configurable.get('checkpoint_ns', '')}"


def make_tools(
    registry: ToolRegistry,
    deployment: Settings | None = None,
    effects: Callable[[Settings], ToolEffectLog] | None = None,
    approver: Approver = interrupt_approver,
) -> Node:
    """The tools node; ``effects`` opens the record of side-effecting calls for a run's settings."""
    rounds = ToolRounds(registry)

    def tools(state: State, runtime: Runtime[Context]) -> Steps:
        ctx = run_settings(runtime, deployment)
        budget = Budget.from_context(ctx)
        last = state.messages[-1]
        assert isinstance(last, AIMessage), "the tools node runs only after an assistant message"
        question, turn_id = current_question(state.messages)
        counters = budget.counters_for(state.budget, turn_id)
        calls = list(last.tool_calls)
        allowance = max(0, budget.max_tool_calls - counters["tool_calls"])
        to_run, over = calls[:allowance], calls[allowance:]

        config = _config()
        thread_id = config.get("configurable", {}).get("thread_id")
        scope = _step_scope(config)
        tool_ctx = ToolContext(
            user_id=ctx.user_id,
            thread_id=thread_id,
            timezone=ctx.timezone,
            settings=ctx,
            run_id=run_label(runtime, turn_id),
            history=tuple(state.messages),
            answers=dict(state.answers),
            grant=grant_for(ctx),
        )

        # High-impact calls pause the graph here (interrupt) until a person answers; nothing has run yet.
        review = rounds.review([dict(c) for c in to_run], tool_ctx, approver, runtime.stream_writer)
        runnable = [c for c in to_run if (c.get("id") or "") not in review.refused]
        answers: dict[str, ToolMessage] = {}
        if runnable:
            step = ToolStep(
                tool_ctx,
                approved=review.approved,
                effects=effects(ctx).step(scope) if effects is not None and scope is not None else None,
                timeout=ctx.tool_timeout,
                concurrency=ctx.tool_concurrency,
                emit=runtime.stream_writer,
            )
            shown = last.model_copy(update={"tool_calls": runnable, "invalid_tool_calls": []})
            round_state = replace(state, messages=[*state.messages[:-1], shown])
            output = yield IO(
                lambda: rounds.invoke(round_state, step, config),
                lambda: rounds.ainvoke(round_state, step, config),
            )
            for message in output:
                answers[message.tool_call_id] = message
        messages: list[Any] = []
        for call in calls:
            call_id = call.get("id") or ""
            if call_id in answers:
                messages.append(answers[call_id])
            elif call_id in review.refused:
                messages.append(
                    ToolMessage(content=review.refused[call_id], tool_call_id=call_id, name=call["name"], status="error")
                )
        for call in over:
            text = f"Error: not run: this turn's budget of {budget.max_tool_calls} tool calls is spent"
            messages.append(ToolMessage(content=text, tool_call_id=call.get("id") or "", name=call["name"], status="error"))
        messages.extend(malformed(last, runtime.stream_writer))
        counters["tool_calls"] += len(to_run)

        reason = budget.spent(counters)
        if reason:
            messages.append(final_message(budget.stop_message(reason, language(question) == "zh"), reason))
        return {"messages": messages, "budget": counters, "stop_reason": reason}

    return dual_node(tools, "tools")
