"""RRF and score fusion against hand-computed values."""

from __future__ import annotations

import math

import pytest

from stores.fusion import convex, rrf


def test_rrf_two_lists_k60_hand_computed() -> None:
    fused = rrf({"vector": ["a", "b", "c"], "bm25": ["b", "c", "d"]}, k=60)
    assert [doc for doc, _, _ in fused] == ["b", "c", "a", "d"]
    scores = {doc: score for doc, score, _ in fused}
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 62)
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["d"] == pytest.approx(1 / 63)
    found = {doc: retrievers for doc, _, retrievers in fused}
    assert found == {"a": ["vector"], "b": ["vector", "bm25"], "c": ["vector", "bm25"], "d": ["bm25"]}


def test_rrf_ties_break_by_best_rank_then_id() -> None:
    # k=0: x and y score 1/1, "a" scores 1/2 + 1/2 — the same, but its best rank is only 2.
    fused = rrf({"vector": ["x", "a"], "bm25": ["y", "a"]}, k=0)
    assert [doc for doc, _, _ in fused] == ["x", "y", "a"]
    assert [score for _, score, _ in fused] == [1.0, 1.0, 1.0]
    # same score and same best rank: by id, whatever the order of the retrievers
    assert [d for d, _, _ in rrf({"v": ["b"], "w": ["a"]})] == ["a", "b"]
    assert [d for d, _, _ in rrf({"w": ["a"], "v": ["b"]})] == ["a", "b"]


def test_rrf_weights() -> None:
    fused = rrf({"vector": ["a"], "bm25": ["b"]}, k=60, weights={"vector": 2.0})
    assert fused == [("a", pytest.approx(2 / 61), ["vector"]), ("b", pytest.approx(1 / 61), ["bm25"])]
    flipped = rrf({"vector": ["a"], "bm25": ["b"]}, weights={"vector": 0.5, "bm25": 1.5})
    assert [doc for doc, _, _ in flipped] == ["b", "a"]
    off = rrf({"vector": ["a", "b"], "bm25": ["b"]}, weights={"vector": 0.0})
    assert off == [("b", pytest.approx(1 / 61), ["bm25"])]  # weight 0 switches a retriever off
    with pytest.raises(ValueError, match="weight"):
        rrf({"vector": ["a"]}, weights={"vector": -1.0})


def test_rrf_dedupes_within_a_list_and_handles_empty_inputs() -> None:
    fused = rrf({"vector": ["a", "a", "b"]}, k=60)
    assert fused == [("a", pytest.approx(1 / 61), ["vector"]), ("b", pytest.approx(1 / 62), ["vector"])]
    assert rrf({}) == []
    assert rrf({"vector": [], "bm25": []}) == []
    assert [d for d, _, _ in rrf({"vector": [], "bm25": ["z"]})] == ["z"]
    with pytest.raises(ValueError):
        rrf({"vector": ["a"]}, k=-1)


def test_convex_minmax() -> None:
    fused = convex({"vector": {"a": 0.9, "b": 0.5, "c": 0.1}, "bm25": {"b": 10.0, "d": 5.0}})
    # vector -> a 1, b .5, c 0; bm25 -> b 1, d 0; c and d tie at 0: d has the better best rank (2 < 3)
    assert [doc for doc, _, _ in fused] == ["b", "a", "d", "c"]
    assert {doc: s for doc, s, _ in fused} == pytest.approx({"b": 1.5, "a": 1.0, "d": 0.0, "c": 0.0})
    assert fused[0][2] == ["vector", "bm25"]
    weighted = convex({"vector": {"a": 0.9, "b": 0.5}, "bm25": {"b": 3.0, "c": 1.0}}, {"bm25": 3.0})
    assert weighted[0] == ("b", pytest.approx(3.0), ["vector", "bm25"])
    assert convex({"vector": {"a": 0.4, "b": 0.4}})[0][1] == 1.0  # equal scores map to 1
    assert convex({"vector": {"a": 0.4}, "bm25": {"b": 2.0}}, {"vector": 0}) == [("b", 1.0, ["bm25"])]


def test_convex_zscore() -> None:
    fused = convex(
        {"vector": {"a": 0.9, "b": 0.5, "c": 0.1}, "bm25": {"b": 10.0, "d": 5.0}}, normalise="zscore"
    )
    z = 0.4 / math.sqrt(0.32 / 3)
    assert {doc: s for doc, s, _ in fused} == pytest.approx({"a": z, "b": 1.0, "d": -1.0, "c": -z})
    assert [doc for doc, _, _ in fused] == ["a", "b", "d", "c"]


def test_convex_max_keeps_zero_as_no_evidence_and_normalisers_per_retriever() -> None:
    fused = convex({"bm25": {"a": 4.0, "b": 1.0}}, normalise="max")
    assert fused == [("a", 1.0, ["bm25"]), ("b", pytest.approx(0.25), ["bm25"])]  # minmax would give b 0
    assert convex({"bm25": {"a": 0.0}}, normalise="max") == [("a", 0.0, ["bm25"])]
    mixed = convex(
        {"vector": {"a": 0.9, "b": 0.8, "c": 0.7}, "bm25": {"c": 3.0, "b": 1.0}},
        normalise={"bm25": "max"},  # vector left out: minmax
    )
    assert {doc: s for doc, s, _ in mixed} == pytest.approx({"a": 1.0, "b": 0.5 + 1 / 3, "c": 1.0})
    with pytest.raises(ValueError, match="minmax"):
        convex({"vector": {"a": 1.0}}, normalise={"vector": "softmax"})


def test_convex_empty_and_bad_normaliser() -> None:
    assert convex({}) == []
    assert convex({"vector": {}}) == []
    with pytest.raises(ValueError, match="minmax"):
        convex({"vector": {"a": 1.0}}, normalise="softmax")
