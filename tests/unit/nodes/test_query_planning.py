"""Query rewrite and decomposition use the model when they can and fall back to the question when it fails."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from models import ScriptedChatModel, tool_call
from models.offline import OfflineChatModel
from nodes.node_io import arun_steps
from nodes.query_planning import (
    QueryPlan,
    plan_queries,
    planned_queries,
    retrieve_planned,
    screen_sub_queries,
)
from stores.base import Passage

CHROMA_TURN: list[BaseMessage] = [
    HumanMessage("Chroma 是什么？"),
    AIMessage("Chroma 是一个开源的向量数据库，可以嵌入运行，也可以作为服务器运行。"),
]
FOLLOW_UP = "它的默认端口是多少？"


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Lets a deliberately hung model call finish when the test ends, so no thread outlives the suite."""
    event = threading.Event()
    yield event
    event.set()


def test_awaited_planning_gives_the_blocking_plan_and_times_out_the_same() -> None:
    """Under ainvoke the rewrite and decomposition calls are awaited (nodes/node_io.py drives them)."""
    replies = [
        '{"query": "Chroma 服务器的默认端口是多少？"}',
        '{"queries": ["Chroma 默认端口", "Chroma 服务器"]}',
    ]
    blocking = plan_queries(FOLLOW_UP, CHROMA_TURN, ScriptedChatModel(replies), decompose=True)
    steps = planned_queries(FOLLOW_UP, CHROMA_TURN, ScriptedChatModel(replies), decompose=True)
    assert asyncio.run(arun_steps(steps)) == blocking
    assert blocking.sub_queries == ["Chroma 默认端口", "Chroma 服务器"] and blocking.model_calls == 2

    class Slow(ScriptedChatModel):
        async def ainvoke(self, *args: object, **kwargs: object) -> AIMessage:
            await asyncio.sleep(5)
            raise AssertionError("not cancelled")

    late = asyncio.run(arun_steps(planned_queries(FOLLOW_UP, CHROMA_TURN, Slow([]), timeout=0.05)))
    assert late.standalone == FOLLOW_UP and late.fallbacks == ["rewrite:timeout"]


def test_follow_up_is_rewritten_into_a_standalone_query() -> None:
    model = ScriptedChatModel(['{"query": "Chroma 服务器的默认端口是多少？"}'])
    plan = plan_queries(FOLLOW_UP, CHROMA_TURN, model)
    assert plan == QueryPlan(
        FOLLOW_UP, "Chroma 服务器的默认端口是多少？", ["Chroma 服务器的默认端口是多少？"], 1, []
    )
    sent = "\n".join(str(m.content) for m in model.calls[0])
    assert "Chroma 是什么" in sent and FOLLOW_UP in sent
    assert "改写" in str(model.calls[0][0].content)  # a Chinese question gets the Chinese prompt


def test_english_question_gets_the_english_prompt() -> None:
    model = ScriptedChatModel(['{"query": "What is the default port of a Chroma server?"}'])
    plan = plan_queries(
        "And its default port?", [HumanMessage("What is Chroma?"), AIMessage("A vector DB.")], model
    )
    assert plan.standalone == "What is the default port of a Chroma server?"
    assert "standalone search query" in str(model.calls[0][0].content)


def test_without_prior_conversation_there_is_no_model_call() -> None:
    model = ScriptedChatModel([])  # any call would raise ScriptExhausted
    for history in ([], [HumanMessage(FOLLOW_UP)]):  # the state's messages end with the question itself
        plan = plan_queries(FOLLOW_UP, history, model)
        assert plan == QueryPlan(FOLLOW_UP, FOLLOW_UP, [FOLLOW_UP], 0, [])
    assert model.calls == []


def test_only_user_and_assistant_text_is_sent_as_conversation() -> None:
    call = tool_call("calculator", {"expression": "1+1"}, id="c")
    history = [HumanMessage("1+1 等于几？"), AIMessage("", tool_calls=[call])]
    history += [ToolMessage("TOOL-RESULT", tool_call_id="c"), AIMessage("1+1 等于 2。")]
    model = ScriptedChatModel(['{"query": "2 乘以 3 等于几？"}'])
    plan = plan_queries("那乘以 3 呢？", [*history, HumanMessage("那乘以 3 呢？")], model)
    assert plan.standalone == "2 乘以 3 等于几？"
    sent = str(model.calls[0][-1].content)
    assert "1+1 等于几" in sent and "1+1 等于 2" in sent and "TOOL-RESULT" not in sent
    assert sent.count("那乘以 3 呢") == 1


