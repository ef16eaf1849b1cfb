"""The offline model's reading of "把第一个问题的结果乘以 2" / "multiply the previous result by 2".

An earlier turn's calculator result may still be in the history or already folded into the running
summary; both places are read here. Kept apart from :mod:`models.summary`, which writes the summary: this
only reads the ``calculator(…) → N`` lines it leaves and the summary block of the system prompt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

_SUMMARY_BLOCK = re.compile(r"<(对话摘要|conversation_summary)>\n(.*?)\n</\1>", re.S)
_CALC_DONE = re.compile(r"calculator\((.*?)\) → (-?\d+(?:\.\d+)?)\b")
_FIRST_REF = re.compile(
    r"第一个?(?:问题|计算|题)?的?(?:结果|答案|得数)|\bfirst (?:question|result|answer|calculation)", re.I
)
_LAST_REF = re.compile(
    r"(?:上一个|上个|刚才|之前|上次|前面)(?:问题|计算)?的?(?:结果|答案|得数)"
    r"|\b(?:previous|last|earlier) (?:result|answer|calculation)\b|\bthat result\b",
    re.IGNORECASE,
)
_REF_OP = (
    (re.compile(r"乘以|乘上|乘|\bmultipl(?:y|ied) by\b|\btimes\b", re.I), "*"),
    (re.compile(r"除以|\bdivided? by\b", re.I), "/"),
    (re.compile(r"加上|加|\bplus\b|\badd\b", re.I), "+"),
    (re.compile(r"减去|减|\bminus\b|\bsubtract\b", re.I), "-"),
)


def earlier_calculation(question: str, messages: Sequence[BaseMessage]) -> str | None:
    """An expression for "把第一个问题的结果乘以 2" from results of earlier turns (the summary included).

    The offline model's way to answer a question that depends on an earlier one after that one was
    folded into the running summary.
    """
    first = _FIRST_REF.search(question)
    if not first and not _LAST_REF.search(question):
        return None
    op = next((symbol for pattern, symbol in _REF_OP if pattern.search(question)), None)
    numbers = re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])", question)
    if op is None or not numbers:
        return None
    last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    results: list[str] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            block = _SUMMARY_BLOCK.search(message.text)
            if block:
                results += [m.group(2) for m in _CALC_DONE.finditer(block.group(2))]
    for message in messages[: max(last_human, 0)]:
        if isinstance(message, ToolMessage) and message.name == "calculator" and message.status != "error":
            results.append(message.text.strip())
    if not results:
        return None
    base = results[0] if first else results[-1]
    return f"({base}) {op} {numbers[-1]}"
