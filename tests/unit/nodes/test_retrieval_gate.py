"""The retrieve node's own rule: a calculation is not worth a knowledge-base search, a question is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodes.retrieval_gate import arithmetic_span, is_calculation, needs_retrieval


@pytest.mark.parametrize(
    "question",
    [
        "计算 123 × 456",
        "算一下 (3 + 4) * 5",
        "7 乘以 8 等于多少",
        "100/4 是多少",
        "把 1,234.5 加上 20",
        "what is 12 * 30?",
        "what's 2^10",
        "3+4",
        "（18 － 3）÷ 5 ＝ ?",
        "42",
    ],
)
def test_a_calculation_and_little_else_skips_the_search(question: str) -> None:
    assert not needs_retrieval(question)


@pytest.mark.parametrize(
    "question",
    [
        "差旅报销的标准是什么？",
        "2024-03-15 的会议纪要说了什么",  # a date is not a subtraction
        "call 555-1234 about the refund policy",  # nor is a phone number
        "the 09:30 standup notes",  # nor a time
        "公司 2023 年营收增长了 15% 吗",
        "版本 1.2.3 的发布说明",
        "报销比例是 80% 还是 90%",
        "how many days of annual leave do I get after 3 years?",
        "计算 (12+8)×3 然后按差旅标准报销多少",  # a calculation inside a real question
        "what does the policy say about 2 + 2 meetings per week for remote staff in the Berlin office?",
    ],
)
def test_a_question_about_the_documents_is_searched(question: str) -> None:
    assert needs_retrieval(question)


def test_the_span_reads_operator_words_and_ignores_dates() -> None:
    assert arithmetic_span("7 乘以 8") == "7 乘以 8"  # an operator word counts as an operator
    assert arithmetic_span("so 12 divided by 4?") == "12 divided by 4"
    assert arithmetic_span("meeting on 2024-03-15") == ""
    assert arithmetic_span("no numbers here") == ""


@pytest.mark.parametrize(
    "question",
    [
        "八的平方根",
        "三加五再乘以二",
        "一千二百五十的百分之八是多少",
        "20% off 150",
        "7% of 1,250?",
        "what is the cube root of twenty-seven",
        "two to the power of ten",
        "１２０ 打八折是多少",
    ],
)
def test_a_calculation_in_words_percentages_or_roots_skips_the_search(question: str) -> None:
    """The same calculations the offline model reads: numbers in words, percentages, roots, chains."""
    assert is_calculation(question) and not needs_retrieval(question)


@pytest.mark.parametrize(
    "question",
    [
        "RAG 加上重排序效果会更好吗",
        "我有一个问题想问",
        "GPT-4 的上下文有多长",
        "下周三是几号？",
        "年假一共有几天",
    ],
)
def test_operator_words_or_numbers_alone_do_not_make_a_calculation(question: str) -> None:
    assert not is_calculation(question)


def test_a_huge_question_is_read_in_linear_time() -> None:
    question = "1 + " * 20_000 + "1 以及差旅报销的标准"
    assert (
        needs_retrieval(question) is False
    )  # mostly arithmetic; returns promptly (the regex does not backtrack)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "question",
    ["1 " * 100_000, "差旅 " + "1 " * 100_000, "1 " * 100_000 + "+ 1", "what about " + "3.5, " * 50_000],
)
def test_a_long_run_of_numbers_without_an_operator_is_read_in_linear_time(question: str) -> None:
    """Tried from every digit of the run, the expression scan took minutes for 100,000 numbers."""
    needs_retrieval(question)
    assert arithmetic_span("word " + "1 " * 100_000) == ""
    assert needs_retrieval("1 " * 100_000) is False  # numbers and nothing else


LABELLED = Path(__file__).parents[2] / "fixtures" / "offline_requests" / "arithmetic_dates.jsonl"


def test_what_the_offline_model_computes_the_gate_does_not_search_and_dates_are_no_calculation() -> None:
    """One notion of "a calculation": the labelled requests the offline model computes whole are the ones
    the gate skips, and a date question is none (the model's reader is the thorough one)."""
    from models.offline import intents

    rows = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines() if line.strip()]
    readings = [(r["request"], intents.read(r["request"]).calculation) for r in rows]
    computed = [q for q, reading in readings if reading.complete and not reading.mixed]
    assert len(computed) >= 30
    assert [q for q in computed if not is_calculation(q)] == []
    dates = [r["request"] for r in rows if r["id"].startswith("date")]
    assert [q for q in dates if is_calculation(q)] == []
    for mixed in ("2 + 2 会议的纪要放在哪个文档里", "where does the handbook describe the 3 + 1 rotation?"):
        assert intents.read(mixed).calculation.mixed and needs_retrieval(mixed)
