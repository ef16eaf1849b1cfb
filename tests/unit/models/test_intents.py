"""The offline model's rules (models/intents.py): plans, rounds, operands and answers."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from models.offline import intents
from models.offline.intents import Step
from tools.calculator import evaluate

ALL = {"calculator", "get_current_date"}
DATE_JSON = json.dumps(
    {
        "date": "2024-03-15",
        "time": "09:30:00",
        "weekday": "Friday",
        "weekday_zh": "星期五",
        "timezone": "UTC",
        "iso": "2024-03-15T09:30:00+00:00",
    },
    ensure_ascii=False,
)


def computed(question: str, tools: set[str] = ALL) -> str | None:
    """What the plan for ``question`` computes, round by round as the model runs it (None: no plan)."""
    steps = [s for s in intents.plan_steps(question, tools) if s.tool == "calculator"]
    last = None
    for round_ in intents.rounds_of(steps):
        for step in round_:
            last = evaluate(intents.resolve(step, last)["expression"])
    return last


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("计算 123 × 456", "56088"),
        ("what is 7 times 8", "56"),
        ("12 plus 30", "42"),
        ("100 divided by 4", "25"),
        ("20 minus 25", "-5"),
        ("3 multiplied by 4", "12"),
        ("2 to the power of 10", "1024"),
        ("2的10次方是多少", "1024"),
        ("12 乘以 3", "36"),
        ("10除以4", "2.5"),
        ("7 加上 8", "15"),
        ("9 减去 4", "5"),
        ("(1 + 2) * 3", "9"),
        ("1,000 + 2", "1002"),
        ("3 x 4", "12"),
        ("what is 2 + 3 * 4?", "14"),
        ("７＋８＝？", "15"),
    ],
)
def test_a_calculation_in_symbols_or_operator_words_is_computed(text: str, value: str) -> None:
    assert computed(text) == value


@pytest.mark.parametrize("text", ["hello", "你好", "the year 2024", "42", ""])
def test_numbers_without_an_operation_plan_no_calculation(text: str) -> None:
    assert intents.plan_steps(text, ALL) == []
    assert intents.unread_reply(text, ALL) is None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("三加五再乘以二", "16"),  # 再: the product of the sum, not 3 + 5 alone
        ("一千减去二百五十再除以五", "150"),
        ("八的平方根", "2.82842712474619"),
        ("20% off 150", "120"),
        ("7% of 1,250", "87.5"),
    ],
)
def test_the_calculations_once_answered_in_part_are_computed_whole(text: str, value: str) -> None:
    assert computed(text) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("两百加一千二百五十", "1450"),
        ("一千二百五除以五十", "25"),  # 一千二百五: 1250, as people say it
        ("twelve hundred minus three hundred", "900"),
        ("what's 15% of 80", "12"),
        ("80 的 15% 是多少", "12"),
        ("一千二百五十的百分之八", "100"),
        ("这件衣服 300 元打八折多少钱", "240"),
        ("450 打 75 折", "337.5"),
        ("a 25% discount on 80", "60"),
        ("80 increased by 25%", "100"),
        ("八十增加百分之二十五", "100"),
        ("27 的立方根", "3"),
        ("the cube root of 64", "4"),
        ("square root of 2 times square root of 2", "2"),
        ("根号 144", "12"),
        ("3 的 4 次方", "81"),
        ("5 squared plus 12 squared", "169"),
        ("two cubed", "8"),
        ("9 to the power 3", "729"),
        ("16 开 4 次方", "2"),
        ("the sum of 3, 4 and 5", "12"),
        ("6 和 7 的积", "42"),
        ("三分之一加三分之二", "1"),
        ("两百四十的三分之二", "160"),
        ("负五加三", "-2"),
        ("1.2 亿加 0.8 亿", "200000000"),
        ("三百块钱的七成是多少", "210"),
        ("求 196 的算术平方根", "14"),
        ("乘法口诀里六乘九是多少", "54"),  # other words, but it asks for the result
    ],
)
def test_numbers_in_words_percentages_roots_and_powers_are_read(text: str, value: str) -> None:
    assert computed(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "三加五再乘以 x",  # an operator with no number after it
        "5 的阶乘是多少",  # an operation the calculator does not have
        "3 除 6",  # 除 alone: 3/6 or 6/3?
        "sin 30 plus 1",
        "what is 2 + 3 for 4 people",  # a number the expression does not use
        "150 - 20%",  # 149.8 or 120: calculators disagree
        "x + 3 = 5",  # an equation
        "then add 5",  # a result that does not exist
        "先算 4 的平方，然后求它的平均数",
        "what is 6 + 6 in binary",  # a form of the result it cannot give
        "what is pi times 3",  # a constant it does not know
        "22 除以 7 保留三位小数",
    ],
)
def test_a_calculation_with_a_number_or_operator_left_over_is_declined(text: str) -> None:
    assert intents.plan_steps(text, ALL) == []
    reply = intents.unread_reply(text, ALL)
    assert reply is not None
    assert "没能读懂整个计算" in reply or "could not read the whole calculation" in reply
    assert re.search(r"=\s*-?\d", reply) is None  # no result of any part


@pytest.mark.parametrize(
    "text",
    [
        "2 + 2 会议的纪要放在哪个文档里",  # a question the documents may answer, naming a "2 + 2" meeting
        "where does the handbook describe the 3 + 1 rotation for on-call staff?",
        "BM25 的 k1=1.2 和 b=0.75 分别控制什么",  # settings, not an equation
    ],
)
def test_a_question_that_only_contains_arithmetic_is_neither_computed_nor_declined(text: str) -> None:
    assert [s for s in intents.plan_steps(text, ALL) if s.tool == "calculator"] == []
    assert intents.unread_reply(text, ALL) is None


def test_a_date_question_and_a_calculation_in_one_request_are_both_answered() -> None:
    steps = intents.plan_steps("后天几号？顺便算一下 9 乘 9", ALL)
    assert [s.tool for s in steps] == ["calculator", "get_current_date"]
    assert steps[1].args == {"days": 2}


def test_a_decline_names_what_was_left_over() -> None:
    reply = intents.unread_reply("三加五再乘以 x", ALL)
    assert reply is not None and "“乘以”" in reply
    assert (
        intents.unread_reply("三加五再乘以 x", {"get_current_date"}) is None
    )  # no calculator: not ours to say


def test_plan_steps_single_calculation() -> None:
    assert intents.plan_steps("计算 123 × 456", ALL) == [Step("calculator", {"expression": "123 × 456"})]


def test_plan_steps_date() -> None:
    assert intents.plan_steps("今天星期几", ALL) == [Step("get_current_date", {})]
    assert intents.plan_steps("what day is it today", ALL) == [Step("get_current_date", {})]


def test_plan_steps_date_only_once() -> None:
    steps = intents.plan_steps("今天几号，然后告诉我现在时间", ALL)
    assert steps == [Step("get_current_date", {})]


def test_plan_steps_respects_bound_tools() -> None:
    assert intents.plan_steps("计算 123 × 456", {"get_current_date"}) == []
    assert intents.plan_steps("今天几号", {"calculator"}) == []
    assert intents.plan_steps("今天几号 计算 1 + 2", set()) == []


def test_plan_steps_chain_in_chinese() -> None:
    steps = intents.plan_steps("先计算 12 × 3，再加上 5", ALL)
    assert steps == [
        Step("calculator", {"expression": "12 × 3"}),
        Step("calculator", {}, then=True, template="{result} + 5"),
    ]


@pytest.mark.parametrize(
    ("question", "value"),
    [
        ("12 times 3, then add 5", "41"),
        ("12 times 3, then subtract 4", "32"),
        ("12 times 3 and then multiply it by 2", "72"),
        ("12 times 3, then divide the result by 8", "4.5"),
        ("2 + 3, then square it", "25"),
        ("先算 2+3，然后乘以 4", "20"),
        ("先算 2+3，然后把结果除以 5", "1"),
        ("先算 2+3，接着减去 1", "4"),
        ("16 的平方根，然后再开平方", "2"),
        ("add 3 and 5, then multiply by 2", "16"),
        ("subtract 3 from 10 and then take the square root of the result", "2.64575131106459"),
        ("50 minus 15 then times 3", "105"),
    ],
)
def test_a_chained_request_computes_each_step_from_the_previous_result(question: str, value: str) -> None:
    steps = intents.plan_steps(question, ALL)
    assert len(steps) >= 2 and steps[-1].then
    assert computed(question) == value


def test_reference_without_a_first_step_is_declined() -> None:
    assert intents.plan_steps("then add 5", ALL) == []


def test_independent_segments_are_not_dependent() -> None:
    steps = intents.plan_steps("what is 2 + 3, then 4 * 5", ALL)
    assert [s.then for s in steps] == [False, False]
    assert len(intents.rounds_of(steps)) == 1


def test_rounds_of_groups_independent_steps_and_splits_dependent_ones() -> None:
    a = Step("calculator", {"expression": "1 + 1"})
    b = Step("get_current_date", {})
    c = Step("calculator", {}, then=True, template="{result} + 1")
    d = Step("calculator", {"expression": "2 + 2"})
    assert intents.rounds_of([]) == []
    assert intents.rounds_of([a, b]) == [[a, b]]
    assert intents.rounds_of([a, c, d]) == [[a], [c, d]]
    assert intents.rounds_of([c]) == [[c]]


def test_resolve_fills_the_previous_result() -> None:
    plain = Step("calculator", {"expression": "1 + 1"})
    assert intents.resolve(plain, "99") == {"expression": "1 + 1"}
    assert intents.resolve(Step("calculator", {}, then=True, template="{result} + 5"), "36") == {
        "expression": "(36) + 5"
    }
    squared = intents.resolve(Step("calculator", {}, then=True, template="{result} ** 2"), "-3")
    assert squared == {"expression": "(-3) ** 2"} and evaluate(squared["expression"]) == "9"


def test_resolve_wraps_fractions_so_precedence_holds() -> None:
    args = intents.resolve(Step("calculator", {}, then=True, template="{result} * 2"), "5/2")
    assert evaluate(args["expression"]) == "5"


def test_compose_answer_in_chinese_leads_with_the_last_calculation() -> None:
    text = intents.compose_answer(
        "先计算 12 × 3，再加上 5",
        [
            ("calculator", {"expression": "12 × 3"}, "36", "success"),
            ("calculator", {"expression": "(36) + 5"}, "41", "success"),
        ],
    )
    assert text == "计算结果：41。\n12 × 3 = 36\n(36) + 5 = 41"


def test_compose_answer_in_english() -> None:
    text = intents.compose_answer(
        "what is 7 times 8", [("calculator", {"expression": "7 * 8"}, "56", "success")]
    )
    assert text == "7 * 8 = 56"  # one result: said once


def test_compose_answer_reports_errors_without_a_result() -> None:
    zh = intents.compose_answer(
        "计算 1/0", [("calculator", {"expression": "1/0"}, "Error: division by zero", "error")]
    )
    assert zh == "工具 calculator 没有成功，无法给出结果：division by zero"
    en = intents.compose_answer("1 over 0", [("calculator", {"expression": "1/0"}, "Error: boom", "error")])
    assert en == "The calculator tool did not succeed, so there is no result: boom"


def test_compose_answer_for_dates() -> None:
    zh = intents.compose_answer("今天几号", [("get_current_date", {}, DATE_JSON, "success")])
    assert zh == "今天是 2024-03-15，星期五，当前时间 09:30:00（时区 UTC）。"
    en = intents.compose_answer("what is the date today", [("get_current_date", {}, DATE_JSON, "success")])
    assert en == "Today is Friday, 2024-03-15; the time is 09:30:00 (UTC)."


def test_compose_answer_passes_non_json_date_text_through() -> None:
    assert intents.compose_answer("今天几号", [("get_current_date", {}, "Friday", "success")]) == "Friday"


@pytest.mark.parametrize("content", ['"2024-03-15"', "[1, 2]", '{"date": "2024-03-15"}'])
def test_compose_answer_survives_unexpected_date_json(content: str) -> None:
    text = intents.compose_answer("今天几号", [("get_current_date", {}, content, "success")])
    assert "2024-03-15" in text or content in text


def test_compose_answer_for_other_tools_truncates() -> None:
    text = intents.compose_answer("hello", [("search", {}, "x" * 1000, "success")])
    assert text.startswith("search returned: ")
    assert len(text) == len("search returned: ") + 600


def test_capabilities_reply_lists_tools_in_the_question_language() -> None:
    zh = intents.capabilities_reply("你好", ALL)
    assert "离线演示模型" in zh and "calculator, get_current_date" in zh
    en = intents.capabilities_reply("hi", ALL)
    assert en.startswith("I am kb-agent's offline demo model") and "calculator, get_current_date" in en
    assert "语言模型" in zh and "language model" in en
    assert not any(word in text for text in (zh, en) for word in ("KB_AGENT", "kb-agent ask", "/memories"))  # shown to end users


def test_capabilities_reply_without_tools() -> None:
    assert "本轮可用的工具：无" in intents.capabilities_reply("你好", set())
    assert "Tools available this turn: none." in intents.capabilities_reply("hi", set())


def test_iso_dates_are_not_arithmetic() -> None:
    steps = intents.plan_steps("2024-03-15 是星期几", ALL)
    assert [s.tool for s in steps] == ["get_current_date"]


def _recalled(*memories: tuple[str, str]) -> list[Any]:
    from langchain_core.messages import HumanMessage, SystemMessage

    lines = "\n".join(f"- [{mid}] (semantic) {content}" for mid, content in memories)
    return [SystemMessage(f"rules\n<user_memories>\n{lines}\n</user_memories>"), HumanMessage("q")]


def test_a_forget_request_names_what_will_be_forgotten_or_says_nothing_matches() -> None:
    from models.offline.memory_intents import memory_reply

    held = _recalled(("mem_1", "The user lives in Beijing"), ("mem_2", "The user likes green tea"))
    reply = memory_reply("forget where I live", held)
    assert reply is not None and "The user lives in Beijing [mem_1]" in reply and "mem_2" not in reply
    for question, messages in [("forget where I live", []), ("forget my shoe size", held)]:
        reply = memory_reply(question, messages)
        assert reply is not None and "nothing to forget" in reply and "I will forget that" not in reply
    zh = memory_reply("忘掉我的鞋码", _recalled(("mem_3", "用户住在北京")))
    assert zh is not None and "没有可忘掉" in zh


def test_without_memory_tools_nothing_is_promised_to_be_kept_or_forgotten() -> None:
    """Where the run offers no memory tool (a role without memory:write, long-term memory off), no memory
    is written after the answer either: the reply says so instead of promising it."""
    from models.offline.memory_intents import memory_reply

    offered = {"calculator", "search_knowledge"}
    for question in ("记住我喜欢喝绿茶", "remember that I prefer short answers"):
        reply = memory_reply(question, [], offered)
        assert reply is not None and ("不能" in reply or "can't" in reply), reply
        assert "会在回答之后" not in reply and "will be saved" not in reply
    held = _recalled(("mem_1", "The user lives in Beijing"))
    reply = memory_reply("forget where I live", held, offered)
    assert reply is not None and "can't" in reply and "I will forget" not in reply
    kept = memory_reply("remember that I prefer short answers", [], {"remember", "forget"})
    assert kept is not None and "will be saved" in kept  # the tool path is the offline model's own choice
