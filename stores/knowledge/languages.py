"""Which of the knowledge base's languages a text is written in: Chinese (CJK script) or English (Latin).

Told by script share, counted in words: a run of Latin letters (with the digits, ``_``, ``-`` and
apostrophes it holds: ``KB_AGENT_HOME``, ``kb-agent``, ``don't``) is one English word, and a Chinese word
averages 1.5 CJK characters. A text whose lesser script holds more than a third of its words is *mixed* and
counts for both, so a product name or an identifier in a Chinese sentence does not make it English, while a
bilingual passage is both. Digits alone, punctuation and symbols count for neither.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ZH, EN = "zh", "en"
LANGUAGES = (ZH, EN)
MIXED_SHARE = 1 / 3  # the lesser script's share above which a text is written in both ("什么是 RAG？" is not)
CJK_PER_WORD = 1.5  # CJK characters per Chinese word, on average

# The CJK letters `nodes.conversation.language` calls Chinese (ideographs, kana, hangul), without punctuation.
_CJK_LETTER = re.compile(r"[\u2e80-\u2fff\u3040-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LATIN = "A-Za-z\u00c0-\u024f"
_LATIN_WORD = re.compile(rf"[{_LATIN}0-9_'’-]*[{_LATIN}][{_LATIN}0-9_'’-]*")


def script_units(text: str) -> dict[str, float]:
    """Words of ``text`` per language (Chinese ones estimated from its CJK characters)."""
    return {ZH: len(_CJK_LETTER.findall(text)) / CJK_PER_WORD, EN: float(len(_LATIN_WORD.findall(text)))}


def languages_in(text: str) -> frozenset[str]:
    """The languages ``text`` is written in: one, both when mixed, none when it has no letters."""
    units = script_units(text)
    total = sum(units.values())
    if not total:
        return frozenset()
    return frozenset(lang for lang, n in units.items() if n / total > MIXED_SHARE)


def written_in(text: str) -> str | None:
    """The one language ``text`` is written in, or None when it is mixed or has no letters."""
    found = languages_in(text)
    return next(iter(found)) if len(found) == 1 else None


def languages_of(texts: Iterable[str]) -> frozenset[str]:
    """The languages a document's passages are written in (a mixed passage counts for both)."""
    found: set[str] = set()
    for text in texts:
        found |= languages_in(text)
        if len(found) == len(LANGUAGES):
            break
    return frozenset(found)


def main_language(text: str) -> str:
    """The language most of ``text`` is written in (English when it has no letters): a passage quoting one
    term of the other language is still of its own."""
    units = script_units(text[:4000])
    return ZH if units[ZH] > units[EN] else EN
