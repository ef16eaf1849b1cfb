"""Where one turn's user id and question travel: the repository files whose functions receive them, and how
often the value climbs back up the layers (cli → graph → nodes/models → tools → stores).

A profiler hook watches every function of the repository return during one offline turn (with a knowledge
base, long-term memory on) and looks for two marker values in its locals (its arguments among them) and in
what it returns, by a shallow walk of dicts, sequences and objects' attributes. A "climb" is such a call
made from a lower layer into a higher one (say nodes → graph): a place where a lower layer reaches back up
for something it should have been handed.

    python bench/data_path.py [--json out.json]

Run it in another checkout (``cd old && python /path/to/bench/data_path.py``) to compare commits: it only
uses ``graph.build_graph`` and ``stores`` names that both sides have.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path.cwd().resolve()
LAYERS = {"cli": 0, "graph": 1, "nodes": 2, "models": 2, "tools": 3, "stores": 4}
USER = "user-marker-5c1e"
QUESTION = "question-marker-8d2f 差旅报销的标准是什么？"
SCAN_DEPTH = 3
RESOLVERS = {"_configured_user", "server_identity", "identity_of"}  # looking up who runs the turn


def _carries(value: Any, marker: str, depth: int = SCAN_DEPTH, seen: set[int] | None = None) -> bool:
    """Whether ``value`` holds ``marker`` within a few hops (strings, containers, attributes)."""
    if isinstance(value, str):
        return marker in value
    if depth <= 0 or value is None or isinstance(value, (int, float, bool, bytes)):
        return False
    seen = seen if seen is not None else set()
    if id(value) in seen:
        return False
    seen.add(id(value))
    if isinstance(value, dict):
        items: Any = list(value.values())[:50]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)[:50]
    else:
        attrs = getattr(value, "__dict__", None)
        if attrs is None and hasattr(value, "__slots__"):
            attrs = {k: getattr(value, k, None) for k in getattr(value, "__slots__", ())}
        if not isinstance(attrs, dict):
            return False
        items = [v for k, v in list(attrs.items())[:50] if not k.startswith("__")]
    return any(_carries(item, marker, depth - 1, seen) for item in items)


def _layer(filename: str) -> tuple[str, int] | None:
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    top = rel.parts[0] if rel.parts else ""
    return (str(rel), LAYERS[top]) if top in LAYERS else None


class PathTracer:
    """Record, per marker, the repository files whose functions were called with it and the climbs."""

    def __init__(self) -> None:
        self.files: dict[str, set[str]] = {USER: set(), QUESTION: set()}
        self.climbs: dict[str, list[str]] = {USER: [], QUESTION: []}
        self.resolutions = 0  # identity looked up for the run (once per run is the aim)

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event != "return":
            return
        here = _layer(frame.f_code.co_filename)
        if here is None:
            return
        if frame.f_code.co_name in RESOLVERS:
            self.resolutions += 1
        # What the function was handed (its locals at return hold its arguments), or what it handed back.
        values = [*list(frame.f_locals.values())[:30], arg]
        caller = frame.f_back
        while caller is not None and _layer(caller.f_code.co_filename) is None:
            caller = caller.f_back  # through library frames (LangGraph's runner) to our last caller
        below = _layer(caller.f_code.co_filename) if caller is not None else None
        for marker in (USER, QUESTION):
            if any(_carries(v, marker) for v in values):
                self.files[marker].add(here[0])
                if below is not None and below[1] > here[1]:
                    self.climbs[marker].append(f"{below[0]} -> {here[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import os

    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    home = tempfile.mkdtemp(prefix="kb-trace-")
    os.environ.update(KB_AGENT_HOME=home, KB_AGENT_EMBEDDER="hashing", KB_AGENT_MODEL="offline")
    docs = Path(home) / "docs"
    docs.mkdir()
    (docs / "travel.md").write_text("# 差旅\n\n差旅报销的标准是每晚住宿不超过 500 元。\n", "utf-8")
    from typer.testing import CliRunner

    from cli.app import app  # ingest as a user would

    done = CliRunner().invoke(app, ["ingest", str(docs)])
    assert done.exit_code == 0, done.output
    from graph import build_graph

    agent = build_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "trace", "user_id": USER}}
    agent.invoke({"messages": [HumanMessage("warm-up")]}, config)  # imports and first-use opening
    tracer = PathTracer()
    threading.setprofile(tracer)  # the worker threads a run starts
    sys.setprofile(tracer)
    try:
        agent.invoke({"messages": [HumanMessage(QUESTION)]}, config)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    result = {
        name: {"files": len(tracer.files[marker]), "climbs": len(tracer.climbs[marker]),
               "climb_pairs": sorted(set(tracer.climbs[marker])), "file_list": sorted(tracer.files[marker])}
        for name, marker in (("user_id", USER), ("question", QUESTION))
    }
    result["identity_lookups"] = tracer.resolutions  # type: ignore[assignment]
    print(f"identity looked up {tracer.resolutions} times in the turn")
    for name, figures in (("user_id", result["user_id"]), ("question", result["question"])):
        print(f"{name}: {figures['files']} files, {figures['climbs']} climbs back up")
        for pair in figures["climb_pairs"]:
            print(f"    {pair}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False), "utf-8")


if __name__ == "__main__":
    main()
