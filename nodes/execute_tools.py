"""``review`` and ``tools``: a person decides first, then LangGraph's ``ToolNode`` runs the round.

``review`` runs only when a call of the round needs a person (every such call is put to one, an
``interrupt``, before anything of the round runs, all questions first, and the decisions go into the state)
or when the round's assistant message was not the agent node's (a caller's, written in its name: its calls
are then counted against the turn's budget here).
``tools`` is a ``ToolNode`` whose wrappers are the platform's policies (``tools.policies``): permissions,
arguments, the approval given for this exact call, run-once side effects, timeouts, the cap on calls at
once, the audit. Each call gets exactly one ToolMessage with its ``tool_call_id``; calls past the turn's
tool-call budget are answered by the policies without running (the agent node counted them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.config import get_config
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime

from nodes.budget import ADMITTED, OVER_BUDGET, Budget
from nodes.context import Context, run_settings
from nodes.conversation import current_question, run_label
from nodes.settings import Settings
from nodes.state import State
from stores.tool_effects import ToolEffectLog
from tools.approval import Approver, interrupt_approver
from tools.permissions import grant_for
from tools.policies import ToolStep
from tools.registry import ToolContext, ToolRegistry
from tools.rounds import ToolRounds, malformed


def pending(messages: list[Any]) -> AIMessage | None:
    """The assistant message whose calls the round runs: the latest one, if the model asked for tools."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message if message.tool_calls else None
        if not isinstance(message, ToolMessage):
            return None
    return None


def _step_scope(config: Mapping[str, Any]) -> str | None:
    """Thread and task of this tools step: the same when LangGraph re-runs the step on resume."""
    configurable = config.get("configurable", {})
    thread_id = configurable.get("thread_id")
    if thread_id is None:
        return None  # no checkpointer: nothing is ever resumed
    return f"{thread_id}|{configurable.get('checkpoint_ns', '')}"


def tool_context(state: State, runtime: Any, ctx: Settings, config: Mapping[str, Any]) -> ToolContext:
    """What a tool may know about the run without the model supplying it."""
    _, turn_id = current_question(state.messages)
    return ToolContext(
        user_id=ctx.user_id,
        thread_id=config.get("configurable", {}).get("thread_id"),
        timezone=ctx.timezone,
        settings=ctx,
        run_id=run_label(runtime, turn_id),
        history=tuple(state.messages),
        answers=dict(state.answers),
        grant=grant_for(ctx),
    )


def make_tools(
    registry: ToolRegistry,
    deployment: Settings | None = None,
    effects: Callable[[Settings], ToolEffectLog] | None = None,
) -> ToolNode:
    """The tools node: a ``ToolNode`` over the registry's tools; ``effects`` opens the record of
    side-effecting calls for a run's settings."""

    def step_for(request: ToolCallRequest) -> ToolStep:
        runtime, state = request.runtime, request.state
        ctx = run_settings(runtime, deployment)  # type: ignore[arg-type]  # a ToolRuntime reads like a Runtime
        config = runtime.config or {}
        scope = _step_scope(config)
        return ToolStep(
            tool_context(state, runtime, ctx, config),
            approved=approved(state),
            refused=refused(state, Budget.from_context(ctx)),
            effects=effects(ctx).step(scope) if effects is not None and scope is not None else None,
            timeout=ctx.tool_timeout,
            concurrency=ctx.tool_concurrency,
            emit=runtime.stream_writer,
        )

    return ToolRounds(registry, step_for=step_for, name="tools").node


def approved(state: State) -> dict[str, str]:
    """The calls a person approved in this round (call id -> digest of the call shown)."""
    message = pending(state.messages)
    decided = state.approvals or {}
    if message is None or decided.get("message") != message.id:
        return {}  # decisions about another round's calls, or none
    return {k: v["digest"] for k, v in (decided.get("calls") or {}).items() if "digest" in v}


def refused(state: State, budget: Budget) -> dict[str, str]:
    """The answers the round's calls get instead of running: rejected by a person, past the turn's budget,
    or every call of an assistant message that was never admitted (one a caller wrote in a node's name)."""
    message = pending(state.messages)
    if message is None:
        return {}
    counters = state.budget or {}
    if counters.get(ADMITTED) != message.id:
        text = "Error: not run: these calls were not admitted to the turn (write them as the agent's)"
        return {call.get("id") or "": text for call in message.tool_calls}
    spent = f"Error: not run: this turn's budget of {budget.max_tool_calls} tool calls is spent"
    answers = {call_id: spent for call_id in counters.get(OVER_BUDGET) or []}
    decided = state.approvals or {}
    if decided.get("message") == message.id:
        answers.update({k: v["refused"] for k, v in (decided.get("calls") or {}).items() if "refused" in v})
    return answers


def make_review(
    registry: ToolRegistry, deployment: Settings | None = None, approver: Approver = interrupt_approver
) -> Callable[..., dict[str, Any]]:
    """The review node: admits a round of calls the agent node did not (a caller's, written in its name)
    to the turn's budget, and asks a person about each call that needs one, before any call runs."""
    rounds = ToolRounds(registry)

    def review(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        ctx = run_settings(runtime, deployment)
        message = pending(state.messages)
        if message is None:
            return {"approvals": {}}
        update: dict[str, Any] = {}
        _, turn_id = current_question(state.messages)
        budget = Budget.from_context(ctx)
        counters = budget.counters_for(state.budget, turn_id)
        if counters.get(ADMITTED) != message.id:
            budget.admit(counters, message)
            update["budget"] = counters
            answered = malformed(message, runtime.stream_writer)
            if answered:
                update["messages"] = answered
        over = set(counters.get(OVER_BUDGET) or [])
        calls = [dict(c) for c in message.tool_calls if (c.get("id") or "") not in over]
        try:
            config = get_config()
        except RuntimeError:
            config = {}
        decided = rounds.review(calls, tool_context(state, runtime, ctx, config), approver, runtime.stream_writer)
        verdicts: dict[str, dict[str, str]] = {k: {"digest": v} for k, v in decided.approved.items()}
        verdicts.update({k: {"refused": v} for k, v in decided.refused.items()})
        update["approvals"] = {"message": message.id, "calls": verdicts}
        return update

    return review


def needs_review(registry: ToolRegistry, state: State, message: AIMessage) -> bool:
    """Whether the round goes through the review node: a call is for a tool that asks a person first, or
    the agent node did not admit the message (the review node then counts its calls)."""
    if (state.budget or {}).get(ADMITTED) != message.id:
        return True
    return needs_person(registry, message)


def needs_person(registry: ToolRegistry, message: AIMessage) -> bool:
    """Whether a call of ``message`` is for a tool that asks a person first (the approve node decides the
    rest: a call that would fail anyway is not put to anyone)."""
    return any(
        (spec := registry.find(call["name"])) is not None and spec.requires_approval for call in message.tool_calls
    )
