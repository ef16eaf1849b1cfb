"""The offline model's replies to memory requests ("记住…", "忘掉…", "I prefer…").

The write itself is the memory update's job (validated, audited, after the answer); the model only says
what will happen, so the user is not told "nothing found in the knowledge base" for "记住我喜欢…".
"""

from __future__ import annotations

import re

from stores.memory.checks import has_forget_intent, has_remember_intent
from stores.text_analysis import has_cjk

_PREFERENCE = re.compile(
    r"我(?:比较|更)?(?:喜欢|偏好|习惯|希望)|\bI (?:prefer|like|always want)\b", re.IGNORECASE
)
_LEAD = re.compile(
    r"^\s*(?:请|麻烦)?(?:你)?(?:帮我)?(?:记住|记下|记一下)[:：，,\s]*|^\s*(?:please\s+)?remember(?:\s+that)?[:,\s]*",
    re.IGNORECASE,
)


def memory_reply(question: str) -> str | None:
    """An acknowledgement for an explicit memory request, or None when the question is not one."""
    zh = has_cjk(question)
    if has_forget_intent(question):
        return (
            "好的，我会忘掉这条记忆（回答之后生效，可用 /memories 查看）。"
            if zh
            else "All right, I will forget that (it takes effect after this answer; see /memories)."
        )
    if has_remember_intent(question) or _PREFERENCE.search(question):
        content = _LEAD.sub("", question).strip(" 。.!！") or question.strip()
        return f"好的，我记住了：{content}。" if zh else f"Got it, I will remember: {content}."
    return None
