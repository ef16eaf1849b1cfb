"""How deep tool arguments may nest: deeper is refused before anything recurses over them.

Validation, JSON encoding and the handlers all walk arguments recursively; 60,000 nested lists from a
model (or ``kb-agent tools call --args``) would raise RecursionError deep inside one of them. Both checks
here are loops, so they work on any depth, and stop counting once past the bound.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

MAX_ARGUMENT_DEPTH = 64  # no real tool's arguments come close: ours nest 3 levels at most


def too_deep(value: Any, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether lists/dicts in ``value`` nest more than ``limit`` levels (the top level counts as 1)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
    return False


def json_too_deep(text: str, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether the JSON text ``text`` opens more than ``limit`` arrays/objects at once (strings skipped)."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


_REFUSAL = "nest deeper than"


def depth_message(what: str) -> str:
    """The one line a refusal says, to the model or on the command line."""
    return f"{what} {_REFUSAL} {MAX_ARGUMENT_DEPTH} levels; send flat arguments"


def is_depth_refusal(error: str) -> bool:
    return _REFUSAL in error


def without_deep_calls(message: AIMessage) -> AIMessage:
    """The model's message with too-deep calls moved to ``invalid_tool_calls`` (their arguments dropped).

    Done as the message arrives: the budget, the checkpointer and the next request would all recurse over
    the arguments otherwise. The executor answers such a call with the refusal, under the same id.
    """
    deep = [call for call in message.tool_calls if too_deep(call.get("args"))]
    if not deep:
        return message
    refused = [
        {
            "type": "invalid_tool_call",
            "id": call.get("id"),
            "name": call.get("name"),
            "args": '{"dropped": "too deep"}',  # what goes back to the endpoint as this call's arguments
            "error": depth_message(f"the arguments for {call.get('name')!r}"),
        }
        for call in deep
    ]
    kept = [call for call in message.tool_calls if call not in deep]
    raw = message.additional_kwargs.get("tool_calls")
    extra = {k: v for k, v in message.additional_kwargs.items() if k != "tool_calls"} if raw else None
    return message.model_copy(
        update={
            "tool_calls": kept,
            "invalid_tool_calls": [*message.invalid_tool_calls, *refused],
            **({"additional_kwargs": extra} if extra is not None else {}),
        }
    )
