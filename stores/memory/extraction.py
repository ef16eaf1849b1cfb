"""The offline extractor: explicit statements turned into proposed operations by rule, deterministically.

"记住…/remember…", "忘掉…/forget…", "我喜欢…/I prefer…", a new value for a fact already kept, and the
questions the user asks (episodic history, :mod:`stores.memory.history`). It only *proposes*; the seven rules in
``stores.memory.rules`` decide. The model-backed extractor (``models.extractor``) is injected from above.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from typing import Any

from stores.base import MemoryRecord
from stores.memory.attributes import asked_attribute, attribute_of, replaced_by
from stores.memory.checks import high_risk
from stores.memory.history import history_operation
from stores.memory.questions import reads_as_question
from stores.memory.rules import (
    ExtractionRequest,
    has_forget_intent,
)
from stores.text_analysis import has_cjk, term_set, tokenize

log = logging.getLogger("kb_agent.memory")

EXPLICIT_CONFIDENCE = 0.95  # "记住…" / "remember…": the user asked in so many words
PREFERENCE_CONFIDENCE = 0.9  # "我喜欢…" / "I prefer…": a stated preference

_SENTENCE_END = re.compile(r"[。！!？?\n]|\.(?:\s|$)")
_ZH_REMEMBER = re.compile(
    r"^(?:请|麻烦|帮我|你|要|帮忙)*(?:记住|记下|记一下|记着)(?:一下)?[:：,，\s]*(?P<body>.+)$"
)
_EN_REMEMBER = re.compile(
    r"^(?:please\s+)?(?:remember|note|keep\s+in\s+mind)(?:\s+that)?\s*[:,]?\s+(?P<body>.+)$", re.I
)
# A stated preference, however it is introduced ("其实", "不对，", "actually, these days") and whatever
# says when ("现在", "最近", "now"): a correction of an earlier one reads the same way.
_ZH_PREFER = re.compile(
    r"^(?:(?:其实|另外|还有|顺便说一下|不对|不是的|对了|更正一下)[，,]?\s*)*"
    r"(?P<body>我(?:现在|最近|如今|这些天|其实|以后)?(?:更|比较|很|最|非常|一直|特别|还是)?"
    r"(?:喜欢|偏好|偏爱|倾向于|习惯|不喜欢|讨厌|宁愿|宁可).+)$"
)
_EN_PREFER = re.compile(
    r"^(?:(?:also|actually|no|well|these\s+days|nowadays|now|lately)\b,?\s*)*"
    r"(?!i\s*(?:'d|would)\s+(?:like|love)\s+to\b)"  # "I'd like to know…" asks for something now
    r"(?P<body>i\s*(?:'d|would)?\s*(?:really\s+|much\s+|usually\s+|generally\s+|now\s+)?"
    r"(?:prefer|like|love|dislike|hate|don't\s+like|do\s+not\s+like|rather)\b.+)$",
    re.I,
)
_CORRECTION = re.compile(
    r"其实|实际上|更正|纠正|改成|改为|不再|不对|现在|如今|最近|不是.{1,20}而是|\bthese days\b|\bnowadays\b|\blately\b|\bnow\b|^no\b|"
    r"\bactually\b|\bin fact\b|\bcorrection\b|\bno longer\b|\banymore\b|\binstead\b|\brather than\b",
    re.I,
)
_GENERIC_WORDS = (
    "用户 我 不 喜欢 偏好 习惯 讨厌 要求 提到 the user prefer like love dislike hate don't not mention ask"
)


_ZH_RULE = re.compile(r"^(?:以后|今后|每次|回答|总是|不要|别|请|务必)")
_EN_RULE = re.compile(r"^(?:always|never|please|answer|reply|respond|use|don't|do not|from now on)\b", re.I)
_ALL = re.compile(
    r"所有|全部|一切|都(?=删|清|忘|去|抹|移)|everything|all\s+(?:of\s+)?(?:my\s+|your\s+|the\s+)?memor", re.I
)
_FORGET_PHRASES = (
    "忘掉 忘记 忘了 忘却 删除 删掉 清除 清空 移除 抹掉 去掉 都 记忆 关于 有关 这条 那条 这个 那个 不要 再 记住 "
    "记得 记着 以前 之前 所有 全部 一切 帮 帮我 把 用户 forget delete remove erase memory memories about "
    "everything all don't remember anymore stop storing keeping"
)


def _first_sentence(text: str) -> tuple[str, bool]:
    """The first sentence of ``text`` and whether it is a question."""
    text = text.strip()
    match = _SENTENCE_END.search(text)
    sentence = text[: match.start()] if match else text
    question = bool(match and match.group().strip() in {"?", "？"}) or reads_as_question(sentence)
    return sentence.strip(" ，,:：;；"), question


def _third_person_zh(body: str) -> tuple[str, str]:
    body = re.sub(r"我(?!们)", "用户", body)
    if body.startswith("用户"):
        return "semantic", body
    if _ZH_RULE.match(body):
        return "procedural", f"用户要求：{body}"
    return "semantic", f"用户提到：{body}"


# Verbs a third-person subject leaves as they are: modals, and past forms (regular ones end in -ed).
_UNCHANGED_WORDS = (
    "can could will would shall should may might must did had was ought "
    "went got made took came saw said knew thought bought brought left felt kept lost met paid sent spent "
    "told wrote ran began became found gave heard held sold stood understood grew drew drove flew forgot "
    "taught caught fought sat slept spoke swam threw won wore chose ate drank broke fell rode sang"
)
_UNCHANGED = frozenset(_UNCHANGED_WORDS.split())
_ED_PRESENT_WORDS = "need feed bleed breed speed proceed succeed exceed heed embed shred wed"
_ED_PRESENT = frozenset(_ED_PRESENT_WORDS.split())  # present-tense verbs that happen to end in -ed


def _verb_s(verb: str) -> str:
    """The verb after "the user" for the verb after "I": has, was, goes, watches, studies; a past form or
    a modal unchanged (moved, went, can)."""
    verb = verb.lower()
    if verb == "have":
        return "has"
    if verb in ("were", "am"):
        return "was" if verb == "were" else "is"
    if verb in _UNCHANGED or (verb.endswith("ed") and verb not in _ED_PRESENT):
        return verb
    if len(verb) > 2 and verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + ("es" if verb.endswith(("s", "sh", "ch", "x", "o", "z")) else "s")


def _third_person_en(body: str) -> tuple[str, str]:
    b = body.strip()
    first = [
        (r"^i\s+am\b|^i'm\b", lambda m: "the user is"),
        (r"^i've\b", lambda m: "the user has"),
        (r"^i'll\b", lambda m: "the user will"),
        (r"^i\s+(?:don't|do\s+not)\s+", lambda m: "the user doesn't "),
        (r"^i\s*(?:'d|would)\s+(?:rather|prefer\s+to)\b", lambda m: "the user would rather"),
        (r"^i\s*(?:'d|would)\s+like\b", lambda m: "the user would like"),
        (r"^i\s+(?:(really|much|usually|generally)\s+)?([a-z]+)\b", None),
        (r"^my\b", lambda m: "the user's"),
    ]
    for pattern, replace in first:
        match = re.match(pattern, b, flags=re.I)
        if not match:
            continue
        if replace is None:
            adverb = f"{match.group(1).lower()} " if match.group(1) else ""
            head = f"the user {adverb}{_verb_s(match.group(2))}"
        else:
            head = replace(match)
        b = head + b[match.end() :]
        break
    else:
        if _EN_RULE.match(b):
            return "procedural", f"The user asks: {b}"
        return "semantic", f"The user mentioned: {b}"
    for pattern, word in (
        (r"\bmyself\b", "themselves"),
        (r"\bmy\b", "their"),
        (r"\bme\b", "them"),
        (r"\bi\b", "they"),
    ):
        b = re.sub(pattern, word, b, flags=re.I)
    return "semantic", b[0].upper() + b[1:]


def _add(memory_type: str, content: str, confidence: float) -> dict[str, Any]:
    return {
        "action": "ADD",
        "type": memory_type,
        "content": content,
        "target_id": None,
        "confidence": confidence,
    }


def _subject_terms(content: str) -> set[str]:
    return {t for t in tokenize(content) if t not in term_set(_GENERIC_WORDS)}


def corrected_memory(text: str, content: str, memories: Sequence[MemoryRecord]) -> MemoryRecord | None:
    """The memory an explicit correction ("其实我不喜欢…", "actually I prefer…") replaces, or None.

    A new value for a fact that holds one at a time (where the user lives or works, their name) replaces
    the memory holding that fact, with or without a correction marker. Otherwise, without a marker a new
    statement is a new memory; with one, the existing memory that shares most of its subject words (at
    least half of its own) is the one the user is correcting.
    """
    if (same_fact := replaced_by(text, content, memories)) is not None:
        return same_fact
    if not _CORRECTION.search(text):
        return None
    new_terms = _subject_terms(content)
    best, best_overlap = None, 0
    for memory in memories:
        old_terms = _subject_terms(memory.get("content", ""))
        overlap = len(new_terms & old_terms)
        if old_terms and overlap >= max(1, math.ceil(len(old_terms) / 2)) and overlap > best_overlap:
            best, best_overlap = memory, overlap
    return best


def _propose(
    text: str, memory_type: str, content: str, confidence: float, memories: Sequence[MemoryRecord]
) -> dict[str, Any]:
    target = corrected_memory(text, content, memories)
    if target is None or target.get("memory_type") != memory_type:
        return _add(memory_type, content, confidence)
    return {
        "action": "UPDATE",
        "type": memory_type,
        "content": content,
        "target_id": target.get("id"),
        "confidence": confidence,
    }


# A statement about oneself ("我对花生过敏", "I'm allergic to peanuts", "my blood pressure is high"), after
# whatever introduces it ("不对，", "其实", "no, these days", "actually").
_ZH_SELF_FACT = re.compile(
    r"^(?:(?:其实|另外|还有|顺便说一下|对了|不对|不是的|错了|更正一下|纠正一下|哦|嗯)[，,！!]?\s*)*"
    r"(?:[^，,。我]{1,12}[，,]\s*)?(?P<body>我(?!们).+)$"  # "不是杭州啦，我…": one short clause before
)
_EN_SELF_FACT = re.compile(
    r"^(?:(?:also|actually|btw|no|nope|well|oh|sorry|correction|these\s+days|nowadays|now|lately|in\s+fact)"
    r"\b[,:!]?\s*)*(?:[^,:;.!?]{1,20}[,:]\s*)?(?P<body>(?:i\b|i'm\b|my\b).+)$",
    re.I,
)


def stated_preference(text: str) -> bool:
    """Whether ``text`` states a preference the offline extractor keeps ("I'd rather…", "我现在更喜欢…")."""
    sentence, question = _first_sentence(text.strip())
    return not question and bool(_ZH_PREFER.match(sentence) or _EN_PREFER.match(sentence))


def stated_sensitive_fact(text: str) -> str | None:
    """The statement's body when ``text`` tells a fact about the user that the rules hold for confirmation
    (health, finances, identity), unasked: what needs the user's yes anyway is proposed from any wording,
    while other unasked statements are not kept (the offline rules cannot tell a fact from chatter)."""
    sentence, question = _first_sentence(text.strip())
    match = _ZH_SELF_FACT.match(sentence) or _EN_SELF_FACT.match(sentence)
    if match is None or question or high_risk(sentence) is None:
        return None
    return match.group("body").strip()


def stated_new_value(text: str, memories: Sequence[MemoryRecord]) -> str | None:
    """The statement's body when ``text`` gives a new value for a single-valued fact a memory already
    holds ("不对，我现在在上海" after "用户住在北京"): the user chose to have that fact kept, so its new
    value replaces it. An unasked statement of a fact nothing holds yet is not kept."""
    sentence, question = _first_sentence(text.strip())
    match = _ZH_SELF_FACT.match(sentence) or _EN_SELF_FACT.match(sentence)
    if match is None or question or attribute_of(match.group("body")) is None:
        return None
    body = match.group("body").strip()
    _, content = _third_person_zh(body) if has_cjk(body) else _third_person_en(body)
    return body if replaced_by(text, content, memories) is not None else None


class OfflineExtractor:
    """Deterministic extraction from the latest user message: explicit statements, and questions asked."""

    def __call__(self, request: ExtractionRequest) -> dict[str, Any]:
        text = request.latest_user_message.strip()
        if not text:
            return {"operations": []}
        if has_forget_intent(text):
            return {"operations": self.forget(text, request.existing_memories)}
        sentence, question = _first_sentence(text)
        zh = _ZH_REMEMBER.match(sentence)
        en = _EN_REMEMBER.match(sentence)
        if (found := zh or en) and not question:
            body = found.group("body").strip()
            memory_type, content = _third_person_zh(body) if zh else _third_person_en(body)
            op = _propose(text, memory_type, content, EXPLICIT_CONFIDENCE, request.existing_memories)
            return {"operations": [op]}
        zh, en = _ZH_PREFER.match(sentence), _EN_PREFER.match(sentence)
        if (found := zh or en) and not question:
            body = found.group("body").strip()
            memory_type, content = _third_person_zh(body) if zh else _third_person_en(body)
            op = _propose(text, memory_type, content, PREFERENCE_CONFIDENCE, request.existing_memories)
            return {"operations": [op]}
        body = stated_sensitive_fact(text) or stated_new_value(text, request.existing_memories)
        if body is not None:
            zh = _ZH_SELF_FACT.match(sentence)
            memory_type, content = _third_person_zh(body) if zh else _third_person_en(body)
            op = _propose(text, memory_type, content, PREFERENCE_CONFIDENCE, request.existing_memories)
            return {"operations": [op]}
        asked = history_operation(text, request.existing_memories)  # what happened: the user asked this
        return {"operations": [asked] if asked is not None else []}

    @staticmethod
    def forget(text: str, memories: Sequence[MemoryRecord]) -> list[dict[str, Any]]:
        """DELETE the memories the request names: those holding the single-valued fact it names ("where I
        work"), else the best keyword overlap, at least half its words."""
        target = [t for t in tokenize(text) if t not in term_set(_FORGET_PHRASES)]
        named = asked_attribute(text)  # "forget where I work": the memory holding that fact, in any words
        holding = [m for m in memories if named is not None and attribute_of(m.get("content", "")) == named]
        if holding:
            chosen = holding
        elif not target and _ALL.search(text):
            chosen = [m for m in memories]
        elif not target:
            note = "a request to forget without a recognisable target"
            return [{"action": "IGNORE", "type": None, "content": note, "target_id": None, "confidence": 0.0}]
        else:
            wanted = set(target)
            overlap = {m.get("id"): len(wanted & set(tokenize(m.get("content", "")))) for m in memories}
            best = max(overlap.values(), default=0)
            chosen = [
                m
                for m in memories
                if best >= max(1, math.ceil(len(wanted) / 2)) and overlap[m.get("id")] == best
            ]
        return [
            {
                "action": "DELETE",
                "type": m.get("memory_type"),
                "content": None,
                "target_id": m.get("id"),
                "confidence": EXPLICIT_CONFIDENCE,
            }
            for m in chosen
        ]
