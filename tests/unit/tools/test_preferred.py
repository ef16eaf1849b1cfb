"""``tools.passage_search.preferred``: folders and groups a user's memories name, boosted once and bounded."""

from __future__ import annotations

import pytest

from tools.passage_search import preferred

PASSAGES = [
    {"id": "a/x.md#0", "source": "a/x.md", "score": 1.0, "metadata": {"groups": "public"}},
    {"id": "y.md#0", "source": "y.md", "score": 0.95, "metadata": {"groups": "sales,public"}},
    {"id": "z/y.md#0", "source": "z/y.md", "score": 0.5, "metadata": {"groups": "public"}},
]


def test_a_group_named_in_a_memory_lifts_its_near_tie_but_not_a_far_one() -> None:
    ranked = preferred(PASSAGES, [{"content": "I mostly read the Sales documents"}], 1.15)
    assert [p["id"] for p in ranked] == ["y.md#0", "a/x.md#0", "z/y.md#0"]
    assert ranked[0]["score"] == pytest.approx(0.95 * 1.15) and ranked[0]["metadata"]["preferred"] is True


def test_public_one_letter_names_and_an_off_switch_boost_nothing() -> None:
    memories = [{"content": "public a z"}]
    assert preferred(PASSAGES, memories, 1.15) == PASSAGES  # 'public' and one-letter folders never match
    assert preferred(PASSAGES, [{"content": "sales"}], 1.0) == PASSAGES
    assert preferred(PASSAGES, [], 1.15) == PASSAGES
