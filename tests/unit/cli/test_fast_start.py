"""The command line starts at once: help and argument errors import typer and rich, not the agent.

Each case runs in a fresh interpreter (imports are process-wide) and lists the heavy packages it loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HEAVY = ("chromadb", "langgraph", "langchain_core", "langchain_openai", "jieba", "numpy", "bm25s", "mcp")

_PROBE = """
import json, sys
args, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
from cli.app import main
sys.argv = ["kb-agent", *args]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
loaded = sorted(m for m in heavy if m in sys.modules)
print("\\n" + json.dumps({"code": code, "loaded": loaded}))
"""


def _run(args: list[str], tmp_path: Path) -> tuple[dict[str, object], str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args), json.dumps(HEAVY)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KB_AGENT_HOME": str(tmp_path / "home")},
    )
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stdout + done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["ask", "--help"],
        ["chat", "--help"],
        ["ingest", "--help"],
        ["search", "--help"],
        ["eval", "--help"],
        ["memories", "--help"],
        ["memories", "add", "--help"],
        ["threads", "--help"],
        ["tools", "--help"],
        ["serve", "--help"],
        ["feedback", "--help"],
        ["trash", "--help"],
    ],
)
def test_help_imports_no_heavy_package(args: list[str], tmp_path: Path) -> None:
    result, output = _run(args, tmp_path)
    assert result["code"] == 0, output
    assert "Usage" in output
    assert result["loaded"] == [], f"kb-agent {' '.join(args)} imported {result['loaded']}"


def test_help_lists_every_command(tmp_path: Path) -> None:
    _, output = _run(["--help"], tmp_path)
    for command in ("ask", "chat", "ingest", "search", "stats", "repair", "eval", "threads", "memories",
                    "tools", "serve", "feedback", "trash", "config"):
        assert f" {command} " in output, command


def test_an_empty_question_is_refused_before_anything_opens(tmp_path: Path) -> None:
    result, output = _run(["ask", "  "], tmp_path)
    assert result["code"] == 2, output
    assert "the question is empty" in output
    assert result["loaded"] == []
    assert not (tmp_path / "home").exists()