@pytest.mark.parametrize("model", [None, OfflineChatModel()], ids=["no-model", "offline"])
def test_a_model_that_cannot_rewrite_is_not_asked(model: OfflineChatModel | None) -> None:
    plan = plan_queries(FOLLOW_UP, CHROMA_TURN, model, decompose=True)
    assert plan == QueryPlan(FOLLOW_UP, FOLLOW_UP, [FOLLOW_UP], 0, [])


def test_a_hung_model_times_out_and_falls_back(release: threading.Event) -> None:
    def hang(messages: list[BaseMessage], tools: list[dict]) -> str:
        release.wait(10)
        return '{"query": "too late"}'

    plan = plan_queries(FOLLOW_UP, CHROMA_TURN, ScriptedChatModel(hang), timeout=0.05)
    assert plan.standalone == FOLLOW_UP and plan.sub_queries == [FOLLOW_UP]
    assert plan.fallbacks == ["rewrite:timeout"] and plan.model_calls == 1


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("我不知道", "not_json"),
        ("", "empty"),
        ('{"x": 1}', "malformed"),
        ('{"query": 42}', "malformed"),
        ('{"query": "   "}', "empty"),
        ('{"query": "' + "端口" * 400 + '"}', "too_long"),
        ("x" * 100_000, "too_long"),
    ],
    ids=["garbage", "empty", "wrong-key", "not-a-string", "blank", "long-query", "huge-reply"],
)
def test_unusable_rewrites_fall_back_with_the_reason(reply: str, reason: str) -> None:
    plan = plan_queries(FOLLOW_UP, CHROMA_TURN, ScriptedChatModel([reply]))
    assert (plan.original, plan.standalone, plan.sub_queries) == (FOLLOW_UP, FOLLOW_UP, [FOLLOW_UP])
    assert plan.fallbacks == [f"rewrite:{reason}"]


def test_a_model_error_falls_back() -> None:
    def fail(messages: list[BaseMessage], tools: list[dict]) -> str:
        raise ConnectionError("endpoint down")

    plan = plan_queries(FOLLOW_UP, CHROMA_TURN, ScriptedChatModel(fail))
    assert plan.standalone == FOLLOW_UP and plan.fallbacks == ["rewrite:error"]


def test_fenced_json_with_chatter_and_thinking_is_parsed() -> None:
    reply = '<think>the user means Chroma {"query": "no"}</think>Sure!\n```json\n{"query": "Chroma 默认端口"}\n```'
    plan = plan_queries(FOLLOW_UP, CHROMA_TURN, ScriptedChatModel([reply]))
    assert plan.standalone == "Chroma 默认端口" and plan.fallbacks == []


def test_decomposition_is_deduped_capped_and_cleaned() -> None:
    queries = ["Milvus 混合检索能力", "milvus  混合检索能力", "", 7, "PostgreSQL 混合检索能力"]
    queries += ["改造成本", "运维成本", "部署方式", "x" * 500]
    model = ScriptedChatModel([json.dumps({"queries": queries}, ensure_ascii=False)])
    question = "比较 Milvus 和 PostgreSQL 做混合检索时的检索能力、改造成本和运维成本"
    plan = plan_queries(question, [], model, decompose=True)
    assert plan.sub_queries == ["Milvus 混合检索能力", "PostgreSQL 混合检索能力", "改造成本", "运维成本"]
    assert plan.standalone == question and plan.model_calls == 1 and plan.fallbacks == []
    assert "4" in str(model.calls[0][0].content)  # the limit is in the prompt

    long = plan_queries("q", [], ScriptedChatModel([json.dumps({"queries": ["y" * 500]})]), decompose=True)
    assert long.sub_queries == ["y" * 300]


@pytest.mark.parametrize(
    "raw, expected",
    [
        (["What is RAG?", "what is rag", "RAG retrieval", "rag  RETRIEVAL!"], ["RAG retrieval"]),
        (["  What is RAG ?", "WHAT IS RAG"], ["What is RAG?"]),  # only the question: searched alone
        (["", "   ", 3], []),
        (
            ["检索增强生成是什么？", "检索增强生成 是什么", "RAG 的检索步骤", "RAG的检索步骤。"],
            ["RAG 的检索步骤"],
        ),
    ],
)
def test_sub_queries_that_repeat_the_question_or_each_other_are_dropped(
    raw: list[Any], expected: list[str]
) -> None:
    question = "检索增强生成是什么？" if isinstance(raw[0], str) and "检索" in raw[0] else "What is RAG?"
    assert screen_sub_queries(question, raw, 4) == expected


