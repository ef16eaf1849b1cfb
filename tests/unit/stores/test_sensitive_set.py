"""Sensitive data is found by what it is, measured on three labelled sets, about half of each Chinese.

``sensitive_sentences.jsonl`` (782 sentences) grew with the check: half hold a phone number, password, PIN,
口令, CVV, key, token, URL with credentials, ID, card or IBAN written in many ways; half are ordinary
sentences that look alike (order and tracking numbers, dates, prices, versions, public service numbers, talk
about passwords without one). ``sensitive_fresh.jsonl`` (242), ``sensitive_fresh2.jsonl`` (104),
``sensitive_fresh3.jsonl`` (99), ``sensitive_fresh4.jsonl`` (99, in the third person a memory is written
in), ``sensitive_fresh5.jsonl`` (98, half look-alikes beside credential words) and ``sensitive_fresh6.jsonl``
(95, commands, config lines, corrections, phones of many countries) were written fresh, in the way people
talk to an assistant, and each was measured before any change it led to (recall 0.834, 0.864, 0.918,
0.984, 0.896, 0.877; false positives 0.035, 0.026, 0.000, 0.053, 0.040, 0.105 then); they hold the check
to wording its rules were not written from.
``tests/fixtures/sensitive_measure.py`` prints the same figures with what was missed or flagged."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stores.memory.checks import redact, sensitive_kinds

FIXTURES = Path(__file__).parents[2] / "fixtures"
SET = FIXTURES / "sensitive_sentences.jsonl"
FRESH = [FIXTURES / f"sensitive_fresh{n}.jsonl" for n in ("", "2", "3", "4", "5", "6")]
FRESH_IDS = ["fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6"]


def _rows(path: Path = SET) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _chinese(rows: list[dict[str, object]]) -> int:
    return sum(bool(re.search(r"[\u4e00-\u9fff]", str(r["text"]))) for r in rows)


def _figures(rows: list[dict[str, object]]) -> tuple[float, float, list[object], list[object]]:
    missed = [r["text"] for r in rows if r["secret"] and not sensitive_kinds(str(r["text"]))]
    flagged = [r["text"] for r in rows if not r["secret"] and sensitive_kinds(str(r["text"]))]
    secrets = sum(bool(r["secret"]) for r in rows)
    return 1 - len(missed) / secrets, len(flagged) / (len(rows) - secrets), missed, flagged


def test_the_set_is_large_and_balanced() -> None:
    rows = _rows()
    with_secret = sum(bool(r["secret"]) for r in rows)
    assert len(rows) >= 400 and abs(with_secret - (len(rows) - with_secret)) <= 10
    assert abs(_chinese(rows) - len(rows) / 2) <= len(rows) / 10


@pytest.mark.parametrize(
    ("path", "at_least", "secret_share"),
    list(zip(FRESH, (200, 80, 80, 80, 80, 80), (0.6, 0.6, 0.6, 0.6, 0.45, 0.6), strict=True)),
    ids=FRESH_IDS,
)
def test_the_fresh_sets_hold_secrets_half_chinese_with_hard_look_alikes(
    path: Path, at_least: int, secret_share: float
) -> None:
    rows = _rows(path)
    with_secret = sum(bool(r["secret"]) for r in rows)
    assert len(rows) >= at_least and with_secret >= secret_share * len(rows) and len(rows) - with_secret >= 30
    assert abs(_chinese(rows) - len(rows) / 2) <= len(rows) / 10
    assert len({r["text"] for r in rows}) == len(rows)


def test_recall_is_at_least_98_percent_and_false_positives_at_most_2_percent() -> None:
    recall, false_positives, missed, flagged = _figures(_rows())
    assert recall >= 0.98, (recall, missed)
    assert false_positives <= 0.02, (false_positives, flagged)


@pytest.mark.parametrize("path", FRESH, ids=FRESH_IDS)
def test_fresh_wording_recall_is_at_least_98_percent_and_false_positives_at_most_3_percent(path: Path) -> None:
    recall, false_positives, missed, flagged = _figures(_rows(path))
    assert recall >= 0.98, (recall, missed)
    assert false_positives <= 0.03, (false_positives, flagged)


def test_what_is_found_is_also_redacted_from_the_audit() -> None:
    for text, secret in [
        ("我的手机号是 138.1234.5678", "138.1234.5678"),
        ("办公室座机 0571 8765 4321", "8765 4321"),
        ("I use hunter2x as my password", "hunter2x"),
        ("银行密码改成了 881234", "881234"),
        ("卡号 6222.0212.3456.7890", "3456.7890"),
        ("sort code 20-00-00, account 55779911", "55779911"),
        ("call my sister on 07823 456712", "456712"),
        ("门禁 *1379#", "1379"),
    ]:
        assert secret not in redact(text), text
