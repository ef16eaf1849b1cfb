"""Escape sequences inside a document, a memory or a tool's output never reach the terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app

runner = CliRunner()
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31m\x9b1m\x07\x08\r"
CONTROLS = ("\x1b", "\x9b", "\x07", "\x08", "\r")


@pytest.fixture
def hostile_kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "leave.md").write_text(
        f"# 年假{HOSTILE}\n\n员工的年假有 15 天{HOSTILE}，需提前两周申请。Annual leave is 15 days{HOSTILE}.\n"
    )
    result = runner.invoke(app, ["ingest", str(docs)])
    assert result.exit_code == 0, result.output
    return docs


def _clean(text: str) -> bool:
    return not any(control in text for control in CONTROLS)


@pytest.mark.parametrize("as_json", [False, True])
def test_search_prints_no_control_bytes(hostile_kb: Path, as_json: bool) -> None:
    result = runner.invoke(
        app, ["search", "年假 annual leave", "--mode", "bm25", *(["--json"] if as_json else [])]
    )
    assert result.exit_code == 0 and "15" in result.stdout
    assert _clean(result.stdout)


def test_ask_and_history_print_no_control_bytes(hostile_kb: Path) -> None:
    result = runner.invoke(app, ["ask", "年假有多少天？", "--thread", "esc"])
    assert result.exit_code == 0 and "15" in result.stdout
    assert _clean(result.output)
    history = runner.invoke(app, ["threads", "history", "esc", "--all"])
    assert history.exit_code == 0 and "15" in history.stdout and _clean(history.output)


def test_memories_and_tool_output_print_no_control_bytes(hostile_kb: Path) -> None:
    added = runner.invoke(app, ["memories", "add", f"I prefer tea{HOSTILE} in the morning", "--user", "eve"])
    assert added.exit_code == 0, added.output
    listed = runner.invoke(app, ["memories", "list", "--user", "eve"])
    assert "tea" in listed.stdout and _clean(listed.output)
    called = runner.invoke(app, ["tools", "call", "search_knowledge", "--args", '{"query": "annual leave"}'])
    assert called.exit_code == 0 and "15" in called.stdout and _clean(called.output)
