"""Reading a calculation whole, or not at all (models/offline/calculation.py and its words)."""

from __future__ import annotations

import pytest

from models.offline.calculation import RESULT, read_calculation
from tools.calculator import evaluate


def steps(text: str) -> list[tuple[str, bool]]:
    return [(s.expression, s.uses_result) for s in read_calculation(text).steps]


@pytest.mark.parametrize(
    ("text", "left_over"),
    [
        ("三加五再乘以 y", ["乘以"]),
        ("6 的阶乘加 1", ["6", "阶乘", "加", "1"]),
        ("what is 12 plus 7 for the 3 of us", ["3"]),
        ("4 除 8", ["4", "除", "8"]),
        ("cos 60 times 2", ["cos", "60", "times", "2"]),
        ("200 plus 15%", ["200", "plus", "15%"]),
        ("2x + 1 = 7", ["+", "1", "=", "7"]),
    ],
)
def test_what_no_expression_used_is_reported_as_unread(text: str, left_over: list[str]) -> None:
    reading = read_calculation(text)
    assert reading.is_calculation and not reading.complete
    assert [t.text for t in reading.unread] == left_over


@pytest.mark.parametrize(
    "text",
    [
        "差旅报销的标准是什么？",
        "加班3小时怎么算加班费",  # 加班 is overtime, not an addition
        "他负责 3 个项目",
        "除了 2 个例外都通过了",
        "3-5 个工作日到账",  # a range
        "GPT-4 的上下文多长",
        "call 555-1234 at 10:30",
        "2024-03-15 的会议",
        "第 3 章讲了什么",
        "三个苹果和五个梨",
        "which one is better, 3 or 5",
        "公司营收增长了 15% 吗",  # a percentage, but no number that grew
        "营收涨了 20% 是真的吗",
    ],
)
def test_numbers_and_words_that_only_look_like_arithmetic_are_not_a_calculation(text: str) -> None:
    assert not read_calculation(text).is_calculation


def test_a_later_part_that_starts_with_an_operator_uses_the_previous_result() -> None:
    assert steps("九乘以九，再减去一") == [("9 * 9", False), (f"{RESULT} - 1", True)]
    assert steps("100 除以 4，然后用 1000 除以结果") == [("100 / 4", False), (f"1000 / {RESULT}", True)]
    assert steps("multiply 6 by 7 then subtract 2 from it") == [("6 * 7", False), (f"{RESULT} - 2", True)]


def test_within_one_part_usual_precedence_holds() -> None:
    assert evaluate(steps("3 加 5 乘以 2")[0][0]) == "13"
    assert evaluate(steps("(3 + 5) × 2")[0][0]) == "16"
    assert evaluate(steps("2 的 3 次方的平方")[0][0]) == "64"
    assert evaluate(steps("-2 squared")[0][0]) == "-4"  # as in mathematics: -(2²)


def test_an_earlier_result_stands_in_for_the_reference() -> None:
    reading = read_calculation("把结果乘以 2，再加一", previous="36")
    assert [(s.expression, s.uses_result) for s in reading.steps] == [
        ("(36) * 2", False),
        (f"{RESULT} + 1", True),
    ]
    assert reading.complete


def test_the_symbols_the_user_typed_are_kept_in_the_expression() -> None:
    assert steps("计算 123 × 456") == [("123 × 456", False)]
    assert steps("84 ÷ 4") == [("84 ÷ 4", False)]
    assert steps("一百二十三乘以四百五十六") == [("123 * 456", False)]


@pytest.mark.parametrize(
    "text",
    ["(" * 3000 + "1" + ")" * 3000 + " + 1", "1 + " * 1000 + "1", "-" * 2000 + "1 + 1"],
)
def test_a_huge_or_deep_request_is_read_without_recursion_errors(text: str) -> None:
    reading = read_calculation(text)
    assert reading.is_calculation  # read (or declined) promptly; the calculator bounds what it computes


def test_a_number_said_as_the_price_of_a_thing_is_what_the_discount_or_rise_applies_to() -> None:
    assert [s.expression for s in read_calculation("一双 480 元的球鞋打七折要多少钱").steps] == ["480 * 0.7"]
    assert [s.expression for s in read_calculation("2000 块的房租涨了 5% 是多少").steps] == [
        "2000 * (1 + (5 / 100))"
    ]
