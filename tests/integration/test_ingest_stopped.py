"""A stopped ingest (SIGTERM, Ctrl-C) says what it kept, in one line, and exits 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_sigterm_during_ingest_says_what_was_kept(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(3):
        (docs / f"doc{n}.md").write_text(f"# Doc {n}\n\nDocument {n} is about the zanzibar project.\n")
    go = tmp_path / "go"  # never created: the ingest waits inside its first embedding until stopped
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "KB_AGENT_HOME": str(tmp_path / "home"),
        "KB_AGENT_EMBEDDER": "hashing",
        "KB_TEST_INGEST_GO": str(go),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.paused_ingest_cli", "ingest", str(docs)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    assert proc.stderr.readline().strip() == "embedding"  # inside the ingest
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("stopped: 0 file(s) indexed and kept"), err
    assert "run the same ingest again" in lines[0] and "Traceback" not in err
    again = subprocess.run(
        [sys.executable, "-m", "cli", "ingest", "--json", str(docs)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr  # the re-run finishes the job
