"""No hang, one line: SIGTERM ends any command within 5 s, whatever store it waits on, and a store that
fails under ``ask`` (a locked database, a disk that fills up) is one line naming it, exit 1, nothing kept."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STOP_SECONDS = 5.0


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_AGENT_")}
    env.update(KB_AGENT_HOME=str(home), KB_AGENT_EMBEDDER="hashing", NO_COLOR="1", COLUMNS="300", PYTHONPATH=str(ROOT))
    return {**env, **extra}


def _cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], cwd=ROOT, env=_env(home, **env), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def _start(home: Path, *args: str, module: str = "cli", **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", module, *args], cwd=ROOT, env=_env(home, **env),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def _stop(proc: subprocess.Popen[str], ready: Callable[[], bool], settle: float = 0.0) -> tuple[str, float]:
    """SIGTERM ``proc`` once ``ready()`` and ``settle`` s more; its stderr and seconds from signal to exit."""
    deadline = time.monotonic() + 120
    while not ready():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "never got to the point to stop it at"
        time.sleep(0.05)
    time.sleep(settle)  # inside the wait that the test is about (the lock is held: it cannot get past it)
    assert proc.poll() is None, "ended before it was stopped"
    proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err, time.monotonic() - started


def _stopped_in_one_line(proc: subprocess.Popen[str], err: str, seconds: float) -> str:
    lines = _lines(err)
    assert proc.returncode == 130 and len(lines) == 1 and "Traceback" not in err, (proc.returncode, err)
    assert seconds < STOP_SECONDS, seconds
    assert lines[0].startswith("stopped"), lines
    return lines[0]


@pytest.fixture(scope="module")
def used_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with a knowledge base of 60 documents, a thread and a memory."""
    home = tmp_path_factory.mktemp("faults") / "home"
    docs = _documents(home.parent / "docs", 60, 1500)
    for args in (["ingest", str(docs)], ["ask", "what is in doc 5?", "-t", "t1"], ["memories", "add", "I prefer tea"]):
        done = _cli(home, *args)
        assert done.returncode == 0, done.stderr
    return home


def _documents(folder: Path, files: int, words: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    vocab = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 9))) for _ in range(5000)]
    for i in range(files):
        (folder / f"d{i}.md").write_text(f"# Doc {i}\n\n" + " ".join(rng.choice(vocab) for _ in range(words)))
    return folder


