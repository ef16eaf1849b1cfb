"""The offline model's knowledge-base rules recognise a request by what it asks, in words no rule names."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from models.offline.kb_intents import plan_kb_steps

TOOLS = {"knowledge_stats", "search_knowledge", "generate_summary", "submit_feedback"}
EARLIER = [HumanMessage("差旅怎么报销？"), AIMessage("提交发票即可 [travel.md#0]"), HumanMessage("…")]


def tools_of(question: str, messages: list = ()) -> list[str] | None:  # type: ignore[assignment]
    steps = plan_kb_steps(question, TOOLS, list(messages))
    return None if steps is None else [step.tool for step in steps]


@pytest.mark.parametrize(
    "question",
    [
        "知识库里一共有几篇文档？",
        "文档总数是多少",
        "一共几个片段",
        "what is the number of files indexed?",
        "How many docs do you have",
    ],
)
def test_a_count_of_the_documents_is_answered_from_the_statistics(question: str) -> None:
    assert tools_of(question) == ["knowledge_stats"]


@pytest.mark.parametrize(
    "question",
    ["帮我找几篇关于 RAG 的文档", "how many documents about RAG are there?", "这周我们开了几次会？"],
)
def test_a_request_for_documents_or_another_count_is_not_the_statistics(question: str) -> None:
    assert tools_of(question) != ["knowledge_stats"]


@pytest.mark.parametrize(
    ("question", "rating"),
    [
        ("这个回答不对，没用", "bad"),
        ("this is wrong", "bad"),
        ("这条回复很有用", "good"),
        ("that reply was helpful", "good"),
    ],
)
def test_a_judgement_of_the_last_answer_is_feedback(question: str, rating: str) -> None:
    steps = plan_kb_steps(question, TOOLS, EARLIER)
    assert steps is not None and [(s.tool, s.args["rating"]) for s in steps] == [("submit_feedback", rating)]


@pytest.mark.parametrize("question", ["I was wrong about the date, it is Monday", "这个政策是不是错了？"])
def test_a_sentence_that_judges_no_answer_is_not_feedback(question: str) -> None:
    steps = plan_kb_steps(question, TOOLS, EARLIER) or []
    assert "submit_feedback" not in [s.tool for s in steps]


def test_without_an_earlier_answer_there_is_nothing_to_rate() -> None:
    assert tools_of("这个回答不对，没用") != ["submit_feedback"]


ALL_TOOLS = TOOLS | {"calculator", "get_current_date", "remember", "forget"}


@pytest.mark.parametrize(
    "request_text",
    [
        "Book me a flight to Tokyo",
        "给张三发封邮件说我晚点到",
        "以后叫我老王",
        "I moved to Shenzhen last month",
    ],
)
def test_a_request_no_rule_understands_is_told_what_the_model_can_do(request_text: str) -> None:
    from models.offline.intents import capabilities_reply
    from models.offline.kb_intents import knowledge_reply

    assert knowledge_reply(request_text, [], ALL_TOOLS) is None  # not "the knowledge base has nothing"
    reply = capabilities_reply(request_text, ALL_TOOLS)
    assert ("did not understand" in reply) or ("没能理解" in reply)
    assert ("remember" in reply and "documents" in reply) or ("记住" in reply and "知识库" in reply)


@pytest.mark.parametrize("question", ["What is our travel policy?", "差旅报销的标准是什么", "公司有年假吗"])
def test_a_question_with_nothing_found_says_the_knowledge_base_has_nothing(question: str) -> None:
    from models.offline.kb_intents import knowledge_reply

    reply = knowledge_reply(question, [], ALL_TOOLS)
    assert reply is not None and ("nothing relevant" in reply or "没有找到" in reply)


def _search_result(query: str, *texts: str) -> str:
    import json

    passages = [{"id": f"doc{n}.md#0", "score": 1.0, "text": text} for n, text in enumerate(texts)]
    return json.dumps({"query": query, "passages": passages}, ensure_ascii=False)


def test_a_search_hit_that_is_not_about_the_query_is_not_quoted_as_the_answer() -> None:
    from models.offline.kb_intents import describe_kb_result

    found = _search_result(
        "茅台 今天 股价", "员工出差需要提交发票。今天起新的标准生效。", "年假需提前三天申请。"
    )
    reply = describe_kb_result("search_knowledge", found, True, "帮我查一下茅台今天的股价")
    assert reply is not None and "根据知识库" not in reply and "关系不大" in reply and "[doc0.md#0]" in reply
    found = _search_result("Apple stock price", "The travel policy starts today.")
    reply = describe_kb_result("search_knowledge", found, False, "look up Apple's stock price")
    assert reply is not None and "From the knowledge base" not in reply and "none answers it" in reply


def test_a_search_hit_about_the_query_is_quoted_with_its_citation() -> None:
    from models.offline.kb_intents import describe_kb_result

    found = _search_result(
        "年假 申请", "员工每年享有十五天带薪年假，需提前三天在系统中申请。", "出差要交发票。"
    )
    reply = describe_kb_result("search_knowledge", found, True, "搜一下年假怎么申请")
    assert reply is not None and reply.startswith("找到 1 段相关资料：[doc0.md#0]") and "doc1" not in reply


@pytest.mark.parametrize(
    ("question", "count"),
    [
        ("最多三篇", 3),
        ("用两个片段", 2),
        ("三篇文档", 3),
        ("top 3", 3),
        ("第三篇怎么说", None),
        ("summarize with 5 passages", 5),
    ],
)
def test_a_count_of_documents_in_any_measure_word_is_the_count(question: str, count: int | None) -> None:
    from models.offline.kb_intents import passage_count

    assert passage_count(question) == count


def test_the_seed_request_summarises_at_most_three_documents() -> None:
    steps = plan_kb_steps("搜一下有没有 RAG 相关文档，有的话整理成摘要，最多三篇", TOOLS, [])
    assert steps is not None
    assert [(s.tool, s.args) for s in steps] == [
        ("search_knowledge", {"query": "RAG", "top_k": 3}),
        ("generate_summary", {"topic": "RAG", "max_docs": 3}),
    ]


@pytest.mark.parametrize(
    ("question", "topic"),
    [("搜一下 RAG 相关文档，整理成摘要", "RAG"), ("搜一下知识库里关于向量检索的相关资料", "向量检索")],
)
def test_the_topic_of_a_search_is_what_is_searched_for(question: str, topic: str) -> None:
    steps = plan_kb_steps(question, TOOLS, [])
    assert steps is not None and steps[0].args["query"] == topic
