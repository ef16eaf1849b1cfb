"""The offline model's rules: read a question as a plan of tool steps, and answer from tool results.

A rule model that understands arithmetic in Chinese and English (symbols or words),
date/time questions, and chained requests ("先算 12×3，再加上 5", "then divide the result by 8"), which
become one model round per dependent step. It never invents a number: every figure in its answers comes
from a tool result.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from models.offline.numbers import digits_for_words
from models.tokens import has_cjk

_WORD_OPS: list[tuple[str, str]] = [
    (r"乘以|乘上|乘", "*"),
    (r"除以", "/"),
    (r"加上|加", "+"),
    (r"减去|减掉|减", "-"),
    (r"\bmultiplied by\b|\btimes\b", "*"),
    (r"\bdivided by\b|\bover\b", "/"),
    (r"\bplus\b", "+"),
    (r"\bminus\b", "-"),
    (r"\bto the power of\b|的(?=\s*\d+\s*次方)", "**"),
    (r"的平方|\bsquared\b", "** 2"),
]
_EXPR = re.compile(
    r"[-+(（]*\s*\d[\d.,\s]*(?:\s*(?:\*\*|[-+*/×÷xX^%＋－＊／％])\s*[-+(（]*\s*\d[\d.,]*\s*[)）]*)+"
)
_ARITH_RUN = re.compile(r"[\d.,\s+\-*/×÷xX^%＋－＊／％()（）]+")
_OPERATOR = re.compile(r"[-+*/×÷xX^%＋－＊／％]")
_BINARY = re.compile(r"\d\s*(?:\*\*|[-+*/×÷xX^%＋－＊／％])\s*[-+(（]*\s*\d")
MAX_RUN_CHARS = 600
MAX_QUESTION_CHARS = 4000
_NOT_ARITHMETIC = re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{3,4}-\d{4}\b|\b\d{1,2}:\d{2}(?::\d{2})?\b")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_DATE = re.compile(
    r"今天|今日|日期|几号|几月几日|星期几|礼拜几|周几|几点|现在时间|当前时间|"
    r"\bdate\b|\btoday\b|what day|what time|current time|time is it",
    re.IGNORECASE,
)
_THEN = re.compile(r"\s*(?:[,，;；。]\s*)?(?:然后|接着|之后|再|and then|then|after that)\s*", re.IGNORECASE)
_REFERENCE = re.compile(r"结果|得数|它|这个数|\bresult\b|\bit\b|\bthat\b", re.IGNORECASE)
_REF_OPS: list[tuple[str, str]] = [
    (r"乘以|乘上|乘|multiply|times", "*"),
    (r"除以|divide", "/"),
    (r"加上|加|add|plus", "+"),
    (r"减去|减掉|减|subtract|minus", "-"),
    (r"平方|square", "**2"),
]


@dataclass(frozen=True)
class Step:
    """One tool call of a plan; ``then`` marks a step that needs the previous result (a new round)."""

    tool: str
    args: dict[str, Any]
    then: bool = False
    ref_op: str | None = None


def _words_to_symbols(text: str) -> str:
    for pattern, symbol in _WORD_OPS:
        text = re.sub(rf"\s*(?:{pattern})\s*", f" {symbol} ", text, flags=re.IGNORECASE)
    return text


def find_expression(text: str) -> str | None:
    """The longest arithmetic expression in ``text`` (symbols or operator words), normalised.

    Runs of arithmetic characters are found in one linear pass; the detailed pattern only looks inside
    runs short enough for the calculator, so a huge question cannot make this quadratic.
    """
    # Dates (2024-03-15) and phone-like numbers (555-1234) are not subtractions.
    text = _words_to_symbols(digits_for_words(_NOT_ARITHMETIC.sub(" ", text)))
    candidates: list[str] = []
    for run in _ARITH_RUN.finditer(text):
        chunk = run.group(0)
        if len(chunk) > MAX_RUN_CHARS:  # too long to evaluate anyway: the calculator will say so
            if _OPERATOR.search(chunk) and any(ch.isdigit() for ch in chunk):
                candidates.append(chunk.strip())
            continue
        candidates += [m.group(0).strip() for m in _EXPR.finditer(chunk) if _BINARY.search(m.group(0))]
    if not candidates:
        return None
    expr = max(candidates, key=len).rstrip(",， ")
    opened, closed = expr.count("(") + expr.count("（"), expr.count(")") + expr.count("）")
    if closed > opened:
        expr = expr.rstrip(")）") + ")" * opened if opened else expr.rstrip(")）")
    elif opened > closed:
        expr = expr.lstrip("(（") if not closed else expr + ")" * (opened - closed)
    return re.sub(r"\s+", " ", expr)


def _reference_step(segment: str) -> Step | None:
    follow_up = re.match(
        r"\s*(?:加|减|乘|除|平方|add|subtract|multiply|divide|square)", segment, re.IGNORECASE
    )
    if not _REFERENCE.search(segment) and not follow_up:
        return None
    for pattern, op in _REF_OPS:
        if re.search(pattern, segment, re.IGNORECASE):
            if op == "**2":
                return Step("calculator", {}, then=True, ref_op="**2")
            number = _NUMBER.search(segment)
            if number:
                return Step("calculator", {}, then=True, ref_op=f"{op} {number.group(0)}")
    return None


def plan_steps(question: str, tools: set[str]) -> list[Step]:
    """Read the question as an ordered plan of tool calls the offline model can make with ``tools``."""
    steps: list[Step] = []
    question = question[:MAX_QUESTION_CHARS]  # a demo model: it reads the start of a huge question
    for segment in (s for s in _THEN.split(question) if s and s.strip()):
        if "calculator" in tools:
            expr = find_expression(segment)
            if expr is not None:
                steps.append(Step("calculator", {"expression": expr}))
            elif steps and (ref := _reference_step(segment)) is not None:
                steps.append(ref)
        wants_date = "get_current_date" in tools and _DATE.search(segment)
        if wants_date and not any(s.tool == "get_current_date" for s in steps):
            steps.append(Step("get_current_date", {}))
    return steps


def rounds_of(steps: list[Step]) -> list[list[Step]]:
    """Group steps into model rounds: independent steps share a round, dependent ones start a new one."""
    rounds: list[list[Step]] = []
    for step in steps:
        if step.then or not rounds:
            rounds.append([step])
        else:
            rounds[-1].append(step)
    return rounds


def resolve(step: Step, last_result: str | None) -> dict[str, Any]:
    """Arguments of a step, with a dependent step's operand filled from the previous result."""
    if step.ref_op is None:
        return step.args
    base = last_result if last_result is not None else "0"
    if step.ref_op == "**2":
        return {"expression": f"({base}) ** 2"}
    return {"expression": f"({base}) {step.ref_op}"}


