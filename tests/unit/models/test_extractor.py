"""The model-backed memory extractor retries a failing endpoint (bounded, with backoff), then gives up."""

from __future__ import annotations

from typing import Any

import pytest

from models import ScriptedChatModel
from models.extractor import ExtractionFailedError, ModelExtractor
from stores.memory.rules import ExtractionRequest

REQUEST = ExtractionRequest("alice", "记住我喜欢简洁的回答", (), ())
REPLY = '{"operations": []}'


def _failing(*_: Any) -> str:
    raise ConnectionError("endpoint down")


def test_a_failed_call_is_retried_with_doubling_pauses() -> None:
    pauses: list[float] = []
    model = ScriptedChatModel([_failing, _failing, REPLY])
    extractor = ModelExtractor(model, timeout=5, attempts=3, backoff=0.5, sleep=pauses.append)
    assert extractor(REQUEST) == REPLY
    assert pauses == [0.5, 1.0] and len(model.calls) == 3


def test_it_gives_up_after_the_last_attempt_with_the_cause() -> None:
    pauses: list[float] = []
    model = ScriptedChatModel([_failing, _failing])
    extractor = ModelExtractor(model, timeout=5, attempts=2, sleep=pauses.append)
    with pytest.raises(ExtractionFailedError, match="failed 2 times, last: ConnectionError: endpoint down"):
        extractor(REQUEST)
    assert pauses == [1.0]
