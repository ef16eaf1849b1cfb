"""`kb-agent memories list`: what holds about the user first, what they asked in a section of its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cli import memory as memory_cli


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> typer.Typer:
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    monkeypatch.setattr(memory_cli.out, "width", 200)  # whole contents: the test reads them back
    app = typer.Typer()
    app.command()(lambda: None)  # a second command, so `memories` is a sub-command as in kb-agent
    memory_cli.register(app)
    run = CliRunner().invoke
    for content, kind in [
        ("用户喜欢喝绿茶", "semantic"),
        ("用户问过：差旅怎么报销？", "episodic"),
        ("用户要求：回答尽量简短", "procedural"),
        ("The user asked 2 times: which VPN client should contractors install?", "episodic"),
        ("The user moved to Graz in May", "episodic"),
    ]:
        added = run(app, ["memories", "add", content, "--type", kind, "--user", "ann"])
        assert added.exit_code == 0, added.output
    return app


def test_the_list_shows_facts_and_preferences_first_and_interaction_history_apart(app: typer.Typer) -> None:
    shown = CliRunner().invoke(app, ["memories", "list", "--user", "ann"]).stdout
    facts, _, history = shown.partition("Interaction history")
    assert "Facts and preferences" in facts and history
    for fact in ("用户喜欢喝绿茶", "用户要求：回答尽量简短", "The user moved to Graz in May"):
        assert fact in facts and fact not in history
    assert "差旅怎么报销" in history and "VPN client" in history
    assert "差旅怎么报销" not in facts


def test_the_json_list_marks_each_memory_s_kind_facts_first(app: typer.Typer) -> None:
    listed = json.loads(CliRunner().invoke(app, ["memories", "list", "--user", "ann", "--json"]).stdout)
    kinds = [m["kind"] for m in listed]
    assert kinds == ["fact", "fact", "fact", "history", "history"]
    assert {m["content"] for m in listed if m["kind"] == "history"} == {
        "用户问过：差旅怎么报销？",
        "The user asked 2 times: which VPN client should contractors install?",
    }


def test_a_user_with_only_history_is_told_no_fact_is_kept(tmp_path: Path, app: typer.Typer) -> None:
    run = CliRunner().invoke
    run(app, ["memories", "add", "用户问过：年假怎么休？", "--type", "episodic", "--user", "bo"])
    shown = run(app, ["memories", "list", "--user", "bo"]).stdout
    assert "no facts or preferences" in shown and "年假怎么休" in shown.partition("Interaction history")[2]
