"""The offline model: rule-based decisions, determinism, metadata and streaming (models/offline.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from models import OfflineChatModel
from models.offline import OFFLINE_MODEL_NAME
from models.tokens import count_message_tokens, estimate_tokens
from tools.builtin import builtin_registry
from tools.calculator import CalculatorError, evaluate
from tools.clock import current_date

FIXED_NOW = datetime(2024, 3, 15, 9, 30, 0, tzinfo=UTC)  # a Friday


def _bound(names: set[str] | None = None) -> Any:
    defs = builtin_registry().definitions()
    if names is not None:
        defs = [d for d in defs if d["function"]["name"] in names]
    return OfflineChatModel().bind_tools(defs)


def _run_tool(call: dict[str, Any]) -> ToolMessage:
    """Run a call the way the executor would (real handlers, errors as 'Error: …')."""
    try:
        if call["name"] == "calculator":
            text = evaluate(**call["args"])
        elif call["name"] == "get_current_date":
            text = json.dumps(current_date(now=FIXED_NOW), ensure_ascii=False)
        else:  # pragma: no cover - the offline model only knows the built-ins
            raise AssertionError(f"unexpected tool {call['name']}")
    except CalculatorError as exc:
        return ToolMessage(f"Error: {exc}", tool_call_id=call["id"], name=call["name"], status="error")
    return ToolMessage(text, tool_call_id=call["id"], name=call["name"])


def _converse(model: Any, question: str, max_rounds: int = 6) -> tuple[list[BaseMessage], AIMessage]:
    """Drive the model to a final answer; returns the transcript and the final message."""
    messages: list[BaseMessage] = [HumanMessage(question)]
    for _ in range(max_rounds):
        reply = model.invoke(messages)
        if not reply.tool_calls:
            return messages, reply
        messages.append(reply)
        messages.extend(_run_tool(call) for call in reply.tool_calls)
    raise AssertionError("the offline model never gave a final answer")


def _calls(messages: list[BaseMessage]) -> list[list[tuple[str, dict[str, Any]]]]:
    return [
        [(c["name"], c["args"]) for c in m.tool_calls]
        for m in messages
        if isinstance(m, AIMessage) and m.tool_calls
    ]


# --- decisions -----------------------------------------------------------------------------------


def test_chinese_arithmetic_makes_one_calculator_call() -> None:
    reply = _bound().invoke([HumanMessage("计算 123 × 456")])
    assert len(reply.tool_calls) == 1
    call = reply.tool_calls[0]
    assert call["name"] == "calculator"
    assert evaluate(call["args"]["expression"]) == "56088"
    assert reply.content == ""


@pytest.mark.parametrize(
    ("question", "value"),
    [("what is 7 times 8", "56"), ("12 plus 30", "42"), ("100 divided by 4", "25"), ("9 minus 10", "-1")],
)
def test_english_operator_words_become_a_calculator_expression(question: str, value: str) -> None:
    reply = _bound().invoke([HumanMessage(question)])
    assert [c["name"] for c in reply.tool_calls] == ["calculator"]
    assert set(reply.tool_calls[0]["args"]) == {"expression"}
    assert evaluate(reply.tool_calls[0]["args"]["expression"]) == value


@pytest.mark.parametrize("question", ["今天星期几", "今天几号", "what is the date today", "what time is it"])
def test_date_questions_call_get_current_date(question: str) -> None:
    reply = _bound().invoke([HumanMessage(question)])
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("get_current_date", {})]


def test_date_answer_uses_the_tool_result_in_the_question_language() -> None:
    _, zh = _converse(_bound(), "今天星期几")
    assert "2024-03-15" in zh.content and "星期五" in zh.content
    _, en = _converse(_bound(), "what is the date today")
    assert "2024-03-15" in en.content and "Friday" in en.content
    assert not zh.tool_calls and not en.tool_calls


def test_chained_request_asks_only_the_first_step_in_round_one() -> None:
    reply = _bound().invoke([HumanMessage("先计算 12 × 3，再加上 5")])
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("calculator", {"expression": "12 × 3"})]


def test_chained_request_feeds_the_previous_result_into_the_next_round() -> None:
    model = _bound()
    messages: list[BaseMessage] = [HumanMessage("先计算 12 × 3，再加上 5")]
    first = model.invoke(messages)
    messages += [first, ToolMessage("36", tool_call_id=first.tool_calls[0]["id"], name="calculator")]
    second = model.invoke(messages)
    assert [(c["name"], c["args"]) for c in second.tool_calls] == [("calculator", {"expression": "(36) + 5"})]
    messages += [second, ToolMessage("41", tool_call_id=second.tool_calls[0]["id"], name="calculator")]
    final = model.invoke(messages)
    assert final.tool_calls == []
    assert "41" in final.content
    assert final.response_metadata["finish_reason"] == "stop"


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("先计算 12 × 3，再加上 5", "41"),
        ("what is 12 times 3, then divide the result by 4", "9"),
        ("what is 2 + 3, then square it", "25"),
        ("先算 2+3，然后求它的平方", "25"),
    ],
)
def test_chained_requests_end_with_the_computed_result(question: str, expected: str) -> None:
    messages, final = _converse(_bound(), question)
    assert len(_calls(messages)) == 2
    assert expected in final.content
    assert final.tool_calls == []


@pytest.mark.parametrize("question", ["先算 2+3，然后平方", "what is 2 + 3, then square"])
def test_chained_square_without_a_reference_word_is_not_dropped(question: str) -> None:
    messages, final = _converse(_bound(), question)
    assert len(_calls(messages)) == 2
    assert "25" in final.content


def test_final_answer_mentions_every_result_and_leads_with_the_last() -> None:
    _, final = _converse(_bound(), "先计算 12 × 3，再加上 5")
    assert final.content.startswith("计算结果：41")
    assert "12 × 3 = 36" in final.content
    _, en = _converse(_bound(), "what is 7 times 8, then add 2")
    assert en.content.startswith("The result is 58.")


def test_one_calculation_is_answered_once() -> None:
    _, final = _converse(_bound(), "计算 123 × 456")
    assert final.content == "123 × 456 = 56088"
    _, en = _converse(_bound(), "what is 7 times 8")
    assert en.content.count("56") == 1


def test_tool_error_is_reported_and_not_retried() -> None:
    model = _bound()
    messages: list[BaseMessage] = [HumanMessage("先计算 12 × 3，再加上 5")]
    first = model.invoke(messages)
    messages += [first, ToolMessage("Error: division by zero", tool_call_id=first.tool_calls[0]["id"])]
    final = model.invoke(messages)
    assert final.tool_calls == []
    assert "division by zero" in final.content
    assert "没有成功" in final.content  # says it failed, in Chinese
    assert "计算结果" not in final.content  # no invented result


def test_tool_error_status_without_error_prefix_counts_as_failure() -> None:
    model = _bound()
    messages: list[BaseMessage] = [HumanMessage("what is 12 times 3, then add 5")]
    first = model.invoke(messages)
    messages += [
        first,
        ToolMessage("timed out", tool_call_id=first.tool_calls[0]["id"], status="error"),
    ]
    final = model.invoke(messages)
    assert final.tool_calls == []
    assert "did not succeed" in final.content and "timed out" in final.content


def test_real_division_by_zero_ends_with_a_failure_message() -> None:
    messages, final = _converse(_bound(), "what is 10 divided by 0")
    assert len(_calls(messages)) == 1
    assert "calculator" in final.content and "did not succeed" in final.content


@pytest.mark.parametrize("question", ["计算 123 × 456", "今天几号", "hello"])
def test_without_tools_it_never_emits_tool_calls(question: str) -> None:
    reply = OfflineChatModel().invoke([HumanMessage(question)])
    assert reply.tool_calls == []
    assert "offline" in reply.content or "离线" in reply.content
    assert reply.response_metadata["finish_reason"] == "stop"


def test_a_tool_that_is_not_bound_is_never_called() -> None:
    reply = _bound({"get_current_date"}).invoke([HumanMessage("计算 123 × 456")])
    assert reply.tool_calls == []
    assert "get_current_date" in reply.content  # the capabilities reply lists what is available
    mixed = _bound({"get_current_date"}).invoke([HumanMessage("今天几号？另外计算 2 + 3")])
    assert [c["name"] for c in mixed.tool_calls] == ["get_current_date"]


def test_only_calculator_bound_does_not_call_the_date_tool() -> None:
    reply = _bound({"calculator"}).invoke([HumanMessage("今天星期几")])
    assert reply.tool_calls == []


def test_independent_steps_share_one_round() -> None:
    reply = _bound().invoke([HumanMessage("今天几号？另外计算 2 + 3")])
    assert sorted(c["name"] for c in reply.tool_calls) == ["calculator", "get_current_date"]
    assert len({c["id"] for c in reply.tool_calls}) == 2


def test_langchain_tools_can_be_bound_too() -> None:
    @tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        return evaluate(expression)

    reply = OfflineChatModel().bind_tools([calculator]).invoke([HumanMessage("12 plus 30")])
    assert [c["name"] for c in reply.tool_calls] == ["calculator"]


def test_greeting_gets_the_capabilities_reply_in_chinese() -> None:
    reply = _bound().invoke([HumanMessage("你好")])
    assert reply.tool_calls == []
    assert "离线演示模型" in reply.content
    assert "calculator" in reply.content and "get_current_date" in reply.content
    assert "I am" not in reply.content


def test_greeting_gets_the_capabilities_reply_in_english() -> None:
    reply = _bound().invoke([HumanMessage("hello there")])
    assert reply.tool_calls == []
    assert reply.content.startswith("I am kb-agent's offline demo model")
    assert "离线" not in reply.content


def test_empty_conversation_without_a_human_message_gets_a_reply() -> None:
    reply = _bound().invoke([AIMessage("earlier answer")])
    assert reply.tool_calls == []
    assert reply.content


def test_only_the_latest_question_is_planned() -> None:
    model = _bound()
    messages, final = _converse(model, "计算 123 × 456")
    messages += [final, HumanMessage("what is the date today")]
    reply = model.invoke(messages)
    assert [c["name"] for c in reply.tool_calls] == ["get_current_date"]


def test_list_of_blocks_question_is_understood() -> None:
    question = HumanMessage(
        content=[{"type": "text", "text": "what is 7 "}, {"type": "text", "text": "times 8"}]
    )
    reply = _bound().invoke([question])
    assert evaluate(reply.tool_calls[0]["args"]["expression"]) == "56"


def test_decide_can_be_called_directly() -> None:
    defs = builtin_registry().definitions()
    reply = OfflineChatModel().decide([HumanMessage("12 plus 30")], defs)
    assert reply.tool_calls[0]["args"] == {"expression": "12 + 30"}
    assert OfflineChatModel().decide([HumanMessage("12 plus 30")]).tool_calls == []


# --- determinism ---------------------------------------------------------------------------------


def _shape(message: AIMessage) -> tuple[Any, ...]:
    return (message.content, [(c["name"], c["args"]) for c in message.tool_calls])


@pytest.mark.parametrize("question", ["计算 123 × 456", "先计算 12 × 3，再加上 5", "今天几号", "你好"])
def test_same_conversation_gives_the_same_decision(question: str) -> None:
    model = _bound()
    replies = [model.invoke([HumanMessage(question)]) for _ in range(3)]
    assert _shape(replies[0]) == _shape(replies[1]) == _shape(replies[2])
    assert (
        OfflineChatModel()
        .bind_tools(builtin_registry().definitions())
        .invoke([HumanMessage(question)])
        .content
        == replies[0].content
    )


def test_final_answer_is_deterministic() -> None:
    messages, final = _converse(_bound(), "先计算 12 × 3，再加上 5")
    again = _bound().invoke(messages)
    assert _shape(again) == _shape(final)


def test_message_ids_and_tool_call_ids_are_fresh_every_call() -> None:
    model = _bound()
    a = model.invoke([HumanMessage("计算 123 × 456")])
    b = model.invoke([HumanMessage("计算 123 × 456")])
    assert a.id and b.id and a.id != b.id
    assert a.tool_calls[0]["id"] != b.tool_calls[0]["id"]
    assert a.tool_calls[0]["id"].startswith("call_")
    c = model.invoke([HumanMessage("你好")])
    d = model.invoke([HumanMessage("你好")])
    assert c.id != d.id


# --- metadata ------------------------------------------------------------------------------------


def test_response_metadata_marks_the_offline_model() -> None:
    model = _bound()
    calls = model.invoke([HumanMessage("计算 123 × 456")])
    text = model.invoke([HumanMessage("hello")])
    for reply in (calls, text):
        assert reply.response_metadata["offline"] is True
        assert reply.response_metadata["model_name"] == OFFLINE_MODEL_NAME == "kb-agent-offline"
    assert calls.response_metadata["finish_reason"] == "tool_calls"
    assert text.response_metadata["finish_reason"] == "stop"
    assert OfflineChatModel().model_name == "kb-agent-offline"
    assert OfflineChatModel()._llm_type == "kb-agent-offline"


@pytest.mark.parametrize("question", ["计算 123 × 456", "hello", "你好"])
def test_usage_metadata_is_consistent(question: str) -> None:
    messages = [HumanMessage(question)]
    reply = _bound().invoke(messages)
    usage = reply.usage_metadata
    assert usage is not None
    assert usage["input_tokens"] == count_message_tokens(messages) > 0
    assert usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    if not reply.tool_calls:
        assert usage["output_tokens"] == estimate_tokens(reply.content)


def test_input_tokens_grow_with_the_conversation() -> None:
    messages, final = _converse(_bound(), "先计算 12 × 3，再加上 5")
    first = _bound().invoke(messages[:1])
    assert final.usage_metadata["input_tokens"] > first.usage_metadata["input_tokens"]


# --- streaming -----------------------------------------------------------------------------------


def _accumulate(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return total


@pytest.mark.parametrize("question", ["你好", "hello"])
def test_streamed_text_arrives_in_pieces_that_add_up_to_the_invoke_content(question: str) -> None:
    model = _bound()
    chunks = list(model.stream([HumanMessage(question)]))
    assert len(chunks) > 2
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    total = _accumulate(chunks)
    assert total.content == model.invoke([HumanMessage(question)]).content
    assert total.tool_calls == []
    assert total.response_metadata.get("finish_reason") == "stop"


def test_streamed_final_answer_matches_invoke() -> None:
    messages, final = _converse(_bound(), "先计算 12 × 3，再加上 5")
    total = _accumulate(list(_bound().stream(messages)))
    assert total.content == final.content


def test_streamed_tool_call_matches_invoke() -> None:
    model = _bound()
    question = [HumanMessage("今天几号？另外计算 123 × 456")]
    total = _accumulate(list(model.stream(question)))
    invoked = model.invoke(question)
    assert [(c["name"], c["args"]) for c in total.tool_calls] == [
        (c["name"], c["args"]) for c in invoked.tool_calls
    ]
    assert all(c["id"].startswith("call_") for c in total.tool_calls)
    assert total.response_metadata.get("finish_reason") == "tool_calls"
    assert total.response_metadata.get("offline") is True


def test_last_stream_chunk_carries_the_usage() -> None:
    for question in ("hello", "计算 123 × 456"):
        chunks = list(_bound().stream([HumanMessage(question)]))
        assert chunks[-1].usage_metadata is not None
        assert all(c.usage_metadata is None for c in chunks[:-1])
        usage = chunks[-1].usage_metadata
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        assert _accumulate(chunks).usage_metadata == usage


def test_streamed_chunks_share_one_message_id() -> None:
    chunks = list(_bound().stream([HumanMessage("hello")]))
    assert len({c.id for c in chunks}) == 1
    again = list(_bound().stream([HumanMessage("hello")]))
    assert again[0].id != chunks[0].id


async def _astream(model: Any, messages: list[BaseMessage]) -> list[AIMessageChunk]:
    return [chunk async for chunk in model.astream(messages)]


def test_async_stream_matches_sync() -> None:
    import asyncio

    model = _bound()
    chunks = asyncio.run(_astream(model, [HumanMessage("hello")]))
    assert len(chunks) > 2
    assert _accumulate(chunks).content == model.invoke([HumanMessage("hello")]).content


@pytest.mark.parametrize(
    ("question", "saved_word"),
    [("记住我住在杭州", "没有记住：保存这条记忆时出错"), ("Remember that I live in Hangzhou", "Not remembered: saving it failed")],
)
def test_a_memory_write_that_failed_is_reported_without_a_rule_or_exception_class(
    question: str, saved_word: str
) -> None:
    remember = {
        "type": "function",
        "function": {
            "name": "remember",
            "description": "Keep a fact about the user.",
            "parameters": {"type": "object", "properties": {"content": {"type": "string"}}},
        },
    }
    model = OfflineChatModel().bind_tools([remember])
    messages: list[BaseMessage] = [HumanMessage(question)]
    first = model.invoke(messages)
    assert [c["name"] for c in first.tool_calls] == ["remember"]
    failed = "Error: tool 'remember' failed: the connection is closed"
    messages += [first, ToolMessage(failed, tool_call_id=first.tool_calls[0]["id"], name="remember", status="error")]
    said = str(model.invoke(messages).content)
    assert saved_word in said and "the connection is closed" in said, said
    assert "规则" not in said and "rule" not in said and "?" not in said, said
