"""graph/fingerprint.py: replicas compare their graph's code and settings, and name what differs."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph import fingerprint
from nodes.settings import Settings


def test_the_graph_version_changes_with_one_line_of_the_graphs_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "nodes").mkdir()
    source = tmp_path / "nodes" / "agent.py"
    source.write_text("ROUNDS = 10\n", "utf-8")
    (tmp_path / "README.md").write_text("docs do not count\n", "utf-8")
    monkeypatch.setattr(fingerprint, "ROOT", tmp_path)
    before = fingerprint.graph_version()
    (tmp_path / "README.md").write_text("changed\n", "utf-8")
    assert fingerprint.graph_version() == before
    source.write_text("ROUNDS = 11\n", "utf-8")
    after = fingerprint.graph_version()
    assert after != before and after.startswith("kb-agent ") and " / langgraph " in after


def test_settings_differences_are_named_by_variable_and_per_machine_paths_do_not_count() -> None:
    base = Settings(data_dir="/srv/a", max_rounds=10)
    same = Settings(data_dir="/srv/b", database_url="postgresql://db-b/kb", max_rounds=10)
    other = Settings(data_dir="/srv/a", max_rounds=3, model="offline")
    mine = fingerprint.settings_digest(base)
    assert fingerprint.differences("g1", mine, "g1", fingerprint.settings_digest(same)) == []
    found = fingerprint.differences("g1", mine, "g2", fingerprint.settings_digest(other))
    assert found[0] == "graph version 'g1' here, 'g2' there"
    assert found[1] == "settings KB_AGENT_MAX_ROUNDS, KB_AGENT_MODEL"


def test_the_digest_holds_hashes_not_values() -> None:
    digest = fingerprint.settings_digest(Settings(base_url="http://secret-host:8000/v1"))
    assert all(len(v) == 12 and "secret" not in v for v in digest.values())
    assert "data_dir" not in digest and "max_rounds" in digest
