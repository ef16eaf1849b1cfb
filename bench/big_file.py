"""One huge text file: peak memory of `kb-agent ingest`, how fast SIGTERM stops it, what `repair` gives back.

Writes a ``--mb`` MB .txt of made-up words (no model needed: the hashing embedder), then, each in a fresh
``KB_AGENT_HOME`` and a process of its own:

- **ingest**: ``python -m cli ingest --json`` of the whole file; wall time, chunks, peak RSS (VmHWM);
- **stop**: the same ingest, sent SIGTERM once ``--stop-after`` seconds have passed; seconds from the signal
  to the process's exit, then ``python -m cli repair --json``: its time, stray chunks removed, bytes
  reclaimed, and the Chroma folder's size before and after;
- **peer** (``--peer``): embedded Chroma alone adding as many 256-dimension vectors (with 1 KB documents)
  as the ingest wrote: the memory embedded Chroma needs for its in-memory index, whoever calls it.

Method and results: bench/README.md, section "big_file.py".
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORDS = [
    f"{a}{b}{c}"
    for a in "bdfgklmnprstvz"
    for b in ("a", "e", "i", "o", "u", "ai", "ou")
    for c in ("", "n", "r")
]

PEER = """
import sys, numpy as np, chromadb
client = chromadb.PersistentClient(sys.argv[1])
col = client.create_collection("peer", embedding_function=None, metadata={"hnsw:space": "cosine"})
rng, total, text = np.random.default_rng(0), int(sys.argv[2]), "x" * 1000
for start in range(0, total, 256):
    n = min(256, total - start)
    vectors = rng.standard_normal((n, 256)).astype(np.float32)
    col.add(ids=[f"c{i}" for i in range(start, start + n)], embeddings=vectors, documents=[text] * n)
"""


def write_file(path: Path, megabytes: float, seed: int = 11) -> None:
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        written = 0
        while written < megabytes * 1024 * 1024:
            sentences = (" ".join(rng.choices(WORDS, k=rng.randint(8, 20))) for _ in range(rng.randint(3, 8)))
            para = ". ".join(sentences) + ".\n\n"
            fh.write(para)
            written += len(para)


def peak_rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return int(status.split("VmHWM:")[1].split()[0]) / 1024


def run(cmd: list[str], env: dict[str, str], stop_after: float | None = None) -> dict[str, Any]:
    """Run ``cmd``, following its peak RSS; with ``stop_after``, SIGTERM it then and time its exit."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, signalled = 0.0, None
    while proc.poll() is None:
        peak = max(peak, peak_rss_mb(proc.pid) or 0.0)
        if stop_after is not None and signalled is None and time.perf_counter() - started >= stop_after:
            proc.send_signal(signal.SIGTERM)
            signalled = time.perf_counter()
        time.sleep(0.1)
    ended = time.perf_counter()
    out, err = proc.communicate()
    return {
        "seconds": round(ended - started, 1),
        "peak_rss_mb": round(peak, 1),
        "returncode": proc.returncode,
        "exit_after_sigterm_s": round(ended - signalled, 2) if signalled is not None else None,
        "stdout": out.strip(),
        "stderr_tail": err.strip().splitlines()[-1:] if err.strip() else [],
    }


def folder_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1024 / 1024, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=200.0, help="size of the text file")
    parser.add_argument(
        "--stop-after", type=float, default=60.0, help="seconds before SIGTERM in the stop run"
    )
    parser.add_argument("--peer", action="store_true", help="also measure embedded Chroma alone")
    parser.add_argument("--json", type=Path, help="write the results here as well")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kb-big-"))
    try:
        write_file(work / "docs" / "big.txt", args.mb)
        base = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "KB_AGENT_EMBEDDER": "hashing",
            "KB_AGENT_MAX_FILE_MB": "0",
        }
        cli = [sys.executable, "-m", "cli"]
        results: dict[str, Any] = {"file_mb": args.mb}

        env = {**base, "KB_AGENT_HOME": str(work / "full")}
        full = run([*cli, "ingest", "--json", str(work / "docs")], env)
        report = json.loads(full.pop("stdout") or "{}")
        full["chunks"] = report.get("chunks_written")
        results["ingest"] = full

        env = {**base, "KB_AGENT_HOME": str(work / "stopped")}
        stopped = run([*cli, "ingest", str(work / "docs")], env, stop_after=args.stop_after)
        stopped.pop("stdout")
        chroma = work / "stopped" / "chroma"
        before = folder_mb(chroma)
        repair = run([*cli, "repair", "--json"], env)
        repair.update(
            json.loads(repair.pop("stdout") or "{}"),
            chroma_mb_before=before,
            chroma_mb_after=folder_mb(chroma),
        )
        results["stop"], results["repair"] = stopped, repair

        if args.peer and full["chunks"]:
            peer = run([sys.executable, "-c", PEER, str(work / "peer"), str(full["chunks"])], base)
            peer.pop("stdout")
            results["peer_chroma_alone"] = peer
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
