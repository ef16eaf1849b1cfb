"""Secrets said in words: the answer to a security question and a wallet's recovery words.

Neither has a shape of its own ("Whitby", "豆豆", "ocean lunar tribe …"), so each is found by what names it:
a security question, a memorable word or 预留问题 with the word that sets its answer, and a run of twelve
to twenty-four plain words beside a word for them.
"""

from __future__ import annotations

import re

from stores.memory.secret_binding import NEGATION, UNIT_AFTER, Span, sentence_of

# What a security question is answered with: the family, and the words that set the answer.
_SECURITY = re.compile(
    r"\b(?:security|secret|recovery)\s+(?:question|answer|q)s?\b|\bmaiden\s+name\b"
    r"|\bmemorable\s+(?:word|information|info|date|name|place)\b|\b(?:secret|code)\s+word\b"
    r"|\banswer\s+to\b(?=[^.!?\n]{0,40}\b(?:pet|maiden|teacher|school|street|born|city|car|friend|nickname)\b)"
    r"|密保|安全问题|保密问题|预留问题|预留信息|娘家姓",
    re.I,
)

# A wallet's recovery words: twelve to twenty-four plain words (or single 汉字) in a row, beside a word for them.
_WORD_RUN = re.compile(
    r"(?<![A-Za-z'’-])(?:\d{1,2}[.):]?\s)?[a-z]{3,8}(?:,?[ \t]{1,2}(?:\d{1,2}[.):]?\s)?[a-z]{3,8}){11,23}(?![A-Za-z'’-])"
    r"|(?<![\u4e00-\u9fff])[\u4e00-\u9fff](?:,?[ \t]{1,2}[\u4e00-\u9fff]){11,23}(?![\u4e00-\u9fff])"
)
_WALLET = re.compile(
    r"wallet|seed|mnemonic|recovery|phrase|words|bip-?39|ledger|trezor|metamask|助记词|钱包|种子", re.I
)
_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        "the and for with that this you are was but not have from they will would there their what about which"
        " when your can all has had been our out into them then than also just like some more very its who how"
        " why she his her him",
    )
)


def _seed_phrases(text: str) -> list[Span]:
    """Twelve to twenty-four plain words in a row, in a sentence that names what they are."""
    spans: list[Span] = []
    for m in _WORD_RUN.finditer(text):
        words = re.findall(r"[a-z]+", m.group())
        if _STOPWORDS.isdisjoint(words) and _WALLET.search(sentence_of(text, m.start())):
            spans.append(("password", m.start(), m.end()))
    return spans


_ANSWER_SET = re.compile(
    r"(?:\b(?:is|was|are|put|used|answered(?:\s+with)?|answers?|chose|it'?s)\b|[:=：]|—+|-{2,}|->|=>|→|答案\s*(?:是|为|[:：])?|是|为|叫"
    r"|填(?:的|了)?(?:是|为)?)\s*",
    re.I,
)
_EN_ANSWER = re.compile(
    r"['\"“‘][^'\"”’]{1,30}['\"”’]|(?:(?:Mr|Mrs|Ms|Dr|Miss|St)\.?\s+)?[A-Z][a-z'’-]+(?:\s+[A-Z][a-z'’-]+){0,2}"
)
_ZH_ANSWER = re.compile(r"[“「『\"']?(?P<value>[\u4e00-\u9fffA-Za-z0-9]{1,16})[”」』\"']?")
_NUMBER_ANSWER = re.compile(r"\d{3,}(?![\d.%])")
# What describes a question rather than answers it: "第一只宠物的名字", "the city where …".
_DESCRIBES = re.compile(r"名字|姓名|名称|问题|什么|哪|谁|^(?:第一|我|你|他|她|母亲|父亲|妈妈|爸爸)|[的吗呢]$")
_NOT_NAMES = frozenset(
    {"I", "The", "A", "An", "My", "It", "What", "Which", "Where", "Who", "How", "When", "This"}
)
_SCOPE_END = re.compile(r"[。!！\n;；]|\.(?=\s|$)")


def _security_answers(text: str) -> list[Span]:
    """The answer to a security question, said in the sentence that names one (or the one after its ?)."""
    spans: list[Span] = []
    for family in _SECURITY.finditer(text):
        low = max(0, family.start() - 160)
        begin = max((m.end() for m in _SCOPE_END.finditer(text, low, family.start())), default=low)
        stop = _SCOPE_END.search(text, family.end(), family.end() + 160)
        scope_end = stop.start() if stop else min(len(text), family.end() + 160)
        for binder in _ANSWER_SET.finditer(text, begin, scope_end):
            at = binder.end()
            if NEGATION.search(text, max(begin, binder.start() - 8), binder.start()):
                continue
            en = _EN_ANSWER.match(text, at, scope_end)
            if en and en.group().split()[0] not in _NOT_NAMES and not re.match(r"\s*[?？]", text[en.end() :]):
                spans.append(("password", en.start(), en.end()))
                break
            number = _NUMBER_ANSWER.match(text, at, scope_end)
            if number and not UNIT_AFTER.match(text, number.end()):
                spans.append(("password", number.start(), number.end()))  # "答案是 0916"
                break
            zh = _ZH_ANSWER.match(text, at, scope_end)
            value = zh.group("value") if zh else ""
            if (
                zh
                and len(value) <= 8
                and re.search(r"[\u4e00-\u9fff]", value)
                and not _DESCRIBES.search(value)
                and not re.match(r"(?:不|没|太|很|这|那|它|用|在|设)", value)
                and not re.match(r"\s*[?？]", text[zh.end() :])
            ):
                spans.append(("password", zh.start(), zh.end()))
                break
    return spans


def said_in_words(text: str) -> list[Span]:
    """(kind, start, end) of every security answer and seed phrase in ``text`` (already in normal form)."""
    return _security_answers(text) + _seed_phrases(text)
