"""The built-in tools every agent starts with."""

from __future__ import annotations

from tools import calculator, clock
from tools.registry import ToolRegistry, ToolSpec

CALCULATOR = ToolSpec(
    name="calculator",
    description=(
        "Evaluate an arithmetic expression exactly: numbers, parentheses, + - * / // % ** (powers), sqrt(x), "
        "cbrt(x). Use it for any calculation instead of computing in your head; pass one expression such as "
        "'(2 + 3) ** 2' or 'sqrt(8)'. Not for units, dates or symbolic algebra."
    ),
    parameters={
        "type": "object",
        "properties": {
            "expression": {"type": "string", "description": "The arithmetic expression, e.g. '123 * 456'."}
        },
        "required": ["expression"],
        "additionalProperties": False,
    },
    handler=calculator.evaluate,
    domain="math",
    always_on=True,
    timeout=5.0,
)

CURRENT_DATE = ToolSpec(
    name="get_current_date",
    description=clock.DESCRIPTION,
    parameters=clock.PARAMETERS,
    handler=clock.current_date,
    domain="time",
    always_on=True,
    timeout=5.0,
)


def builtin_registry() -> ToolRegistry:
    """A fresh registry with the built-in tools (each agent gets its own, so apps can add to it)."""
    return ToolRegistry([CALCULATOR, CURRENT_DATE])
