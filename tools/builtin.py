"""The built-in tools every agent starts with."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from tools import calculator, clock
from tools.registry import CallContext, ToolRegistry, ToolSpec

Weekday = Literal["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def calculate(
    expression: Annotated[str, Field(description="The arithmetic expression, e.g. '123 * 456'.")],
) -> str:
    return calculator.evaluate(expression)


def get_current_date(
    date: str = "",
    years: int = 0,
    months: int = 0,
    day: int = 0,
    weeks: int = 0,
    days: int = 0,
    weekday: Weekday | None = None,
    *,
    tool_context: CallContext,
) -> dict[str, Any]:
    return clock.current_date(
        tool_context,
        date=date or None,
        years=years,
        months=months,
        day=day or None,  # 0: not given (no month has a day 0)
        weeks=weeks,
        days=days,
        weekday=weekday,
    )


CALCULATOR = ToolSpec.of(
    calculate,
    name="calculator",
    description=(
        "Evaluate an arithmetic expression exactly: numbers, parentheses, + - * / // % ** (powers), sqrt(x), "
        "cbrt(x). Use it for any calculation instead of computing in your head; pass one expression such as "
        "'(2 + 3) ** 2' or 'sqrt(8)'. Not for units, dates or symbolic algebra."
    ),
    domain="math",
    always_on=True,
    timeout=5.0,
)

CURRENT_DATE = ToolSpec.of(
    get_current_date,
    name="get_current_date",
    description=clock.DESCRIPTION,
    domain="time",
    always_on=True,
    timeout=5.0,
)


def builtin_registry() -> ToolRegistry:
    """A fresh registry with the built-in tools (each agent gets its own, so apps can add to it)."""
    return ToolRegistry([CALCULATOR, CURRENT_DATE])
