"""Numbers as people write them: Chinese numerals, English number words, digits, percentages."""

from __future__ import annotations

import pytest

from models.offline import intents
from models.offline.numbers import en_number, find_numbers, zh_number
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
        ("一千二百五十", 1250),
        ("两百", 200),
        ("一千二百五", 1250),  # a digit after a unit counts in the next unit down
        ("两万五", 25000),
        ("三百零五", 305),
        ("一亿两千万", 120_000_000),
        ("壹仟贰佰", 1200),
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
    assert en_number("twelve hundred") == 1200
    assert en_number("twelve hundred and fifty") == 1250
    assert en_number("a thousand") == 1000
    assert en_number("three point one four") == 3.14
    assert en_number("someone") is None
    assert en_number("twenty-five hundred") == 2500
    assert en_number("two thousand and twenty six") == 2026
    # Words that do not make one number: a year said in pairs, digits read out one by one.
    assert en_number("nineteen ninety") is None
    assert en_number("one two") is None
    assert en_number("one thousand thousand") is None


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("7% of 1,250", [("7", True), ("1250", False)]),
        ("百分之二十乘以五十", [("20", True), ("50", False)]),
        ("3,4", [("3", False), ("4", False)]),  # not a thousands group: two numbers
        ("1.2 亿 and 3万", [("120000000", False), ("30000", False)]),
        ("twenty percent of eighty", [("20", True), ("80", False)]),
        ("Q3 and k1 and the 10th and 5km", []),  # names, ordinals and units are not numbers
        ("version 1.2.3", []),
        ("10 % 3", [("10", False), ("3", False)]),  # a % between numbers is a remainder, not a percentage
    ],
)
def test_find_numbers_reads_digits_words_and_percentages(text: str, found: list[tuple[str, bool]]) -> None:
    assert [(n.shown, n.percent) for n in find_numbers(text)] == found


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
        ("twelve hundred divided by four", "300"),
        ("一千二百五十减两百", "1050"),
    ],
)
def test_arithmetic_in_words_is_computed(question: str, result: str) -> None:
    steps = intents.plan_steps(question, TOOLS)
    assert [s.tool for s in steps] == ["calculator"]
    assert float(evaluate(steps[0].args["expression"])) == float(result)


@pytest.mark.parametrize(
    "question",
    [
        "一个人加两个人",
        "The meeting is at one, then lunch",
        "someone plus one",
        "我想一下",
        "三个苹果加五个梨",
    ],
)
def test_words_that_are_not_arithmetic_stay_words(question: str) -> None:
    assert intents.plan_steps(question, TOOLS) == []
