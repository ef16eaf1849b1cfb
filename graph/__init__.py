"""kb-agent's public API: ``build_graph``, ``build_builder``, ``Settings``, ``Context`` and ``State``
(the server's compiled graph is ``graph.server.graph``)."""

from __future__ import annotations

from graph.builder import build_builder, build_graph
from nodes.context import Context
from nodes.settings import Settings
from nodes.state import State

__all__ = ["Context", "Settings", "State", "build_builder", "build_graph"]
