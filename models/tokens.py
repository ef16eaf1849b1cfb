"""Offline token counting of messages: a CJK-aware estimate, used until an endpoint reports real usage.

tiktoken would download its encodings at run time, which this project may not do; the estimate errs on
the high side (one token per CJK character, about four Latin characters per token) so budgets hold.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from langchain_core.messages import AIMessage, BaseMessage

from stores.text_analysis import estimate_tokens, has_cjk

__all__ = ["count_message_tokens", "count_tool_tokens", "estimate_tokens", "has_cjk"]
MESSAGE_OVERHEAD = 4


def count_message_tokens(messages: Iterable[BaseMessage]) -> int:
    """Estimated prompt tokens of a message list, tool calls included."""
    total = 0
    for message in messages:
        total += MESSAGE_OVERHEAD + estimate_tokens(message.text)
        if isinstance(message, AIMessage) and message.tool_calls:
            total += estimate_tokens(json.dumps(message.tool_calls, ensure_ascii=False))
    return total


def count_tool_tokens(definitions: Iterable[dict]) -> int:
    """Estimated tokens the tool definitions add to every request."""
    return sum(estimate_tokens(json.dumps(d, ensure_ascii=False)) for d in definitions)
