"""Knowledge-base scenarios through the whole graph with the offline model and a real KB, on both
storage backends (embedded, and Postgres + a Chroma server)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from typer.testing import CliRunner

from cli.app import app
from graph import build_graph
from graph.services import feedback_store
from nodes.settings import Settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rag"
pytestmark = pytest.mark.usefixtures("store_backend")


def _ask(graph, config: dict, question: str, **ctx: str) -> dict:
    return graph.invoke({"messages": [HumanMessage(question)]}, config, context=Settings(**ctx))


def _tools_called(messages: list) -> list[str]:
    start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    return [c["name"] for m in messages[start:] if isinstance(m, AIMessage) for c in m.tool_calls]


def test_how_many_documents_calls_knowledge_stats(kb_home: Path) -> None:
    result = _ask(build_graph(), {}, "知识库里有多少文档？")
    assert _tools_called(result["messages"]) == ["knowledge_stats"]
    assert "2 篇文档" in result["messages"][-1].content  # salary.md is hr's: not counted for this caller
    hr = _ask(build_graph(), {}, "知识库里有多少文档？", groups="hr")
    assert "3 篇文档" in hr["messages"][-1].content


def test_search_then_summarise_then_feedback(kb_home: Path) -> None:
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "rag", "user_id": "alice"}}
    result = _ask(graph, config, "搜一下知识库里有没有 RAG 相关文档，有的话整理成摘要")
    assert _tools_called(result["messages"]) == ["search_knowledge", "generate_summary"]
    search = next(
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "search_knowledge"
    )
    assert json.loads(search.content)["passages"][0]["id"].startswith("rag.md#")
    summary = result["messages"][-1].content
    assert "[rag.md#" in summary and "RAG" in summary
    answer = summary

    result = _ask(graph, config, "刚才那个回答不太准确")
    assert _tools_called(result["messages"]) == ["submit_feedback"]
    row = feedback_store(Settings()).list(user_id="alice")[0]
    assert (row.rating, row.thread_id, row.answer) == ("bad", "rag", answer)
    assert row.cited and all(f"[{cid}]" in answer for cid in row.cited)  # as the agent recorded them


def test_bad_feedback_down_weights_the_chunks_it_cited_and_is_reported(kb_home: Path) -> None:
    question = "混合检索用什么方法合并两路结果？"
    before = _ask(build_graph(), {}, question)["passages"]
    cited = before[0]["id"]
    store = feedback_store(Settings())
    for n in range(2):  # one user's two bad ratings citing the chunk: not enough (KB_AGENT_FEEDBACK_MIN_USERS=2)
        store.add(user_id="u", thread_id=f"t{n}", rating="bad", question=question, answer="答", reason="旧了", cited=[cited])
    alone = _ask(build_graph(), {}, question)["passages"]
    assert alone[0]["id"] == cited and alone[0]["score"] == pytest.approx(before[0]["score"])
    store.add(user_id="v", thread_id="t9", rating="bad", question=question, answer="答", reason="旧了", cited=[cited])
    after = _ask(build_graph(), {}, question)["passages"]
    again = next(p for p in after if p["id"] == cited)
    assert again["score"] == pytest.approx(before[0]["score"] * 0.8)
    assert again["metadata"]["feedback_penalty"] == 0.8
    # The search_knowledge tool searches as the retrieve node does: the same order, the same scores.
    called = _ask(build_graph(), {}, "call tool search_knowledge with " + json.dumps({"query": question}))
    tool = next(m for m in called["messages"] if isinstance(m, ToolMessage) and m.name == "search_knowledge")
    found = [(p["id"], p["score"]) for p in json.loads(tool.content)["passages"]]
    assert found and found == [(p["id"], round(p["score"], 4)) for p in after][: len(found)]
    off = _ask(build_graph(), {}, question, feedback_penalty=1.0)["passages"]
    assert off[0]["id"] == cited and off[0]["score"] == pytest.approx(before[0]["score"])
    report = CliRunner().invoke(app, ["feedback", "report", "--json"])
    assert report.exit_code == 0, report.output
    data = json.loads(report.stdout)
    assert [r["passages"] for r in data["bad"]] == [[cited]] * 3 and data["down_weighted"] == {cited: 3}
    text = CliRunner().invoke(app, ["feedback", "report"])
    assert "旧了" in text.stdout and "down-weighted in retrieval" in text.stdout


def test_knowledge_question_is_answered_with_a_citation(kb_home: Path) -> None:
    result = _ask(build_graph(), {}, "混合检索用什么方法合并两路结果？")
    assert result["passages"] and result["passages"][0]["id"].startswith("rag.md#")
    assert "RRF" in result["messages"][-1].content and "[rag.md#" in result["messages"][-1].content


def test_small_talk_retrieves_nothing(kb_home: Path) -> None:
    assert _ask(build_graph(), {}, "你好")["passages"] == []


def test_a_user_outside_the_groups_never_sees_the_document(kb_home: Path) -> None:
    question = "高级工程师的年薪范围是多少？"
    outsider = _ask(build_graph(), {}, question, user_id="bob")
    assert all(not p["id"].startswith("salary.md") for p in outsider["passages"])
    assert "60 万" not in outsider["messages"][-1].content
    insider = _ask(build_graph(), {}, question, user_id="carol", groups="hr")
    assert insider["passages"][0]["id"].startswith("salary.md#")
    assert "60 万到 90 万" in insider["messages"][-1].content

    tool_run = _ask(build_graph(), {}, "搜一下知识库里有没有薪资相关文档，有的话整理成摘要", user_id="bob")
    contents = " ".join(m.content for m in tool_run["messages"] if isinstance(m, ToolMessage | AIMessage))
    assert "salary.md" not in contents and "60 万" not in contents

    runner = CliRunner()
    hidden = runner.invoke(app, ["search", "年薪范围", "--json", "--user", "bob"])
    assert all(not hit["id"].startswith("salary.md") for hit in json.loads(hidden.stdout))
    shown = runner.invoke(app, ["search", "年薪范围", "--json", "--groups", "hr"])
    assert json.loads(shown.stdout)[0]["id"].startswith("salary.md#")


def test_cli_ingest_stats_and_bad_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    docs = tmp_path / "docs"
    shutil.copytree(FIXTURES, docs)
    (docs / "empty.txt").write_text("")
    (docs / "binary.txt").write_bytes(b"\x00\x01\x02" * 100)
    runner = CliRunner()
    first = json.loads(runner.invoke(app, ["ingest", str(docs), "--json"]).stdout)
    assert len(first["added"]) == 3 and {s["source"].rsplit("/", 1)[-1] for s in first["skipped"]} == {
        "empty.txt",
        "binary.txt",
    }
    again = json.loads(runner.invoke(app, ["ingest", str(docs), "--json"]).stdout)
    assert again["chunks_written"] == 0 and len(again["unchanged"]) == 3
    (docs / "agents.md").unlink()
    pruned = json.loads(runner.invoke(app, ["ingest", str(docs), "--prune", "--json"]).stdout)
    assert pruned["removed"] == ["agents.md"]
    stats = json.loads(runner.invoke(app, ["stats", "--json"]).stdout)
    assert stats["documents"] == 2 and stats["embedder"] == "hashing"
    assert runner.invoke(app, ["search", "x", "--mode", "fuzzy"]).exit_code == 2
    assert runner.invoke(app, ["search", "  "]).exit_code == 2
    assert runner.invoke(app, ["ingest", str(tmp_path / "missing")]).exit_code == 2


def test_a_document_is_its_file_whichever_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    docs = tmp_path / "docs"
    (docs / "part").mkdir(parents=True)
    (docs / "top.md").write_text("# Top\n\nThe top document.\n")
    (docs / "part" / "x.md").write_text("# X\n\nThe expense policy lives here.\n")
    runner = CliRunner()
    parent = json.loads(runner.invoke(app, ["ingest", str(docs), "--json"]).stdout)
    assert sorted(parent["added"]) == ["part/x.md", "top.md"]
    child = json.loads(runner.invoke(app, ["ingest", str(docs / "part"), "--json"]).stdout)
    assert child["added"] == [] and child["unchanged"] == ["part/x.md"] and child["chunks_written"] == 0
    (docs / "part" / "x.md").write_text("# X\n\nThe expense policy changed.\n")
    again = json.loads(runner.invoke(app, ["ingest", str(docs / "part" / "x.md"), "--json"]).stdout)
    assert again["updated"] == ["part/x.md"] and again["added"] == []
    stats = json.loads(runner.invoke(app, ["stats", "--json"]).stdout)
    assert stats["documents"] == 2  # not x.md and part/x.md side by side


def test_an_ingest_whose_every_file_is_refused_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "empty.txt").write_text("")
    (bad / "binary.txt").write_bytes(b"\x00\x01\x02" * 100)
    runner = CliRunner()
    refused = runner.invoke(app, ["ingest", str(bad)])
    assert refused.exit_code == 1 and "every one was refused" in refused.stderr, refused.output
    as_json = runner.invoke(app, ["ingest", str(bad), "--json"])
    assert as_json.exit_code == 1 and len(json.loads(as_json.stdout)["skipped"]) == 2
    (bad / "good.md").write_text("# Good\n\nSomething to index.\n")
    assert runner.invoke(app, ["ingest", str(bad), "--json"]).exit_code == 0  # some refused, one indexed
