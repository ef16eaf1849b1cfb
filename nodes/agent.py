"""``agent``: the model decides — answer now, or ask for tools.

The budget is checked before every request, the model is told what is left, and retrieved passages,
recalled memories and the running summary reach it as marked data blocks, laid out by
:func:`nodes.history.request` so that consecutive requests share a long prefix.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
import uuid
from collections.abc import Mapping
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable
from langgraph.graph.message import Messages, add_messages
from langgraph.runtime import Runtime

from models import ChatModelFactory, get_chat_model
from models.deadline import ModelTimeout, await_with_deadline, call_with_deadline, interruptible
from models.errors import ModelError, describe_model_error
from models.local import LocalChatModel
from models.tokens import calibration, count_message_tokens, count_tool_tokens, estimate_tokens
from nodes import history, prompts
from nodes.budget import Budget
from nodes.context import Context, run_settings
from nodes.conversation import current_question, language, run_label, unsummarised
from nodes.node_io import IO, Node, NodeBody, Steps, dual_node
from nodes.settings import Settings
from nodes.state import State
from nodes.tool_choice import offered_definitions
from stores.feedback import answer_digest, cited_ids
from tools.nesting import without_deep_calls
from tools.registry import ToolRegistry
from tools.rounds import malformed

log = logging.getLogger("kb_agent.agent")


class TurnOutOfTime(Exception):
    """The model had not answered when the turn's wall-time budget ran out."""


def final_message(text: str, reason: str) -> AIMessage:
    """An answer the application writes itself (budget stop, empty question): marked so callers can tell."""
    return AIMessage(content=text, response_metadata={"kb_agent_stop": reason, "finish_reason": "stop"})


def with_call_ids(response: AIMessage) -> AIMessage:
    """The reply with an id on every tool call: some OpenAI-compatible servers send none, and a result
    must name its call (the call id is checked first), or the next request cannot be built."""
    missing = [c for c in [*response.tool_calls, *response.invalid_tool_calls] if not c.get("id")]
    if not missing:
        return response
    log.info("node=agent %d tool call(s) arrived without an id: assigned", len(missing))

    def fixed(calls: list[Any]) -> list[Any]:
        return [c if c.get("id") else {**c, "id": f"call_{uuid.uuid4().hex[:24]}"} for c in calls]

    tool_calls, invalid = fixed(response.tool_calls), fixed(response.invalid_tool_calls)
    wire = response.additional_kwargs.get("tool_calls")
    kwargs = dict(response.additional_kwargs)
    if isinstance(wire, list) and len(wire) == len(tool_calls) + len(invalid):
        ids = [c["id"] for c in [*tool_calls, *invalid]]
        kwargs["tool_calls"] = [{**w, "id": w.get("id") or i} for w, i in zip(wire, ids, strict=True)]
    return response.model_copy(
        update={"tool_calls": tool_calls, "invalid_tool_calls": invalid, "additional_kwargs": kwargs}
    )


def folded_state(state: State, update: dict[str, Any]) -> State:
    """``state`` as the fold's ``update`` leaves it (messages through their reducer)."""
    if not update:
        return state
    changes = {key: value for key, value in update.items() if key != "messages"}
    if "messages" in update:
        # a list of messages is a list of message-likes: add_messages reads it and returns a new list
        changes["messages"] = add_messages(cast(Messages, state.messages), update["messages"])
    return dataclasses.replace(state, **changes)


def joined(first: dict[str, Any], then: dict[str, Any]) -> dict[str, Any]:
    """One node update out of two in sequence (their messages in order, the later value otherwise)."""
    both = {**first, **then}
    if "messages" in first and "messages" in then:
        both["messages"] = [*first["messages"], *then["messages"]]
    return both


