"""Whether a question is worth a knowledge-base search: not when it is a calculation and little else.

A search costs a round trip to the stores and fills the prompt with passages; for "计算 123 × 456",
"八的平方根" or "what is 7% of 1,250?" nothing in the documents can help, and the passages would only
distract the model. The rule is deliberately narrow: a question is skipped only when it has no words at all
besides numbers, or when arithmetic makes up most of it once the words that only ask for it ("计算", "等于
多少", "what is") are set aside.

Arithmetic is read as the offline model reads a calculation: numbers in digits or words (Chinese numerals,
English number words, percentages) and operators in symbols or words, roots, powers and discounts
included, with an operator right beside a number. Dates, times and phone-like numbers are not subtractions.
The offline model's reader is the thorough one (it must compute what it reads); this one only weighs a
question, cheaply enough for the graph's edges, without segmenting words.
"""

from __future__ import annotations

import re
import unicodedata

from stores.text_analysis import query_focus, tokenize

ARITHMETIC_SHARE = 0.6  # at least this much of the question (ignoring spaces and asking words): no search

_EN_NUMBER = (
    r"zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
    r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|"
    r"thousand|million|billion"
)
_NUMBER = (
    r"(?P<num>(?:百分之)?[零〇一二两三四五六七八九十百千万亿]+(?:点[零〇一二三四五六七八九]+)?"
    r"|\d+(?:[.,]\d+)*(?:\s*(?:[%万亿]|percent\b|per\s*cent\b))?|\b(?:"
    + _EN_NUMBER
    + r")(?:[\s-]+(?:and\s+)?(?:"
    + _EN_NUMBER
    + r"))*\b"
    r"(?:\s*(?:percent|per\s*cent)\b)?)"
)
_OPERATOR = (
    r"(?P<op>\*\*|[-+*/×÷^%=()（）]|乘以|乘上|除以|加上|减去|减掉|[加减乘]|除(?![了非外])|的?(?:算术)?平方根?|的?立方根?|次方根?|"
    r"次幂|开方|开平方|开立方|开(?=\s*[\d一二三四五六七八九十]+\s*次方)|根号|√|(?:打|按)?\s*[\d一二三四五六七八九]+\s*折|"
    r"的?\s*[\d一二两三四五六七八九十]+\s*[倍成]|分之|增加了?|增长了?|上涨了?|涨了?|提高了?|减少了?|降低了?|"
    r"下降了?|降了?|跌了?|的和|的差|的积|的商|相加|相减|相乘|相除|"
    # Operations the offline model declines to compute still make the question a calculation.
    r"阶乘|平均数?|平均值|对数|余数|一半|"
    r"\b(?:plus|minus|times|multiplied\s+by|divided\s+by|over|mod|modulo|to\s+the\s+power(?:\s+of)?|squared|"
    r"cubed|square\s+root(?:\s+of)?|cube\s+root(?:\s+of)?|sqrt|off|discount|increased\s+by|decreased\s+by|"
    r"sum\s+of|product\s+of|add|subtract|multiply|divide|square|cube|increase|decrease|reduce|factorial|log|"
    r"average|mean|median|remainder|solve|half)\b)"
)
# Words that only ask for the calculation: they do not make a question about anything else.
_ASKING = (
    r"(?P<ask>计算|算一下|算算|算下|帮我算|请问|请|等于|是多少|多少钱|多少|是几|几|的|是|呢|吗|元|块钱?|美元|"
    r"\b(?:what(?:'s|\s+is)?|how\s+much(?:\s+is)?|calculate|compute|please|the|of|is|equals?|dollars?|bucks)\b|"
    r"[?？。!！,，])"
)
_NOT_ARITHMETIC = re.compile(
    r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b|\b\d{3,4}-\d{4}\b|\b\d{1,2}:\d{2}(?::\d{2})?\b|"  # dates, phones, times
    r"\d+(?:\.\d+){2,}|[A-Za-z]+-\d+"  # versions (1.2.3), names (GPT-4)
)
_PARTS = re.compile(f"{_OPERATOR}|{_NUMBER}|{_ASKING}", re.IGNORECASE)
_ANY_OPERATION = re.compile(f"{_OPERATOR}|%|百分之|percent|per\\s*cent", re.IGNORECASE)


