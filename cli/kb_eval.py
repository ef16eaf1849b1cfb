"""``kb-agent eval``: retrieval metrics of the knowledge base, or of a BEIR dataset indexed on the side.

Split from ``cli.kb`` (the everyday commands), whose helpers it shares.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from cli.kb import (
    DECOMPOSED,
    PLANNED,
    RERANKED,
    TRANSLATED,
    _context,
    _fail,
    _modes,
    err,
    open_knowledge_base,
    out,
)
from cli.progress import ingest_bar
from cli.terminal import json_text, shown

if TYPE_CHECKING:
    from nodes.settings import Settings

EVAL_CHUNK_TOKENS = 480
_CHUNK_LABEL = re.compile(r"#\d+$")  # "notes/a.md#3"; a label without it names a source file


def _beir_index(folder: Path, ctx: Settings) -> tuple[Any, list[Any], list[str], dict[str, str]]:
    """Index a BEIR corpus in a cache of its own (never the user's knowledge base): one file per document."""
    from stores.embeddings import embedder_for
    from stores.knowledge.evaluation import load_beir
    from stores.knowledge.knowledge_base import KnowledgeBase

    corpus, queries = load_beir(folder)
    problems = list(getattr(queries, "problems", []))
    digest = hashlib.sha256(str(folder.resolve()).encode() + str(len(corpus)).encode()).hexdigest()[:12]
    cache = Path(ctx.data_dir) / "eval" / f"{folder.name}-{digest}-{ctx.embedder}"
    docs = cache / "docs"
    if not docs.exists():
        tmp = Path(tempfile.mkdtemp(dir=cache.parent if cache.parent.exists() else None))
        for doc_id, doc in corpus.items():
            name = hashlib.sha1(doc_id.encode()).hexdigest()[:16] + ".txt"
            text = "\n\n".join(x for x in (doc.get("title", ""), doc.get("text", "")) if x)
            (tmp / name).write_text(text or doc_id, encoding="utf-8")
            (tmp / (name + ".id")).write_text(doc_id, encoding="utf-8")
        cache.mkdir(parents=True, exist_ok=True)
        tmp.rename(docs)
    embedder = embedder_for(ctx)
    # Whole documents where they fit the e5 window (512 tokens), as BEIR evaluations embed them.
    kb = KnowledgeBase(
        cache / "kb",
        embedder=embedder,
        candidates=ctx.candidates,
        rrf_k=ctx.rrf_k,
        fusion=ctx.fusion,
        vector_weight=ctx.vector_weight,
        bm25_weight=ctx.bm25_weight,
        chunk_tokens=EVAL_CHUNK_TOKENS,
    )
    with ingest_bar(err, "indexing the eval corpus") as report:
        kb.ingest([docs], progress=report)
    id_map = {p.name.removesuffix(".id"): p.read_text(encoding="utf-8") for p in docs.glob("*.id")}
    return kb, queries, problems, id_map


def visible_labels(
    kb: Any, queries: Any, groups: Sequence[str], *, by_file: bool = False
) -> tuple[Any, list[str]]:
    """The test set with labels outside ``groups`` dropped, and a warning per query that lost any.

    Labels are chunk ids, or with ``by_file`` source files (checked against the manifest's groups).
    """
    from stores.knowledge.evaluation import EvalQuery, QuerySet

    labelled = sorted({cid for q in queries for cid in q.relevant})
    if by_file:
        seen = {*groups, "public"}
        records = kb.manifest.records()
        existing = set(records)
        visible = {src for src, r in records.items() if seen & set(r.groups or ["public"])}
    else:
        existing = {p["id"] for p in kb.get(labelled)} if labelled else set()
        visible = {p["id"] for p in kb.get(labelled, groups=groups)} if labelled else set()
    kept, problems = QuerySet(), []
    for q in queries:
        relevant = {cid: g for cid, g in q.relevant.items() if cid in visible}
        unknown = sorted(cid for cid in q.relevant if cid not in existing)
        hidden = len(q.relevant) - len(relevant) - len(unknown)
        if unknown:  # a typo, a stale id, or a file name in a set labelled by chunks: not a permission
            kind = "source files" if by_file else "chunk ids (source#n, as `kb-agent search` shows them)"
            problems.append(
                f"query {q.qid!r}: {len(unknown)} label(s) not in the knowledge base ({', '.join(unknown[:3])}); "
                f"labels here are {kind}"
            )
        if hidden:
            problems.append(f"query {q.qid!r}: {hidden} label(s) outside your groups dropped")
        if not any(g >= 1 for g in relevant.values()):
            why = (
                "no relevant chunk your groups may see"
                if hidden and not unknown
                else "no relevant label left"
            )
            problems.append(f"query {q.qid!r}: {why}; skipped")
            continue
        kept.append(EvalQuery(q.qid, q.text, relevant, q.type))
    return kept, problems


def evaluate(
    dataset: Path = typer.Argument(
        ..., help="A BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) or a JSON test set."
    ),
    modes: str = typer.Option(
        "bm25,vector,hybrid",
        "--modes",
        help="Comma-separated: bm25, vector, hybrid, and with a model hybrid+rewrite, hybrid+decompose, "
        "hybrid+translate (the question and its translation into the knowledge base's other language, "
        "fused), hybrid+rerank.",
    ),
    k: int = typer.Option(10, "--k", min=1, max=1000),
    groups: str | None = typer.Option(
        None, "--groups", "-g", help="Evaluate as a caller with these groups (default KB_AGENT_GROUPS)."
    ),
    per_query: bool = typer.Option(
        False, "--per-query", help="Also list every question: its ranks, hits and misses, failures first."
    ),
    answers: bool = typer.Option(
        False,
        "--answers",
        help="Also answer each question and check citations (and faithfulness, with a model).",
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Recall@K, Precision@K, MRR, nDCG@K and latency per retrieval mode, side by side.

    A JSON test set (a list, or JSON Lines) is searched against your knowledge base; each entry is
    {"question": "年假怎么申请？", "relevant_chunk_ids": ["hr/leave.md#0"]}, with optional "id" and "type";
    labels are chunk ids as kb-agent search shows them (source#n), or source files for the whole set
    (scored at file level, with a warning); a mapping {"hr/leave.md#0": 2} gives graded labels.
    A BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) is indexed into a cache of its own.

    Against the knowledge base, only what the caller's groups may see is searched and scored: labels that
    point at chunks outside them are dropped, with a warning.
    """
    from stores.knowledge.chunking import source_of_chunk
    from stores.knowledge.evaluation import evaluate_modes, load_seed_testset

    chosen = _modes(modes, eval_modes=True)
    if not dataset.exists():
        _fail(f"no such dataset: {dataset}", 2)
    ctx = _context(None, groups)
    if dataset.is_dir():
        if answers:
            _fail("--answers needs a JSON test set against your knowledge base, not a BEIR folder", 2)
        kb, queries, problems, id_map = _beir_index(dataset, ctx)

        def to_doc(chunk_id: str) -> str:
            source = Path(source_of_chunk(chunk_id)).name
            return id_map.get(source, source)
    else:
        kb = open_knowledge_base(ctx)
        if kb is None:
            _fail("the knowledge base is empty: ingest documents before evaluating a test set against it")
        queries = load_seed_testset(dataset)
        problems = list(getattr(queries, "problems", []))
        kinds = {bool(_CHUNK_LABEL.search(cid)) for q in queries for cid in q.relevant}
        by_file = kinds == {False}
        if by_file:
            problems.append("the labels name source files, not chunks: scoring at file level")
        elif kinds == {True, False}:
            problems.append(
                "the labels mix chunk ids (source#n) and file names: scoring chunks, so a file name matches "
                "nothing; label one kind throughout"
            )
        queries, hidden = visible_labels(kb, queries, ctx.group_list, by_file=by_file)
        problems += hidden

        def to_doc(chunk_id: str) -> str:
            return chunk_id.rsplit("#", 1)[0] if by_file else chunk_id

    # A BEIR index is the eval's own (every document public); the user's is seen as the caller sees it.
    every_group = list(kb.stats().get("groups") or ["public"]) if dataset.is_dir() else list(ctx.group_list)
    calls = [0]  # model (or /rerank endpoint) calls made by the modes that use one
    reranker = _eval_reranker(ctx, calls) if RERANKED in chosen else None
    planned = [m for m in chosen if m in PLANNED]
    planner = _eval_planner(ctx, calls, kb.languages(every_group)) if planned else None
    if planned and planner is None:
        chosen = [m for m in chosen if m not in PLANNED]
        problems.append(
            f"{', '.join(planned)} skipped: the offline model does not rewrite, decompose or translate "
            "questions (configure an endpoint)"
        )
        if not chosen:
            _fail(f"nothing to evaluate: {', '.join(planned)} needs a model endpoint", 2)

    def search_ids(mode: str, text: str, limit: int) -> list[tuple[str, float]]:
        best: dict[str, float] = {}
        if mode == RERANKED:
            assert reranker is not None
            pool = kb.search(text, groups=every_group, top_k=max(limit, ctx.candidates), mode="hybrid")
            from models.rerank import cut_below

            reranked = cut_below(reranker.rerank(text, pool, limit * 3), ctx.rerank_min_score)
            hits = [(p["id"], float(p.get("score", 0.0))) for p in reranked]
            ranked = [(cid, float(len(hits) - i)) for i, (cid, _) in enumerate(hits)]  # the reranker's order
        elif mode in PLANNED:
            assert planner is not None
            search = lambda query: kb.search(query, groups=every_group, top_k=limit * 3)  # noqa: E731
            ranked = planner(text, search, mode=mode)
        else:
            ranked = kb.search_ids(text, groups=every_group, k=limit * 3, mode=mode)
        for chunk_id, score in ranked:
            doc = to_doc(chunk_id)
            best[doc] = max(best.get(doc, float("-inf")), score)
        return sorted(best.items(), key=lambda item: -item[1])[:limit]

    results = evaluate_modes(search_ids, queries, chosen, k, model_calls=lambda: calls[0], details=per_query)
    checks = None
    if answers:
        from cli.eval_answers import answer_checks

        checks = answer_checks(ctx, kb, list(queries))
    for problem in problems:
        err.print(f"[yellow]warning:[/yellow] {shown(str(problem))}")
    if as_json:
        typer.echo(json_text(results if checks is None else {**results, "answers": checks}))
        return
    table = Table("metric", *chosen)
    metrics = [
        key for key, v in next(iter(results.values())).items() if key != "queries" and not isinstance(v, dict)
    ]
    for metric in metrics:
        table.add_row(metric, *(_cell(results[m][metric]) for m in chosen))
    out.print(table)
    _print_breakdowns(results, chosen, k)
    if checks is not None:
        faithful = checks["faithfulness"]
        judged = f"{faithful:.3f}" if faithful is not None else str(checks["faithfulness_note"])
        out.print(
            f"answers: {checks['questions']} questions, {checks['answers_with_citations']:.0%} with citations, "
            f"citation precision {checks['citation_precision']:.3f} over {checks['citations']} citations, "
            f"faithfulness {judged}"
        )


def _print_breakdowns(results: dict[str, dict[str, Any]], modes: list[str], k: int) -> None:
    """Means per test-set ``type``, and with ``--per-query`` every question, worst first."""
    ndcg = f"ndcg@{k}"
    first = results[modes[0]]
    if "by_type" in first:
        table = Table("type", "queries", *(f"{m} {ndcg}" for m in modes))
        for kind, row in first["by_type"].items():
            table.add_row(
                kind, str(row["queries"]), *(_cell(results[m]["by_type"][kind][ndcg]) for m in modes)
            )
        out.print(table)
    for mode in modes if "per_query" in first else ():
        table = Table("query", "type", ndcg, "hits (rank)", "misses", title=f"per query: {mode}")
        rows = sorted(results[mode]["per_query"].items(), key=lambda item: item[1][ndcg])
        for _qid, row in rows:
            hits = ", ".join(f"{doc}@{rank}" for doc, rank in row["ranks"].items() if rank is not None)
            misses = ", ".join(doc for doc, rank in row["ranks"].items() if rank is None)
            question = row["question"] if len(row["question"]) <= 60 else row["question"][:59] + "…"
            table.add_row(shown(question), shown(row["type"]), _cell(row[ndcg]), shown(hits), shown(misses))
        out.print(table)


def _cell(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _eval_planner(ctx: Settings, calls: list[int], languages: frozenset[str]) -> Any:
    """Planned search, counting model calls; None offline: ``hybrid+rewrite`` searches the model's search
    query for the question, ``hybrid+decompose`` its sub-queries fused by RRF, ``hybrid+translate`` the
    question and its translation into each of the knowledge base's ``languages`` it is not written in,
    fused by RRF (a question already in the only language held costs no call)."""
    from models import follows_instructions, get_chat_model
    from nodes.query_planning import plan_queries, retrieve_planned

    model = get_chat_model(ctx)
    if not follows_instructions(model):
        return None

    def ranked(text: str, search: Any, *, mode: str) -> list[tuple[str, float]]:
        decompose, translate = mode == DECOMPOSED, mode == TRANSLATED
        options = {
            "rewrite_alone": not (decompose or translate),
            "decompose": decompose,
            "languages": languages if translate else (),
            "timeout": ctx.model_timeout,
        }
        plan = plan_queries(text, [], model, rewrite=not (decompose or translate), **options)
        calls[0] += plan.model_calls
        fused = retrieve_planned(plan, search, rrf_k=ctx.rrf_k, top_k=ctx.candidates)
        return [(p["id"], float(p.get("score", 0.0))) for p in fused]

    return ranked


def _eval_reranker(ctx: Settings, calls: list[int]) -> Any:
    """The configured reranker, counting its calls; ``hybrid+rerank`` needs KB_AGENT_RERANKER set."""
    from models import get_chat_model
    from models.rerank import RerankerSettingError, reranker_from_setting

    missing = "mode hybrid+rerank needs a reranker: set KB_AGENT_RERANKER=llm or the URL of a /rerank endpoint"
    if not ctx.reranker:
        _fail(missing, 2)
    try:
        configured = reranker_from_setting(ctx.reranker, get_chat_model(ctx), api_key=ctx.api_key)
    except RerankerSettingError as exc:
        _fail(str(exc), 2)
    if configured is None:  # set, but to "none" or "off"
        _fail(missing, 2)
    inner = configured  # a Reranker, also inside the class below

    class Counting:
        def rerank(self, query: str, passages: Any, top_k: int) -> Any:
            calls[0] += 1
            return inner.rerank(query, passages, top_k)

    return Counting()
