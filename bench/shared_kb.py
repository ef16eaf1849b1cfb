"""Shared knowledge base (issue 11): two replicas on one Postgres and one Chroma server.

Measures, with synthetic chunks and the hashing embedder (see ``kb_speed.bulk_load``):

- BM25 reload: a replica opening the shared KB (every text read from Chroma and tokenized), at each size;
- freshness: the time from A's ingest finishing to B's first query that finds the new chunk in both retrievers;
- hybrid query p50/p95 on B (shared) against one embedded process (local Chroma + SQLite) on the same corpus.

A and B are two ``KnowledgeBase`` objects with their own data dirs in this process: B learns of A's write the
way another process does (the index version in Postgres), and keeps its own BM25.

    KB_TEST_POSTGRES_URL=postgresql://... python -m bench.shared_kb --sizes 10000,100000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.kb_speed import Corpus, bulk_load, documents, pct
from stores.embeddings import HashingEmbedder
from stores.knowledge import KnowledgeBase

QUERIES = ["quarterly revenue forecast", "annual leave policy", "database backup schedule", "merger plan"]


def chroma_server(path: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    binary = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    proc = subprocess.Popen(
        [binary, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1).close()
            return proc, url
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("chroma run did not start")


def query_ms(kb: KnowledgeBase, n: int) -> dict[str, float]:
    times = []
    for i in range(n):
        started = time.perf_counter()
        kb.search(QUERIES[i % len(QUERIES)] + f" {i}", top_k=5)
        times.append(1000 * (time.perf_counter() - started))
    return pct(times)


def run(size: int, database_url: str, chroma_url: str, tmp: Path, queries: int) -> dict[str, Any]:
    import psycopg

    collection = f"bench{size}"
    with psycopg.connect(database_url, autocommit=True) as conn:
        for table in ("files", "meta"):
            conn.execute(f"DROP TABLE IF EXISTS kb_{collection}_{table}")
    shared = {"chroma_url": chroma_url, "database_url": database_url, "collection": collection}
    embedder = HashingEmbedder(dim=384)
    docs = documents(Corpus(), size)
    a = KnowledgeBase(tmp / f"a{size}", embedder=embedder, **shared)
    started = time.perf_counter()
    print(f"loading {size} chunks", file=sys.stderr, flush=True)
    bulk_load(a, docs)
    out: dict[str, Any] = {"chunks": size, "load_s": round(time.perf_counter() - started, 1)}

    started = time.perf_counter()
    b = KnowledgeBase(tmp / f"b{size}", embedder=embedder, **shared)  # opens: BM25 from Chroma's texts
    out["bm25_reload_s"] = round(time.perf_counter() - started, 2)
    out["b_hybrid_ms"] = query_ms(b, queries)

    new = tmp / f"new{size}"
    new.mkdir()
    (new / "fresh.md").write_text("The zanzibar quokka protocol ships in version 5.2.", encoding="utf-8")
    a.ingest([new])
    done = time.perf_counter()
    for _ in range(1000):
        hits = b.search("zanzibar quokka protocol", top_k=3)
        if hits and hits[0]["id"] == "fresh.md#0":
            break
    out["ingest_to_b_finds_ms"] = round(1000 * (time.perf_counter() - done), 1)
    out["b_retrievers"] = hits[0]["retrievers"] if hits else []
    out["a_vector_finds"] = [p["id"] for p in a.search("zanzibar quokka protocol", top_k=3, mode="vector")]

    local = KnowledgeBase(tmp / f"local{size}", embedder=embedder)  # one embedded process, same corpus
    bulk_load(local, docs)
    out["single_process_hybrid_ms"] = query_ms(local, queries)
    a.reset()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    database_url = os.environ.get("KB_BENCH_POSTGRES_URL") or os.environ.get("KB_TEST_POSTGRES_URL", "")
    if not database_url:
        sys.exit("set KB_BENCH_POSTGRES_URL (or KB_TEST_POSTGRES_URL) to a Postgres database")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        server, chroma_url = chroma_server(tmp / "chroma-server")
        try:
            for size in (int(s) for s in args.sizes.split(",")):
                print(json.dumps(run(size, database_url, chroma_url, tmp, args.queries)), flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
