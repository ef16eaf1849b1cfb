"""Interaction history as episodic memories: what the user asked, and how often they came back to it.

What the user asked is kept only where it tells something that lasts: that they wanted to know about a
subject outside the conversation ("差旅怎么报销？", "how do I claim travel expenses?"), a subject the
documents may hold. Asking about the same subject again updates that memory with the count, so "asked
about the refund policy twice this week" is one memory, not two; it expires like every episodic memory.

Everything else a question can be tells nothing new and is never kept (:func:`unkept_reason`): a question
about the user themselves (memory answers it, and asking it changes nothing about them), a calculation, a
date or time, a greeting or small talk or a question to the assistant (nothing is left once question
words, pronouns and greetings are set aside), and anything touching health, finances, identity or
secrets, which are never kept without the user asking.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from stores.base import MemoryRecord
from stores.memory.attributes import asked_attribute
from stores.memory.checks import high_risk, sensitive_kinds
from stores.memory.questions import about_assistant, about_user, is_calculation, is_date_question, topic
from stores.text_analysis import has_cjk

HISTORY_CONFIDENCE = 0.9
MAX_QUESTION_CHARS = 200
HISTORY, FACT = "history", "fact"  # how a memory is listed: what the user asked, or what holds about them

_ASKS = re.compile(
    r"[?？]\s*$|[吗呢]\s*[。.]?$|什么|哪(?!怕)|啥|谁|咋|怎么|怎样|如何|为什么|为何|多少|几[个篇条天次]|是否|能否|"
    r"([\u4e00-\u9fff])[不没]\1|"  # 能不能, 有没有, 是不是: a question without a question mark
    r"^\s*(?:what|which|who|whom|whose|where|when|why|how|do|does|did|is|are|can|could|should|would|will)\b",
    re.I,
)
# Asks about the conversation or the memory itself ("你还记得上次那个问题吗？", "what did I ask?").
_TO_MEMORY = re.compile(r"记得|记住|记忆|问过|\b(?:remember|memor(?:y|ies)|asked|did\s+i\s+ask)\b", re.I)
_ZH_HISTORY = re.compile(r"^用户问过(?:\s*(?P<n>\d+)\s*次)?：")
_EN_HISTORY = re.compile(r"^The user asked(?:\s+(?P<n>\d+)\s+times)?: ")


def _topic(text: str) -> set[str]:
    """The question's subject (:func:`stores.memory.questions.topic`), Chinese words as single characters
    (the segmenter cuts "差旅费用" and "差旅" differently, while their characters agree)."""
    out: set[str] = set()
    for term in topic(text):
        out.update(term if has_cjk(term) else (term,))
    return out


def unkept_reason(text: str) -> str | None:
    """Why a question is not kept as interaction history, or None when it asks about a subject of its own."""
    if about_user(text) or asked_attribute(text) is not None or _TO_MEMORY.search(text):
        return "a question about the user or what the assistant remembers"
    if about_assistant(text):
        return "a question about the assistant itself"
    if is_calculation(text):
        return "a calculation"
    if is_date_question(text):
        return "a question about a date or a time"
    if high_risk(text) is not None or sensitive_kinds(text):
        return "it touches health, finances, identity or a secret"
    if not topic(text):
        return "a greeting, small talk or a question to the assistant: no subject of its own"
    return None


def asks(text: str) -> bool:
    """Whether ``text`` reads as a question (a mark, a question word, "能不能", "do you…")."""
    return bool(_ASKS.search(" ".join(text.split())))


def asked_question(text: str) -> str | None:
    """``text`` as the question to keep in the user's history, or None when it is not one worth keeping."""
    question = " ".join(text.split())
    if not question or not asks(question) or len(question) > MAX_QUESTION_CHARS:
        return None
    return question if unkept_reason(question) is None else None


def _asked(memory: MemoryRecord) -> tuple[int, str] | None:
    """(times asked, the question) of a history memory, or None for any other memory."""
    content = memory.get("content", "")
    match = _ZH_HISTORY.match(content) or _EN_HISTORY.match(content)
    if match is None or memory.get("memory_type") != "episodic":
        return None
    return int(match.group("n") or 1), content[match.end() :]


def is_history(content: str) -> bool:
    """Whether a memory's content records a question asked (as :func:`history_content` writes it)."""
    return bool(_ZH_HISTORY.match(content) or _EN_HISTORY.match(content))


def recorded_question(content: str) -> str | None:
    """The question a history record holds ("用户问过 2 次：…" → "…"), or None for any other content."""
    match = _ZH_HISTORY.match(content) or _EN_HISTORY.match(content)
    return content[match.end() :].strip() if match else None


def memory_kind(memory: Mapping[str, Any]) -> str:
    """``"history"`` for a record of what the user asked, ``"fact"`` for what holds about them (facts,
    preferences, rules for the assistant, things that happened): the two are listed apart."""
    content = str(memory.get("content") or "")
    return HISTORY if memory.get("memory_type") == "episodic" and is_history(content) else FACT


def history_content(question: str, times: int) -> str:
    if has_cjk(question):
        return f"用户问过：{question}" if times == 1 else f"用户问过 {times} 次：{question}"
    return f"The user asked: {question}" if times == 1 else f"The user asked {times} times: {question}"


def history_operation(text: str, memories: Sequence[MemoryRecord]) -> dict[str, Any] | None:
    """ADD the question as an episodic memory, or UPDATE the one recording the same topic with one more
    ask (the topics share at least half of the larger one's words); None when ``text`` is no such question."""
    question = asked_question(text)
    if question is None:
        return None
    wanted = _topic(question)
    for memory in memories:
        asked = _asked(memory)
        if asked is None:
            continue
        times, earlier = asked
        have = _topic(earlier)
        if len(wanted & have) >= max(1, math.ceil(max(len(wanted), len(have)) / 2)):
            return {
                "action": "UPDATE",
                "type": "episodic",
                "content": history_content(question, times + 1),
                "target_id": memory.get("id"),
                "confidence": HISTORY_CONFIDENCE,
            }
    return {
        "action": "ADD",
        "type": "episodic",
        "content": history_content(question, 1),
        "target_id": None,
        "confidence": HISTORY_CONFIDENCE,
    }
