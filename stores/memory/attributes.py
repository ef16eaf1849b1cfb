"""Facts about a user that hold one value at a time: where they live, where they work, what they are called.

A new value for such a fact replaces the old one, however the user words it ("不对，我现在在上海",
"I moved to Munich", "these days I live in Hamburg"): the statement and the memory it corrects are
matched by the fact they are about, not by shared words (the old and the new value never share any).
The same patterns read the user's own words ("我住在…", "I live in…") and a stored memory ("用户住在…",
"The user lives in…").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from stores.base import MemoryRecord

RESIDENCE, WORKPLACE, NAME = "residence", "workplace", "name"

_WORKPLACE = re.compile(
    r"在[^，。,.\s]{1,15}?(?:工作|上班|任职|就职|实习)|入职|跳槽到|就职于|供职于|(?:我|用户)的(?:公司|单位|雇主)是|"
    r"\bwork(?:s|ing|ed)?\s+(?:at|for)\b|\bemployed\s+(?:at|by)\b|\bjob\s+at\b|\bemployer\s+is\b|"
    r"\b(?:joined|switched\s+to)\s+[A-Z]",
    re.I,
)
_NAME = re.compile(
    r"(?:我|用户)(?:现在|其实)?叫(?!过|人|车)|叫(?:我|用户)(?!去|来|做)|(?:我|用户)的名字(?:是|叫)|"
    r"\bmy\s+name\s+is\b|\bcall\s+me\b|\bthe\s+user'?s\s+name\s+is\b|\bgoes\s+by\b",
    re.I,
)
_RESIDENCE = re.compile(
    r"住在|(?:我|用户)(?:现在|目前|如今|最近|已经)*住|居住|生活在|定居|搬到|搬去|搬家|搬回|落户|家在|"
    r"\b(?:live|lives|living|lived|reside|resides|residing)\s+in\b|"
    r"\b(?:moved|move|moves|moving|relocated|relocating)\s+(?:back\s+)?(?:to|into)\b|\bbased\s+in\b",
    re.I,
)
# "I'm in Munich now", "我现在在上海": being in a named place (a capitalised name; a place word for Chinese).
_EN_IN_PLACE = re.compile(
    r"\b(?i:i'm|i\s+am|the\s+user\s+is|they\s+are)\s+(?i:now\s+|currently\s+|still\s+)?(?i:in)\s+[A-Z]"
)
_ZH_IN_PLACE = re.compile(r"(?:我|用户)(?:现在|目前|如今|最近|已经|其实)*在(?P<place>[^，。,.\s]{2,12})")


def _is_place(text: str) -> bool:
    """Whether ``text`` begins with a place name (jieba tags it ``ns``); the tagger loads on first use."""
    import jieba.posseg as posseg

    for pair in posseg.cut(text):
        return pair.flag == "ns"
    return False


def attribute_of(text: str) -> str | None:
    """The single-valued fact ``text`` states about the user, or None."""
    if not text:
        return None
    if _WORKPLACE.search(text):
        return WORKPLACE
    if _NAME.search(text):
        return NAME
    if _RESIDENCE.search(text) or _EN_IN_PLACE.search(text):
        return RESIDENCE
    match = _ZH_IN_PLACE.search(text)
    if match and _is_place(match.group("place")):
        return RESIDENCE
    return None


_NOT_VALUE = re.compile(
    r"(?:不是|不在|而不是)(?P<zh>[^，。,.\s]{2,12})|\bnot\s+(?:in\s+|at\s+)?(?P<en>[A-Z][\w-]+)"
)


def _negated_value(text: str) -> str | None:
    """The old value a correction names ("not Berlin", "不是北京"), if it names one."""
    match = _NOT_VALUE.search(text)
    if match is None:
        return None
    return (match.group("zh") or match.group("en") or "").lower() or None


def replaced_by(statement: str, content: str, memories: Sequence[MemoryRecord]) -> MemoryRecord | None:
    """The memory holding the same single-valued fact that ``content`` (the user's ``statement`` put in the
    third person) gives a new value for: the one whose value the statement negates, else the first listed."""
    attribute = attribute_of(content)
    if attribute is None:
        return None
    same = [m for m in memories if attribute_of(m.get("content", "")) == attribute]
    if not same:
        return None
    old = _negated_value(statement)
    if old is not None:
        for memory in same:
            if old in memory.get("content", "").lower():
                return memory
    return same[0]


_ASKED = {
    RESIDENCE: re.compile(
        r"住(?:在)?(?:哪|什么地方)|在哪(?:个城市|个地方)|哪个城市|家在哪|"
        r"住址|\bwhere\s+(?:do\s+|did\s+)?i\s+live\b|\bwhere\s+am\s+i\s+(?:based|living|from)\b|"
        r"\bwhich\s+(?:city|town|country)\b|\bmy\s+(?:home\s+)?(?:address|city|town)\b",
        re.I,
    ),
    WORKPLACE: re.compile(
        r"在哪(?:里|儿)?(?:工作|上班)|(?:工作|上班)(?:的地方)?在哪|哪(?:家|个)公司|什么公司|工作单位|我的公司|"
        r"\bwhere\s+(?:do\s+)?i\s+work\b|\bwho\s+(?:do\s+i\s+work\s+for|employs\s+me)\b|"
        r"\bmy\s+(?:employer|company|workplace)\b|\bwhat\s+(?:company|firm)\b",
        re.I,
    ),
    NAME: re.compile(
        r"我叫什么|我的名字|怎么称呼我|\bmy\s+name\b|\bwhat\s+(?:should\s+you|do\s+you)\s+call\s+me\b",
        re.I,
    ),
}


def asked_attribute(question: str) -> str | None:
    """The single-valued fact a question or a request names ("Where do I work?", "我住哪儿？", "forget
    where I live"), or None."""
    for attribute, pattern in _ASKED.items():
        if pattern.search(question):
            return attribute
    return None
