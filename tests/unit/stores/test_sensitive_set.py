"""Sensitive data is found by what it is, measured on a labelled set of 782 sentences, half of them Chinese:
half hold a phone number, password, PIN, 口令, CVV, key, token, URL with credentials, ID, card or IBAN written
in many ways; half are ordinary sentences that look alike (order and tracking numbers, dates, prices,
versions, public service numbers, talk about passwords without one). ``tests/fixtures/sensitive_measure.py``
prints the same figures with what was missed or flagged."""

from __future__ import annotations

import json
import re
from pathlib import Path

from stores.memory.checks import redact, sensitive_kinds

SET = Path(__file__).parents[2] / "fixtures" / "sensitive_sentences.jsonl"


def _rows() -> list[dict[str, object]]:
    return [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_set_is_large_and_balanced() -> None:
    rows = _rows()
    with_secret = sum(bool(r["secret"]) for r in rows)
    assert len(rows) >= 400 and abs(with_secret - (len(rows) - with_secret)) <= 10
    chinese = sum(bool(re.search(r"[\u4e00-\u9fff]", str(r["text"]))) for r in rows)
    assert abs(chinese - len(rows) / 2) <= len(rows) / 10


def test_recall_is_at_least_98_percent_and_false_positives_at_most_2_percent() -> None:
    rows = _rows()
    missed = [r["text"] for r in rows if r["secret"] and not sensitive_kinds(str(r["text"]))]
    flagged = [r["text"] for r in rows if not r["secret"] and sensitive_kinds(str(r["text"]))]
    secrets = sum(bool(r["secret"]) for r in rows)
    recall = 1 - len(missed) / secrets
    false_positives = len(flagged) / (len(rows) - secrets)
    assert recall >= 0.98, (recall, missed)
    assert false_positives <= 0.02, (false_positives, flagged)


def test_what_is_found_is_also_redacted_from_the_audit() -> None:
    for text, secret in [
        ("我的手机号是 138.1234.5678", "138.1234.5678"),
        ("办公室座机 0571 8765 4321", "8765 4321"),
        ("I use hunter2x as my password", "hunter2x"),
        ("银行密码改成了 881234", "881234"),
        ("卡号 6222.0212.3456.7890", "3456.7890"),
    ]:
        assert secret not in redact(text), text
