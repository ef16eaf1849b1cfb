"""Retrieval evaluation: test sets in, Recall/Precision/MRR/nDCG and latency per variant out.

The metrics are the standard ones and agree with ``ranx`` to 1e-9 (the tests check): a document is
relevant when its graded label is >= 1; nDCG uses the label as gain (Järvelin & Kekäläinen, ranx's
``ndcg``), a log2(rank + 1) discount and the ideal ordering of the qrels; Precision@k divides by k even
when fewer were returned. A run's list order is its ranking (scores are not re-sorted) and a document
listed twice counts once, at its first rank - several chunks of one document are one hit.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stores.text_analysis import tokenize

log = logging.getLogger(__name__)

Run = Mapping[str, Sequence[tuple[str, float]]]


class EvalDataError(ValueError):
    """A test set cannot be read at all (missing file, unreadable JSON): the message says which and where."""


@dataclass(frozen=True)
class EvalQuery:
    """One test question and its graded relevance labels (doc or chunk id -> grade; >= 1 is relevant)."""

    qid: str
    text: str
    relevant: dict[str, int]
    type: str = ""


class QuerySet(list[EvalQuery]):
    """The queries of a test set, with ``problems``: what was dropped while loading it, and why."""

    def __init__(self, queries: Iterable[EvalQuery] = (), problems: Iterable[str] = ()) -> None:
        super().__init__(queries)
        self.problems: list[str] = list(problems)


# --- loading ------------------------------------------------------------------------------------------
def _jsonl(path: Path, problems: list[str]) -> Iterable[dict[str, Any]]:
    if not path.is_file():
        raise EvalDataError(f"{path} not found")
    with path.open(encoding="utf-8-sig") as lines:
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"{path.name}:{n}: not JSON ({exc.msg}); line skipped")
                continue
            if isinstance(item, dict) and "_id" in item:
                yield item
            else:
                problems.append(f"{path.name}:{n}: no '_id'; line skipped")


def load_beir(folder: Path, split: str = "test") -> tuple[dict[str, dict[str, Any]], QuerySet]:
    """A BEIR folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

    Ids are kept as strings (SciFact's look numeric). Judgements naming a document or query that does not
    exist are dropped, queries without a positive judgement are skipped; each drop is listed in the
    returned ``QuerySet.problems`` (one warning is logged), never raised.
    """
    folder = Path(folder)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        available = sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))
        raise EvalDataError(f"{qrels_path} not found; splits here: {', '.join(available) or 'none'}")
    problems: list[str] = []
    corpus = {
        str(d["_id"]): {"title": str(d.get("title") or ""), "text": str(d.get("text") or "")}
        for d in _jsonl(folder / "corpus.jsonl", problems)
    }
    texts = {str(q["_id"]): str(q.get("text") or "") for q in _jsonl(folder / "queries.jsonl", problems)}
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8-sig") as lines:
        for n, line in enumerate(lines, start=1):
            fields = line.split()
            if not fields or (n == 1 and fields[0] == "query-id"):
                continue
            if len(fields) == 4:  # TREC style: qid iteration docid grade
                fields = [fields[0], fields[2], fields[3]]
            try:
                qid, doc, grade = fields[0], fields[1], int(float(fields[2]))
            except (IndexError, ValueError):
                problems.append(f"{qrels_path.name}:{n}: expected 'query-id corpus-id score'; skipped")
                continue
            if doc not in corpus:
                problems.append(f"{qrels_path.name}:{n}: corpus-id {doc!r} not in corpus; judgement dropped")
            elif qid not in texts:
                problems.append(f"{qrels_path.name}:{n}: query-id {qid!r} not in queries; judgement dropped")
            else:
                qrels.setdefault(qid, {})[doc] = grade
    queries: list[EvalQuery] = []
    for qid, text in texts.items():
        labels = qrels.get(qid)
        if labels is None:
            continue  # queries.jsonl holds every split's queries; only this split's are judged
        if not any(g >= 1 for g in labels.values()):
            problems.append(f"query {qid!r} has no relevant document in {split}; skipped")
            continue
        queries.append(EvalQuery(qid, text, labels))
    if problems:
        log.warning("%s: %d problem(s) while loading, first: %s", folder, len(problems), problems[0])
    return corpus, QuerySet(queries, problems)


def load_seed_testset(path: Path) -> QuerySet:
    """A hand-made test set: a JSON list or JSONL of ``{"question", "relevant_chunk_ids", "type"?}``.

    ``relevantChunkIds`` (the camelCase spelling) is accepted too, as is a ``{id: grade}`` mapping; an
    ``id``/``qid`` field names the query, otherwise it is ``q<n>``. Unusable entries are skipped into
    ``problems``; a file that is not JSON at all raises :class:`EvalDataError`.
    """
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise EvalDataError(f"cannot read test set {path}: {exc.strerror or exc}") from exc
    items: list[Any]
    try:
        loaded = json.loads(raw)
        items = loaded if isinstance(loaded, list) else [loaded]
    except json.JSONDecodeError:
        items = []
        for n, line in enumerate(raw.splitlines(), start=1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise EvalDataError(f"{path}:{n}: not JSON ({exc.msg})") from exc
    queries = QuerySet()
    for n, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            queries.problems.append(f"entry {n}: not an object; skipped")
            continue
        question = str(item.get("question") or "").strip()
        ids = item.get("relevant_chunk_ids", item.get("relevantChunkIds"))
        try:
            if isinstance(ids, Mapping):
                relevant = {str(k): int(v) for k, v in ids.items()}
            else:
                relevant = {str(i): 1 for i in ids} if isinstance(ids, list) else {}
        except (TypeError, ValueError):
            relevant = {}
        if not question or not any(g >= 1 for g in relevant.values()):
            queries.problems.append(f"entry {n}: needs 'question' and 'relevant_chunk_ids'; skipped")
            continue
        qid = str(item.get("id") or item.get("qid") or f"q{n}")
        queries.append(EvalQuery(qid, question, relevant, str(item.get("type") or "")))
    return queries


# --- metrics (per query) ------------------------------------------------------------------------------
def _ranked(ranking: Sequence[str], k: int | None) -> list[str]:
    unique = list(dict.fromkeys(ranking))
    return unique if k is None else unique[:k]


def _hits(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> int:
    return sum(1 for doc in _ranked(ranking, k) if relevant.get(doc, 0) >= 1)


def recall_at_k(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Share of the relevant documents found in the top ``k``."""
    wanted = sum(1 for g in relevant.values() if g >= 1)
    return _hits(ranking, relevant, k) / wanted if wanted else 0.0


def precision_at_k(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Share of the top ``k`` slots holding a relevant document (a short list is not rewarded)."""
    return _hits(ranking, relevant, k) / k if k > 0 else 0.0


def mrr(ranking: Sequence[str], relevant: Mapping[str, int], k: int | None = None) -> float:
    """Reciprocal rank of the first relevant document (in the top ``k``, or the whole list)."""
    for rank, doc in enumerate(_ranked(ranking, k), start=1):
        if relevant.get(doc, 0) >= 1:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Graded nDCG@k: gain = label, discount log2(rank + 1), normalised by the qrels' ideal order."""
    dcg = sum(
        relevant.get(doc, 0) / math.log2(rank + 1)
        for rank, doc in enumerate(_ranked(ranking, k), start=1)
        if relevant.get(doc, 0) >= 1
    )
    ideal = sorted((g for g in relevant.values() if g >= 1), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, start=1))
    return dcg / idcg if idcg else 0.0


def per_query(run: Run, queries: Sequence[EvalQuery], k: int) -> dict[str, dict[str, float]]:
    """Every metric for every query (a query missing from ``run`` retrieved nothing): the failure list."""
    out: dict[str, dict[str, float]] = {}
    for q in queries:
        ranking = [doc for doc, _ in run.get(q.qid, ())]
        out[q.qid] = {
            f"ndcg@{k}": ndcg_at_k(ranking, q.relevant, k),
            f"recall@{k}": recall_at_k(ranking, q.relevant, k),
            f"precision@{k}": precision_at_k(ranking, q.relevant, k),
            "mrr": mrr(ranking, q.relevant),
        }
    return out


def evaluate(run: Run, queries: Sequence[EvalQuery], k: int) -> dict[str, float]:
    """Means over ``queries`` of ndcg@k, recall@k, precision@k and MRR (over the full returned list)."""
    scores = per_query(run, queries, k)
    names = [f"ndcg@{k}", f"recall@{k}", f"precision@{k}", "mrr"]
    if not scores:
        return dict.fromkeys(names, 0.0)
    return {name: float(np.mean([s[name] for s in scores.values()])) for name in names}


def relevant_ranks(ranking: Sequence[str], relevant: Mapping[str, int]) -> dict[str, int | None]:
    """Where each relevant document landed (1-based) in the returned list; None when it was missed."""
    where = {doc: rank for rank, doc in enumerate(_ranked(ranking, None), start=1)}
    return {doc: where.get(doc) for doc, grade in relevant.items() if grade >= 1}


def _means(rows: Sequence[Mapping[str, float]], names: Sequence[str]) -> dict[str, float]:
    return {name: float(np.mean([r[name] for r in rows])) if rows else 0.0 for name in names}


def evaluate_modes(
    search_ids: Callable[[str, str, int], list[tuple[str, float]]],
    queries: Sequence[EvalQuery],
    modes: Sequence[str],
    k: int,
    *,
    model_calls: Callable[[], int] | None = None,
    details: bool = False,
) -> dict[str, dict[str, Any]]:
    """Run ``search_ids(mode, query_text, k)`` for every query and mode; metrics side by side.

    Per mode: the :func:`evaluate` means plus ``p50_ms``/``p95_ms`` latency, ``queries``, ``errors``
    (searches that raised; scored as empty) and, given a ``model_calls`` counter, the calls it spent. When
    the test set has ``type``s, ``by_type`` holds the means per type; ``details=True`` adds ``per_query``:
    every query's metrics and the rank of each relevant document (None: missed).
    """
    names = [f"ndcg@{k}", f"recall@{k}", f"precision@{k}", "mrr"]
    table: dict[str, dict[str, Any]] = {}
    for mode in modes:
        run: dict[str, list[tuple[str, float]]] = {}
        latencies: list[float] = []
        errors = 0
        calls_before = model_calls() if model_calls else 0
        for q in queries:
            started = time.perf_counter()
            try:
                run[q.qid] = list(search_ids(mode, q.text, k))
            except Exception as exc:  # one broken query must not sink a 300-query run
                errors += 1
                log.warning("eval %s: query %s failed: %s", mode, q.qid, exc)
            latencies.append((time.perf_counter() - started) * 1000)
        scores = per_query(run, queries, k)
        row: dict[str, Any] = _means(list(scores.values()), names)
        row["p50_ms"] = float(np.percentile(latencies, 50)) if latencies else 0.0
        row["p95_ms"] = float(np.percentile(latencies, 95)) if latencies else 0.0
        row["queries"] = len(queries)
        row["errors"] = errors
        if model_calls:
            row["model_calls"] = model_calls() - calls_before
        types = sorted({q.type for q in queries if q.type})
        if types:
            row["by_type"] = {
                t: {**_means([scores[q.qid] for q in queries if q.type == t], names),
                    "queries": sum(1 for q in queries if q.type == t)}
                for t in types
            }
        if details:
            row["per_query"] = {
                q.qid: {
                    "question": q.text,
                    "type": q.type,
                    **scores[q.qid],
                    "ranks": relevant_ranks([doc for doc, _ in run.get(q.qid, ())], q.relevant),
                }
                for q in queries
            }
        table[mode] = row
    return table


# --- answer-level checks ------------------------------------------------------------------------------
_CITATION = re.compile(r"\[([^\[\]\s]+#\d+)\]")
_SENTENCE = re.compile(r"[^。！？!?\n]+(?:[。！？!?]|\.(?=\s|$)|$)")
SUPPORT_SHARE = 0.5  # a claim is supported when this share of its terms occur in the chunk it cites


def cited_claims(answer: str) -> list[tuple[str, list[str]]]:
    """(sentence, the chunk ids it cites as ``[source#n]``) for every sentence that cites something."""
    claims = []
    for match in _SENTENCE.finditer(answer):
        sentence = match.group(0)
        ids = _CITATION.findall(sentence)
        if ids:
            claims.append((_CITATION.sub("", sentence).strip(), ids))
    return claims


def supports(claim: str, chunk_text: str) -> bool:
    """Whether ``chunk_text`` contains the claim: most of the claim's terms occur in it."""
    terms = set(tokenize(claim))
    if not terms:
        return True
    return len(terms & set(tokenize(chunk_text))) / len(terms) >= SUPPORT_SHARE


def citation_precision(answer: str, chunks: Mapping[str, str]) -> tuple[int, int]:
    """(citations whose chunk contains the claim, citations): a citation to an unknown chunk counts as wrong."""
    good = total = 0
    for claim, ids in cited_claims(answer):
        for cid in ids:
            total += 1
            good += int(cid in chunks and supports(claim, chunks[cid]))
    return good, total
