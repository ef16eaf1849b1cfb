"""Whether a question is worth a knowledge-base search: not when it is a calculation and little else.

A search costs a round trip to the stores and fills the prompt with passages; for "计算 123 × 456" or
"what is (3 + 4) * 5?" nothing in the documents can help, and the passages would only distract the model.
The rule is deliberately narrow: a question is skipped only when it has no words at all besides numbers, or
when an arithmetic expression makes up most of it. Operator words count as operators ("12 plus 30",
"7 乘以 8"), and dates, times and phone-like numbers are not subtractions or divisions.
"""

from __future__ import annotations

import re

from stores.text_analysis import tokenize

ARITHMETIC_SHARE = 0.6  # at least this much of the question (ignoring spaces) is the expression: no search

_OPERATOR_WORDS = re.compile(
    r"乘以|乘上|除以|加上|减去|减掉|的平方|平方|[加减乘除]|"
    r"\b(?:plus|minus|times|multiplied\s+by|divided\s+by|over|mod|modulo|to\s+the\s+power\s+of|squared)\b",
    re.IGNORECASE,
)
_NOT_ARITHMETIC = re.compile(
    r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b|\b\d{3,4}-\d{4}\b|\b\d{1,2}:\d{2}(?::\d{2})?\b"  # dates, phones, times
)
# A match starts only where a run of digits, separators and brackets starts: tried from every digit of
# "1 1 1 … 1" (no operator), the scan would be quadratic in the question's length.
_EXPRESSION = re.compile(
    r"(?<![\d.,\s(（])[(（\s]*\d[\d.,\s]*(?:(?:\*\*|[-+*/×÷xX^%＋－＊／％=＝])[\s(（]*[-+]?\d[\d.,\s)）]*)+"
)


def arithmetic_span(question: str) -> str:
    """The longest run of the question that is an expression (numbers joined by operators), else ""."""
    text = _OPERATOR_WORDS.sub(" + ", _NOT_ARITHMETIC.sub(" ", question))
    runs = [m.group(0).strip() for m in _EXPRESSION.finditer(text)]
    return max(runs, key=len, default="")


def is_calculation(question: str) -> bool:
    """True when an arithmetic expression makes up most of the question: told by patterns alone, without
    segmenting words (which would load the Chinese dictionary for "计算 12 × 12"), so it is cheap enough
    for the graph's edges."""
    span = arithmetic_span(question)
    return bool(span) and len(re.sub(r"\s+", " ", span)) >= ARITHMETIC_SHARE * len(question.replace(" ", ""))


def needs_retrieval(question: str) -> bool:
    """False for small talk made only of numbers and for questions that are mostly a calculation."""
    if is_calculation(question):
        return False
    return any(not w.replace(".", "").isdigit() for w in tokenize(question))
