"""The graph a LangGraph server (``langgraph dev``, ``kb-agent serve``) imports, named in ``langgraph.json``.

It is compiled without a checkpointer (the server brings its own) and serves every run from the
deployment's settings as the environment gives them; each run's long-term memory is the one its
settings name. Built on import, so a setting or an MCP config that cannot be used stops the server from
starting, with the reason.
"""

from __future__ import annotations

from graph.builder import build_graph
from graph.services import RunMemory

graph = build_graph(memory=RunMemory())
