"""Retrieval metrics agree with ranx; BEIR folders and hand-made test sets load without crashing on bad rows."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from ranx import Qrels, Run
from ranx import evaluate as ranx_evaluate

from stores.knowledge.evaluation import (
    EvalDataError,
    EvalQuery,
    evaluate,
    evaluate_modes,
    load_beir,
    load_seed_testset,
    mrr,
    ndcg_at_k,
    per_query,
    precision_at_k,
    recall_at_k,
)


def _random_case(seed: int) -> tuple[list[EvalQuery], dict[str, list[tuple[str, float]]]]:
    """Graded qrels (with some zero labels) and runs of varying length, some queries missing from the run."""
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(60)]
    queries, run = [], {}
    for q in range(40):
        labels = {d: rng.choice([0, 1, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, 12))}
        labels[rng.choice(docs)] = rng.randint(1, 3)  # at least one relevant
        queries.append(EvalQuery(f"q{q}", f"question {q}", labels))
        if q % 9 == 8:
            continue  # retrieved nothing
        scores = sorted((rng.random() for _ in range(rng.randint(0, 25))), reverse=True)
        run[f"q{q}"] = list(zip(rng.sample(docs, len(scores)), scores, strict=True))
    return queries, run


@pytest.mark.filterwarnings("ignore:unsafe cast from uint64")  # inside ranx's numba kernels
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("k", [1, 5, 10])
def test_metrics_match_ranx(seed: int, k: int) -> None:
    queries, run = _random_case(seed)
    qrels = Qrels({q.qid: dict(q.relevant) for q in queries})
    ranx_run = Run({qid: dict(hits) for qid, hits in run.items() if hits})
    names = [f"ndcg@{k}", f"recall@{k}", f"precision@{k}", "mrr", f"mrr@{k}"]
    expected = ranx_evaluate(qrels, ranx_run, names, make_comparable=True)
    ours = evaluate(run, queries, k)
    for name in names[:4]:
        assert ours[name] == pytest.approx(expected[name], abs=1e-9), name
    mrr_at_k = sum(mrr([d for d, _ in run.get(q.qid, [])], q.relevant, k) for q in queries) / len(queries)
    assert mrr_at_k == pytest.approx(expected[f"mrr@{k}"], abs=1e-9)


def test_seed_example_recall_and_mrr() -> None:
    """Two relevant chunks, top 3 holds one at rank 2 -> Recall@3 = 1/2, MRR = 1/2."""
    relevant = {"travel#hotel": 1, "travel#meal": 1}
    ranking = ["travel#intro", "travel#hotel", "travel#taxi"]
    assert recall_at_k(ranking, relevant, 3) == 0.5 and mrr(ranking, relevant) == 0.5
    assert precision_at_k(ranking, relevant, 3) == pytest.approx(1 / 3)
    assert precision_at_k(ranking, relevant, 10) == pytest.approx(1 / 10)  # a short list is not rewarded


def test_graded_ndcg_uses_the_ideal_order_of_the_qrels() -> None:
    relevant = {"a": 3, "b": 1, "c": 0}
    assert ndcg_at_k(["a", "b"], relevant, 5) == pytest.approx(1.0)
    assert ndcg_at_k(["b", "a"], relevant, 5) == pytest.approx(
        (1 + 3 / 1.5849625007211563) / (3 + 1 / 1.5849625007211563)
    )
    assert ndcg_at_k(["c"], relevant, 5) == 0.0 and ndcg_at_k([], {}, 5) == 0.0


def test_a_document_listed_twice_counts_once_at_its_first_rank() -> None:
    relevant = {"doc1": 1, "doc2": 1}
    ranking = ["doc1", "doc1", "doc2"]  # two chunks of doc1
    assert recall_at_k(ranking, relevant, 2) == 1.0 and precision_at_k(ranking, relevant, 2) == 1.0


def test_per_query_scores_missing_runs_as_empty() -> None:
    queries = [EvalQuery("q1", "x", {"a": 1}), EvalQuery("q2", "y", {"b": 1})]
    scores = per_query({"q1": [("a", 1.0)]}, queries, 5)
    assert scores["q1"]["mrr"] == 1.0 and scores["q2"] == {
        "ndcg@5": 0.0,
        "recall@5": 0.0,
        "precision@5": 0.0,
        "mrr": 0.0,
    }
    assert evaluate({}, [], 5) == {"ndcg@5": 0.0, "recall@5": 0.0, "precision@5": 0.0, "mrr": 0.0}


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture
def beir(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    (folder / "qrels").mkdir(parents=True)
    _write_jsonl(
        folder / "corpus.jsonl",
        [
            {"_id": "10", "title": "Ports", "text": "Chroma listens on 8000."},
            {"_id": "20", "title": "", "text": "BM25 with jieba."},
            {"_id": "30", "text": "Unjudged."},
        ],
    )
    _write_jsonl(
        folder / "queries.jsonl",
        [
            {"_id": "1", "text": "default port?", "metadata": {}},
            {"_id": "2", "text": "chinese bm25?"},
            {"_id": "3", "text": "train-only query"},
            {"_id": "4", "text": "only a zero label"},
        ],
    )
    (folder / "queries.jsonl").open("a").write("{not json\n")
    qrels = "query-id\tcorpus-id\tscore\n1\t10\t1\n2\t20\t2\n2\t99\t1\n4\t30\t0\n7\t10\t1\n"
    (folder / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n3\t30\t1\n", encoding="utf-8")
    return folder


def test_load_beir_keeps_string_ids_and_reports_what_it_dropped(beir: Path) -> None:
    corpus, queries = load_beir(beir)
    assert corpus["10"] == {"title": "Ports", "text": "Chroma listens on 8000."}
    assert corpus["30"] == {"title": "", "text": "Unjudged."}
    assert queries == [EvalQuery("1", "default port?", {"10": 1}), EvalQuery("2", "chinese bm25?", {"20": 2})]
    problems = "\n".join(queries.problems)
    assert len(queries.problems) == 4
    assert "'99' not in corpus" in problems and "'7' not in queries" in problems
    assert "not JSON" in problems and "query '4' has no relevant document" in problems


def test_load_beir_reads_other_splits_and_names_the_ones_present(beir: Path) -> None:
    _, train = load_beir(beir, split="train")
    assert [q.qid for q in train] == ["3"]
    assert len(train.problems) == 1 and train.problems[0].startswith("queries.jsonl:5: not JSON")
    with pytest.raises(EvalDataError, match="splits here: test, train"):
        load_beir(beir, split="dev")


def test_seed_testset_loads_json_lists_and_jsonl(tmp_path: Path) -> None:
    items = [
        {"question": "酒店住宿每晚最多能报销多少？", "relevantChunkIds": ["travel-policy#hotel-limit"]},
        {"question": "餐补？", "relevant_chunk_ids": ["travel#2", "travel#3"], "type": "multi", "id": "meal"},
        {"question": "graded", "relevant_chunk_ids": {"a#0": 2, "a#1": 1}},
        {"question": "no labels"},
        "not an object",
    ]
    listed = tmp_path / "set.json"
    listed.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    lines = tmp_path / "set.jsonl"
    _write_jsonl(lines, items[:4])
    for path in (listed, lines):
        queries = load_seed_testset(path)
        assert queries[0] == EvalQuery("q1", items[0]["question"], {"travel-policy#hotel-limit": 1})
        assert queries[1] == EvalQuery("meal", "餐补？", {"travel#2": 1, "travel#3": 1}, "multi")
        assert queries[2].relevant == {"a#0": 2, "a#1": 1}
        assert len(queries) == 3 and queries.problems[0].startswith("entry 4:")


def test_unreadable_test_sets_raise_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EvalDataError, match="cannot read"):
        load_seed_testset(tmp_path / "missing.json")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "a", "relevant_chunk_ids": ["x"]}\n{oops\n', encoding="utf-8")
    with pytest.raises(EvalDataError, match=r"bad.jsonl:2"):
        load_seed_testset(bad)


def test_evaluate_modes_reports_metrics_latency_errors_and_model_calls() -> None:
    queries = [
        EvalQuery("q1", "port", {"a": 1}),
        EvalQuery("q2", "jieba", {"b": 1}),
        EvalQuery("q3", "boom", {"c": 1}),
    ]
    calls = {"n": 0}

    def search_ids(mode: str, text: str, k: int) -> list[tuple[str, float]]:
        if text == "boom":
            raise RuntimeError("index broken")
        if mode == "rewrite":
            calls["n"] += 1
        hits = {"port": ["a", "x"], "jieba": ["x", "b"]}[text]
        return [(d, 1.0 / (i + 1)) for i, d in enumerate(hits if mode != "bm25" else hits[::-1])][:k]

    table = evaluate_modes(search_ids, queries, ["bm25", "rewrite"], k=2, model_calls=lambda: calls["n"])
    assert set(table) == {"bm25", "rewrite"}
    rewrite = table["rewrite"]
    assert rewrite["mrr"] == pytest.approx((1 + 0.5 + 0) / 3) and rewrite["recall@2"] == pytest.approx(2 / 3)
    assert rewrite["queries"] == 3 and rewrite["errors"] == 1 and rewrite["model_calls"] == 2
    assert table["bm25"]["model_calls"] == 0 and table["bm25"]["mrr"] == pytest.approx((0.5 + 1) / 3)
    assert 0 <= rewrite["p50_ms"] <= rewrite["p95_ms"]


def test_citation_precision_counts_citations_whose_chunk_contains_the_claim() -> None:
    from stores.knowledge.evaluation import citation_precision, cited_claims

    answer = (
        "RAG 先检索相关片段，再交给大模型生成回答 [rag.md#0]。高级工程师年薪 60 万到 90 万元 [rag.md#0]。"
        "Agents call tools in a loop [agents.md#0]. No citation here."
    )
    chunks = {
        "rag.md#0": "RAG（检索增强生成）先从知识库检索相关片段，再把片段交给大模型生成回答。",
        "agents.md#0": "An agent calls tools in a loop until it can answer.",
    }
    assert [ids for _, ids in cited_claims(answer)] == [["rag.md#0"], ["rag.md#0"], ["agents.md#0"]]
    assert citation_precision(answer, chunks) == (2, 3)  # the salary claim is not in the RAG chunk
    assert citation_precision("see [missing.md#3].", chunks) == (0, 1)
    assert citation_precision("no citations at all", chunks) == (0, 0)
