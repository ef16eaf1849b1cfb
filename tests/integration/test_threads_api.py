"""Thread commands through the Python API and the CLI: owners, titles, history with folded turns, clearing."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cli.app import app
from graph.api import ThreadOwnershipError, open_agent
from nodes.settings import Settings

runner = CliRunner()


def test_a_thread_belongs_to_the_user_who_opened_it() -> None:
    with open_agent(Settings(user_id="alice")) as agent:
        assert "56088" in agent.ask("计算 123 × 456", thread_id="t1").text
        with pytest.raises(ThreadOwnershipError, match="belongs to another user"):
            agent.ask("let me read it", thread_id="t1", user_id="bob")
        with pytest.raises(ThreadOwnershipError):
            agent.history("t1", user_id="bob")
        with pytest.raises(ThreadOwnershipError):
            agent.clear("t1", user_id="bob")
        assert [(t.thread_id, t.title) for t in agent.threads()] == [("t1", "计算 123 × 456")]
        assert agent.threads("bob") == []
        assert [m.type for m in agent.history("t1")] == ["human", "ai", "tool", "ai"]
        agent.clear("t1")
        assert agent.history("t1") == [] and agent.threads() == []


def test_a_long_thread_folds_and_the_full_history_stays_readable() -> None:
    questions = [f"计算 {i} × 7，然后把结果加上 {i}" for i in range(30)]
    with open_agent(Settings(user_id="alice", context_window=2_500)) as agent:
        for q in questions:
            agent.ask(q, thread_id="long")
        summary = agent.summary("long")
        kept = agent.history("long")
        everything = agent.history("long", include_folded=True)
    assert summary.startswith("已讨论：") and "已完成：" in summary
    assert len(kept) < len(everything)
    assert [m.text for m in everything if m.type == "human"] == questions
    assert kept[0].type == "human"


def test_cli_refuses_another_users_thread_in_one_line() -> None:
    assert runner.invoke(app, ["ask", "计算 1 + 1", "--thread", "shared", "--user", "alice"]).exit_code == 0
    result = runner.invoke(app, ["ask", "hello", "--thread", "shared", "--user", "bob"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "belongs to another user" in lines[0]


def test_cli_thread_commands() -> None:
    runner.invoke(app, ["ask", "计算 6 × 7", "--thread", "work", "--user", "alice"])
    listed = runner.invoke(app, ["threads", "list", "--user", "alice", "--json"])
    rows = json.loads(listed.stdout)
    assert rows[0]["thread_id"] == "work" and rows[0]["title"] == "计算 6 × 7" and rows[0]["last_activity"]
    shown = runner.invoke(app, ["threads", "history", "work", "--all", "--user", "alice"])
    assert shown.exit_code == 0 and "6 × 7" in shown.stdout and "42" in shown.stdout
    refused = runner.invoke(app, ["threads", "clear", "work", "--user", "bob"])
    assert refused.exit_code == 1 and "belongs to another user" in refused.stderr
    assert runner.invoke(app, ["threads", "clear", "work", "--user", "alice"]).exit_code == 0
    assert json.loads(runner.invoke(app, ["threads", "list", "--user", "alice", "--json"]).stdout) == []


def test_chat_new_thread_history_all_and_a_refused_switch() -> None:
    runner.invoke(app, ["ask", "hello", "--thread", "bobs", "--user", "bob"])
    script = "计算 2 × 5\n/new\n计算 3 × 3\n/history --all\n/threads\n/thread bobs\n/thread\n/quit\n"
    result = runner.invoke(app, ["chat", "--thread", "mine", "--user", "alice"], input=script)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "new thread t-" in out and "3 × 3" in out
    assert "mine" in out  # /threads lists both of alice's threads
    assert "belongs to another user" in result.stderr
    assert "current thread: t-" in out  # the refused switch left the current thread alone
