"""Arithmetic written in words reaches the calculator: Chinese numerals, English number words, percentages."""

from __future__ import annotations

import pytest

from models.offline import intents
from models.offline.numbers import en_number, zh_number
from tools.calculator import evaluate

TOOLS = {"calculator", "get_current_date"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("一百二十三", 123),
        ("两万零五", 20005),
        ("一千零一", 1001),
        ("十五", 15),
        ("三点一四", 3.14),
        ("零", 0),
    ],
)
def test_chinese_numerals(text: str, value: float) -> None:
    assert zh_number(text) == value


@pytest.mark.parametrize("text", ["一二三", "百百", "万"])
def test_what_is_no_numeral_is_left_alone(text: str) -> None:
    assert zh_number(text) is None


def test_english_number_words() -> None:
    assert en_number("two hundred and five") == 205
    assert en_number("twenty-one") == 21
    assert en_number("one thousand two hundred") == 1200
    assert en_number("someone") is None


@pytest.mark.parametrize(
    ("question", "result"),
    [
        ("一百二十三乘以四百五十六", "56088"),
        ("三加五等于几", "8"),
        ("what is seven times eight", "56"),
        ("what's 15% of 80", "12"),
        ("80的15%是多少", "12"),
        ("百分之二十乘以五十", "10"),
        ("计算 2 的 10 次方", "1024"),
        ("二十的平方是多少", "400"),
        ("two hundred and five minus one", "204"),
    ],
)
def test_arithmetic_in_words_is_computed(question: str, result: str) -> None:
    steps = intents.plan_steps(question, TOOLS)
    assert [s.tool for s in steps] == ["calculator"]
    assert float(evaluate(steps[0].args["expression"])) == float(result)


@pytest.mark.parametrize(
    "question", ["一个人加两个人", "The meeting is at one, then lunch", "someone plus one", "我想一下"]
)
def test_words_that_are_not_arithmetic_stay_words(question: str) -> None:
    assert intents.plan_steps(question, TOOLS) == []