def make_agent(
    registry: ToolRegistry,
    model: BaseChatModel | None = None,
    deployment: Settings | None = None,
    *,
    chat_models: ChatModelFactory = get_chat_model,
    fold: NodeBody | None = None,
) -> Node:
    """The agent node over ``registry``; ``model`` overrides the per-run choice (tests, benchmarks), which
    is otherwise ``chat_models(run)`` (the composition root's shared clients).

    ``fold`` (``nodes.summarize.make_fold``) runs before each model round, in the same step: it brings the
    request within its budget (passages dropped, old rounds folded into the summary) only when needed, and
    a step of its own would cost every round a checkpoint of the whole state.
    """

    def agent(state: State, runtime: Runtime[Context]) -> Steps:
        ctx = run_settings(runtime, deployment)
        budget = Budget.from_context(ctx)
        question, turn_id = current_question(state.messages)
        lang = language(question)
        counters = budget.counters_for(state.budget, turn_id)
        if not question.strip():
            return {
                "messages": [final_message(prompts.EMPTY_QUESTION[lang], "empty_question")],
                "budget": counters,
                "stop_reason": "empty_question",
            }
        reason = budget.spent(counters)
        if reason:
            return {
                "messages": [final_message(budget.stop_message(reason, lang == "zh"), reason)],
                "budget": counters,
                "stop_reason": reason,
            }
        if fold is None:
            return (yield from decide(state, runtime, ctx, budget, counters, lang, turn_id))
        update = yield from fold(state, runtime)
        decided = yield from decide(folded_state(state, update), runtime, ctx, budget, counters, lang, turn_id)
        return joined(update, decided)

    def decide(
        state: State,
        runtime: Runtime[Context],
        ctx: Settings,
        budget: Budget,
        counters: dict[str, Any],
        lang: str,
        turn_id: str | None,
    ) -> Steps:
        """One model round on ``state`` as the fold left it."""
        request = history.request(
            unsummarised(state.messages, state.summary_covers),
            remaining=budget.remaining(counters),
            summary=state.summary,
            memories=state.memories,
            passages=state.passages,
        )
        chat = model or chat_models(ctx)
        definitions = offered_definitions(registry, state.messages, ctx)
        bound = chat.bind_tools(definitions) if definitions else chat
        started = time.perf_counter()
        try:
            response = yield model_call(chat, bound, request, budget.remaining(counters)["seconds"])
        except TurnOutOfTime:
            log.warning(
                "run=%s node=agent the model had not answered when the turn's wall time ran out",
                run_label(runtime, turn_id),
            )
            return {
                "messages": [final_message(budget.stop_message("time", lang == "zh"), "time")],
                "budget": counters,
                "stop_reason": "time",
            }
        except ModelError:
            raise
        except Exception as exc:
            described = describe_model_error(exc, ctx)
            if described is None:
                raise
            raise described from exc
        if not isinstance(response, AIMessage):
            response = AIMessage(content=response.text)
        response = without_deep_calls(response)  # before anything below walks the arguments
        response = with_call_ids(response)

        usage: Mapping[str, Any] = response.usage_metadata or {}
        if model is None and not ctx.uses_offline_model and usage.get("input_tokens"):
            # The endpoint's own count teaches the estimate its tokenizer (the summarize node's budget).
            estimated = count_message_tokens(request) + count_tool_tokens(definitions)
            calibration.observe(ctx.model_name, estimated, int(usage["input_tokens"]))
        used = usage.get("total_tokens") or (
            count_message_tokens(request) + estimate_tokens(response.text)
        )
        counters["rounds"] += 1
        counters["tokens"] += int(used)
        log.info(
            "run=%s node=agent model=%s round=%d tokens=%d tool_calls=%d duration_ms=%.1f",
            run_label(runtime, turn_id),
            ctx.model_name,
            counters["rounds"],
            used,
            len(response.tool_calls),
            (time.perf_counter() - started) * 1000,
        )
        runtime.stream_writer(  # the live trace (kb-agent ask -v): what the model was offered and chose
            {
                "type": "model_round",
                "round": counters["rounds"],
                "model": ctx.model_name,
                "tools_offered": [d.get("function", d).get("name") for d in definitions],
                "tool_calls": [{"name": c["name"], "args": c["args"]} for c in response.tool_calls],
                "tokens": int(used),
            }
        )
        if response.tool_calls and budget.note_calls(counters, response.tool_calls):
            # The repeated call is not run: the assistant message is replaced so no call goes unanswered.
            text = budget.stop_message("repeated_call", lang == "zh")
            return {
                "messages": [final_message(text, "repeated_call")],
                "budget": counters,
                "stop_reason": "repeated_call",
            }
        # Decisions about calls are about one round's: none carries over to the next.
        update: dict[str, Any] = {"messages": [response], "budget": counters, "stop_reason": None, "approvals": {}}
        if response.tool_calls or response.invalid_tool_calls:
            # The round's calls within the turn's budget run, the rest are answered without running;
            # calls whose arguments were not JSON are answered here (the ToolNode never sees them).
            response.id = response.id or f"calls-{uuid.uuid4().hex}"
            budget.admit(counters, response)
            update["messages"] = [response, *malformed(response, runtime.stream_writer)]
        if not response.tool_calls:  # the answer: recorded, so feedback can tell it from a caller's text
            if not response.id:
                response.id = f"answer-{uuid.uuid4().hex}"
            text = response.text
            update["answers"] = {response.id: {"digest": answer_digest(text), "cited": cited_ids(text)}}
        return update

    return dual_node(agent, "agent")


def own_bound(chat: BaseChatModel) -> float:
    """The longest a call to ``chat`` can take by its client's own settings (0: answers in-process)."""
    if isinstance(chat, LocalChatModel):
        return 0.0
    timeout, retries = getattr(chat, "request_timeout", None), getattr(chat, "max_retries", None)
    if not isinstance(timeout, int | float) or not isinstance(retries, int):
        return math.inf
    return float(timeout) * (retries + 1)


def model_call(
    chat: BaseChatModel, bound: Runnable[Any, Any], request: list[BaseMessage], seconds: float
) -> IO[Any]:
    """The model request, cut off when the turn's wall time (``seconds`` left) runs out.

    Awaited, the HTTP call is cancelled. Blocking, a watchdog thread is only started when the client's own
    timeout could outlast the turn or the process may be stopped by a signal (the command line, whose
    Ctrl-C then rolls the turn back at once): a library or server call pays nothing extra.
    """

    def blocking() -> Any:
        if own_bound(chat) <= seconds and not interruptible():
            return bound.invoke(request)
        try:
            return call_with_deadline(lambda: bound.invoke(request), seconds, what="the model")
        except ModelTimeout as exc:
            raise TurnOutOfTime() from exc

    async def awaited() -> Any:
        try:
            return await await_with_deadline(bound.ainvoke(request), seconds)
        except ModelTimeout as exc:
            raise TurnOutOfTime() from exc

    return IO(blocking, awaited)
