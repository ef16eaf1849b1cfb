"""``summarize``: keep every request inside the model's context window (short-term memory).

Runs before each model round. It measures what the next request will hold and, when the history is
over its budget, folds the oldest whole rounds into the running summary (old summary + folded messages →
summary model), records the id of the last folded message in ``summary_covers`` and removes the folded
messages from the state with ``RemoveMessage``; they stay readable in the checkpoint history
(:func:`full_history`). A round is a user message and everything up to the next one, so a question is
never cut from its answer nor a tool call from its results. A failing summary model changes nothing.

    input budget   = context limit − reserved answer tokens − safety margin
    history budget = input budget − system prompt − tool definitions − current question
                     − retrieved passages − recalled memories
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from models import ChatModelFactory, follows_instructions, get_chat_model
from models.deadline import await_with_deadline, call_with_deadline
from models.summarizers import ModelSummarizer, Summarizer, offline_summarizer
from models.summary import summary_language
from models.tokens import calibration, count_message_tokens, count_tool_tokens, estimate_tokens
from nodes import prompts
from nodes.budget import Budget
from nodes.context import Context, run_settings
from nodes.conversation import current_question, language, last_human_index
from nodes.history import wire_history
from nodes.node_io import IO, Node, NodeBody, Steps, dual_node
from nodes.settings import OFFLINE_MODEL, Settings
from nodes.state import State
from nodes.tool_choice import offered_definitions
from tools.registry import ToolRegistry

log = logging.getLogger("kb_agent.summarize")

# The offline model has no window of its own: it gets a small real model's (16k), which holds the tool
# definitions (~2.2k) and five full passages (~1.6k) with room for history; long threads still fold.
OFFLINE_WINDOW = 16_384
UNKNOWN_WINDOW = 8_192  # an unknown model gets a cautious limit; set KB_AGENT_CONTEXT_WINDOW
SUMMARY_BLOCK_OVERHEAD = 24  # the marked block's tags and separators around the summary text
FAMILY_WINDOWS: tuple[tuple[str, int], ...] = (
    (r"gpt-3\.5", 16_385),
    (r"gpt-4o|gpt-4-turbo|gpt-4\.1|gpt-5|\bo[134]\b|\bo[134]-", 128_000),
    (r"gpt-4", 8_192),
    (r"qwen-max", 32_768),
    (r"qwen|qwq", 131_072),
    (r"deepseek|glm|moonshot|kimi", 128_000),
    (r"claude", 200_000),
    (r"gemini", 1_000_000),
    (r"mistral|mixtral", 32_768),
    (r"llama-?3\.[1-9]", 128_000),
    (r"llama", 8_192),
)
_SIZE_SUFFIX = re.compile(r"-(\d{1,4})k\b", re.IGNORECASE)

def window_for(model_name: str) -> int:
    """Default context limit of a model family ("moonshot-v1-32k" → 32768, "qwen-plus" → 131072)."""
    name = model_name.lower()
    if name in {OFFLINE_MODEL, "kb-agent-offline"}:
        return OFFLINE_WINDOW
    size = _SIZE_SUFFIX.search(name)
    if size:
        return int(size.group(1)) * 1024
    return next((tokens for pattern, tokens in FAMILY_WINDOWS if re.search(pattern, name)), UNKNOWN_WINDOW)


@dataclass(frozen=True)
class HistoryLimits:
    """The short-term-memory limits of one run, defaults resolved (0 in the context means "auto")."""

    context_window: int
    reserved_answer_tokens: int
    safety_margin_tokens: int
    keep_recent_rounds: int = 3
    summary_max_tokens: int = 512
    summary_timeout: float = 60.0

    @classmethod
    def resolve(
        cls,
        window: int,
        *,
        reserved: int = 0,
        margin: int = 0,
        keep_recent_rounds: int = 3,
        summary_max_tokens: int = 0,
        summary_timeout: float = 60.0,
    ) -> HistoryLimits:
        return cls(
            context_window=window,
            reserved_answer_tokens=reserved or min(4_096, window // 8),
            safety_margin_tokens=margin or min(4_096, max(64, window // 20)),
            keep_recent_rounds=max(0, keep_recent_rounds),
            summary_max_tokens=summary_max_tokens or min(1_024, window // 8),
            summary_timeout=summary_timeout,
        )

    @classmethod
    def from_context(cls, ctx: Settings, model_name: str | None = None) -> HistoryLimits:
        """From the run's context; fields the context lacks (older builds) take their defaults."""
        window = ctx.context_window or window_for(model_name or ctx.model_name)
        return cls.resolve(
            window,
            reserved=int(getattr(ctx, "reserved_answer_tokens", 0) or 0),
            margin=int(getattr(ctx, "safety_margin_tokens", 0) or 0),
            keep_recent_rounds=int(getattr(ctx, "keep_recent_rounds", 3)),
            summary_max_tokens=int(getattr(ctx, "summary_max_tokens", 0) or 0),
            summary_timeout=float(ctx.model_timeout),
        )

    @property
    def input_budget(self) -> int:
        return self.context_window - self.reserved_answer_tokens - self.safety_margin_tokens


