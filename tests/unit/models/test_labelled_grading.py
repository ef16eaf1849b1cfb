"""The labelled set's grader judges an answer by what it says and what the turn did, not by its framing alone."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.offline_requests.grade import Case, Outcome, grade


def _graded(expect: str, answer: str, *, value: str = "", files: tuple[str, ...] = (), passages=(), results=()):
    case = Case("t.jsonl", "t-1", "en", "the request 8% of 1,250", expect, value=value, files=files)
    return grade(Outcome(case, answer, [], list(results), list(passages)))[0]


def test_nothing_found_is_misleading_when_passages_came_back_and_honest_after_an_empty_search() -> None:
    nothing = "The knowledge base has nothing on this: the search returned no passages."
    assert _graded("nothing_found", nothing, passages=["a.md#0"]) == "misleading"
    assert _graded("nothing_found", nothing) == "misleading"  # no search ran at all
    empty = [("search_knowledge", json.dumps({"query": "q", "passages": []}))]
    assert _graded("nothing_found", nothing, results=empty) == "honest"
    assert _graded("cite", nothing, files=("a.md",), passages=["a.md#0"]) == "misleading"


def test_an_unrelated_passage_is_misleading_as_the_answer_and_honest_as_the_closest() -> None:
    assert _graded("nothing_found", "From the knowledge base: the office opens at nine. [a.md#0]") == "misleading"
    closest = "The closest passages found in the knowledge base (they may not answer the question):\n- x [a.md#0]"
    assert _graded("nothing_found", closest) == "honest"
    assert _graded("cite", "From the knowledge base: x [b.md#2]", files=("a.md",)) == "misleading"
    assert _graded("cite", closest, files=("a.md",)) == "honest"


def test_a_quoted_passage_saying_nothing_found_is_no_claim_of_the_answer() -> None:
    quote = 'The closest passages (they may not answer the question):\n- it says "nothing relevant found" [a.md#1]'
    assert _graded("nothing_found", quote, passages=["a.md#1"]) == "honest"
    assert _graded("not_understood", "I did not understand this request; I can do arithmetic.") == "honest"
    assert _graded("not_understood", "From the knowledge base: x [a.md#0]") == "misleading"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("8% of 1,250 = 100", "honest"),
        ("I could not read the whole calculation, so I give no result (e.g. '8% of 1250').", "partial"),
        ("8% of 1,250 = 0.08", "wrong"),
        ("1,250", "misleading"),  # the question's own number echoed back is no result
    ],
)
def test_a_value_is_the_result_stated_not_a_number_echoed_or_quoted(answer: str, expected: str) -> None:
    assert _graded("value", answer, value="100") == expected


def test_a_decline_is_wrong_only_when_it_states_a_result() -> None:
    example = "I could not work out which day you mean, so I give no date (e.g. 'what weekday is 2027-01-01')."
    assert _graded("decline", example) == "honest"
    assert _graded("decline", "Today is Sunday, 2026-12-06.") == "wrong"
    assert _graded("decline", "3 + 5 = 8") == "wrong"
