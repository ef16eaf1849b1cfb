"""What a search looks for in a message: the question, not the page pasted around it."""

from __future__ import annotations

import time

import pytest

from stores.text_analysis import QUERY_TOKENS, estimate_tokens, query_focus

PASTE_ZH = "以下是会议记录的原文，供参考：项目组讨论了发布计划、预算和人员安排，决定下周再议。"
PASTE_EN = "The team discussed the release plan, the budget and staffing, and agreed to meet again. "


@pytest.mark.parametrize(
    "question",
    [
        "员工每年有几天带薪年假？",
        "How long must a password be?",
        "Explain how the running summary stays within the token budget when a thread has many turns.",
        "线程存在哪里？文档切块大概多大？",
        "",
        "   ",
        "?!。",
        "🙂🙂",
    ],
)
def test_a_question_is_searched_as_it_is(question: str) -> None:
    assert query_focus(question) == question


@pytest.mark.parametrize(
    ("paste", "question"),
    [(PASTE_ZH, "员工每年有几天带薪年假？"), (PASTE_EN, "How long must a password be?")],
)
def test_a_pasted_page_is_searched_by_the_question_after_it(paste: str, question: str) -> None:
    text = paste * (30_000 // len(paste) + 1) + "\n\n" + question
    assert len(text) > 30_000
    assert query_focus(text) == question


def test_a_question_before_the_page_is_found_too() -> None:
    text = "Which of our policies covers what these notes describe? " + PASTE_EN * 300
    assert query_focus(text) == "Which of our policies covers what these notes describe?"


def test_several_questions_are_kept_in_order_within_the_budget() -> None:
    text = PASTE_EN * 300 + "Who approves a refund? 退款多久到账？ Thanks."
    assert query_focus(text) == "Who approves a refund? 退款多久到账？"


def test_without_a_question_the_instruction_and_the_end_are_searched() -> None:
    text = "Summarise what our policy says about these notes: " + PASTE_EN * 300 + "End of the notes."
    focus = query_focus(text)
    assert focus.startswith("Summarise what our policy says about these notes:")
    assert focus.endswith("End of the notes.")
    assert estimate_tokens(focus) <= QUERY_TOKENS


@pytest.mark.parametrize(
    "text",
    [
        "word " * 20_000,  # no sentence at all
        "没有标点的一段很长的中文" * 5_000,
        "Is this one very long question "
        + "and " * 5_000
        + "what else?",  # one asking sentence past the budget
        "🙂" * 50_000,
        "？" * 50_000,
    ],
)
def test_any_long_text_is_bounded(text: str) -> None:
    started = time.process_time()
    focus = query_focus(text)
    assert estimate_tokens(focus) <= QUERY_TOKENS
    assert time.process_time() - started < 2  # linear in the text: a bound, not a benchmark
