"""Whether a request asks the documents something: the one place the offline model decides it.

A request is for the documents when it has a subject of its own (a word that is not a question word, a
pronoun, politeness or a verb of asking) and it asks for information: it reads as a question ("线程存在
哪里", "chunk size?"), or asks to be told ("explain RRF", "介绍一下回收站"), or it only names the heading of
a passage the retriever found ("parking"). A request addressed to the assistant ("帮我…", "can you …") asks
the documents only when what it asks for is to be told or shown something; "帮我写首诗", "translate
this", "嗯", "what should I do", "你能做什么" ask nothing the documents answer, and the offline model says
it did not understand them instead of quoting whatever the retriever returned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from models.extractive import heading_terms, topic_terms

_WH = (  # "多高", "多远": 多 before a measurable adjective asks how much
    r"什么|啥|怎么|怎样|如何|为什么|为何|哪|谁|多少|多[大长久快高重远宽深厚贵老早晚]|几|何时|有何|"
    r"\b(?:what|what's|whats|which|who|who's|whom|whose|why|when|where|where's|how|how's)\b"
)
_QUESTION = re.compile(
    rf"[?？]|[吗呢么嘛][\s。.!！~～]*$|{_WH}|是否|能否|可否|是不是|有没有|能不能|会不会|要不要|可不可以|对不对|请问|"
    r"^\s*(?:is|are|was|were|do|does|did|can|could|should|would|will|may|might|must|has|have|had|am|isn't|"
    r"aren't|doesn't|don't|didn't|can't|won't)\b",
    re.IGNORECASE,
)
_ASKS_WH = re.compile(_WH, re.IGNORECASE)
# Verbs of asking to be told: an imperative made of one of these is a question in other words.
_ASKS = re.compile(
    r"^\s*(?:介绍|解释|说明|讲讲|讲一讲|讲一下|讲解|说说|说一说|说一下|告诉|列出|列举|描述|阐述|解读|看看|看一下|查|搜|找|"
    r"检索|我想知道|我想了解|我想问|想知道|想了解|想问|了解|问一下|请教|"
    r"explain|describe|tell|show|list|give|define|clarify|outline|walk me through|look up|lookup|find|search|"
    r"check|remind|understand|learn about|what about|how about|"
    r"i (?:want|would like|'d like|need) to (?:know|understand|learn)|i wonder|i'm wondering|i am wondering|"
    r"i'm curious|i am curious)",
    re.IGNORECASE,
)
# Words that address the assistant as the one to act ("帮我…", "请…", "can you…"): what follows is the
# request, and it asks the documents only if it asks to be told something.
_ADDRESSED = re.compile(
    r"^\s*(?:(?:请|麻烦|劳驾)?(?:你|您)?(?:能不能|能否|可不可以|可以|能|会不会|会)?(?:请|麻烦)?"
    r"(?:帮我|帮忙|给我|替我|为我|帮)(?:一下)?|(?:你|您)(?:能不能|能否|可不可以|可以|能|会)|(?:请|麻烦|劳驾)(?!问)(?:你|您)?|"
    r"(?:please\s+)?(?:can|could|would|will)\s+you(?:\s+please)?|please|kindly|help me(?:\s+to)?|"
    r"i (?:need|want) you to)\s*",
    re.IGNORECASE,
)
_MODAL = re.compile(r"^\s*(?:能不能|能否|可不可以|可以|能|会不会|会)\s*")
# Making something new is beyond a model that can only quote: "写首诗", "能翻译一下吗", and telling "a joke" or
# "个故事" (a thing to be made up, where "tell me about X" and "讲讲 X" ask to be told what is known).
_PRODUCING = re.compile(
    r"^\s*(?:写|作|画|翻译|译|生成|创作|编|改写|重写|润色|修改|唱|做|设计|实现|造|起个|想个|(?:讲|说)(?:一)?个|"
    r"write|compose|draw|translate|generate|create|make|rewrite|paraphrase|polish|sing|code|implement|"
    r"design|build|invent|play|tell (?:me |us )?(?:a|an|another|some) )",
    re.IGNORECASE,
)
MAX_TOPIC_TERMS = 6  # a bare heading is a few words; a longer phrase without a question is something else


def reads_as_question(text: str) -> bool:
    """A question by its form: a question mark, a question word or particle, a leading auxiliary."""
    return bool(_QUESTION.search(text.strip()))


def asks_the_documents(question: str, passages: Sequence[dict[str, Any]] = ()) -> bool:
    """True when ``question`` asks something the documents may answer (see the module's docstring);
    ``passages`` are the ones retrieved for it, whose headings a bare topic may name."""
    text = question.strip()
    if not topic_terms(text):
        return False  # "what should I do", "嗯", "你是谁": nothing to look up
    addressed = _ADDRESSED.match(text)
    if addressed:
        rest = text[addressed.end() :]
        return bool(_ASKS.match(rest)) and not _PRODUCING.match(rest)
    if _PRODUCING.match(_MODAL.sub("", text)) and not _ASKS_WH.search(text):
        return False  # "能写首诗吗", "tell me a joke": a request to make something
    if reads_as_question(text) or _ASKS.match(text):
        return True
    return names_a_heading(text, passages)


def names_a_heading(text: str, passages: Sequence[dict[str, Any]]) -> bool:
    """A short phrase whose every word is in the heading (title, section, file name) of a retrieved passage:
    "parking" for a document titled "Parking" is a lookup of that document."""
    wanted = set(topic_terms(text))
    if not wanted or len(wanted) > MAX_TOPIC_TERMS:
        return False
    return any(wanted <= heading_terms(p) for p in passages)
