"""How memory reads a user's message: a question without its question mark is still a question."""

from __future__ import annotations

import pytest

from stores.memory.extraction import OfflineExtractor
from stores.memory.questions import reads_as_question
from stores.memory.rules import ExtractionRequest


def _ops(text: str) -> list[dict]:
    return OfflineExtractor()(ExtractionRequest("u", text, (), ()))["operations"]


@pytest.mark.parametrize(
    "text",
    [
        "我习惯用左手还是右手写字",
        "我喜欢什么样的回答",
        "我更喜欢哪种风格",
        "我比较偏好谁写的文档",
        "我平时喜欢喝啥",
        "I prefer tea or coffee?",
    ],
)
def test_a_question_without_a_mark_is_never_kept_as_a_preference(text: str) -> None:
    assert reads_as_question(text)
    assert _ops(text) == []


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("我还是喜欢简洁的回答", "用户还是喜欢简洁的回答"),
        ("我喜欢哪怕长一点也完整的回答", "用户喜欢哪怕长一点也完整的回答"),
        ("I like how short your answers are", "The user likes how short"),
    ],
)
def test_a_statement_with_a_question_word_inside_is_still_a_statement(text: str, kept: str) -> None:
    assert not reads_as_question(text)
    [op] = _ops(text)
    assert op["action"] == "ADD" and op["content"].startswith(kept)