def test_a_question_alone_is_rewritten_into_a_search_query_when_asked() -> None:
    model = ScriptedChatModel(['{"query": "RAG retrieval augmented generation"}'])
    plan = plan_queries("that retrieve-then-generate method", [], model, rewrite_alone=True)
    assert plan.standalone == "RAG retrieval augmented generation" and plan.model_calls == 1
    assert plan.sub_queries == ["RAG retrieval augmented generation"]
    untouched = plan_queries("that retrieve-then-generate method", [], ScriptedChatModel([]))
    assert untouched.model_calls == 0  # without history and without asking, no rewrite


def test_rewrite_then_decompose_splits_the_standalone_query() -> None:
    model = ScriptedChatModel(
        [
            '{"query": "Chroma 的默认端口和持久化目录"}',
            '{"queries": ["Chroma 默认端口", "Chroma 持久化目录"]}',
        ]
    )
    plan = plan_queries("那它的端口和目录呢？", CHROMA_TURN, model, decompose=True)
    assert plan.sub_queries == ["Chroma 默认端口", "Chroma 持久化目录"] and plan.model_calls == 2
    assert "Chroma 的默认端口和持久化目录" in str(model.calls[1][-1].content)
    assert plan.original == "那它的端口和目录呢？"


@pytest.mark.parametrize("reply", ['{"queries": []}', '{"queries": "a, b"}', "nope"])
def test_failed_decomposition_keeps_one_query(reply: str) -> None:
    plan = plan_queries("a and b?", [], ScriptedChatModel([reply]), decompose=True)
    assert plan.sub_queries == ["a and b?"] and len(plan.fallbacks) == 1
    assert plan.fallbacks[0].startswith("decompose:")


def _passage(pid: str, retriever: str = "bm25") -> Passage:
    return {"id": pid, "text": pid, "source": "doc", "score": 1.0, "retrievers": [retriever], "metadata": {}}


def test_retrieve_planned_fuses_sub_query_rankings_by_rrf() -> None:
    lists = {"a": ["x", "y", "z"], "b": ["y", "w"], "c": ["y", "x"]}
    retriever = {"a": "bm25", "b": "vector", "c": "bm25"}
    plan = QueryPlan("q", "q", ["a", "b", "c"], 1, [])
    fused = retrieve_planned(plan, lambda q: [_passage(p, retriever[q]) for p in lists[q]], rrf_k=60, top_k=3)
    assert [p["id"] for p in fused] == ["y", "x", "w"]
    assert fused[0]["score"] == pytest.approx(1 / 62 + 2 / 61)
    assert fused[1]["score"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[0]["retrievers"] == ["bm25", "vector"]
    assert fused[0]["metadata"]["sub_queries"] == ["a", "b", "c"]


def test_fused_ties_go_to_the_earlier_sub_querys_find() -> None:
    lists = {"first": ["zeta", "alpha"], "second": ["alpha", "zeta"]}  # the same two, mirrored: equal scores
    plan = QueryPlan("q", "q", ["first", "second"], 0, [])
    fused = retrieve_planned(plan, lambda q: [_passage(p) for p in lists[q]], top_k=2)
    assert [p["id"] for p in fused] == ["zeta", "alpha"]  # zeta: the first sub-query's best, not the id order
    flipped = QueryPlan("q", "q", ["second", "first"], 0, [])
    assert [p["id"] for p in retrieve_planned(flipped, lambda q: [_passage(p) for p in lists[q]])] == [
        "alpha",
        "zeta",
    ]


def test_retrieve_planned_searches_sub_queries_concurrently() -> None:
    barrier = threading.Barrier(3, timeout=5)  # breaks (and the test fails) unless all three run at once
    threads: set[int] = set()

    def search(query: str) -> list[Passage]:
        threads.add(threading.get_ident())
        barrier.wait()
        return [_passage(query)]

    fused = retrieve_planned(QueryPlan("q", "q", ["a", "b", "c"], 0, []), search, top_k=5)
    assert sorted(p["id"] for p in fused) == ["a", "b", "c"] and len(threads) == 3


def test_one_sub_query_keeps_the_search_ranking_and_a_failing_one_is_skipped() -> None:
    single = retrieve_planned(
        QueryPlan("q", "q", ["q"], 0, []), lambda q: [_passage("p1"), _passage("p2")], top_k=1
    )
    assert single == [_passage("p1")]

    def search(query: str) -> list[Passage]:
        if query == "bad":
            raise RuntimeError("index offline")
        return [_passage("p1")]

    assert [p["id"] for p in retrieve_planned(QueryPlan("q", "q", ["ok", "bad"], 0, []), search)] == ["p1"]
    with pytest.raises(RuntimeError):
        retrieve_planned(QueryPlan("q", "q", ["bad", "bad2"], 0, []), lambda q: search("bad"))