@pytest.fixture
def write_locked() -> Iterator[Callable[[Path], None]]:
    """Hold a write lock on a SQLite file from another process, as an ingest stopped mid-write would."""
    holders: list[subprocess.Popen[str]] = []

    def lock(db: Path) -> None:
        holder = subprocess.Popen(
            [sys.executable, "-c",
             f"import sqlite3,time\nc=sqlite3.connect({str(db)!r},isolation_level=None)\n"
             "c.execute('BEGIN EXCLUSIVE')\nprint('locked',flush=True)\ntime.sleep(300)"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        holders.append(holder)
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"

    yield lock
    for holder in holders:
        holder.kill()
        holder.wait()


def test_sigterm_mid_ingest_of_a_large_folder_says_what_was_kept(tmp_path: Path) -> None:
    docs = _documents(tmp_path / "big", 200, 3000)
    home = tmp_path / "home"
    proc = _start(home, "ingest", str(docs))
    chroma = home / "chroma" / "chroma.sqlite3"
    err, seconds = _stop(proc, lambda: chroma.exists() and chroma.stat().st_size > 1_000_000)
    line = _stopped_in_one_line(proc, err, seconds)
    assert "file(s) indexed and kept" in line and "run the same ingest again" in line


def test_sigterm_in_a_slow_model_call_of_ask_is_one_line(used_home: Path) -> None:
    proc = _start(used_home, "ask", "what is in doc 7?", "-t", "t2", module="tests.fixtures.slow_cli",
                  KB_TEST_MODEL_DELAY="30")  # fmt: skip
    assert proc.stderr is not None
    assert proc.stderr.readline().startswith("model-step 1")
    err, seconds = _stop(proc, lambda: True)
    line = _stopped_in_one_line(proc, err, seconds)
    assert "kb-agent ask" in line and "run it again" in line


def test_sigterm_while_ask_waits_on_a_locked_threads_database(
    used_home: Path, write_locked: Callable[[Path], None]
) -> None:
    """SQLite waits out its busy timeout inside C, where Python's handler cannot run: it used to take 28 s."""
    write_locked(used_home / "threads.sqlite")
    proc = _start(used_home, "ask", "hello", "-t", "t3")
    err, seconds = _stop(proc, lambda: True, settle=4)
    _stopped_in_one_line(proc, err, seconds)


@pytest.mark.parametrize("args", [["search", "abc"], ["memories", "list"], ["repair"]])
def test_sigterm_while_waiting_on_a_locked_chroma_database(
    used_home: Path, write_locked: Callable[[Path], None], args: list[str]
) -> None:
    """Embedded Chroma waits for such a lock forever, deaf to signals: these hung until killed."""
    write_locked(used_home / "chroma" / "chroma.sqlite3")
    proc = _start(used_home, *args)
    err, seconds = _stop(proc, lambda: True, settle=4)
    line = _stopped_in_one_line(proc, err, seconds)
    assert f"kb-agent {args[0]}" in line


def test_a_locked_chroma_database_is_one_line_when_its_wait_ends(
    used_home: Path, write_locked: Callable[[Path], None]
) -> None:
    write_locked(used_home / "chroma" / "chroma.sqlite3")
    started = time.monotonic()
    done = _cli(used_home, "search", "abc")
    assert time.monotonic() - started < 60
    lines = _lines(done.stderr)
    assert done.returncode == 1 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"error: {used_home / 'chroma' / 'chroma.sqlite3'}: locked by another process")


def test_a_locked_threads_database_is_one_line_naming_it(used_home: Path, write_locked: Callable[[Path], None]) -> None:
    """It was an 82-line traceback ending in 'database is locked'."""
    write_locked(used_home / "threads.sqlite")
    done = _cli(used_home, "ask", "hello", "-t", "t4")
    lines = _lines(done.stderr)
    assert done.returncode == 1 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert str(used_home / "threads.sqlite") in lines[0] and "locked by another process" in lines[0]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 40 MB tmpfs (the approach of test_disk_full.py): mounting needs root, so elsewhere it skips."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(disk)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill_leaving(disk: Path, keep: int) -> Path:
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as fh:
        left = max(0, shutil.disk_usage(disk).free - keep)
        while left > 0:
            try:
                left -= fh.write(b"\0" * min(left, 1 << 20))
            except OSError:
                break
    return filler


@pytest.mark.parametrize("keep", [64 << 10, 256 << 10])
def test_a_disk_that_fills_during_ask_is_one_line_and_keeps_nothing(
    small_disk: Path, tmp_path: Path, keep: int
) -> None:
    """With a little space left the turn starts, then a store's write fails: a search logged ~110 lines of
    traceback (its feedback penalties, the turn's undo) before the one line."""
    home = small_disk / "home"
    docs = _documents(tmp_path / "docs", 3, 400)
    for args in (["ingest", str(docs)], ["ask", "what is in doc 1?", "-t", "t1"]):
        assert _cli(home, *args).returncode == 0
    before = _cli(home, "threads", "history", "t1", "--all").stdout
    filler = _fill_leaving(small_disk, keep)
    done = _cli(home, "ask", "Remember that I prefer green tea. What is in doc 2?", "-t", "t1")
    filler.unlink()
    lines = _lines(done.stderr)
    assert done.returncode == 1 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"error: the disk holding {home} is full"), lines
    assert _cli(home, "threads", "history", "t1", "--all").stdout == before


def test_sigterm_at_the_chat_prompt_is_one_line(tmp_path: Path) -> None:
    """A chat waiting for its next line is stopped like any command: one line, exit 130 (end of input is
    how a chat ends normally: exit 0)."""
    home = tmp_path / "home"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "chat", "--offline", "-t", "c1"], cwd=ROOT, env=_env(home),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    header: list[str] = []
    reader = threading.Thread(target=lambda: header.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    err, seconds = _stop(proc, lambda: bool(header) and "kb-agent" in header[0], settle=0.5)
    line = _stopped_in_one_line(proc, err, seconds)
    assert "chat" in line and "c1" in line, line
    ended = subprocess.run(
        [sys.executable, "-m", "cli", "chat", "--offline", "-t", "c1"], cwd=ROOT, env=_env(home), input="",
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ended.returncode == 0 and not _lines(ended.stderr), ended.stderr
