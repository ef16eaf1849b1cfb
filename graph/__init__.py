"""kb-agent's public API: ``build_graph``, the server ``graph``, ``Settings``, ``Context`` and ``State``."""

from __future__ import annotations

from graph.builder import build_builder, build_graph, graph
from nodes.context import Context
from nodes.settings import Settings
from nodes.state import State

__all__ = ["Context", "Settings", "State", "build_builder", "build_graph", "graph"]
