"""Shared knowledge base: two real processes on one Postgres and one Chroma server.

Process A (this one) bulk-loads synthetic chunks (hashing embedder, see ``kb_speed.bulk_load``) into the
shared KB. Process B (``--replica``, a subprocess with its own data dir) then:

- opens the shared KB: its BM25 index is built from every text Chroma holds (the **BM25 reload** time);
  later it is opened again on the same data dir (the **BM25 restart** time, and the texts it had to fetch);
- runs the hybrid queries (**p50/p95 on B**), compared with one embedded process (local Chroma + SQLite,
  same corpus, in A) in the same run;
- queries in a loop while A ingests one new file; the **freshness** is the time from A's ingest returning
  to the end of B's first query that finds the new chunk, per retriever and in both.

    KB_TEST_POSTGRES_URL=postgresql://... python -m bench.shared_kb                    # 10k chunks, ~4 min
    KB_TEST_POSTGRES_URL=postgresql://... python -m bench.shared_kb --sizes 100000     # ~20 min here
    ... --ef-search 2000      # HNSW ef_search of every collection (Chroma's default is 100)
    ... --staleness 30        # B may query with its keyword index for 30 s after a write, catching up meanwhile

Also reported: B's slowest query while A writes (the refresh its first query after the write pays, unless
B is within its staleness).
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
from stores.chroma import ChromaEmbedding, chroma_client
from stores.embeddings import HashingEmbedder
from stores.knowledge.knowledge_base import KnowledgeBase

QUERIES = ["quarterly revenue forecast", "annual leave policy", "database backup schedule", "merger plan"]
FRESH_TEXT = "The zanzibar quokka protocol ships in version 5.2."
FRESH_QUERY = "zanzibar quokka protocol"
EMBEDDER = HashingEmbedder(dim=384)


def chroma_server(path: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    binary = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    proc = subprocess.Popen(
        [binary, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
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


def create_collection(directory: Path, chroma_url: str, name: str, ef_search: int) -> None:
    """Create the collection as ``open_collection`` would, with another HNSW ef_search (0: Chroma's)."""
    if not ef_search:
        return
    chroma_client(directory, chroma_url).create_collection(
        name,
        configuration={"hnsw": {"space": "cosine", "ef_search": ef_search}},  # type: ignore[typeddict-item]
        metadata={"embedder": EMBEDDER.name, "dim": EMBEDDER.dim},
        embedding_function=ChromaEmbedding(EMBEDDER),  # type: ignore[arg-type]
    )


def replica(args: argparse.Namespace) -> None:
    """Process B: open, time queries, then poll for the new chunk until found by both or timed out."""
    shared = {"chroma_url": args.chroma_url, "database_url": args.database_url, "collection": args.collection}
    started = time.perf_counter()
    kb = KnowledgeBase(args.home, embedder=EMBEDDER, bm25_staleness=args.staleness, **shared)
    out: dict[str, Any] = {
        "bm25_reload_s": round(time.perf_counter() - started, 2),
        "chunks_in_bm25": len(kb.index.bm25),
    }
    out["b_hybrid_ms"] = query_ms(kb, args.queries)
    print(json.dumps(out), flush=True)  # A ingests once it reads this line
    found: dict[str, float] = {}
    deadline = None
    slowest = 0.0  # the longest query while A writes: the refresh a query pays, unless within the staleness
    while len(found) < 3:
        began = time.perf_counter()
        hits = kb.search(FRESH_QUERY, top_k=3)
        slowest = max(slowest, time.perf_counter() - began)
        now = time.time()
        fresh = next((h for h in hits if h["id"] == "fresh.md#0"), None)
        for name in fresh["retrievers"] if fresh else []:
            found.setdefault(name, now)
        if fresh and len(fresh["retrievers"]) == 2:
            found.setdefault("both", now)
        if deadline is None and args.done_file.exists():
            deadline = now + args.fresh_timeout
        if deadline is not None and now > deadline:
            break
    print(json.dumps({"found_at": found, "slowest_query_ms": round(1000 * slowest, 1)}), flush=True)


def run(size: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import psycopg

    collection = f"bench{size}"
    with psycopg.connect(args.database_url, autocommit=True) as conn:
        for table in ("files", "meta"):
            conn.execute(f"DROP TABLE IF EXISTS kb_{collection}_{table}")
    shared = {"chroma_url": args.chroma_url, "database_url": args.database_url, "collection": collection}
    docs = documents(Corpus(), size)
    create_collection(tmp / f"a{size}", args.chroma_url, collection, args.ef_search)
    a = KnowledgeBase(tmp / f"a{size}", embedder=EMBEDDER, **shared)
    print(f"loading {size} chunks into the shared KB", file=sys.stderr, flush=True)
    started = time.perf_counter()
    bulk_load(a, docs)
    out: dict[str, Any] = {"chunks": size, "ef_search": args.ef_search or 100}
    out["shared_load_s"] = round(time.perf_counter() - started, 1)

    done_file = tmp / f"done{size}"
    b = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.shared_kb",
            "--replica",
            "--home",
            str(tmp / f"b{size}"),
            "--collection",
            collection,
            "--chroma-url",
            args.chroma_url,
            "--database-url",
            args.database_url,
            "--queries",
            str(args.queries),
            "--done-file",
            str(done_file),
            "--fresh-timeout",
            str(args.fresh_timeout),
            "--staleness",
            str(args.staleness),
        ],
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert b.stdout is not None
    out.update(json.loads(b.stdout.readline()))
    new = tmp / f"new{size}"
    new.mkdir()
    (new / "fresh.md").write_text(FRESH_TEXT, encoding="utf-8")
    a.ingest([new])
    finished = time.time()
    done_file.touch()
    polled = json.loads(b.stdout.readline())
    found = polled["found_at"]
    out["b_staleness_s"] = args.staleness
    out["b_slowest_query_while_a_writes_ms"] = polled["slowest_query_ms"]
    b.wait(timeout=60)
    started = time.perf_counter()  # B restarts on its own data dir: what its local BM25 copy saves
    reopened = KnowledgeBase(tmp / f"b{size}", embedder=EMBEDDER, **shared)
    out["bm25_restart_s"] = round(time.perf_counter() - started, 2)
    out["restart_texts_fetched"] = reopened.index.texts_fetched
    out["ingest_to_b_finds_ms"] = {k: round(1000 * (v - finished), 1) for k, v in sorted(found.items())}
    out["a_vector_finds_new_chunk"] = "fresh.md#0" in [
        p["id"] for p in a.search(FRESH_QUERY, top_k=3, mode="vector")
    ]

    if not args.no_single:
        local_dir = tmp / f"local{size}"
        create_collection(local_dir, "", "knowledge", args.ef_search)
        local = KnowledgeBase(local_dir, embedder=EMBEDDER)  # one embedded process, same corpus
        print(f"loading {size} chunks into one embedded KB", file=sys.stderr, flush=True)
        bulk_load(local, docs)
        out["single_process_hybrid_ms"] = query_ms(local, args.queries)
    a.reset()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", default="10000", help="comma-separated chunk counts (100000: ~20 min here)"
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ef-search", type=int, default=0, help="HNSW ef_search (0: Chroma's default, 100)")
    parser.add_argument(
        "--fresh-timeout", type=float, default=10.0, help="s B keeps polling after A's ingest"
    )
    parser.add_argument("--no-single", action="store_true", help="skip the single embedded process")
    parser.add_argument(
        "--staleness", type=float, default=0.0, help="B's KB_AGENT_BM25_STALENESS (s; 0: reload first)"
    )
    parser.add_argument("--replica", action="store_true", help=argparse.SUPPRESS)
    for name in ("--home", "--collection", "--chroma-url", "--database-url"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    parser.add_argument("--done-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replica:
        replica(args)
        return
    args.database_url = os.environ.get("KB_BENCH_POSTGRES_URL") or os.environ.get("KB_TEST_POSTGRES_URL", "")
    if not args.database_url:
        sys.exit("set KB_BENCH_POSTGRES_URL (or KB_TEST_POSTGRES_URL) to a Postgres database")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        server, args.chroma_url = chroma_server(tmp / "chroma-server")
        try:
            for size in (int(s) for s in args.sizes.split(",")):
                print(json.dumps(run(size, args, tmp)), flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
