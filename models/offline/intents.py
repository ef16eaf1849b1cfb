"""The offline model's rules: read a question as a plan of tool steps, and answer from tool results.

A rule model for arithmetic in Chinese and English (symbols or words, percentages, roots and powers),
date questions about today or another day, and chained requests ("先算 12×3，再加上 5", "then divide the
result by 8"), which become one model round per dependent step. It never invents a number: every figure
in its answers comes from a tool result. It computes only what it read whole: a calculation with a number
or an operator word left over (:mod:`models.offline.calculation`), or a day it cannot work out
(:mod:`models.offline.dates`), is declined with what it can do instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from models.offline.calculation import RESULT, Calculation, read_calculation
from models.offline.calculation_words import normalized
from models.offline.dates import DateReading, read_dates
from models.tokens import has_cjk

MAX_QUESTION_CHARS = 4000


@dataclass(frozen=True)
class Step:
    """One tool call of a plan; ``then`` marks a step that needs the previous result (a new round), whose
    expression is ``template`` with the result put in for ``{result}``."""

    tool: str
    args: dict[str, Any]
    then: bool = False
    template: str | None = None


@dataclass(frozen=True)
class Reading:
    """A request read for the calculator and the clock: what to compute and which days it asks about."""

    calculation: Calculation
    dates: DateReading


def read(question: str) -> Reading:
    """The calculation and the days ``question`` asks about (a demo model: it reads the start of a huge one)."""
    question = question[:MAX_QUESTION_CHARS]
    dates = read_dates(question)
    return Reading(read_calculation(question, blanked=dates.spans), dates)


def plan_steps(question: str, tools: set[str]) -> list[Step]:
    """Read the question as an ordered plan of tool calls the offline model can make with ``tools``.

    Only what was read whole is planned: a calculation with a number or operator word left over, or a date
    question naming a day the rules cannot work out, plans nothing (:func:`unread_reply` says why).
    """
    reading = read(question)
    steps: list[Step] = []
    if "calculator" in tools and reading.calculation.complete and not reading.calculation.mixed:
        for part in reading.calculation.steps:
            if part.uses_result:
                steps.append(Step("calculator", {}, then=True, template=part.expression))
            else:
                steps.append(Step("calculator", {"expression": part.expression}))
    if "get_current_date" in tools and reading.dates.asks and not reading.dates.unread:
        steps += [Step("get_current_date", args) for args in reading.dates.arguments()]
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
    if step.template is None:
        return step.args
    base = last_result if last_result is not None else "0"
    return {"expression": step.template.replace(RESULT, f"({base})")}


def _quoted(words: list[str], zh: bool) -> str:
    distinct = list(dict.fromkeys(w for w in words if w))[:3]
    return ("、".join(f"“{w}”" for w in distinct)) if zh else ", ".join(f"'{w}'" for w in distinct)


def _calculation_declined(reading: Reading, zh: bool) -> str:
    left = _quoted([t.text for t in reading.calculation.unread], zh)
    if zh:
        return (
            f"我没能读懂整个计算（{left or '其中一部分'}没能放进我能算的式子），所以不给出结果：只算一部分会得出错的答案。"
            "我能算数字和运算都写明的式子，比如“(3 + 5) × 2”“1250 的 8%”“8 的平方根”“2 的 10 次方”“150 打八折”，"
            "也能分步算，如“先算 3 + 5，再乘以 2”。"
        )
    return (
        f"I could not read the whole calculation ({left or 'part of it'} did not fit into an expression I can "
        "compute), so I give no result: computing only part of it would give a wrong answer. I can compute "
        "expressions whose numbers and operations are all written out, e.g. '(3 + 5) * 2', '8% of 1250', "
        "'the square root of 8', '2 to the power of 10', '20% off 150', and steps such as 'add 3 and 5, "
        "then multiply by 2'."
    )


def _date_declined(reading: Reading, zh: bool) -> str:
    left = _quoted(reading.dates.unread, zh)
    if zh:
        return (
            f"我没能确定你问的是哪一天（{left}超出了我的日期规则），所以不报日期。我能回答今天的日期和时间、"
            "从今天算起的日子（明天、3 天后、下周三、上个月的今天），以及公历日期是星期几（如“2027年1月1日是星期几”）。"
        )
    return (
        f"I could not work out which day you mean ({left} is beyond my date rules), so I give no date. I can "
        "tell today's date and time, days counted from today (tomorrow, in 3 days, next Wednesday, a month "
        "ago) and the weekday of a calendar date (e.g. 'what weekday is 2027-01-01')."
    )


def too_long_to_compute(zh: bool) -> str:
    """The reply to a calculation asked inside a message too long to read whole: its numbers may lie in
    the part not read, and computing part of a request gives a wrong answer."""
    if zh:
        return "这条消息太长，我读不全，所以不从中计算：没读到的部分可能还有数字。请把要算的式子单独发给我，比如“(3 + 5) × 2”。"
    return (
        "This message is too long for me to read whole, so I compute nothing from it: the part I did not read "
        "may hold more numbers. Send the calculation on its own, e.g. '(3 + 5) * 2'."
    )


def unread_reply(question: str, tools: set[str]) -> str | None:
    """Why nothing was computed: the calculation or the day asked about could not be read whole (None when
    neither applies, or its tool is not offered this turn)."""
    reading = read(question)
    zh = has_cjk(question)
    parts = []
    if "calculator" in tools and reading.calculation.is_calculation and not reading.calculation.complete:
        parts.append(_calculation_declined(reading, zh))
    if "get_current_date" in tools and reading.dates.asks and reading.dates.unread:
        parts.append(_date_declined(reading, zh))
    return "\n".join(parts) or None


def _relative(days: int, zh: bool) -> str:
    if zh:
        return "就是今天" if days == 0 else f"{days} 天后" if days > 0 else f"{-days} 天前"
    if days == 0:
        return "today"
    return f"in {days} day{'s' * (days != 1)}" if days > 0 else f"{-days} day{'s' * (days != -1)} ago"


def _describe_day(args: dict[str, Any], info: dict[str, Any], question: str, zh: bool) -> str:
    """One sentence for another day: the words the user named it by, its date and weekday, and how far off."""
    reading = read_dates(question)
    named = [i for i, d in enumerate(reading.days) if d.args == args and not d.anchor]
    label = ""
    if named:
        day = reading.days[named[0]]
        after = reading.days[named[0] + 1] if named[0] + 1 < len(reading.days) else None
        end = after.end if after is not None and after.anchor else day.end  # "下个月的今天", not "下个月"
        label = normalized(question)[day.start : end].strip()
    days = int(info["days_from_today"])
    if reading.counts_days:
        if zh:
            return f"{info['date']}（{info['weekday_zh']}）距今天{'还有' if days >= 0 else '已过去'} {abs(days)} 天。"
        when = f"{days} days from today" if days >= 0 else f"{-days} days before today"
        return f"{info['date']} ({info['weekday']}) is {when}."
    if zh:
        return f"{label or info['date']}是 {info['date']}，{info['weekday_zh']}（{_relative(days, zh)}）。"
    note = ""
    if "weekday" in args:
        week = {1: "next week", -1: "last week", 0: "this week"}.get(int(args.get("weeks", 0)), "that week")
        note = f", the {info['weekday']} of {week}, weeks starting on Monday"
    label = label[:1].upper() + label[1:] if label else "That day"
    return f"{label}: {info['weekday']}, {info['date']} ({_relative(days, zh)}{note})."


def describe_result(
    tool: str, args: dict[str, Any], content: str, status: str, zh: bool, question: str = ""
) -> str:
    """One sentence for one tool result, in the user's language."""
    if status == "error":
        reason = content.removeprefix("Error: ")
        if zh:
            return f"工具 {tool} 没有成功，无法给出结果：{reason}"
        return f"The {tool} tool did not succeed, so there is no result: {reason}"
    if tool == "calculator":
        expr = args.get("expression", "")
        return f"{expr} = {content}"
    if tool == "get_current_date":
        try:
            info = json.loads(content)
            if "days_from_today" in info:
                return _describe_day(args, info, question, zh)
            if zh:
                return f"今天是 {info['date']}，{info['weekday_zh']}，当前时间 {info['time']}（时区 {info['timezone']}）。"
            return f"Today is {info['weekday']}, {info['date']}; the time is {info['time']} ({info['timezone']})."
        except (ValueError, KeyError, TypeError):  # another tool under that name: quote it as it is
            return content
    return (f"工具 {tool} 返回：" if zh else f"{tool} returned: ") + content[:600]


def compose_answer(question: str, results: list[tuple[str, dict[str, Any], str, str]]) -> str:
    """The final answer from ``(tool, args, content, status)`` results, in the question's language; a part
    of the request that could not be read (a calculation beside a date question) is said to be declined."""
    zh = has_cjk(question)
    lines = [
        describe_result(tool, args, content, status, zh, question) for tool, args, content, status in results
    ]
    calc = [r for r in results if r[0] == "calculator" and r[3] == "success"]
    lead = ""
    if calc and len(results) > 1:  # one line already reads "123 × 456 = 56088": saying it twice is noise
        final = calc[-1][2]
        lead = (f"计算结果：{final}。" if zh else f"The result is {final}.") + "\n"
    declined = unread_reply(question, {"calculator", "get_current_date"})
    return lead + "\n".join([*lines, *([declined] if declined else [])])


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
            "开放的请求需要语言模型，可由本服务的管理员接入。"
        )
    return (
        "I am kb-agent's offline demo model and did not understand this request; I only handle fixed kinds "
        "of requests by rule: "
        + "; ".join(item for _, item in can)
        + f". Tools available this turn: {names}. "
        "Open requests need a language model, which whoever runs this service can connect."
    )
