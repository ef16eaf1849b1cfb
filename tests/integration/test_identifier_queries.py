"""One-word and identifier queries (an error code, a product, a setting, a file name, a title) are found by
BM25 whatever the dense side finds: measured on the labelled set in bench/data/identifiers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app

DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "identifiers"


def test_every_identifier_query_is_found_first_by_bm25_and_kept_by_hybrid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")  # a dense side that knows nothing
    run = CliRunner().invoke
    assert run(app, ["ingest", str(DATA / "docs")]).exit_code == 0
    result = run(app, ["eval", str(DATA / "testset.json"), "--k", "5", "--json", "--per-query"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    misses = {q: row for q, row in report["bm25"]["per_query"].items() if row["mrr"] < 1.0}
    assert report["bm25"]["mrr"] == 1.0, misses  # first, every one
    assert report["hybrid"]["recall@5"] == 1.0  # and kept by the fusion, even beside a noisy dense side
    assert {q["type"] for q in json.loads((DATA / "testset.json").read_text("utf-8"))} >= {
        "error code",
        "file name",
        "product",
        "setting",
        "title",
    }
