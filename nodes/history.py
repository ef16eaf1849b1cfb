"""The message history as an endpoint will accept it (tool results follow their call).

A thread can hold a broken sequence: a turn that crashed after the model asked for tools (process killed,
endpoint down), or a history cut by summarisation. Sent as it is, OpenAI-style endpoints refuse the whole
request. The state keeps what really happened; only the request is repaired. :func:`request` builds the
whole request around that history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from nodes import prompts
from nodes.conversation import language, last_human_index

INTERRUPTED = "Error: not run: the turn was interrupted before this tool call was executed"


def _call_ids(message: AIMessage) -> list[str]:
    return [c["id"] or "" for c in message.tool_calls] + [c.get("id") or "" for c in message.invalid_tool_calls]


def sendable(message: AnyMessage) -> AnyMessage:
    """A copy safe to send back: unparseable tool-call arguments become ``{}``."""
    if isinstance(message, AIMessage) and message.invalid_tool_calls:
        fixed = [{**call, "args": "{}"} for call in message.invalid_tool_calls]
        return message.model_copy(update={"invalid_tool_calls": fixed})
    return message


def wire_history(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """Every tool call answered right after its assistant message; orphan tool results dropped."""
    out: list[AnyMessage] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if isinstance(message, ToolMessage):
            continue  # a result whose call is not right before it (orphan)
        out.append(sendable(message))
        if not isinstance(message, AIMessage) or not (message.tool_calls or message.invalid_tool_calls):
            continue
        results: dict[str, ToolMessage] = {}
        while i < len(messages) and isinstance(result := messages[i], ToolMessage):
            results.setdefault(result.tool_call_id, result)
            i += 1
        for call_id in _call_ids(message):
            out.append(results.get(call_id) or ToolMessage(INTERRUPTED, tool_call_id=call_id, status="error"))
    return out


def _appended(message: HumanMessage, text: str) -> HumanMessage:
    """A copy of ``message`` with ``text`` after its own words (a list content gets one more text part)."""
    if isinstance(message.content, str):
        return message.model_copy(update={"content": f"{message.content}\n\n{text}"})
    return message.model_copy(update={"content": [*message.content, {"type": "text", "text": f"\n\n{text}"}]})


def request(
    messages: Sequence[AnyMessage],
    *,
    remaining: dict[str, Any],
    summary: str = "",
    memories: list[dict[str, Any]] | None = None,
    passages: list[dict[str, Any]] | None = None,
) -> list[BaseMessage]:
    """One model request over the unsummarised ``messages``, laid out for a provider's prefix cache.

    What changes least comes first, so each request repeats the previous one's prefix as far as possible
    (a provider's prefix cache): the rules and the running summary (one system message; the tool definitions travel
    beside it), the history, the current question followed by this turn's memories and passages, the
    turn's tool calls and results, and last the budget note, the one part that changes every round.

    Only the first message is a system message: several chat templates (Qwen3.5+, Gemma and others, as
    served by vLLM, llama.cpp or Ollama) reject a system message anywhere else, and OpenAI-compatible
    endpoints all accept this shape. So the turn's data blocks ride in the question's user message, after
    its words (a later turn's request sends the question alone, keeping the prefix up to it), and the
    budget note is appended to that message in the turn's first round, then sent as a user message of
    its own after the tool results: the request never puts two user messages side by side, and tool
    results go out verbatim. Each block carries its own mark (passages and memories say they are data;
    the note has a tag of its own). Memories used to sit in the system prompt; there they would
    change the very first message every turn.

    The rules' language is that of the first question in ``messages``, not the current one's, so that a
    thread switching language keeps its leading message; the summary is marked in its own language.
    """
    history = wire_history(messages)
    asked = last_human_index(history)
    first = next((m for m in history if isinstance(m, HumanMessage)), None)
    thread_lang = language(first.text) if first is not None else "en"
    question = history[asked] if asked >= 0 else None
    lang = language(question.text) if isinstance(question, HumanMessage) else thread_lang
    system = prompts.rules_prompt(thread_lang, summary, language(summary))
    out: list[BaseMessage] = [SystemMessage(system), *history]
    note = prompts.budget_note(lang, remaining)
    if not isinstance(question, HumanMessage):
        return [*out, HumanMessage(note)]
    context = prompts.turn_context(lang, memories, passages)
    if context:
        question = _appended(question, context)
    if asked == len(history) - 1:  # the turn's first round: nothing follows the question yet
        return [*out[:-1], _appended(question, note)]
    out[asked + 1] = question
    return [*out, HumanMessage(note)]
