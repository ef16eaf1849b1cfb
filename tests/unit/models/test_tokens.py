"""Offline token estimates (models/tokens.py): CJK-aware, high-side, tool calls included."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from models.scripted import tool_call
from models.tokens import (
    MESSAGE_OVERHEAD,
    count_message_tokens,
    count_tool_tokens,
    estimate_tokens,
    has_cjk,
)
from tools.builtin import builtin_registry


def test_empty_text_is_zero_tokens() -> None:
    assert estimate_tokens("") == 0


@pytest.mark.parametrize(
    ("text", "count"), [("你好世界", 4), ("你", 1), ("今天星期几", 5), ("こんにちは", 5)]
)
def test_cjk_counts_one_token_per_character(text: str, count: int) -> None:
    assert estimate_tokens(text) == count


def test_hangul_counts_per_character() -> None:
    assert estimate_tokens("안녕하세요") == 5


def test_english_is_a_few_tokens() -> None:
    assert 2 <= estimate_tokens("hello world") <= 4
    assert estimate_tokens("a") == 1
    assert estimate_tokens("internationalization") == 5  # about four letters a token


def test_digits_and_punctuation() -> None:
    assert estimate_tokens("123") == 1
    assert estimate_tokens("123456") == 2
    assert estimate_tokens("!?") == 2
    assert estimate_tokens("   ") == 0


def test_mixed_text_counts_both_parts() -> None:
    mixed = estimate_tokens("你好 world")
    assert mixed == estimate_tokens("你好") + estimate_tokens("world")
    assert estimate_tokens("计算 123 × 456") == 2 + 1 + 1 + 1
    assert estimate_tokens("你好world") == estimate_tokens("你好 world")  # CJK splits words


@pytest.mark.parametrize("unit", ["hello world ", "你好世界", "12 + 34 ", "混合 text 12, "])
def test_longer_text_of_the_same_kind_never_counts_less(unit: str) -> None:
    counts = [estimate_tokens(unit * n) for n in range(1, 12)]
    assert counts == sorted(counts)
    assert counts[-1] > counts[0]


def test_estimate_errs_high_for_chinese_compared_to_character_count() -> None:
    text = "这是一个用于测试的中文句子，包含标点符号。"
    assert estimate_tokens(text) >= len(text) - 1


def test_has_cjk() -> None:
    assert has_cjk("hello 世界")
    assert has_cjk("（")  # full-width forms count as CJK
    assert not has_cjk("hello world 123 × ÷")
    assert not has_cjk("")


def test_count_message_tokens_adds_per_message_overhead() -> None:
    assert count_message_tokens([]) == 0
    assert count_message_tokens([HumanMessage("")]) == MESSAGE_OVERHEAD
    one = count_message_tokens([HumanMessage("你好世界")])
    assert one == MESSAGE_OVERHEAD + 4
    two = count_message_tokens([SystemMessage("你好世界"), HumanMessage("你好世界")])
    assert two == 2 * one


def test_count_message_tokens_counts_tool_calls() -> None:
    calls = [tool_call("calculator", {"expression": "123 * 456"}, id="call_1")]
    with_calls = AIMessage("", tool_calls=calls)
    counted = count_message_tokens([with_calls])
    assert counted > MESSAGE_OVERHEAD
    assert counted == MESSAGE_OVERHEAD + estimate_tokens(
        json.dumps(with_calls.tool_calls, ensure_ascii=False)
    )
    more = AIMessage("", tool_calls=[*calls, tool_call("get_current_date", {}, id="call_2")])
    assert count_message_tokens([more]) > counted


def test_count_message_tokens_handles_blocks_and_tool_messages() -> None:
    blocks = HumanMessage(content=[{"type": "text", "text": "你好"}, {"type": "text", "text": "世界"}])
    assert count_message_tokens([blocks]) == count_message_tokens([HumanMessage("你好世界")])
    result = ToolMessage("56088", tool_call_id="call_1")
    assert count_message_tokens([result]) == MESSAGE_OVERHEAD + estimate_tokens("56088")


def test_count_tool_tokens() -> None:
    defs = builtin_registry().definitions()
    assert count_tool_tokens([]) == 0
    total = count_tool_tokens(defs)
    assert total == sum(count_tool_tokens([d]) for d in defs)
    assert total > 50  # the definitions are real prose
