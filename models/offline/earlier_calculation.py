"""The offline model's reading of "把第一个问题的结果乘以 2" / "multiply the previous result by 2".

An earlier turn's calculator result may still be in the history or already folded into the running
summary; both places are read here. Kept apart from :mod:`models.summary`, which writes the summary: this
only reads the ``calculator(…) → N`` lines it leaves and the summary block of the system prompt. The rest
of the request is read as any calculation is (:func:`models.offline.calculation.read_calculation`), with
the earlier result in place of "第一个问题的结果": all of it, or nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from models.offline.calculation import read_calculation

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


def earlier_calculation(question: str, messages: Sequence[BaseMessage]) -> str | None:
    """An expression for "把第一个问题的结果乘以 2" from results of earlier turns (the summary included).

    The offline model's way to answer a question that depends on an earlier one after that one was
    folded into the running summary.
    """
    first = _FIRST_REF.search(question)
    reference = first or _LAST_REF.search(question)
    if reference is None:
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
    # The reference reads as "the result" does in a chain: the earlier value stands in its place.
    words = "结果" if re.search(r"[\u4e00-\u9fff]", reference.group(0)) else " the result "
    text = question[: reference.start()] + words + question[reference.end() :]
    calculation = read_calculation(text, previous=results[0] if first else results[-1])
    if not calculation.complete or len(calculation.steps) != 1:
        return None
    return calculation.steps[0].expression
