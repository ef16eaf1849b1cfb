"""``kb-agent ask -v`` / ``chat --trace``: the live trace of a turn, secrets redacted; ``--offline`` forces
the offline model."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app

runner = CliRunner()


def test_ask_v_traces_rounds_tools_passages_results_and_memories(kb_home: Path) -> None:
    result = runner.invoke(app, ["ask", "搜一下知识库里 RAG 的内容", "-v"])
    assert result.exit_code == 0, result.output
    trace = result.stderr
    assert "· retrieved: rag.md#0 (" in trace  # passages with their scores, before the model round
    assert "· round 1 · offline" in trace and "tools offered: " in trace and "search_knowledge" in trace
    assert "→ search_knowledge(" in trace and "← " in trace  # the call with its arguments, then its result
    assert trace.index("· retrieved:") < trace.index("· round 1") < trace.index("· round 2")
    remembered = runner.invoke(app, ["ask", "记住我喜欢简洁的回答", "-v", "--user", "tess"])
    assert remembered.exit_code == 0, remembered.output
    assert "→ remember(" in remembered.stderr
    recalled = runner.invoke(app, ["ask", "我喜欢什么样的回答？", "-v", "--user", "tess"])
    assert "· memory " in recalled.stderr and "简洁" in recalled.stderr  # recalled, with its id


def test_the_trace_redacts_secrets(kb_home: Path) -> None:
    secret = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
    result = runner.invoke(app, ["ask", f"记住我的 API key 是 {secret}", "-v"])
    assert result.exit_code == 0, result.output
    assert "→ remember(" in result.stderr and secret not in result.stderr


def test_offline_forces_the_offline_model_whatever_is_configured(
    kb_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KB_AGENT_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    monkeypatch.setenv("KB_AGENT_MODEL", "qwen-plus")
    result = runner.invoke(app, ["ask", "计算 123 × 456", "--offline", "-v"])
    assert result.exit_code == 0, result.output
    assert "56088" in result.stdout and "· round 1 · offline" in result.stderr


def test_chat_trace_shows_the_same_trace_per_turn(kb_home: Path) -> None:
    result = runner.invoke(app, ["chat", "--trace", "--thread", "tr"], input="搜一下知识库里 RAG 的内容\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "· round 1 · offline" in result.output and "→ search_knowledge(" in result.output
