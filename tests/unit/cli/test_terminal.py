"""cli.terminal: what the CLI prints from documents, tools and models cannot drive the terminal."""

from __future__ import annotations

import json

import pytest

from cli.terminal import clean, json_text, shown, undecodable


@pytest.mark.parametrize(
    ("raw", "printed"),
    [
        ("plain\ttext\n第二行", "plain\ttext\n第二行"),
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b[2J\x1b[H wiped", " wiped"),
        ("\x1b]0;owned title\x07after", "after"),
        ("\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("\x9b31mC1 CSI", "C1 CSI"),
        ("\x9d0;t\x9cafter", "after"),
        ("\x1bPq#0;2;0;0;0\x1b\\sixel gone", "sixel gone"),
        ("bell\x07 back\x08space del\x7f", "bell backspace del"),
        ("over\rwrite", "overwrite"),
        ("dos\r\nline", "dos\nline"),
        ("\x1b7saved\x1b8", "saved"),
        ("bytes \udcff\udcfe", "bytes \ufffd\ufffd"),
    ],
)
def test_clean_strips_escape_sequences_and_controls(raw: str, printed: str) -> None:
    assert clean(raw) == printed


def test_shown_is_clean_and_literal_for_rich() -> None:
    assert shown("\x1b[1m[bold]x[/bold]") == "\\[bold]x\\[/bold]"


def test_json_text_keeps_the_data_and_escapes_the_controls() -> None:
    data = {"text": "a\x1b[31mb\x9b31m\x07c \udcff", "中文": "保留"}
    text = json_text(data)
    assert not any(c in text for c in "\x1b\x9b\x07\udcff") and "保留" in text
    assert json.loads(text) == data


def test_undecodable_names_the_bytes() -> None:
    assert undecodable("fine 中文") is None
    assert undecodable("x\udcff\udcfe") == "\\xff\\xfe"