def describe_result(tool: str, args: dict[str, Any], content: str, status: str, zh: bool) -> str:
    """One sentence for one tool result, in the user's language."""
    if status == "error":
        reason = content.removeprefix("Error: ")
        return f"工具 {tool} 没有成功：{reason}" if zh else f"The {tool} tool did not succeed: {reason}"
    if tool == "calculator":
        expr = args.get("expression", "")
        return f"{expr} = {content}"
    if tool == "get_current_date":
        try:
            info = json.loads(content)
            if zh:
                return f"今天是 {info['date']}，{info['weekday_zh']}，当前时间 {info['time']}（时区 {info['timezone']}）。"
            return f"Today is {info['weekday']}, {info['date']}; the time is {info['time']} ({info['timezone']})."
        except (ValueError, KeyError, TypeError):  # another tool under that name: quote it as it is
            return content
    return (f"工具 {tool} 返回：" if zh else f"{tool} returned: ") + content[:600]


def compose_answer(question: str, results: list[tuple[str, dict[str, Any], str, str]]) -> str:
    """The final answer from ``(tool, args, content, status)`` results, in the question's language."""
    zh = has_cjk(question)
    lines = [describe_result(tool, args, content, status, zh) for tool, args, content, status in results]
    calc = [r for r in results if r[0] == "calculator" and r[3] == "success"]
    lead = ""
    if calc and len(results) > 1:  # one line already reads "123 × 456 = 56088": saying it twice is noise
        final = calc[-1][2]
        lead = (f"计算结果：{final}。" if zh else f"The result is {final}.") + "\n"
    return lead + "\n".join(lines)


def capabilities_reply(question: str, tools: set[str]) -> str:
    """What the offline model says when no rule applies: that it did not understand, what it can do with
    this turn's tools, and how to get a real model."""
    zh = has_cjk(question)
    names = ", ".join(sorted(tools)) or ("无" if zh else "none")
    can = [("算术（如“计算 123 × 456”）", "arithmetic (e.g. 'what is 123 * 456')")]
    can.append(("日期时间（如“今天几号”）", "dates and times ('what is the date today')"))
    if "search_knowledge" in tools:
        can.append(
            (
                "回答关于知识库文档的问题（如“差旅怎么报销？”）",
                "questions about your documents ('how do I claim travel expenses?')",
            )
        )
    if "remember" in tools:
        can.append(
            (
                "记住或忘掉关于你的事（“记住我住在上海”“忘掉我住在哪里”）",
                "remembering or forgetting things about you ('remember that I live in Shanghai', 'forget where I live')",
            )
        )
    if zh:
        return (
            "我是 kb-agent 的离线演示模型，没能理解这个请求；我只按规则处理固定类型的请求："
            + "、".join(item for item, _ in can)
            + f"。本轮可用的工具：{names}。"
            "要处理开放的请求，请设置 KB_AGENT_BASE_URL / KB_AGENT_API_KEY / KB_AGENT_MODEL 接入真实模型。"
        )
    return (
        "I am kb-agent's offline demo model and did not understand this request; I only handle fixed kinds "
        "of requests by rule: "
        + "; ".join(item for _, item in can)
        + f". Tools available this turn: {names}. "
        "For open requests, set KB_AGENT_BASE_URL / KB_AGENT_API_KEY / KB_AGENT_MODEL to use a real model."
    )