@dataclass(frozen=True)
class HistoryBudget:
    """Token accounts of one request; ``history`` is what the summary and earlier rounds may use."""

    input_budget: int
    system: int
    tools: int
    question: int
    passages: int
    memories: int

    @property
    def history(self) -> int:
        return self.input_budget - self.system - self.tools - self.question - self.passages - self.memories


def _block_tokens(lang: str, remaining: dict[str, Any], base: int, rules: str, **block: Any) -> int:
    """Tokens one marked block adds to the system prompt (measured on the real prompt, not re-derived)."""
    return estimate_tokens(prompts.system_prompt(lang, remaining=remaining, rules_lang=rules, **block)) - base


@functools.cache
def _longer_rules() -> str:
    """The language whose rules are longer. The rules go out in the language of the thread's first question
    (a fold can change which question that is), the turn's parts in the current one's: count the longer."""
    return max(sorted(prompts.SYSTEM), key=lambda code: estimate_tokens(prompts.SYSTEM[code]))


def measure(
    settings: HistoryLimits,
    state: State,
    ctx: Settings,
    definitions: Sequence[dict[str, Any]],
    passages: list[dict[str, Any]] | None = None,
) -> tuple[HistoryBudget, int]:
    """The budget of the next request and the tokens its summary block takes (``passages``: a subset)."""
    passages = state.passages if passages is None else passages
    question, _ = current_question(state.messages)
    lang = language(question)
    budget = Budget.from_context(ctx)
    remaining = budget.remaining(budget.counters_for(state.budget, None))
    rules = _longer_rules()
    base = estimate_tokens(prompts.system_prompt(lang, remaining=remaining, rules_lang=rules))
    current = wire_history(state.messages[max(0, last_human_index(state.messages)) :])
    summary = _text(state.summary)
    accounts = HistoryBudget(  # the budget in estimate units, corrected by what the endpoint reported
        input_budget=int(settings.input_budget / calibration.ratio(ctx.model_name)),
        system=count_message_tokens(
            [SystemMessage(prompts.system_prompt(lang, remaining=remaining, rules_lang=rules))]
        ),
        tools=count_tool_tokens(definitions),
        question=count_message_tokens(current),
        passages=_block_tokens(lang, remaining, base, rules, passages=passages) if passages else 0,
        memories=_block_tokens(lang, remaining, base, rules, memories=state.memories) if state.memories else 0,
    )
    if not summary:
        return accounts, 0
    return accounts, _block_tokens(lang, remaining, base, rules, summary=summary, summary_lang=language(summary))


def split_rounds(messages: Sequence[AnyMessage]) -> list[list[AnyMessage]]:
    """Rounds: each starts at a user message (anything before the first one is a round of its own)."""
    rounds: list[list[AnyMessage]] = []
    for message in messages:
        if isinstance(message, HumanMessage) or not rounds:
            rounds.append([])
        rounds[-1].append(message)
    return rounds


def rounds_to_fold(round_tokens: Sequence[int], history_budget: int, summary_tokens: int, keep: int) -> int:
    """How many of the oldest earlier rounds to fold (0: the history fits).

    All rounds but the ``keep`` most recent go at once (so a summary call is rare, not every turn); if
    the rest still does not fit next to a full-size summary, recent rounds follow, oldest first.
    """
    if summary_tokens + sum(round_tokens) <= history_budget:
        return 0
    n = max(0, len(round_tokens) - keep)
    while n < len(round_tokens) and summary_tokens + sum(round_tokens[n:]) > history_budget:
        n += 1
    return n


def checked_covers(messages: Sequence[AnyMessage], covers: object) -> tuple[int, bool]:
    """Index of the last covered message still in the state (-1: none) and whether the marker is bad.

    A marker that is not a string, points into the current round or into the middle of a round is
    corrupted: it is treated as "covers nothing" (and repaired), never trusted and never a crash. An id
    that is no longer in the state is the normal case: the folded messages were removed.
    """
    if covers is None:
        return -1, False
    if not isinstance(covers, str) or not covers:
        return -1, True
    index = next((i for i, m in enumerate(messages) if m.id == covers), None)
    if index is None:
        return -1, False
    current = last_human_index(messages)
    at_boundary = index + 1 < len(messages) and isinstance(messages[index + 1], HumanMessage)
    if index >= current or not at_boundary:
        return -1, True
    return index, False


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


# -- summarisers ----------------------------------------------------------------------------------

def model_summarizer(model: BaseChatModel) -> Summarizer:
    return ModelSummarizer(model, prompts.RUNNING_SUMMARY)


# -- the node -------------------------------------------------------------------------------------


def make_summarize(*args: Any, **kwargs: Any) -> Node:
    """The fold (:func:`make_fold`, same arguments) as a node of its own; the graph runs it inside ``agent``."""
    return dual_node(make_fold(*args, **kwargs), "summarize")


