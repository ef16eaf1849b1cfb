"""Bytes that are not UTF-8, in arguments, chat input and file names: one line each, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def _cli(home: Path, *args: str | bytes, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "KB_AGENT_HOME": str(home), "KB_AGENT_EMBEDDER": "hashing", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], input=stdin, capture_output=True, cwd=ROOT, env=env, timeout=120
    )


@pytest.mark.parametrize("command", ["ask", "search"])
def test_an_argument_that_is_not_utf8_is_one_line_and_exit_2(tmp_path: Path, command: str) -> None:
    done = _cli(tmp_path, command, b"\xff\xfe")
    assert done.returncode == 2, done.stderr
    assert done.stderr.decode().splitlines() == [
        "error: argument 2 is not valid UTF-8 (bytes \\xff\\xfe): retype it, or set the terminal to UTF-8"
    ]


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])  # strict UTF-8 stdin; Python's UTF-8 mode (surrogates)
def test_a_chat_line_that_is_not_utf8_is_refused_and_the_chat_goes_on(
    tmp_path: Path, locale: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LC_ALL", locale)
    done = _cli(tmp_path, "chat", "--thread", "bytes", stdin=b"\xff\xfe hello\n/history\n/quit\n")
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert stderr.splitlines() == ["error: that line is not valid UTF-8 (bytes \\xff\\xfe): not sent"]


def test_a_file_name_that_is_not_utf8_is_skipped_and_the_rest_ingests(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nalpha is the first letter.\n")
    bad = os.open(os.fsencode(docs) + b"/b\xff\xfe.md", os.O_CREAT | os.O_WRONLY)
    os.write(bad, b"# B\n\nbeta is the second letter.\n")
    os.close(bad)
    (docs / "c.md").write_text("# C\n\ngamma is the third letter.\n")
    done = _cli(tmp_path / "home", "ingest", str(docs), "--json")
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout)
    assert report["added"] == ["a.md", "c.md"]
    [skipped] = report["skipped"]
    assert skipped["source"].endswith("b\\xff\\xfe.md")
    assert skipped["reason"] == "the file's path is not valid UTF-8: rename it"
    plain = _cli(tmp_path / "home", "ingest", str(docs))
    assert plain.returncode == 0 and b"Traceback" not in plain.stderr
    assert "skipped" in plain.stdout.decode() and "b\\xff\\xfe.md" in plain.stdout.decode()
