"""Which tools the model is offered this round: the ones the caller may use, searched when there are many.

A tool the caller's roles do not permit is never offered (the executor refuses it anyway, but offering it
would only invite a denied call). With a large catalog only a small candidate set is bound per round
(SPEC §5, seed 001 "工具很多时"); see :mod:`tools.tool_search`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph.context import Context
from tools.permissions import grant_for
from tools.registry import ToolRegistry, ToolSpec


def offered_tools(registry: ToolRegistry, messages: Sequence[Any], ctx: Context) -> list[ToolSpec]:
    """The tools bound to the model for this round, in registration order."""
    grant = grant_for(ctx)
    return [spec for spec in registry if grant.permits(spec)]


def offered_definitions(
    registry: ToolRegistry, messages: Sequence[Any], ctx: Context
) -> list[dict[str, Any]]:
    """The OpenAI ``tools`` entries of :func:`offered_tools` (also what the budget counts)."""
    return [spec.definition() for spec in offered_tools(registry, messages, ctx)]
