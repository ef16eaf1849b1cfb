"""Offline token counting of messages: a CJK-aware estimate, used until an endpoint reports real usage.

tiktoken would download its encodings at run time, which this project may not do; the estimate errs on
the high side (one token per CJK character, about four Latin characters per token) so budgets hold.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage

from stores.text_analysis import estimate_tokens, has_cjk

__all__ = [
    "TokenCalibration",
    "calibration",
    "count_message_tokens",
    "count_tool_tokens",
    "estimate_tokens",
    "has_cjk",
]
MESSAGE_OVERHEAD = 4


def count_message_tokens(messages: Iterable[BaseMessage]) -> int:
    """Estimated prompt tokens of a message list, tool calls included."""
    total = 0
    for message in messages:
        total += MESSAGE_OVERHEAD + estimate_tokens(message.text)
        if isinstance(message, AIMessage) and message.tool_calls:
            total += estimate_tokens(json.dumps(message.tool_calls, ensure_ascii=False))
    return total


def count_tool_tokens(definitions: Iterable[dict]) -> int:
    """Estimated tokens the tool definitions add to every request."""
    return sum(estimate_tokens(json.dumps(d, ensure_ascii=False)) for d in definitions)


@dataclass
class TokenCalibration:
    """Per model name, the running ratio of the endpoint's reported prompt tokens to our estimate.

    The estimate is deliberately generic (one token per CJK character); an endpoint's ``usage_metadata``
    says what its tokenizer really counted, so budgets measured in estimate units are corrected by this
    ratio. Older samples fade (``decay``) so a changed deployment is followed, and the ratio is bounded
    (``low``–``high``) so one odd report cannot make the budget collapse or balloon.
    """

    low: float = 0.5
    high: float = 2.0
    decay: float = 0.9
    min_estimate: int = 16  # a tiny request says more about fixed overheads than about the tokenizer
    _sums: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def observe(self, model: str, estimated: int, reported: int) -> None:
        """Record one request: our estimate of its prompt and the prompt tokens the endpoint reported."""
        if not model or estimated < self.min_estimate or reported <= 0:
            return
        with self._lock:
            est, rep = self._sums.get(model, (0.0, 0.0))
            self._sums[model] = (est * self.decay + estimated, rep * self.decay + reported)

    def ratio(self, model: str) -> float:
        """Reported ÷ estimated for ``model`` (1.0 until it has reported usage), within the bounds."""
        with self._lock:
            est, rep = self._sums.get(model, (0.0, 0.0))
        if est <= 0:
            return 1.0
        return min(self.high, max(self.low, rep / est))

    def calibrated(self, model: str, estimate: int) -> int:
        """``estimate`` in the model's own tokens."""
        return round(estimate * self.ratio(model))

    def reset(self) -> None:
        with self._lock:
            self._sums.clear()


calibration = TokenCalibration()  # one per process: every run against a model name teaches the same ratio
