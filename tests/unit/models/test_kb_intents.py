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


def _with_passages(question: str, *passages: dict) -> list:
    """The request as the graph lays it out: the question, then the retrieved passages' block."""
    from nodes.prompts import turn_context
    from stores.text_analysis import has_cjk

    return [HumanMessage(f"{question}\n\n{turn_context('zh' if has_cjk(question) else 'en', passages=list(passages))}")]


def _decide(messages: list, tools: set[str] = ALL_TOOLS) -> AIMessage:
    from models.offline import OfflineChatModel
    from models.offline.request_reading import read_request

    tool_defs = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in tools]
    return OfflineChatModel().decide(read_request(messages), tool_defs)


THREADS_EN = {"id": "memory.md#1", "text": "Threads live in SQLite under the data directory, or in Postgres."}
CHUNKS_EN = {"id": "knowledge-base.md#4", "text": "Documents are split into chunks of about 400 tokens."}
LEAVE_ZH = {"id": "hr.md#0", "text": "员工每年享有十五天带薪年假。年假需提前三天在系统中申请。"}


@pytest.mark.parametrize(
    ("question", "passage"),
    [("线程存在哪里？", THREADS_EN), ("文档切块一般多大", CHUNKS_EN), ("how many days of leave do I get?", LEAVE_ZH)],
)
def test_a_passage_in_the_other_language_is_quoted_as_it_is_and_said_to_be_in_that_language(
    question: str, passage: dict
) -> None:
    reply = _decide(_with_passages(question, passage))
    assert reply.tool_calls == [] and f"[{passage['id']}]" in reply.content
    assert passage["text"].split("。")[0].split(",")[0] in reply.content
    assert ("英文资料" in reply.content) or ("in Chinese" in reply.content)
    assert "没有找到" not in reply.content and "has nothing" not in reply.content


def test_a_passage_holding_the_subject_of_the_question_is_quoted_as_the_answer() -> None:
    reply = _decide(_with_passages("年假需要提前几天申请？", LEAVE_ZH, CHUNKS_EN)).content
    assert reply.startswith("根据知识库：") and "提前三天" in reply and "[hr.md#0]" in reply
    assert "knowledge-base.md#4" not in reply  # a passage not about leave is no "see also"
    english = _decide(_with_passages("Where do threads live?", THREADS_EN)).content
    assert english.startswith("From the knowledge base:") and "[memory.md#1]" in english


@pytest.mark.parametrize(
    "question", ["What does an enterprise licence cost?", "公司的股票代码是多少", "who founded the company"]
)
def test_a_passage_without_the_subject_of_the_question_is_quoted_as_the_closest_not_as_the_answer(
    question: str,
) -> None:
    reply = _decide(_with_passages(question, THREADS_EN, LEAVE_ZH)).content
    assert "[memory.md#1]" in reply
    assert ("最接近" in reply and "不一定" in reply) or ("closest" in reply and "may not answer" in reply)
    assert "根据知识库" not in reply and "From the knowledge base" not in reply


@pytest.mark.parametrize("question", ["What is our travel policy?", "差旅报销的标准是什么", "公司有年假吗"])
def test_a_question_without_passages_is_searched_before_anything_is_said_about_the_knowledge_base(
    question: str,
) -> None:
    from langchain_core.messages import ToolMessage

    first = _decide([HumanMessage(question)])
    assert [c["name"] for c in first.tool_calls] == ["search_knowledge"] and first.content == ""
    empty = ToolMessage('{"query": "q", "passages": []}', tool_call_id=first.tool_calls[0]["id"])
    final = _decide([HumanMessage(question), first, empty]).content
    assert "nothing" in final or "没有找到" in final
    found = ToolMessage(
        '{"query": "q", "passages": [{"id": "memory.md#1", "text": "Threads live in SQLite."}]}',
        tool_call_id=first.tool_calls[0]["id"],
    )
    answered = _decide([HumanMessage(question), first, found]).content
    assert "[memory.md#1]" in answered and "nothing" not in answered and "没有找到" not in answered


