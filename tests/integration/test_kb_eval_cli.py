"""``kb-agent eval`` on a BEIR folder: modes side by side, JSON keys following --k, model calls, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app

DOCS = [
    {"_id": "d1", "title": "Ports", "text": "Chroma listens on port 8000 by default."},
    {"_id": "d2", "title": "BM25", "text": "BM25 with jieba segments Chinese text for keyword search."},
    {"_id": "d3", "title": "RRF", "text": "Reciprocal rank fusion merges the vector and keyword rankings."},
    {"_id": "d4", "title": "混合检索", "text": "混合检索把向量检索和关键词检索的结果合并。"},
]
QUERIES = [
    {"_id": "q1", "text": "which port does Chroma listen on"},
    {"_id": "q2", "text": "jieba segmentation for BM25"},
    {"_id": "q3", "text": "混合检索怎么合并结果"},
]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq3\td4\t1\nq3\tmissing-doc\t1\n"


@pytest.fixture
def beir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    folder = tmp_path / "mini"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in DOCS), encoding="utf-8")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in QUERIES), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text(QRELS, encoding="utf-8")
    return folder


def test_modes_side_by_side_as_json(beir: Path) -> None:
    result = CliRunner().invoke(
        app, ["eval", str(beir), "--modes", "bm25,vector,hybrid", "--k", "3", "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report) == {"bm25", "vector", "hybrid"}
    for row in report.values():
        assert {"ndcg@3", "recall@3", "mrr", "p50_ms", "p95_ms"} <= set(row)
        assert row["model_calls"] == 0  # plain retrieval spends no model calls
    assert report["bm25"]["recall@3"] == pytest.approx(1.0)
    assert "missing-doc" in result.stderr  # the qrels line naming a missing document is reported


def test_reranked_mode_counts_its_model_calls(beir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_RERANKER", "llm")  # the offline model: unparseable → original order kept
    result = CliRunner().invoke(app, ["eval", str(beir), "--modes", "hybrid,hybrid+rerank", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["hybrid+rerank"]["model_calls"] == len(QUERIES) and report["hybrid"]["model_calls"] == 0
    assert report["hybrid+rerank"]["ndcg@10"] == pytest.approx(report["hybrid"]["ndcg@10"])


def test_bad_modes_are_clear(beir: Path) -> None:
    unknown = CliRunner().invoke(app, ["eval", str(beir), "--modes", "bm25,fuzzy"])
    assert unknown.exit_code == 2 and "unknown mode fuzzy" in unknown.output
    no_reranker = CliRunner().invoke(app, ["eval", str(beir), "--modes", "hybrid+rerank"])
    assert no_reranker.exit_code == 2 and "KB_AGENT_RERANKER" in no_reranker.output


def test_eval_against_the_knowledge_base_scores_only_what_the_caller_may_see(
    kb_home: Path, tmp_path: Path
) -> None:
    testset = tmp_path / "set.json"
    testset.write_text(
        json.dumps(
            [
                {"question": "RAG 是什么", "relevant_chunk_ids": ["rag.md#0"]},
                {"question": "高级工程师的年薪范围", "relevant_chunk_ids": ["salary.md#0"]},
                {"question": "RAG 和薪资", "relevant_chunk_ids": ["rag.md#0", "salary.md#0"]},
            ]
        ),
        encoding="utf-8",
    )
    public = CliRunner().invoke(app, ["eval", str(testset), "--modes", "bm25", "--json"])
    assert public.exit_code == 0, public.output
    assert "no relevant chunk your groups may see; skipped" in public.output
    assert "1 label(s) outside your groups dropped" in public.output
    scored = json.loads(public.stdout[public.stdout.index("{") :])
    assert scored["bm25"]["queries"] == 2  # the hr-only question is not evaluated for a public caller
    hr = CliRunner().invoke(app, ["eval", str(testset), "--modes", "bm25", "--json", "--groups", "hr"])
    assert hr.exit_code == 0, hr.output
    assert json.loads(hr.stdout[hr.stdout.index("{") :])["bm25"]["queries"] == 3


def _testset(path: Path, items: list[dict]) -> Path:
    path.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    return path


def test_per_query_lists_ranks_hits_and_misses_worst_first_and_types_break_down(
    kb_home: Path, tmp_path: Path
) -> None:
    testset = _testset(
        tmp_path / "set.json",
        [
            {"question": "RAG 检索增强生成", "relevant_chunk_ids": ["rag.md#0"], "type": "definition"},
            {
                "question": "completely unrelated zebra",
                "relevant_chunk_ids": ["agents.md#0"],
                "type": "other",
            },
        ],
    )
    result = CliRunner().invoke(app, ["eval", str(testset), "--modes", "bm25", "--json", "--per-query"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout[result.stdout.index("{") :])["bm25"]
    assert set(row["by_type"]) == {"definition", "other"} and row["by_type"]["other"]["queries"] == 1
    found, missed = row["per_query"]["q1"], row["per_query"]["q2"]
    assert found["ranks"] == {"rag.md#0": 1} and missed["ranks"] == {"agents.md#0": None}
    text = CliRunner().invoke(app, ["eval", str(testset), "--modes", "bm25", "--per-query"])
    assert text.exit_code == 0, text.output
    assert "per query: bm25" in text.stdout and "rag.md#0@1" in text.stdout
    assert text.stdout.index("zebra") < text.stdout.index("RAG 检索增强生成")  # the failure comes first


def test_labels_naming_files_score_at_file_level_with_a_warning(kb_home: Path, tmp_path: Path) -> None:
    testset = _testset(
        tmp_path / "files.json", [{"question": "RAG 检索增强生成", "relevant_chunk_ids": ["rag.md"]}]
    )
    result = CliRunner().invoke(app, ["eval", str(testset), "--modes", "bm25", "--json"])
    assert result.exit_code == 0, result.output
    assert "scoring at file level" in result.output
    assert json.loads(result.stdout[result.stdout.index("{") :])["bm25"]["mrr"] == 1.0


def test_decompose_mode_is_skipped_offline_and_counts_its_calls_with_an_endpoint(
    kb_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fixtures.openai_server import OpenAIServer, ScriptedReply

    testset = _testset(
        tmp_path / "set.json", [{"question": "RAG 和智能体", "relevant_chunk_ids": ["rag.md#0"]}]
    )
    offline = CliRunner().invoke(app, ["eval", str(testset), "--modes", "bm25,hybrid+decompose", "--json"])
    assert offline.exit_code == 0, offline.output
    assert "hybrid+decompose skipped" in offline.output
    assert "hybrid+decompose" not in json.loads(offline.stdout[offline.stdout.index("{") :])
    reply = ScriptedReply(content=json.dumps({"queries": ["RAG 检索增强生成", "智能体"]}, ensure_ascii=False))
    with OpenAIServer([reply]) as server:
        monkeypatch.setenv("KB_AGENT_BASE_URL", server.base_url)
        monkeypatch.setenv("KB_AGENT_API_KEY", server.api_key)
        monkeypatch.setenv("KB_AGENT_MODEL", server.model)
        online = CliRunner().invoke(app, ["eval", str(testset), "--modes", "hybrid+decompose", "--json"])
    assert online.exit_code == 0, online.output
    row = json.loads(online.stdout[online.stdout.index("{") :])["hybrid+decompose"]
    assert row["model_calls"] == 1 and row["mrr"] == 1.0


def test_rewrite_mode_searches_the_models_query_beside_the_question(
    kb_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fixtures.openai_server import OpenAIServer, ScriptedReply

    testset = _testset(
        tmp_path / "set.json", [{"question": "那个先检索再生成的方法", "relevant_chunk_ids": ["rag.md#0"]}]
    )
    offline = CliRunner().invoke(app, ["eval", str(testset), "--modes", "bm25,hybrid+rewrite", "--json"])
    assert offline.exit_code == 0 and "hybrid+rewrite skipped" in offline.output
    reply = ScriptedReply(content=json.dumps({"query": "RAG 检索增强生成"}, ensure_ascii=False))
    with OpenAIServer([reply]) as server:
        monkeypatch.setenv("KB_AGENT_BASE_URL", server.base_url)
        monkeypatch.setenv("KB_AGENT_API_KEY", server.api_key)
        monkeypatch.setenv("KB_AGENT_MODEL", server.model)
        online = CliRunner().invoke(app, ["eval", str(testset), "--modes", "hybrid+rewrite", "--json"])
        asked = server.requests
    assert online.exit_code == 0, online.output
    row = json.loads(online.stdout[online.stdout.index("{") :])["hybrid+rewrite"]
    assert row["model_calls"] == 1 and row["mrr"] == 1.0
    assert "那个先检索再生成的方法" in json.dumps(asked[0], ensure_ascii=False)


def test_translate_mode_searches_the_question_and_its_translation_into_the_corpus_language(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fixtures.openai_server import OpenAIServer, ScriptedReply

    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    folder = tmp_path / "zh2en"
    (folder / "qrels").mkdir(parents=True)
    english = [d for d in DOCS if d["_id"] != "d4"]  # English paragraphs only
    asked = [
        {"_id": "z1", "text": "Chroma 默认在哪个端口上监听？"},
        {"_id": "z2", "text": "倒数排名融合把什么合并在一起？"},
    ]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in english), encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        "\n".join(json.dumps(q, ensure_ascii=False) for q in asked), encoding="utf-8"
    )
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nz1\td1\t1\nz2\td3\t1\n")
    offline = CliRunner().invoke(app, ["eval", str(folder), "--modes", "hybrid,hybrid+translate", "--json"])
    assert offline.exit_code == 0 and "hybrid+translate skipped" in offline.output
    translations = {
        "Chroma 默认在哪个端口上监听？": "Which port does Chroma listen on by default?",
        "倒数排名融合把什么合并在一起？": "What does reciprocal rank fusion merge?",
    }

    def translate(body: dict) -> ScriptedReply:
        question = body["messages"][-1]["content"].split("：", 1)[1]
        return ScriptedReply(content=json.dumps({"translations": {"en": translations[question]}}))

    with OpenAIServer(translate) as server:
        monkeypatch.setenv("KB_AGENT_BASE_URL", server.base_url)
        monkeypatch.setenv("KB_AGENT_API_KEY", server.api_key)
        monkeypatch.setenv("KB_AGENT_MODEL", server.model)
        online = CliRunner().invoke(
            app, ["eval", str(folder), "--modes", "hybrid,hybrid+translate", "--json"]
        )
    assert online.exit_code == 0, online.output
    report = json.loads(online.stdout[online.stdout.index("{") :])
    assert report["hybrid+translate"]["model_calls"] == len(asked) and report["hybrid"]["model_calls"] == 0
    assert report["hybrid+translate"]["mrr"] == 1.0
    assert report["hybrid+translate"]["recall@10"] >= report["hybrid"]["recall@10"]


def test_answers_checks_citations_and_skips_the_judge_offline(kb_home: Path, tmp_path: Path) -> None:
    testset = _testset(
        tmp_path / "set.json", [{"question": "什么是 RAG？", "relevant_chunk_ids": ["rag.md#0"]}]
    )
    result = CliRunner().invoke(app, ["eval", str(testset), "--modes", "bm25", "--answers", "--json"])
    assert result.exit_code == 0, result.output
    checks = json.loads(result.stdout[result.stdout.index("{") :])["answers"]
    assert checks["questions"] == 1 and checks["citations"] >= 1
    assert checks["citation_precision"] == 1.0  # the offline model cites what it quotes
    assert checks["faithfulness"] is None and "offline" in checks["faithfulness_note"]
    beir = CliRunner().invoke(app, ["eval", str(tmp_path), "--answers"])
    assert beir.exit_code == 2


def test_answers_are_judged_by_a_configured_endpoint(
    kb_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fixtures.openai_server import OpenAIServer, ScriptedReply

    testset = _testset(
        tmp_path / "set.json", [{"question": "什么是 RAG？", "relevant_chunk_ids": ["rag.md#0"]}]
    )
    answer = ScriptedReply(content="RAG 先从知识库检索相关片段，再交给大模型生成回答 [rag.md#0]。")
    # the judge is under test, not retrieval: no translation call for the English half of the corpus
    monkeypatch.setenv("KB_AGENT_CROSS_LANGUAGE", "false")
    with OpenAIServer([answer, ScriptedReply(content='{"score": 8}')]) as server:
        monkeypatch.setenv("KB_AGENT_BASE_URL", server.base_url)
        monkeypatch.setenv("KB_AGENT_API_KEY", server.api_key)
        monkeypatch.setenv("KB_AGENT_MODEL", server.model)
        result = CliRunner().invoke(app, ["eval", str(testset), "--modes", "bm25", "--answers", "--json"])
        judged = server.requests[-1]["messages"][0]["content"]
    assert result.exit_code == 0, result.output
    checks = json.loads(result.stdout[result.stdout.index("{") :])["answers"]
    assert checks["faithfulness"] == 0.8 and checks["citation_precision"] == 1.0
    assert "[rag.md#0] RAG（检索增强生成）" in judged  # the judge saw the cited chunk and the answer


def test_building_the_eval_index_shows_the_bar_on_stderr_while_json_goes_to_stdout(
    beir: Path, tmp_path: Path
) -> None:
    from tests.fixtures.tty import cli_with_terminal_stderr

    env = {"KB_AGENT_HOME": str(tmp_path / "home"), "KB_AGENT_EMBEDDER": "hashing"}
    code, stdout, terminal = cli_with_terminal_stderr("eval", str(beir), "--modes", "bm25", "--json", env=env)
    assert code == 0, terminal
    assert set(json.loads(stdout)) == {"bm25"}
    assert "indexing the eval corpus" in terminal and "chunks/s" in terminal


def test_a_set_mixing_chunk_and_file_labels_says_so_and_names_the_labels_it_cannot_find(
    kb_home: Path, tmp_path: Path
) -> None:
    testset = _testset(
        tmp_path / "mixed.json",
        [
            {"question": "RAG 检索增强生成", "relevant_chunk_ids": ["rag.md#0"]},
            {"question": "什么是 agent", "relevant_chunk_ids": ["agents.md"]},
            {"question": "拼错的标签", "relevant_chunk_ids": ["rag.md#99"]},
        ],
    )
    result = CliRunner().invoke(app, ["eval", str(testset), "--modes", "bm25", "--json"])
    assert result.exit_code == 0, result.output
    assert "mix chunk ids (source#n) and file names" in result.output
    assert "1 label(s) not in the knowledge base (agents.md)" in result.output
    assert "(rag.md#99)" in result.output
    assert "groups" not in result.output  # nothing here is about permissions
    assert json.loads(result.stdout[result.stdout.index("{") :])["bm25"]["queries"] == 1


def test_the_help_says_what_a_test_set_looks_like() -> None:
    result = CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert '"relevant_chunk_ids"' in result.stdout and "source#n" in result.stdout and "BEIR" in result.stdout
    assert "file level" in result.stdout  # and what a file-labelled set means
