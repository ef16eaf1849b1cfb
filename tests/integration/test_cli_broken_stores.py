"""A store that cannot be used is one line naming the path and what to do, exit 1, for every command: a data
folder that cannot be created, a damaged threads database, a damaged Chroma database. Nothing is changed by
the attempt."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_AGENT_")}
    env.update(KB_AGENT_HOME=str(home), KB_AGENT_EMBEDDER="hashing", NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=180
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "Error:" not in lines[0].split(":", 1)[1][:40]
    return lines[0]


@pytest.fixture(scope="module")
def used_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with a knowledge base, a thread and a memory in it."""
    home = tmp_path_factory.mktemp("broken") / "home"
    docs = home.parent / "docs"
    docs.mkdir()
    (docs / "leave.md").write_text("# Leave\n\nAnnual leave is fifteen days a year.\n")
    for args in (["ingest", str(docs)], ["ask", "计算 2 + 2", "--thread", "t1"], ["memories", "add", "I prefer tea"]):
        done = _run(home, *args)
        assert done.returncode == 0, done.stderr
    return home


def _copy_with(home: Path, dest: Path, damaged: str) -> Path:
    subprocess.run(["cp", "-r", str(home), str(dest)], check=True)
    target = dest / damaged
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 3])
    return target


@pytest.mark.parametrize(
    "args",
    [["ask", "计算 1 + 1"], ["memories", "list"], ["threads", "list"], ["ingest", str(REPO / "README.md")]],
)
def test_a_data_folder_that_cannot_be_created_is_one_line(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    home = tmp_path / "a-file" / "home"
    line = _one_line(_run(home, *args))
    assert str(home) in line and "KB_AGENT_HOME" in line, line


@pytest.mark.parametrize("args", [["threads", "list"], ["ask", "计算 1 + 1", "--thread", "t1"]])
def test_a_damaged_threads_database_is_named_and_left_as_it_was(
    used_home: Path, tmp_path: Path, args: list[str]
) -> None:
    target = _copy_with(used_home, tmp_path / "home", "threads.sqlite")
    before = hashlib.sha256(target.read_bytes()).hexdigest()
    line = _one_line(_run(tmp_path / "home", *args))
    assert str(target) in line and "damaged" in line and "backup" in line, line
    assert hashlib.sha256(target.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("args", [["search", "annual leave"], ["memories", "list"], ["trash", "list"]])
def test_a_damaged_chroma_database_is_named_with_what_to_do(used_home: Path, tmp_path: Path, args: list[str]) -> None:
    target = _copy_with(used_home, tmp_path / "home", "chroma/chroma.sqlite3")
    line = _one_line(_run(tmp_path / "home", *args))
    assert str(target) in line and "damaged" in line and "kb-agent repair" in line, line
