"""Through the whole graph: the offline model computes a calculation whole or declines it, and answers a
date question with the day asked about (the clock pinned to Sunday 2026-12-06, 10:00 in Shanghai)."""

from __future__ import annotations

from datetime import datetime, tzinfo
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graph import build_graph
from nodes.settings import Settings
from tools import clock

SUNDAY = datetime.fromisoformat("2026-12-06T10:00:00+08:00")


@pytest.fixture
def sunday(monkeypatch: pytest.MonkeyPatch, kb_home: Path) -> Path:
    def pinned(zone: tzinfo | None = None) -> datetime:
        return SUNDAY.astimezone(zone) if zone is not None else SUNDAY

    monkeypatch.setattr(clock, "now", pinned)
    monkeypatch.setenv("KB_AGENT_TIMEZONE", "Asia/Shanghai")
    return kb_home


def _ask(question: str) -> tuple[str, list[tuple[str, dict]], list[str]]:
    result = build_graph(settings=Settings()).invoke({"messages": [HumanMessage(question)]})
    messages = result["messages"]
    calls = [(c["name"], c["args"]) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    results = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
    return str(messages[-1].content), calls, results


@pytest.mark.parametrize(
    ("question", "value", "rounds"),
    [
        ("三加五再乘以二", "16", 2),
        ("一千减去二百五十再除以五", "150", 2),
        ("八的平方根", "2.82842712474619", 1),
        ("20% off 150", "120", 1),
        ("7% of 1,250", "87.5", 1),
    ],
)
def test_a_calculation_is_answered_with_its_whole_result(
    sunday: Path, question: str, value: str, rounds: int
) -> None:
    answer, calls, results = _ask(question)
    assert [name for name, _ in calls] == ["calculator"] * rounds
    assert results[-1] == value and value in answer


@pytest.mark.parametrize("question", ["三加五再乘以 x", "9 的阶乘是多少", "what is 4 plus 4 for the 2 of us"])
def test_a_calculation_it_cannot_read_whole_is_declined_without_a_result_or_a_quote(
    sunday: Path, question: str
) -> None:
    answer, calls, _ = _ask(question)
    assert calls == []
    assert "没能读懂整个计算" in answer or "could not read the whole calculation" in answer
    assert "8" not in answer.split("比如")[0].split("e.g.")[0]  # no part computed, "3 + 5 = 8" least of all
    assert "[" not in answer  # no passage of the knowledge base quoted instead


@pytest.mark.parametrize(
    ("question", "day"),
    [
        ("下周三是几号？", "2026-12-09"),
        ("what is the date tomorrow", "2026-12-07"),
        ("3天后是星期几", "2026-12-09"),
    ],
)
def test_a_date_question_about_another_day_is_answered_with_that_day(
    sunday: Path, question: str, day: str
) -> None:
    answer, calls, _ = _ask(question)
    assert [name for name, _ in calls] == ["get_current_date"] and calls[0][1] != {}
    assert day in answer and "2026-12-06" not in answer


def test_a_day_it_cannot_work_out_is_declined_not_answered_with_today(sunday: Path) -> None:
    answer, calls, _ = _ask("上个农历月初一是几号")
    assert calls == [] and "农历" in answer and "2026-12-06" not in answer


def test_today_is_still_answered_with_today(sunday: Path) -> None:
    answer, calls, _ = _ask("今天几号？")
    assert calls == [("get_current_date", {})] and "2026-12-06" in answer and "10:00:00" in answer
