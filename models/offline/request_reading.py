"""How the in-process models read a request laid out for a prefix cache (``nodes.history.request``).

kb-agent appends this turn's marked blocks (memories, passages) and the budget note to the user's
question, and sends later rounds' budget note as a user message of its own. The offline model's rules
want the question alone and look for the blocks in a system message, where they used to be: this puts
them back there, so the rules read the same request a real model is sent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

_TAGS = "用户长期记忆|user_memories|检索资料|retrieved_passages|剩余预算|budget_left"
_OPENING = re.compile(rf"\n\n<(?:{_TAGS})[\s>]")
_BLOCK = re.compile(rf"<({_TAGS})(?:\s[^>]*)?>.*</\1>\s*", re.S)


def split_appended(text: str) -> tuple[str, list[str]]:
    """``text`` without the marked blocks appended after it, and those blocks in order.

    Blocks are taken from the end: the last opening tag whose block runs to the end of the text first, so
    a block the user typed inside the question stays part of the question.
    """
    blocks: list[str] = []
    while True:
        for opening in reversed(list(_OPENING.finditer(text))):
            if _BLOCK.fullmatch(text, opening.start() + 2):
                blocks.insert(0, text[opening.start() + 2 :].strip())
                text = text[: opening.start()]
                break
        else:
            return text, blocks


def read_request(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with the appended blocks moved into a system message after the leading one, and a
    user message that is nothing but a block (the later rounds' budget note) dropped."""
    moved: list[str] = []
    out: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, HumanMessage):
            whole, blocks = split_appended(f"\n\n{message.text}")
            if blocks and not whole.strip():
                moved += blocks
                continue
            if blocks:
                moved += blocks
                message = message.model_copy(update={"content": whole[2:]})
        out.append(message)
    if not moved:
        return out
    at = 1 if out and isinstance(out[0], SystemMessage) else 0
    return [*out[:at], SystemMessage("\n\n".join(moved)), *out[at:]]
