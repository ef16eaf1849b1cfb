"""The message history as an endpoint will accept it (seed 004 §6: tool results follow their call).

A thread can hold a broken sequence: a turn that crashed after the model asked for tools (process killed,
endpoint down), or a history cut by summarisation. Sent as it is, OpenAI-style endpoints refuse the whole
request. The state keeps what really happened; only the request is repaired.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

INTERRUPTED = "Error: not run: the turn was interrupted before this tool call was executed"


def _call_ids(message: AIMessage) -> list[str]:
    return [c["id"] for c in message.tool_calls] + [c.get("id") or "" for c in message.invalid_tool_calls]


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
        while i < len(messages) and isinstance(messages[i], ToolMessage):
            results.setdefault(messages[i].tool_call_id, messages[i])
            i += 1
        for call_id in _call_ids(message):
            out.append(results.get(call_id) or ToolMessage(INTERRUPTED, tool_call_id=call_id, status="error"))
    return out
