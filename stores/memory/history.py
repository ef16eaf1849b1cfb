"""Interaction history as episodic memories: what the user asked, and how often they came back to it.

A question the user puts ("差旅怎么报销？", "how do I claim travel expenses?") is something that happened,
so it is kept as an episodic memory (which expires like every episodic memory); asking about the same
topic again updates that memory with the count, so "asked about the refund policy twice this week" is
one memory, not two. Questions about the user themselves, arithmetic and the clock are not history
worth keeping, and neither is a question touching health, finances, identity or secrets: those are never
kept without the user asking.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from stores.base import MemoryRecord
from stores.memory.attributes import asked_attribute
from stores.memory.checks import high_risk, sensitive_kinds
from stores.text_analysis import has_cjk, term_set, tokenize

HISTORY_CONFIDENCE = 0.9
MAX_QUESTION_CHARS = 200

_ASKS = re.compile(
    r"[?？]\s*$|[吗呢]\s*[。.]?$|什么|哪些|哪里|哪个|怎么|怎样|如何|为什么|为何|多少|几[个篇条天次]|是否|能否|"
    r"([\u4e00-\u9fff])[不没]\1|"  # 能不能, 有没有, 是不是: a question without a question mark
    r"^\s*(?:what|which|who|whom|whose|where|when|why|how|do|does|did|is|are|can|could|should|would|will)\b",
    re.I,
)
# About the user themselves (answered from memory, not history), or a request to the memory itself.
_ABOUT_USER = re.compile(
    r"(?:我|用户)(?:的[^，。？?]{0,8}?)?(?:现在|目前|以前)?(?:是|叫|住在?|生活在|在|喜欢|偏好|讨厌|习惯|几岁)(?:什么|哪|谁|多少|几)|"
    r"你(?:还)?(?:记得|知道)(?:我|关于)|关于我|记忆|问过|"
    r"\b(?:where|what|who|how\s+old)\s+(?:do|did|am|was)\s+i\b|\bmy\s+name\b|\babout\s+me\b|"
    r"\bremember\b|\bmemor(?:y|ies)\b|\b(?:asked|did\s+i\s+ask)\b",
    re.I,
)
_ARITHMETIC = re.compile(r"\d\s*[-+*/×÷xX^%]\s*\d|计算|算一下|\bcalculate\b|\bwhat(?:'s| is) \d", re.I)
_CLOCK = re.compile(
    r"今天|几号|星期几|礼拜几|周几|几点|\bdate\b|\btoday\b|what day|what time|time is it", re.I
)
_ZH_HISTORY = re.compile(r"^用户问过(?:\s*(?P<n>\d+)\s*次)?：")
_EN_HISTORY = re.compile(r"^The user asked(?:\s+(?P<n>\d+)\s+times)?: ")
_QUESTION_WORDS = (
    "什么 哪些 哪里 哪个 怎么 怎么办 怎样 如何 为什么 为何 多少 是否 能否 有没有 吗 呢 请问 一下 我 我们 你 想 知道 想知道 告诉 "
    "what which who whom whose where when why how do does did is are can could should would will i we you "
    "want know wonder tell please"
)


def _topic(text: str) -> set[str]:
    """The question's subject: its words without question words, Chinese ones as single characters (the
    segmenter cuts "差旅费用" and "差旅" differently, while their characters agree)."""
    topic: set[str] = set()
    for term in tokenize(text):
        if term not in term_set(_QUESTION_WORDS):
            topic.update(term if has_cjk(term) else (term,))
    return topic


def asked_question(text: str) -> str | None:
    """``text`` as the question to keep in the user's history, or None when it is not one worth keeping."""
    question = " ".join(text.split())
    if not question or not _ASKS.search(question) or len(question) > MAX_QUESTION_CHARS:
        return None
    if _ABOUT_USER.search(question) or asked_attribute(question) is not None:
        return None
    if _ARITHMETIC.search(question) or _CLOCK.search(question):
        return None
    if high_risk(question) is not None or sensitive_kinds(question) or not _topic(question):
        return None
    return question


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
