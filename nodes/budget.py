"""The per-turn budget: limits are one value object, checked before every model request (pydantic-ai style).

Counters live in the graph state (so a resumed turn keeps counting) and are reset when a new question
arrives. A spent budget never raises to the caller: the turn ends with a message that says which limit
was reached and what to do.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodes.settings import Settings

LIMIT_NAMES = {
    "rounds": ("最大模型轮数", "model rounds"),
    "tool_calls": ("最大工具调用次数", "tool calls"),
    "tokens": ("token 上限", "tokens"),
    "time": ("最长运行时间", "wall time"),
    "repeated_call": ("重复调用", "repeated calls"),
}


OVER_BUDGET = "over"  # the counters' list of this round's call ids past the turn's tool-call budget
ADMITTED = "admitted"  # the id of the assistant message whose calls were counted against the budget


def _sane(counters: dict[str, Any]) -> dict[str, Any]:
    """Stored counters as the nodes write them: counts never below zero, a start never in the future. Only
    nodes write them, but a budget must not be liftable by any state it is read from."""
    now = time.time()
    sane = dict(counters)
    for name in ("rounds", "tool_calls", "tokens", "repeats"):
        value = sane.get(name)
        sane[name] = max(0, value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
    started = sane.get("started_at")
    sane["started_at"] = min(started, now) if isinstance(started, int | float) and started == started else now
    return sane


@dataclass(frozen=True)
class Budget:
    max_rounds: int = 10
    max_tool_calls: int = 20
    max_tokens: int = 200_000
    max_seconds: float = 300.0
    max_repeated_calls: int = 3

    @classmethod
    def from_context(cls, ctx: Settings) -> Budget:
        return cls(
            ctx.max_rounds, ctx.max_tool_calls, ctx.max_tokens, ctx.max_seconds, ctx.max_repeated_calls
        )

    def counters_for(self, current: dict[str, Any], turn_id: str | None) -> dict[str, Any]:
        """This turn's counters: the stored ones if they belong to ``turn_id``, else fresh ones."""
        if current and current.get("turn") == turn_id:
            return _sane(current)
        return {
            "turn": turn_id,
            "rounds": 0,
            "tool_calls": 0,
            "tokens": 0,
            "started_at": time.time(),
            "last_call": None,
            "repeats": 0,
        }

    def spent(self, counters: dict[str, Any], now: float | None = None) -> str | None:
        """The name of the first limit reached, or None while the turn may go on."""
        now = time.time() if now is None else now
        if counters["rounds"] >= self.max_rounds:
            return "rounds"
        if counters["tool_calls"] >= self.max_tool_calls:
            return "tool_calls"
        if counters["tokens"] >= self.max_tokens:
            return "tokens"
        if now - counters["started_at"] >= self.max_seconds:
            return "time"
        return None

    def remaining(self, counters: dict[str, Any], now: float | None = None) -> dict[str, float]:
        now = time.time() if now is None else now
        return {
            "rounds": self.max_rounds - counters["rounds"],
            "tool_calls": self.max_tool_calls - counters["tool_calls"],
            "tokens": self.max_tokens - counters["tokens"],
            "seconds": round(max(0.0, self.max_seconds - (now - counters["started_at"])), 1),
        }

    def note_calls(self, counters: dict[str, Any], calls: Sequence[Mapping[str, Any]]) -> bool:
        """Count identical consecutive calls; True when one reaches ``max_repeated_calls`` (stop before running it)."""
        for call in calls:
            signature = json.dumps(
                [call.get("name"), call.get("args")], sort_keys=True, ensure_ascii=False, default=str
            )
            if signature == counters.get("last_call"):
                counters["repeats"] += 1
            else:
                counters["last_call"], counters["repeats"] = signature, 1
            if counters["repeats"] >= self.max_repeated_calls:
                return True
        return False

    def admit(self, counters: dict[str, Any], message: Any) -> None:
        """Count the calls of ``message`` (an assistant message with an id) against the turn's tool-call
        budget: those within it run, the rest are answered without running (``OVER_BUDGET``)."""
        allowance = max(0, self.max_tool_calls - counters["tool_calls"])
        ids = [call.get("id") or "" for call in message.tool_calls]
        counters[OVER_BUDGET] = ids[allowance:]
        counters["tool_calls"] += min(len(ids), allowance)
        counters[ADMITTED] = message.id

    def stop_message(self, reason: str, zh: bool) -> str:
        """What the user reads when the turn stops on a limit."""
        limit = {
            "rounds": self.max_rounds,
            "tool_calls": self.max_tool_calls,
            "tokens": self.max_tokens,
            "time": f"{self.max_seconds:g}s",
            "repeated_call": self.max_repeated_calls,
        }[reason]
        zh_name, en_name = LIMIT_NAMES[reason]
        if reason == "repeated_call":
            return (
                f"已停止：同一个工具以相同参数连续被请求 {limit} 次，继续下去不会有新结果。请换个问法或补充信息。"
                if zh
                else f"Stopped: the same tool was requested with the same arguments {limit} times in a row, "
                "which will not produce anything new. Please rephrase or add details."
            )
        if zh:
            return f"已达到本轮的{zh_name}（{limit}），本轮停止。请缩小问题范围后重试，或调高对应的预算设置。"
        return (
            f"This turn stopped: its budget of {en_name} ({limit}) is spent. Narrow the question and try again, "
            "or raise the matching budget setting."
        )