# Between the parts of one calculation: "1250 的 8%", "7% of 1,250", "399 元打八折", "三加五再乘以二",
# "add 45 and 55, then divide by 4" are each one run.
_JOINING = re.compile(
    r"的|元|块钱?|美元|再|然后|接着|结果|它|[,，]|\s|"
    r"\b(?:of|the|by|from|to|and|then|after\s+that|it|result|dollars?|bucks)\b",
    re.IGNORECASE,
)
_PERCENT = re.compile(r"%|百分之|percent|per\s*cent", re.IGNORECASE)


def _parts(text: str) -> list[tuple[str, int, int]]:
    """The arithmetic parts of ``text`` in order: ("num" | "pct" | "op" | "ask", start, end)."""
    text = _NOT_ARITHMETIC.sub(lambda m: " " * len(m.group(0)), text)
    parts = []
    for m in _PARTS.finditer(text):
        kind = m.lastgroup or ""
        if kind == "num" and _PERCENT.search(m.group(0)):
            kind = "pct"  # a percentage of something is an operation in itself
        parts.append((kind, m.start(), m.end()))
    return parts


def _runs(text: str, parts: list[tuple[str, int, int]]) -> list[list[tuple[str, int, int]]]:
    """Runs of numbers and operators with nothing but blanks (or "的", "of") between them, holding an
    operation on a number: an operator beside a number, or a percentage with another number."""
    runs: list[list[tuple[str, int, int]]] = []
    current: list[tuple[str, int, int]] = []

    def close() -> None:
        kinds = {kind for kind, _, _ in current}
        if ("op" in kinds and kinds & {"num", "pct"}) or ("pct" in kinds and len(current) > 1):
            runs.append(list(current))
        current.clear()

    for kind, start, end in parts:
        if kind == "ask" and _JOINING.fullmatch(text[start:end]):
            continue
        if kind not in ("num", "pct", "op"):
            close()
            continue
        if current and _JOINING.sub("", text[current[-1][2] : start]):
            close()
        current.append((kind, start, end))
    close()
    return runs


def _read(question: str) -> tuple[str, list[tuple[str, int, int]]]:
    """The question with full-width forms as ASCII, and its parts (none without any operation at all, so a
    long question of numbers and words costs one scan)."""
    text = unicodedata.normalize("NFKC", question)
    return text, (_parts(text) if _ANY_OPERATION.search(text) else [])


def arithmetic_span(question: str) -> str:
    """The longest run of the question that is arithmetic (numbers beside operators), else ""."""
    text, parts = _read(question)
    spans = [text[run[0][1] : run[-1][2]] for run in _runs(text, parts)]
    return max(spans, key=lambda s: len(s.replace(" ", "")), default="")


def is_calculation(question: str) -> bool:
    """True when arithmetic makes up most of the question, the words asking for it aside: told by patterns
    alone, without segmenting words (which would load the Chinese dictionary for "计算 12 × 12"), so it is
    cheap enough for the graph's edges. Of a page pasted with a question, the question is read."""
    text, parts = _read(query_focus(question))
    runs = _runs(text, parts)
    if not runs:
        return False
    arithmetic = sum(len(text[run[0][1] : run[-1][2]].replace(" ", "")) for run in runs)
    asking = sum(len(text[s:e].replace(" ", "")) for kind, s, e in parts if kind == "ask")
    rest = len(text.replace(" ", "")) - asking
    return rest > 0 and arithmetic >= ARITHMETIC_SHARE * rest


def needs_retrieval(question: str) -> bool:
    """False for small talk made only of numbers and for questions that are mostly a calculation."""
    question = query_focus(question)  # of a page pasted with a question, what is asked
    if is_calculation(question):
        return False
    return any(not w.replace(".", "").isdigit() for w in tokenize(question))
