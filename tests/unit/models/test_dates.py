"""Which day a date question is about, and answers that name that day, never today in its place."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from models.offline import intents
from models.offline.dates import read_dates
from tools.clock import current_date
from tools.registry import ToolContext

ALL = {"calculator", "get_current_date"}
SUNDAY = datetime(2026, 12, 6, 2, 0, tzinfo=UTC)  # 10:00 in Shanghai


@pytest.mark.parametrize(
    ("question", "args"),
    [
        ("今儿几号", {}),
        ("what's today's date?", {}),
        ("大后天星期几？", {"days": 3}),
        ("前天是几号", {"days": -2}),
        ("十天以后是几月几号", {"days": 10}),
        ("再过两周是哪天", {"weeks": 2}),
        ("三个月前是几号", {"months": -3}),
        ("上周五是几号", {"weeks": -1, "weekday": "friday"}),
        ("本周六是几号", {"weekday": "saturday"}),
        ("下下个礼拜一是哪天", {"weeks": 2, "weekday": "monday"}),
        ("下个月15号星期几", {"months": 1, "day": 15}),
        ("明年的今天是星期几", {"years": 1}),
        ("二〇二八年二月二十九日是星期几", {"date": "2028-02-29"}),
        ("10月1日是星期几", {"date": "10-01"}),
        ("what day of the week was 2000/01/01", {"date": "2000-01-01"}),
        ("what day is July 4, 2030", {"date": "2030-07-04"}),
        ("which day is the 25th of December", {"date": "12-25"}),
        ("what was the date two weeks ago", {"weeks": -2}),
        ("what will the date be 100 days from now", {"days": 100}),
        ("the day after tomorrow is what day?", {"days": 2}),
        ("what date is Monday next week", {"weeks": 1, "weekday": "monday"}),
        ("next Tuesday's date please", {"weeks": 1, "weekday": "tuesday"}),
    ],
)
def test_a_day_named_in_either_language_becomes_the_date_tool_s_arguments(question: str, args: dict) -> None:
    reading = read_dates(question)
    assert reading.asks and not reading.unread
    assert reading.arguments() == [args]
    assert intents.plan_steps(question, ALL)[-1].args == args


@pytest.mark.parametrize(
    ("question", "left"),
    [
        ("下个农历十五是几号", "农历"),
        ("这周末是几号", "周末"),
        ("国庆节是星期几", "国庆"),
        ("5个工作日后是几号", "工作日"),
        ("两小时以后几点", "小时"),
        ("周五是几号", "周五"),  # which Friday? this week's has passed on a Sunday
        ("what date was last Friday", "Friday"),  # the one two days ago, or last week's?
        ("what day is Easter next year", "Easter"),
        ("how many days until my birthday", "birthday"),
        ("一个半月后是几号", "半月"),  # an offset the rules cannot count is no reason to give today
        ("下个月最后一天是几号", "最后一天"),
    ],
)
def test_a_day_the_rules_cannot_work_out_is_declined_never_answered_with_today(
    question: str, left: str
) -> None:
    reading = read_dates(question)
    assert reading.asks and any(left.lower() in w.lower() for w in reading.unread)
    assert intents.plan_steps(question, ALL) == []
    reply = intents.unread_reply(question, ALL)
    assert reply is not None and (
        "没能确定你问的是哪一天" in reply or "could not work out which day" in reply
    )


@pytest.mark.parametrize(
    "question",
    [
        "年假一共有多少天",
        "文档的更新日期是什么",
        "RAG 是哪一年提出的",
        "我一般几点睡觉",
        "what time does the office open",
    ],
)
def test_a_question_that_only_mentions_days_or_times_is_not_a_date_question(question: str) -> None:
    assert not read_dates(question).asks
    assert all(s.tool != "get_current_date" for s in intents.plan_steps(question, ALL))


def _answer(question: str) -> str:
    """The offline answer to ``question`` with the date tool run at SUNDAY in Shanghai."""
    results: list[tuple[str, dict[str, Any], str, str]] = []
    for step in intents.plan_steps(question, ALL):
        info = current_date(ToolContext(timezone="Asia/Shanghai"), now=SUNDAY, **step.args)
        results.append((step.tool, step.args, json.dumps(info, ensure_ascii=False), "success"))
    return intents.compose_answer(question, results)


@pytest.mark.parametrize(
    ("question", "day"),
    [
        ("下周三是几号？", "2026-12-09"),
        ("明天星期几", "2026-12-07"),
        ("what's the date tomorrow?", "2026-12-07"),
        ("next Friday is which date", "2026-12-11"),
        ("上个月的今天是几号", "2026-11-06"),
        ("2027年1月1日是星期几", "2027-01-01"),
    ],
)
def test_the_answer_for_another_day_gives_that_day_not_today(question: str, day: str) -> None:
    answer = _answer(question)
    assert day in answer and "2026-12-06" not in answer


def test_counting_days_answers_with_the_count() -> None:
    assert "还有 26 天" in _answer("距离2027年1月1日还有多少天？")
    assert "26 days from today" in _answer("how many days until 2027-01-01")


def test_a_guess_about_a_named_day_is_answered_with_that_day() -> None:
    assert read_dates("今天是周日吗").arguments() == [{}]
    assert read_dates("is tomorrow a Monday?").arguments() == [{"days": 1}]


def test_today_named_as_an_anchor_is_not_asked_about_but_listed_it_is() -> None:
    assert read_dates("下个月的今天是星期几").arguments() == [{"months": 1}]
    assert read_dates("今天和明天分别几号").arguments() == [{}, {"days": 1}]
    assert "下个月的今天是 2027-01-06" in _answer("下个月的今天是星期几")
