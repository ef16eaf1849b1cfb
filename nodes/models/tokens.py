"""Offline token counting: a CJK-aware estimate, used until an endpoint reports real usage.

tiktoken would download its encodings at run time, which this project may not do; the estimate errs on
the high side (one token per CJK character, about four Latin characters per token) so budgets hold.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable

from langchain_core.messages import AIMessage, BaseMessage

_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]")
_PIECES = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")
MESSAGE_OVERHEAD = 4


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


@functools.lru_cache(maxsize=4096)
def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text`` for a BPE tokenizer of the GPT/Qwen kind (cached: history repeats)."""
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    rest = _CJK.sub(" ", text)
    tokens = cjk
    for piece in _PIECES.findall(rest):
        if piece[0].isalpha():
            tokens += max(1, math.ceil(len(piece) / 4))
        elif piece[0].isdigit():
            tokens += math.ceil(len(piece) / 3)
        else:
            tokens += 1
    return tokens


def message_text(message: BaseMessage) -> str:
    """The text of a message, whether its content is a string or a list of content blocks."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def count_message_tokens(messages: Iterable[BaseMessage]) -> int:
    """Estimated prompt tokens of a message list, tool calls included."""
    total = 0
    for message in messages:
        total += MESSAGE_OVERHEAD + estimate_tokens(message_text(message))
        if isinstance(message, AIMessage) and message.tool_calls:
            total += estimate_tokens(json.dumps(message.tool_calls, ensure_ascii=False))
    return total


def count_tool_tokens(definitions: Iterable[dict]) -> int:
    """Estimated tokens the tool definitions add to every request."""
    return sum(estimate_tokens(json.dumps(d, ensure_ascii=False)) for d in definitions)
