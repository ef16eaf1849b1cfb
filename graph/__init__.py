"""kb-agent's public API: ``build_graph``, ``build_builder``, ``Settings``, ``Context`` and ``State``
(the server's compiled graph is ``graph.server.graph``).

The names load on first use, so a command that needs one module of this package (the CLI's ``--help``,
the auth handler) does not import LangGraph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graph.builder import build_builder, build_graph
    from nodes.context import Context
    from nodes.settings import Settings
    from nodes.state import State

__all__ = ["Context", "Settings", "State", "build_builder", "build_graph"]


def __getattr__(name: str) -> Any:
    if name in ("build_builder", "build_graph"):
        from graph import builder

        return getattr(builder, name)
    if name == "Context":
        from nodes.context import Context

        return Context
    if name == "Settings":
        from nodes.settings import Settings

        return Settings
    if name == "State":
        from nodes.state import State

        return State
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