def make_fold(
    registry: ToolRegistry | None = None,
    model: BaseChatModel | None = None,
    *,
    summarizer: Summarizer | None = None,
    settings: HistoryLimits | None = None,
    deployment: Settings | None = None,
    chat_models: ChatModelFactory = get_chat_model,
) -> NodeBody:
    """The fold's body: the update that brings this round's request within its budget (passages dropped,
    oldest rounds folded into the summary), or nothing. ``model`` is the graph's fixed chat model (if any),
    else ``chat_models(run)`` picks it; ``summarizer`` and ``settings`` override the per-run choices."""
    failed_turns: dict[str, None] = {}  # one failed summary attempt per turn, not one per model round

    def pick(ctx: Settings) -> Summarizer:
        if summarizer is not None:
            return summarizer
        if (model is not None and not follows_instructions(model)) or (model is None and ctx.uses_offline_model):
            return offline_summarizer
        return model_summarizer(model if model is not None else chat_models(ctx))

    def summarize(state: State, runtime: Runtime[Context]) -> Steps:
        messages = state.messages
        current = last_human_index(messages)
        if current < 0:
            return {}
        ctx = run_settings(runtime, deployment)
        name = getattr(model, "model_name", None)
        limits = settings or HistoryLimits.from_context(ctx, name)
        update: dict[str, Any] = {}
        covered, corrupt = checked_covers(messages, state.summary_covers)
        if corrupt:
            log.warning(
                "node=summarize corrupted summary_covers=%r: treated as covering nothing",
                state.summary_covers,
            )
            update["summary_covers"] = None
        rounds = split_rounds(messages[covered + 1 : current])
        round_tokens = [count_message_tokens(wire_history(r)) for r in rounds]
        definitions = offered_definitions(registry, messages, ctx) if registry is not None else []
        accounts, summary_tokens = measure(limits, state, ctx, definitions)
        if accounts.history < 0 and state.passages:
            # Retrieved passages are ours, not the user's: the lowest ranked go first, without a warning.
            kept = list(state.passages)
            while accounts.history < 0 and kept:
                kept.pop()
                accounts, summary_tokens = measure(limits, state, ctx, definitions, kept)
            log.info(
                "node=summarize dropped %d of %d passages to fit the input budget (%d tokens)",
                *(len(state.passages) - len(kept), len(state.passages), accounts.input_budget),
            )
            update["passages"] = kept
        history = summary_tokens + sum(round_tokens)
        if accounts.history < 0:  # the question, tools or memories alone do not fit: worth a warning
            log.warning(
                "node=summarize the request exceeds its input budget (%d tokens) without any history: "
                "system %d, tools %d, question %d, passages %d, memories %d",
                *(accounts.input_budget, accounts.system, accounts.tools, accounts.question),
                *(accounts.passages, accounts.memories),
            )
        reserve = max(summary_tokens, limits.summary_max_tokens + SUMMARY_BLOCK_OVERHEAD)
        n = rounds_to_fold(round_tokens, accounts.history, reserve, limits.keep_recent_rounds)
        turn = str(messages[current].id)
        if history <= accounts.history or n == 0 or turn in failed_turns:
            return update
        folded = [m for r in rounds[:n] for m in r]
        old = _text(state.summary)
        lang = summary_language(old, folded)
        job, args, seconds = pick(ctx), (old, folded, lang, limits.summary_max_tokens), limits.summary_timeout

        def blocking() -> str | None:
            return call_with_deadline(lambda: job(*args), seconds, what="the summary model")

        async def awaited() -> str | None:
            if isinstance(job, ModelSummarizer):
                return await await_with_deadline(job.asummarize(*args), seconds, what="the summary model")
            return await asyncio.to_thread(blocking)  # a local summariser: bounded by the same deadline

        try:
            new = yield IO(blocking, awaited)
        except Exception as exc:
            new, reason = None, f"failed ({type(exc).__name__}: {exc})"
        else:
            reason = "returned an unusable summary"
        if not new:
            log.warning("node=summarize summary model %s; nothing folded, nothing lost", reason)
            failed_turns[turn] = None
            if len(failed_turns) > 1_000:
                failed_turns.pop(next(iter(failed_turns)))
            return update
        removed = [*messages[: covered + 1], *folded]
        log.info(
            "node=summarize folded_rounds=%d folded_messages=%d kept_rounds=%d history_tokens=%d "
            "history_budget=%d summary_tokens=%d",
            *(n, len(folded), len(rounds) - n, history, accounts.history, estimate_tokens(new)),
        )
        update.update(
            summary=new,
            summary_covers=folded[-1].id,
            messages=[RemoveMessage(id=m.id) for m in removed if m.id],
        )
        return update

    return summarize


def full_history(graph: Any, config: RunnableConfig) -> list[AnyMessage]:
    """Every message the thread ever held, in order, folded ones included (from the checkpoints).

    Messages are only appended or removed, so the order of first appearance is the conversation's order;
    a message edited in place shows its latest version.
    """
    latest: dict[str, AnyMessage] = {}
    for snapshot in reversed(list(graph.get_state_history(config))):
        for message in snapshot.values.get("messages", None) or []:
            latest[message.id or f"noid-{len(latest)}"] = message  # a known id keeps its place
    return list(latest.values())
