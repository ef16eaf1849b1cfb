"""A full disk under KB_AGENT_HOME: ingest and ask say so in one line, exit 1, and change nothing.

The disk is a real 40 MB tmpfs, filled to the last byte; mounting one needs root (CAP_SYS_ADMIN), so
elsewhere the test is skipped with that reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = shutil.which("mount")
    if os.geteuid() != 0 or mount is None:
        pytest.skip("needs root to mount a small tmpfs")
    done = subprocess.run([mount, "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(disk)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KB_AGENT_HOME": str(home), "KB_AGENT_EMBEDDER": "hashing", "COLUMNS": "300"}
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )


def _fill(disk: Path) -> Path:
    """Write a file until the disk is full; return it (deleting it frees the space)."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as fh:
        for size in (2**20, 2**12, 1):
            try:
                while True:
                    fh.write(b"\0" * size)
            except OSError:
                continue
    return filler


def _state(home: Path) -> tuple[dict, str]:
    stats = _cli(home, "stats", "--json")
    history = _cli(home, "threads", "history", "t1", "--all")
    assert stats.returncode == 0 and history.returncode == 0, stats.stderr + history.stderr
    data = json.loads(stats.stdout)
    return {k: data[k] for k in ("documents", "chunks")}, history.stdout


def _one_disk_line(done: subprocess.CompletedProcess[str], home: Path) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"error: the disk holding {home} is full")


def test_a_full_disk_is_one_line_and_changes_nothing(small_disk: Path, tmp_path: Path) -> None:
    home, first, more = small_disk / "home", tmp_path / "first", tmp_path / "more"
    first.mkdir(), more.mkdir()
    for n in range(3):
        (first / f"leave{n}.md").write_text(f"# Leave {n}\n\n" + "年假 annual leave policy. " * 200)
        (more / f"more{n}.md").write_text(f"# More {n}\n\n" + " ".join(f"word{i}" for i in range(20000)))
    assert _cli(home, "ingest", str(first)).returncode == 0
    assert _cli(home, "ask", "年假有几天？", "--thread", "t1").returncode == 0
    before = _state(home)

    filler = _fill(small_disk)
    _one_disk_line(_cli(home, "ingest", str(more)), home)
    _one_disk_line(_cli(home, "ask", "annual leave policy?", "--thread", "t1"), home)
    filler.unlink()

    assert _state(home) == before


def test_an_ingest_that_fills_the_disk_ends_with_one_line(small_disk: Path, tmp_path: Path) -> None:
    """The disk fills up during the ingest, not before: it used to hang at 0% CPU in Chroma's SQLite layer
    (undoing its writes on the full disk), deaf to SIGTERM. Now it ends, and a later ingest repairs."""
    import random

    home, docs = small_disk / "home", tmp_path / "big"
    docs.mkdir()
    rng = random.Random(1)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 9))) for _ in range(5000)]
    for i in range(200):
        (docs / f"d{i}.md").write_text(f"# Doc {i}\n\n" + " ".join(rng.choice(words) for _ in range(6000)))
    keep_free = 10 * 2**20
    with (small_disk / "filler").open("wb") as fh:  # leave about 10 MB: the index outgrows it mid-way
        fh.write(b"\0" * max(0, shutil.disk_usage(small_disk).free - keep_free))
    _one_disk_line(_cli(home, "ingest", str(docs)), home)  # _cli's timeout: a hang fails the test
    (small_disk / "filler").unlink()
    shutil.rmtree(docs)
    docs.mkdir()
    (docs / "small.md").write_text("# Small\n\nA small document about annual leave.\n")
    again = _cli(home, "ingest", str(docs), "--json")
    assert again.returncode == 0, again.stderr
    stats = json.loads(_cli(home, "stats", "--json").stdout)
    assert stats["documents"] >= 1
    repaired = json.loads(_cli(home, "repair", "--json").stdout)
    assert repaired["stray_chunks"] == 0 and repaired["missing_chunks"] == 0  # the next ingest cleaned up
