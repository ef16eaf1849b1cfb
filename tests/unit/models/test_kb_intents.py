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
