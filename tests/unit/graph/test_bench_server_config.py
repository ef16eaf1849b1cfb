"""The server benchmark's config serves our graph and the create_agent peer with the repository's auth and edge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench"


def test_bench_config_names_both_graphs_and_the_repository_auth_and_edge() -> None:
    spec = json.loads((BENCH / "langgraph.json").read_text("utf-8"))
    repo = json.loads((ROOT / "langgraph.json").read_text("utf-8"))
    assert set(spec["graphs"]) == {"kb_agent", "create_agent"}
    for target in [*spec["graphs"].values(), spec["auth"]["path"], spec["http"]["app"]]:
        path = (BENCH / target.split(":")[0]).resolve()
        assert path.is_file() and ROOT in path.parents, target
    # the same graph, auth and edge as the repository's own config: only the peer is added
    for ours, theirs in (
        (spec["graphs"]["kb_agent"], repo["graphs"]["kb_agent"]),
        (spec["auth"]["path"], repo["auth"]["path"]),
        (spec["http"]["app"], repo["http"]["app"]),
    ):
        assert (BENCH / ours.split(":")[0]).resolve() == (ROOT / theirs.split(":")[0]).resolve()
        assert ours.split(":")[1] == theirs.split(":")[1]


def test_the_peer_is_create_agent_with_our_calculator_and_no_checkpointer_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("langchain.agents")
    monkeypatch.setenv("KB_AGENT_MODEL", "gpt-test")
    monkeypatch.setenv("KB_AGENT_BASE_URL", "http://127.0.0.1:9/v1")
    from bench.peer_graph import calculator, make_peer

    peer = make_peer()
    assert peer.checkpointer is None  # a LangGraph server refuses a graph compiled with its own
    assert "tools" in peer.nodes and calculator.invoke({"expression": "12 * 12"}) == "144"
