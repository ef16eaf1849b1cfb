"""kb-agent's public API: ``build_graph``, the server ``graph``, ``Settings``, ``Context`` and ``State``.

Imports are lazy so that ``nodes`` can import ``graph.context``/``graph.state`` without a cycle.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Context", "Settings", "State", "build_builder", "build_graph", "graph"]


def __getattr__(name: str) -> Any:
    if name in {"build_graph", "build_builder", "graph"}:
        from graph import builder

        return getattr(builder, name)
    if name == "Context":
        from graph.context import Context

        return Context
    if name == "Settings":
        from graph.settings import Settings

        return Settings
    if name == "State":
        from graph.state import State

        return State
    raise AttributeError(name)
