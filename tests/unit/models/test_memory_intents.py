"""The offline model on memory: what it says it remembers about the user, and what it says it did not keep."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from models import OfflineChatModel
from tools.builtin import builtin_registry
from tools.memory_tools import memory_tools

FACTS = (("mem_tea", "semantic", "用户喜欢喝绿茶"), ("mem_job", "semantic", "The user works as a pilot"))
HISTORY = (("mem_asked", "episodic", "用户问过：差旅怎么报销？"),)


def _ask(question: str, recalled: tuple[tuple[str, str, str], ...] = (), weak: bool = False) -> AIMessage:
    """The offline model's first reply to ``question`` with ``recalled`` in the prompt's memory block."""
    registry = builtin_registry()
    for spec in memory_tools(lambda: None):  # type: ignore[arg-type, return-value]
        registry.register(spec)
    model = OfflineChatModel().bind_tools(registry.definitions())
    mark = ", weak match" if weak else ""
    lines = "\n".join(f"- [{mid}] ({kind}{mark}) {content}" for mid, kind, content in recalled)
    system = SystemMessage(f"rules\n<user_memories>\n{lines}\n</user_memories>" if recalled else "rules")
    return model.invoke([system, HumanMessage(question)])


@pytest.mark.parametrize(
    "question",
    [
        "你还记得我的什么信息？",
        "what do you know about me?",
        "说说你对我的了解吧",
        "What have you kept about me so far?",
    ],
)
def test_what_do_you_remember_about_me_answers_with_the_recalled_facts(question: str) -> None:
    reply = _ask(question, FACTS + HISTORY)
    assert not reply.tool_calls
    assert "用户喜欢喝绿茶 [mem_tea]" in reply.text and "The user works as a pilot [mem_job]" in reply.text
    assert "没有关于" not in reply.text and "no memory" not in reply.text.lower()


def test_with_only_asked_questions_kept_the_answer_says_so_instead_of_no_memory() -> None:
    reply = _ask("你都记得我哪些事？", HISTORY)
    assert "差旅怎么报销" in reply.text and "[mem_asked]" in reply.text
    assert "没有记住关于你的事实" in reply.text and "我没有关于这个问题的记忆" not in reply.text


def test_with_nothing_kept_the_answer_says_nothing_is_kept() -> None:
    reply = _ask("Tell me what you remember about me")
    assert not reply.tool_calls and "nothing about you" in reply.text


@pytest.mark.parametrize(
    "question", ["我平时喜欢喝什么？", "What's my favourite colour?", "我一般几点睡觉？"]
)
def test_a_question_about_the_users_own_habits_is_answered_from_memory_even_with_none(question: str) -> None:
    reply = _ask(question, FACTS, weak=True)  # recalled, but none related
    assert not reply.tool_calls  # not a search of the documents, not a date
    assert "没有关于这个问题的记忆" in reply.text or "no memory about that" in reply.text


@pytest.mark.parametrize(
    ("statement", "said"),
    [
        ("我今天有点累", "没有保存"),
        ("it is raining here", "did not store"),
        ("刚跑完步，腿好酸啊", "没有保存"),
        ("I just got back from a long trip", "did not store"),
        ("我们组下个月搬去三楼了", "没有保存"),
        ("我周五要去上海出差", "没有保存"),  # a plan told, not a request to the assistant
        ("honestly the coffee here is terrible", "did not store"),
        ("the weather here is lovely today", "did not store"),  # told, not a weather question
        ("我这边在下雪呢！", "没有保存"),
    ],
)
def test_a_statement_the_rules_do_not_keep_is_said_to_be_not_stored(statement: str, said: str) -> None:
    reply = _ask(statement, FACTS)
    assert not reply.tool_calls and said in reply.text, reply.text
    assert "记住了" not in reply.text and "I remember" not in reply.text and "今天是" not in reply.text


@pytest.mark.parametrize(
    "request_text",
    [
        "我想了解一下差旅报销",
        "我要查一下报销进度",
        "I'm looking for the VPN guide",
        "hello",
        "明天天气怎么样",
    ],
)
def test_a_request_or_a_greeting_is_not_taken_for_a_statement(request_text: str) -> None:
    reply = _ask(request_text)
    assert "没有保存" not in reply.text and "did not store" not in reply.text
