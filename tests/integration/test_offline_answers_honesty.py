"""The offline model answers only what it can, through the whole graph and a real KB.

No weather tool: it says so instead of giving the date. Loosely related passages are quoted as the closest
found, not as the answer, and never hidden behind "nothing found".
English questions get English answers and summaries. Summary requests carry their passage count.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from graph import build_graph


def _ask(question: str) -> tuple[str, list[tuple[str, dict]]]:
    result = build_graph().invoke({"messages": [HumanMessage(question)]})
    messages = result["messages"]
    calls = [(c["name"], c["args"]) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    return str(messages[-1].content), calls


def test_a_weather_question_is_refused_not_answered_with_the_date(kb_home: Path) -> None:
    answer, calls = _ask("今天杭州天气怎么样？")
    assert calls == [] and "天气" in answer and "没有" in answer
    assert "今天是" not in answer and "星期" not in answer
    english, calls = _ask("What's the weather like in Hangzhou today?")
    assert calls == [] and "no tool for the weather" in english and "Today is" not in english


def test_the_date_is_still_answered(kb_home: Path) -> None:
    answer, calls = _ask("今天几号？")
    assert [name for name, _ in calls] == ["get_current_date"] and "今天是" in answer


def test_loosely_related_passages_are_quoted_as_the_closest_not_as_the_answer(kb_home: Path) -> None:
    answer, _ = _ask("What is the price of an agent license?")
    assert "From the knowledge base" not in answer and "nothing" not in answer
    assert "closest passages" in answer and "may not answer" in answer and "[agents.md#0]" in answer
    zh, _ = _ask("谁发明了检索？")
    assert "根据知识库" not in zh and "没有找到" not in zh and "最接近" in zh and "[rag.md#" in zh
    relevant, _ = _ask("混合检索用什么方法合并两路结果？")
    assert "根据知识库" in relevant and "RRF" in relevant


def test_an_english_question_gets_an_english_answer_and_summary(kb_home: Path) -> None:
    answer, _ = _ask("How does RAG work?")
    assert answer.startswith("From the knowledge base:") and "[rag.md#0]" in answer
    summary, calls = _ask("summarize what the knowledge base says about RAG, at most 3 passages")
    assert calls == [("generate_summary", {"topic": "RAG", "max_docs": 3})]
    assert re.match(r"What \d passages? says? about 'RAG':", summary) and "[rag.md#0]" in summary
    assert set(re.findall(r"\[([^\]#]+)#\d+\]", summary)) == {"rag.md"}  # the RAG document's passages only
    assert "关于" not in summary and "要点" not in summary


@pytest.mark.parametrize(
    ("question", "topic", "count"),
    [
        ("整理一下知识库里 RAG 的内容，最多 3 个片段", "RAG", 3),
        ("总结一下知识库里检索的内容，最多 2 段资料", "检索", 2),
        ("归纳一下关于检索的资料，只用两个片段", "检索", 2),
        ("概括一下知识库中 RAG 的内容，最多 4 个片段", "RAG", 4),
        ("Summarize the knowledge base on retrieval, top 2", "retrieval", 2),
        ("summarise what the knowledge base says about RAG using at most 1 passage", "RAG", 1),
    ],
)
def test_summary_requests_with_a_passage_count_call_generate_summary_with_max_docs(
    kb_home: Path, question: str, topic: str, count: int
) -> None:
    answer, calls = _ask(question)
    assert calls == [("generate_summary", {"topic": topic, "max_docs": count})]
    assert "[rag.md#" in answer or "nothing on" in answer or "没有关于" in answer


def test_a_summary_request_without_a_count_keeps_the_default(kb_home: Path) -> None:
    _, calls = _ask("整理一下知识库里 RAG 的内容")
    assert calls == [("generate_summary", {"topic": "RAG"})]


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("麻烦帮我给人事部写一封邮件", "发送邮件"),
        ("帮我订一张明天去广州的火车票", "预订"),
        ("Please text her that the meeting moved", "sending messages"),
        ("book a hotel room in Lyon for two nights", "bookings"),
        ("腾讯现在的股价是多少？", "股价"),
        ("email the auditors that the report is late", "sending e-mail"),
        ("订两张周六去上海的高铁票", "预订"),
    ],
)
def test_a_request_for_a_tool_nobody_registered_says_it_cannot_be_done_here(
    kb_home: Path, question: str, kind: str
) -> None:
    answer, calls = _ask(question)
    assert calls == [] and kind in answer
    assert ("这里做不到" in answer) or ("can't do that here" in answer)
    assert "根据知识库" not in answer and "From the knowledge base" not in answer


@pytest.mark.parametrize(("question", "cited"), [("parking", "garage.md#0"), ("访客登记", "front-desk.md#0")])
def test_a_question_naming_only_a_documents_heading_is_answered_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, question: str, cited: str
) -> None:
    from graph.services import open_knowledge_base
    from nodes.settings import Settings

    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "garage.md").write_text("# Parking\n\nLevel B2 is reserved for visitors until noon.\n", "utf-8")
    (docs / "front-desk.md").write_text("# 前台\n\n## 访客登记\n\n来访人员出示证件，领取临时门卡。\n", "utf-8")
    open_knowledge_base(Settings(), create=True).ingest([docs])
    answer, _ = _ask(question)
    assert f"[{cited}]" in answer and "nothing relevant" not in answer and "没有找到" not in answer