def test_without_a_search_tool_a_question_is_not_answered_with_nothing_found() -> None:
    reply = _decide([HumanMessage("线程存在哪里？")], tools={"calculator"}).content
    assert "没有找到" not in reply and "没能理解" in reply and "search_knowledge" not in reply
    english = _decide([HumanMessage("where do threads live?")], tools={"calculator"}).content
    assert "nothing" not in english and "questions about your documents" not in english


@pytest.mark.parametrize("request_text", ["帮我写首诗", "translate this", "嗯", "给我讲个笑话", "make it shorter"])
def test_a_request_not_understood_gets_no_quote_even_when_passages_came_back(request_text: str) -> None:
    reply = _decide(_with_passages(request_text, THREADS_EN, LEAVE_ZH))
    assert reply.tool_calls == [] and "[memory.md#1]" not in reply.content and "[hr.md#0]" not in reply.content
    assert ("did not understand" in reply.content) or ("没能理解" in reply.content)
    assert "knowledge base has" not in reply.content and "没有找到" not in reply.content


def _search_result(query: str, *texts: str) -> str:
    import json

    passages = [{"id": f"doc{n}.md#0", "score": 1.0, "text": text} for n, text in enumerate(texts)]
    return json.dumps({"query": query, "passages": passages}, ensure_ascii=False)


def test_a_search_hit_that_is_not_about_the_query_is_quoted_as_the_closest_passage() -> None:
    from models.offline.kb_intents import describe_kb_result

    found = _search_result(
        "茅台 今天 股价", "员工出差需要提交发票。今天起新的标准生效。", "年假需提前三天申请。"
    )
    reply = describe_kb_result("search_knowledge", found, True, "帮我查一下茅台今天的股价")
    assert reply is not None and "根据知识库" not in reply and "最接近" in reply and "[doc0.md#0]" in reply
    found = _search_result("Apple stock price", "The travel policy starts today.")
    reply = describe_kb_result("search_knowledge", found, False, "look up Apple's stock price")
    assert reply is not None and "From the knowledge base" not in reply and "may not answer" in reply


def test_a_search_hit_about_the_query_is_quoted_with_its_citation() -> None:
    from models.offline.kb_intents import describe_kb_result

    found = _search_result(
        "年假 申请", "员工每年享有十五天带薪年假，需提前三天在系统中申请。", "出差要交发票。"
    )
    reply = describe_kb_result("search_knowledge", found, True, "搜一下年假怎么申请")
    assert reply is not None and reply.startswith("根据知识库：") and "[doc0.md#0]" in reply
    assert "doc1" not in reply


def test_a_search_of_an_empty_knowledge_base_says_nothing_has_been_ingested() -> None:
    from models.offline.kb_intents import describe_kb_result

    said = "The knowledge base is empty: nothing has been ingested yet."
    assert describe_kb_result("search_knowledge", said, False, "where do threads live?") == said
    assert "还没有导入" in (describe_kb_result("search_knowledge", said, True, "线程存在哪里？") or "")


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


@pytest.mark.parametrize(
    "question", ["谁整理了保存至今的登月数据？", "What does the overview section say about chunks?", "摘要里的数字是怎么来的"]
)
def test_a_question_that_mentions_a_summary_is_not_a_summary_request(question: str) -> None:
    assert "generate_summary" not in (tools_of(question) or [])


@pytest.mark.parametrize(
    "question", ["请总结一下知识库里关于回收站的内容", "Give me a quick overview of access groups", "把记忆规则概括一下"]
)
def test_a_request_for_a_summary_calls_generate_summary(question: str) -> None:
    assert "generate_summary" in (tools_of(question) or [])


@pytest.mark.parametrize(
    ("question", "needs_weather"),
    [
        ("how's the weather in Lyon?", True),
        ("will it rain tomorrow", True),
        ("weather for Berlin this weekend", True),
        ("明天北京气温多少", True),
        ("Which weather records did the survey keep?", False),
        ("What weather feature do climatologists model?", False),
    ],
)
def test_only_a_request_for_the_weather_itself_needs_a_weather_tool(question: str, needs_weather: bool) -> None:
    from models.offline.tool_intents import missing_capability

    assert (missing_capability(question, ALL_TOOLS) is not None) == needs_weather
