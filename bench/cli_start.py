"""How long ``kb-agent`` takes to start, as ratios to importing typer and rich in the same run.

Each command runs ``--repeat`` times as a fresh process, interleaved with the reference and the peers, and
the medians are compared: on a shared machine the absolute times drift, the ratios hold.

    python bench/cli_start.py [--repeat 15] [--json out.json]

Measured, each a fresh interpreter:
- ``typer+rich``: ``python -c "import typer, rich"``, the reference (a bare typer app is about 2.5x it);
- ``langgraph+core``: ``import langgraph.graph, langchain_core.messages``, what any graph run must import;
- ``chromadb``: ``import chromadb``, what a command pays when it opens a Chroma store;
- ``kb-agent --help``;
- ``kb-agent ask "计算 12 × 12"`` with the offline model in a warm home (a data folder used once before,
  no knowledge base, no memories): a calculation, which needs neither Chroma nor the Chinese dictionary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"kb-agent --help": 4.0, "kb-agent ask": 20.0}


def _timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    python = sys.executable
    cli = [python, "-m", "cli"]
    home = Path(tempfile.mkdtemp(prefix="kb-start-"))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("KB_AGENT_")},
        "KB_AGENT_HOME": str(home / "data"),
    }
    question = "计算 12 × 12"
    cases = {
        "typer+rich": [python, "-c", "import typer, rich"],
        "langgraph+core": [python, "-c", "import langgraph.graph, langchain_core.messages"],
        "chromadb": [python, "-c", "import chromadb"],
        "kb-agent --help": [*cli, "--help"],
        "kb-agent ask": [*cli, "ask", "--offline", question],
    }
    try:
        _timed(cases["kb-agent ask"], env)  # the warm home: folders and databases exist from now on
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.repeat):
            for name, argv in cases.items():
                times[name].append(_timed(argv, env))
        answer = subprocess.run(cases["kb-agent ask"], env=env, capture_output=True, text=True, timeout=300)
        chroma_made = (home / "data" / "chroma").exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)

    reference = statistics.median(times["typer+rich"])
    rows = []
    print(f"{'command':<18} {'median s':>9} {'p90 s':>7} {'x typer+rich':>13} {'target':>7}")
    for name, values in times.items():
        median = statistics.median(values)
        p90 = sorted(values)[int(0.9 * (len(values) - 1))]
        ratio = median / reference
        target = TARGETS.get(name)
        rows.append({"command": name, "median_s": median, "p90_s": p90, "ratio": ratio, "target": target})
        shown = f"<= {target:g}" if target else ""
        print(f"{name:<18} {median:9.3f} {p90:7.3f} {ratio:13.2f} {shown:>7}")
    print(f"answer: {answer.stdout.strip()!r}; Chroma folder created by the calculation: {chroma_made}")
    if args.json:
        args.json.write_text(
            json.dumps({"repeat": args.repeat, "rows": rows, "answer": answer.stdout.strip()}, indent=2),
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
