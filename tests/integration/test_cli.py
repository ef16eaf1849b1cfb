"""The command line: answers, JSON, the chat REPL's commands, and one-line errors with exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from tests.fixtures.openai_server import OpenAIServer, ScriptedReply

runner = CliRunner()


def test_ask_answers_a_calculation() -> None:
    result = runner.invoke(app, ["ask", "计算 123 × 456"])
    assert result.exit_code == 0, result.output
    assert "56088" in result.stdout


def test_ask_json_reports_tool_calls_and_offline_model() -> None:
    result = runner.invoke(app, ["ask", "计算 2 ** 10", "--json", "--thread", "j", "--user", "alice"])
    data = json.loads(result.stdout)
    assert data["thread_id"] == "j" and data["user_id"] == "alice" and data["offline"] is True
    assert data["tool_calls"][0]["tool"] == "calculator" and data["tool_calls"][0]["result"] == "1024"


def test_ask_continues_a_named_thread() -> None:
    runner.invoke(app, ["ask", "计算 6 × 7", "--thread", "keep"])
    runner.invoke(app, ["ask", "hello", "--thread", "keep"])
    result = runner.invoke(app, ["chat", "--thread", "keep"], input="/history\n/quit\n")
    assert "6 × 7" in result.stdout and "hello" in result.stdout


@pytest.mark.parametrize("question", ["", "   "])
def test_empty_question_is_one_line_and_exit_2(question: str) -> None:
    result = runner.invoke(app, ["ask", question])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == ["error: the question is empty: type what you want to ask"]


def test_unreachable_endpoint_is_one_line_and_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("KB_AGENT_MODEL_MAX_RETRIES", "0")
    result = runner.invoke(app, ["ask", "hi"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: cannot reach the model endpoint http://127.0.0.1:9/v1"
    )


def test_rejected_key_is_one_line_and_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer([ScriptedReply(content="never")], api_key="right-key") as server:
        monkeypatch.setenv("KB_AGENT_BASE_URL", server.base_url)
        monkeypatch.setenv("KB_AGENT_API_KEY", "wrong-key")
        monkeypatch.setenv("KB_AGENT_MODEL", "scripted-gpt")
        result = runner.invoke(app, ["ask", "hi"])
    assert result.exit_code == 1
    assert "rejected the API key" in result.stderr and "Traceback" not in result.output


def test_bad_setting_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_MAX_ROUNDS", "lots")
    result = runner.invoke(app, ["ask", "hi"])
    assert result.exit_code == 1
    assert "KB_AGENT_MAX_ROUNDS='lots' is not a valid int" in result.stderr


@pytest.mark.parametrize(
    ("variable", "content", "named"),
    [
        ("KB_AGENT_MAX_ROUNDS", "ten", "KB_AGENT_MAX_ROUNDS"),
        ("KB_AGENT_MCP_CONFIG", "{not json", "KB_AGENT_MCP_CONFIG"),
        ("KB_AGENT_CONFIG", 'top_k = "many"\n', "top_k"),
        ("KB_AGENT_CONFIG", "no_such_setting = 1\n", "no_such_setting"),
    ],
)
def test_a_setting_that_cannot_be_used_stops_the_process_with_one_line(
    tmp_path: Path, variable: str, content: str, named: str
) -> None:
    """As a user runs it: a fresh process, so nothing imported before the command can raise first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_AGENT_", "OPENAI_"))}
    env["KB_AGENT_HOME"] = str(tmp_path / "home")
    if variable == "KB_AGENT_MAX_ROUNDS":
        env[variable] = content
    else:
        path = tmp_path / ("settings.toml" if variable == "KB_AGENT_CONFIG" else "mcp.json")
        path.write_text(content, "utf-8")
        env[variable] = str(path)
    done = subprocess.run(
        [sys.executable, "-m", "cli", "ask", "计算 1 + 1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert named in lines[0] and "Traceback" not in done.stderr and done.stdout == ""


def test_budget_stop_exits_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_MAX_ROUNDS", "1")
    result = runner.invoke(app, ["ask", "计算 1 + 1"])
    assert result.exit_code == 3 and "最大模型轮数（1）" in result.stdout


def test_chat_repl_commands() -> None:
    script = (
        "计算 3 × 3\n/threads\n/thread other\n今天几号\n/thread\n/history\n/reset\n/history\n/bogus\n/quit\n"
    )
    result = runner.invoke(app, ["chat", "--thread", "first"], input=script)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "calculator" in out and "9" in out  # live tool status line and the answer
    assert "first" in out  # /threads lists the first thread
    assert "switched to thread other" in out and "current thread: other" in out
    assert "thread other cleared" in out
    assert "unknown command /bogus" in out


def test_config_lists_every_variable() -> None:
    result = runner.invoke(app, ["config"])
    for name in ("KB_AGENT_MODEL", "KB_AGENT_BASE_URL", "KB_AGENT_HOME", "KB_AGENT_MAX_ROUNDS"):
        assert name in result.stdout


def test_console_script_runs_the_readme_command(tmp_path: Path) -> None:
    exe = shutil.which("kb-agent", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the kb-agent console script is not installed in this environment (pip install -e .)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_AGENT_", "OPENAI_"))}
    done = subprocess.run(
        [exe, "ask", "计算 123 × 456"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "56088" in done.stdout
    assert (tmp_path / ".kb-agent" / "threads.sqlite").exists()


def test_ingest_draws_its_bar_on_a_terminal_stderr_and_json_stdout_stays_clean(tmp_path: Path) -> None:
    from tests.fixtures.tty import cli_with_terminal_stderr

    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(3):
        (docs / f"f{n}.md").write_text("".join(f"## S{i}\n\nFile {n} part {i}.\n\n" for i in range(40)))
    env = {"KB_AGENT_HOME": str(tmp_path / "home"), "KB_AGENT_EMBEDDER": "hashing"}
    code, stdout, terminal = cli_with_terminal_stderr("ingest", "--json", str(docs), env=env)
    assert code == 0, terminal
    assert json.loads(stdout)["chunks_written"] == 120  # nothing but the report on stdout
    assert "ingesting" in terminal and "chunks/s" in terminal and "ETA" in terminal


def test_ingest_draws_no_bar_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("## One\n\nSome text.\n\n## Two\n\nMore text.\n")
    env = {**os.environ, "KB_AGENT_HOME": str(tmp_path / "home"), "KB_AGENT_EMBEDDER": "hashing"}
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "cli", "ingest", str(tmp_path / "docs")],
        cwd=root, env={**env, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # a log or a pipe gets no control codes, only the summary on stdout
    assert "chunks written 2" in done.stdout
