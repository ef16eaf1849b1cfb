"""A store that cannot be used is one line naming the path and what to do, exit 1, for every command: a data
folder that cannot be created, a read-only one, a damaged threads database, a damaged Chroma database.
Nothing is changed by the attempt."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
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


@pytest.fixture
def read_only_home(used_home: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of ``used_home`` on a file system mounted read-only (a backup medium, a locked-down volume)."""
    disk = tmp_path / "ro"
    disk.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a file system read-only")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        subprocess.run(["cp", "-r", str(used_home), str(disk / "home")], check=True)
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        yield disk / "home"
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.parametrize(
    "args",
    [
        ["ask", "计算 1 + 1"],
        ["search", "leave"],
        ["ingest", str(REPO / "README.md")],
        ["stats"],
        ["memories", "list"],
        ["memories", "add", "I prefer coffee"],
        ["threads", "list"],
        ["trash", "list"],
        ["repair"],
    ],
)
def test_a_read_only_data_folder_is_one_line_that_says_so(read_only_home: Path, args: list[str]) -> None:
    before = _digest(read_only_home)
    line = _one_line(_run(read_only_home, *args))
    assert str(read_only_home) in line and "read-only" in line and "KB_AGENT_HOME" in line, line
    assert _digest(read_only_home) == before


def _digest(home: Path) -> str:
    files = sorted(path for path in home.rglob("*") if path.is_file())
    return hashlib.sha256(b"".join(path.read_bytes() for path in files)).hexdigest()
