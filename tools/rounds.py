"""One round of tool calls through the platform: ask people first, then LangGraph's ``ToolNode`` with the
platform's policies. The graph's tools node, ``kb-agent tools call`` and the benchmarks all run calls here,
so a call is checked the same way wherever it comes from.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest

from tools.approval import Approver, Review, describe_call, review_calls
from tools.nesting import is_depth_refusal
from tools.policies import STEP_KEY, Emit, ToolStep, chain, grant, platform_policies
from tools.registry import ToolContext, ToolError, ToolRegistry

log = logging.getLogger("kb_agent.tools")


def malformed(message: AIMessage, emit: Emit | None = None) -> list[ToolMessage]:
    """An answer for each call whose arguments were not valid JSON (``invalid_tool_calls``), reported on
    the status stream like any other failed call."""
    answers = []
    for bad in message.invalid_tool_calls:
        # LangChain's parser message repeats the raw arguments and a docs link: the first line is the point.
        reason = (bad.get("error") or "malformed JSON").strip().splitlines()[0]
        name = bad.get("name") or "unknown"
        if is_depth_refusal(reason):
            text = f"Error: {reason}"
        else:
            text = (
                f"Error: the arguments for {name!r} were not valid JSON ({reason}); send a JSON object "
                "that matches the tool's parameters"
            )
        answers.append(ToolMessage(content=text, tool_call_id=bad.get("id") or "", name=name, status="error"))
        if emit is not None:
            event = {"type": "tool_call", "tool": name, "call_id": bad.get("id") or "", "source": "unknown"}
            emit({**event, "status": "executing", "args": None})
            emit({**event, "status": "error", "error": text.removeprefix("Error: "), "duration_ms": 0.0, "cause": "arguments"})
    return answers


class ToolRounds:
    """The registry's tools in a ``ToolNode`` wrapped by the platform's policies, and the approval step
    that comes before them."""

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        step_for: Callable[[ToolCallRequest], ToolStep] | None = None,
        name: str = "tools",
    ) -> None:
        """``step_for`` works a call's round out from the graph it runs in (the agent's tools node);
        without it each round is handed in through the run's config (:meth:`call`)."""
        self.registry = registry
        wrap, awrap = chain(platform_policies(registry, step_for))
        self.node = ToolNode(
            registry.tools(), name=name, wrap_tool_call=wrap, awrap_tool_call=awrap, handle_tool_errors=False
        )
        self._graph: Any = None

    def review(
        self, calls: Sequence[dict[str, Any]], context: ToolContext, approver: Approver | None, emit: Emit
    ) -> Review:
        """Put every call that needs a person to one, before any call runs (see ``review_calls``)."""

        def logged(request: Any, decision: Any) -> None:
            log.info(
                "run=%s tool=%s call_id=%s approval=%s user=%s reason=%s",
                context.run_id or "-",
                request.tool,
                request.call_id,
                "granted" if decision.approved else "denied",
                context.user_id,
                decision.reason or "-",
            )

        return review_calls(
            [dict(c) for c in calls],
            self._asks(context),
            self._describe(context),
            approver,
            emit,
            source=lambda name: spec.source if (spec := self.registry.find(name)) is not None else "unknown",
            log=logged,
        )

    def step_config(self, config: RunnableConfig, step: ToolStep) -> RunnableConfig:
        """The run's config with the round riding in it, for the policies to read."""
        return {
            **config,
            "configurable": {**config.get("configurable", {}), STEP_KEY: step},
            "max_concurrency": step.concurrency,
        }

    def call(
        self,
        calls: Sequence[dict[str, Any]],
        context: ToolContext,
        *,
        approver: Approver | None = None,
        emit: Emit | None = None,
        timeout: float = 90.0,
        concurrency: int = 4,
    ) -> list[ToolMessage]:
        """Calls outside a graph (the command line, benchmarks): review, then run; one answer per call."""
        review, state, config = self._prepare(calls, context, approver, emit, timeout, concurrency)
        output = self._alone().invoke(state, config) if state is not None else None
        return self._answers(calls, review, output)

    async def acall(
        self,
        calls: Sequence[dict[str, Any]],
        context: ToolContext,
        *,
        approver: Approver | None = None,
        emit: Emit | None = None,
        timeout: float = 90.0,
        concurrency: int = 4,
    ) -> list[ToolMessage]:
        """:meth:`call` awaited: the tools' async paths, as under ``graph.ainvoke``."""
        review, state, config = self._prepare(calls, context, approver, emit, timeout, concurrency)
        output = await self._alone().ainvoke(state, config) if state is not None else None
        return self._answers(calls, review, output)

    def _prepare(
        self,
        calls: Sequence[dict[str, Any]],
        context: ToolContext,
        approver: Approver | None,
        emit: Emit | None,
        timeout: float,
        concurrency: int,
    ) -> tuple[Review, dict[str, Any] | None, RunnableConfig]:
        """The people's decisions, and the one-node graph's input and config for the calls left to run."""
        events: Emit = emit or (lambda _event: None)
        review = self.review(calls, context, approver, events)
        runnable = [c for c in calls if (c.get("id") or "") not in review.refused]
        step = ToolStep(
            context,
            approved=review.approved,
            effects=context.effects,
            timeout=timeout,
            concurrency=concurrency,
            emit=events,
        )
        message = AIMessage(content="", tool_calls=[{**c, "type": "tool_call"} for c in runnable])  # type: ignore[list-item]
        return review, ({"messages": [message]} if runnable else None), self.step_config({}, step)

    @classmethod
    def _answers(
        cls, calls: Sequence[dict[str, Any]], review: Review, output: dict[str, Any] | None
    ) -> list[ToolMessage]:
        answers = {answer.tool_call_id: answer for answer in (output or {}).get("messages", [])[1:]}
        return cls._in_order(calls, answers, review)

    @staticmethod
    def _in_order(calls: Sequence[dict[str, Any]], answers: dict[str, ToolMessage], review: Review) -> list[ToolMessage]:
        return [
            answers.get(c.get("id") or "")
            or ToolMessage(
                content=review.refused.get(c.get("id") or "", "Error: not run"),
                tool_call_id=c.get("id") or "",
                name=c["name"],
                status="error",
            )
            for c in calls
        ]

    def _alone(self) -> Any:
        """A graph of the ToolNode alone: LangGraph runs it (and gives it its runtime) outside the agent."""
        if self._graph is None:
            builder = StateGraph(MessagesState)
            builder.add_node("tools", self.node)
            builder.add_edge(START, "tools")
            self._graph = builder.compile()
        return self._graph

    def _asks(self, context: ToolContext) -> Callable[[dict[str, Any]], bool]:
        """Whether a call goes to a person: not one that would fail anyway (unknown, denied, bad arguments)."""
        permits = grant(context).permits

        def asks(call: dict[str, Any]) -> bool:
            spec = self.registry.find(call["name"])
            if spec is None or not spec.requires_approval or not permits(spec):
                return False
            args = call.get("args")
            if not isinstance(args, dict) or spec.unavailable_for(context.settings):
                return False
            fields = spec.parameters.get("properties") or {}
            return set(args) <= set(fields) and not spec.argument_problems(args)

        return asks

    def _describe(self, context: ToolContext) -> Callable[[dict[str, Any]], str]:
        """The tool's own account of the exact action, falling back to name and arguments."""

        def words(call: dict[str, Any]) -> str:
            spec = self.registry.get(call["name"])
            if spec.describe is not None:
                try:
                    return spec.describe(call.get("args") or {}, context)
                except ToolError:
                    raise
                except Exception:
                    log.exception("describing %s for approval failed", spec.name)
            return describe_call(call["name"], call.get("args") or {})

        return words
