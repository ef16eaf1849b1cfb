"""What must be equal on every replica of a deployment: the graph's code and the deployment's settings.

The graph version is kb-agent's version, LangGraph's, and a digest of the source of every package the graph
runs (graph, nodes, tools, models, stores) and of ``langgraph.json``: two checkouts that differ in one line
differ here. The settings digest is one short hash per setting, leaving out what may differ per machine
(the data dir, and the URLs of the shared services, which one machine may spell differently from another).
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path

from nodes.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
GRAPH_PACKAGES = ("graph", "nodes", "tools", "models", "stores")
PER_MACHINE = frozenset({"data_dir", "database_url", "chroma_url", "checkpoint_url", "user_id"})


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def graph_version() -> str:
    """``kb-agent <version> / langgraph <version> / <digest of the graph's source>``."""
    digest = hashlib.sha256()
    files = sorted(p for pkg in GRAPH_PACKAGES for p in (ROOT / pkg).rglob("*.py"))
    for path in [*files, ROOT / "langgraph.json"]:
        if path.is_file():
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return f"kb-agent {_version('kb-agent')} / langgraph {_version('langgraph')} / {digest.hexdigest()[:12]}"


def settings_digest(settings: Settings) -> dict[str, str]:
    """Setting name -> a short hash of its value (values themselves never leave the machine)."""
    out = {}
    for name in type(settings).model_fields:
        if name in PER_MACHINE:
            continue
        value = json.dumps(getattr(settings, name), sort_keys=True, default=str)
        out[name] = hashlib.sha256(value.encode()).hexdigest()[:12]
    return out


def differences(
    graph: str, settings: dict[str, str], peer_graph: str, peer_settings: dict[str, str]
) -> list[str]:
    """What differs from a peer, in words an operator can act on (environment variable names)."""
    found = []
    if graph != peer_graph:
        found.append(f"graph version {graph!r} here, {peer_graph!r} there")
    names = sorted(n for n in settings.keys() | peer_settings.keys() if settings.get(n) != peer_settings.get(n))
    if names:
        found.append("settings " + ", ".join(f"KB_AGENT_{n.upper()}" for n in names))
    return found
