"""A knowledge base whose Chroma file is damaged in the middle (not truncated): ``repair`` finds it and says
so in one line, and changes nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app


def test_repair_names_a_database_damaged_in_the_middle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(60):
        (docs / f"d{i}.md").write_text(f"# Doc {i}\n\n" + f"Some text about topic {i}. " * 50)
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(docs)]).exit_code == 0
    clean = runner.invoke(app, ["repair", "--json"])
    assert clean.exit_code == 0 and json.loads(clean.stdout)["stray_chunks"] == 0
    [db] = list((tmp_path / "home").rglob("chroma.sqlite3"))
    size = db.stat().st_size
    with db.open("r+b") as f:  # a bad sector's worth of garbage in the middle: the file keeps its length
        f.seek(size // 2)
        f.write(os.urandom(8192))
    before = db.read_bytes()
    found = runner.invoke(app, ["repair"])
    assert found.exit_code == 1, found.output
    lines = found.stderr.strip().splitlines()
    assert len(lines) == 1 and str(db) in lines[0] and "damaged" in lines[0], found.stderr
    as_json = runner.invoke(app, ["repair", "--json"])
    assert as_json.exit_code == 1 and json.loads(as_json.stdout) == {"damaged": [str(db)]}
    assert db.read_bytes() == before  # nothing was changed
