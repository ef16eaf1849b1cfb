"""Short-term memory: the budget arithmetic, whole-round folding, the summary rules, failure safety."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph import add_messages
from langgraph.runtime import Runtime

from models import ScriptedChatModel
from models.offline.earlier_calculation import earlier_calculation
from models.summarizers import checked_summary
from models.summary import extractive_summary, has_sections, verbatim_tokens
from models.tokens import count_message_tokens, count_tool_tokens
from nodes import prompts
from nodes.budget import Budget
from nodes.history import request, wire_history
from nodes.settings import Settings
from nodes.state import State
from nodes.summarize import (
    HistoryBudget,
    HistoryLimits,
    checked_covers,
    make_summarize,
    measure,
    model_summarizer,
    rounds_to_fold,
    split_rounds,
    window_for,
)
from tools.builtin import builtin_registry

# -- budget ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("offline", 16_384),
        ("gpt-4o-mini", 128_000),
        ("gpt-3.5-turbo", 16_385),
        ("qwen-plus", 131_072),
        ("deepseek-chat", 128_000),
        ("llama3", 8_192),
        ("moonshot-v1-32k", 32_768),
        ("something-new", 8_192),
    ],
)
def test_context_window_defaults_per_model_family(name: str, window: int) -> None:
    assert window_for(name) == window


def test_input_budget_is_window_minus_answer_minus_margin() -> None:
    offline = HistoryLimits.from_context(Settings())
    assert (offline.context_window, offline.reserved_answer_tokens, offline.safety_margin_tokens) == (
        16_384,
        2_048,
        819,
    )
    assert offline.input_budget == 16_384 - 2_048 - 819
    assert (offline.keep_recent_rounds, offline.summary_max_tokens) == (3, 1_024)
    big = HistoryLimits.from_context(Settings(model="gpt-4o", api_key_env="NOPE"))
    assert big.input_budget == 128_000 - 4_096 - 4_096
    assert HistoryLimits.from_context(Settings(context_window=10_000)).input_budget == 10_000 - 1_250 - 500


def test_context_fields_override_every_default() -> None:
    settings = Settings(
        context_window=20_000,
        reserved_answer_tokens=1_000,
        safety_margin_tokens=300,
        keep_recent_rounds=5,
        summary_max_tokens=700,
    )
    s = HistoryLimits.from_context(settings)
    assert (s.reserved_answer_tokens, s.safety_margin_tokens, s.keep_recent_rounds, s.summary_max_tokens) == (
        1_000,
        300,
        5,
        700,
    )
    assert s.input_budget == 18_700


def test_history_budget_subtracts_every_other_part() -> None:
    b = HistoryBudget(input_budget=3_000, system=200, tools=350, question=50, passages=900, memories=100)
    assert b.history == 3_000 - 200 - 350 - 50 - 900 - 100


def test_measured_parts_add_up_to_the_request_the_agent_sends() -> None:
    registry = builtin_registry()
    messages = [*_conversation([1, 0, 2]), HumanMessage("最后一个问题", id="q-last")]
    state = State(
        messages=messages,
        summary="已讨论：\n- 用户：x\n已决定：\n- （无）\n已完成：\n- （无）",
        passages=[{"id": "doc#1", "text": "RAG 是检索增强生成。" * 20}],
        memories=[{"memory_type": "semantic", "content": "用户喜欢简洁的中文回答"}],
    )
    ctx = Settings()
    accounts, summary_tokens = measure(HistoryLimits.from_context(ctx), state, ctx, registry.definitions())
    budget = Budget.from_context(ctx)
    system = prompts.system_prompt(
        "zh",
        remaining=budget.remaining(budget.counters_for({}, None)),
        summary=state.summary,
        memories=state.memories,
        passages=state.passages,
    )
    sent = count_message_tokens([SystemMessage(system), *wire_history(messages)])
    history = count_message_tokens(wire_history(messages[:-1]))
    parts = (
        accounts.system + accounts.passages + accounts.memories + summary_tokens + history + accounts.question
    )
    assert abs(parts - sent) <= 6
    assert accounts.tools == count_tool_tokens(registry.definitions())
    assert accounts.passages > 200 and accounts.memories > 5


@pytest.mark.parametrize(
    ("first", "last", "summary"),
    [
        ("第一个问题是什么？", "And what is the last question?", ""),
        ("What was the first question?", "最后一个问题是什么？", ""),
        ("第一个问题是什么？", "And what is the last question?", "Discussed:\n- user: x"),
        ("What was the first question?", "最后一个问题是什么？", "已讨论：\n- 用户：x"),
    ],
)
def test_the_accounts_cover_the_request_when_the_thread_changes_language(first: str, last: str, summary: str) -> None:
    """The rules go out in the thread's first language, the turn's parts in the current question's: a
    thread begun in Chinese and asked in English was counted with the shorter English rules (13 tokens
    under), and a request went over its budget."""
    messages = [HumanMessage(first, id="q0"), AIMessage("answer " * 20, id="a0"), HumanMessage(last, id="q1")]
    state = State(
        messages=messages,
        summary=summary,
        passages=[{"id": "doc#1", "text": "RAG 是检索增强生成。" * 5}],
        memories=[{"id": "m1", "memory_type": "semantic", "content": "用户喜欢简洁的中文回答"}],
    )
    ctx = Settings()
    accounts, summary_tokens = measure(HistoryLimits.from_context(ctx), state, ctx, [])
    budget = Budget.from_context(ctx)
    remaining = budget.remaining(budget.counters_for(state.budget, None))
    sent = count_message_tokens(
        request(messages, remaining=remaining, summary=summary, memories=state.memories, passages=state.passages)
    )
    history = count_message_tokens(wire_history(messages[:-1]))
    parts = accounts.system + accounts.passages + accounts.memories + summary_tokens + history + accounts.question
    assert sent <= parts <= sent + 20


def test_rounds_to_fold_keeps_recent_rounds_and_folds_more_only_when_needed() -> None:
    assert rounds_to_fold([100] * 6, history_budget=1_000, summary_tokens=0, keep=3) == 0
    assert rounds_to_fold([100] * 6, history_budget=500, summary_tokens=100, keep=3) == 3
    assert rounds_to_fold([100] * 6, history_budget=250, summary_tokens=100, keep=3) == 5
    assert rounds_to_fold([100] * 6, history_budget=50, summary_tokens=100, keep=3) == 6
    assert rounds_to_fold([100] * 2, history_budget=150, summary_tokens=0, keep=3) == 1


# -- rounds and the property test -----------------------------------------------------------------


def _round(n_tools: int, size: int = 1, *, tag: str = "") -> list[AnyMessage]:
    tag = tag or uuid.uuid4().hex[:8]
    out: list[AnyMessage] = [HumanMessage(f"问题 {tag} " + "内容" * size, id=f"h-{tag}")]
    for k in range(n_tools):
        calls = [
            {"name": "calculator", "args": {"expression": f"{k}+{j}"}, "id": f"c-{tag}-{k}-{j}"}
            for j in range(1 + k % 2)
        ]
        out.append(AIMessage("", tool_calls=calls, id=f"a-{tag}-{k}"))
        out += [
            ToolMessage(str(j), tool_call_id=c["id"], name="calculator", id=f"t-{c['id']}")
            for j, c in enumerate(calls)
        ]
    out.append(AIMessage("答案 " + "文字" * size, id=f"f-{tag}"))
    return out


def _conversation(tools_per_round: list[int], sizes: list[int] | None = None) -> list[AnyMessage]:
    sizes = sizes or [1] * len(tools_per_round)
    return [m for i, n in enumerate(tools_per_round) for m in _round(n, sizes[i], tag=f"r{i}")]


def test_split_rounds_starts_each_round_at_a_user_message() -> None:
    messages = [AIMessage("hello", id="greet"), *_conversation([2, 0])]
    rounds = split_rounds(messages)
    assert [len(r) for r in rounds] == [1, 1 + 2 + 3 + 1, 2]
    assert all(isinstance(r[0], HumanMessage) for r in rounds[1:])


def _run(state: State, ctx: Settings | None = None, **kwargs: Any) -> tuple[dict[str, Any], list[AnyMessage]]:
    node = make_summarize(builtin_registry(), **kwargs)
    update = node.invoke(state, runtime=Runtime(context=ctx or Settings()))
    after = add_messages(list(state.messages), update["messages"]) if "messages" in update else state.messages
    return update, list(after)


def assert_well_formed(kept: list[AnyMessage]) -> None:
    assert kept and isinstance(kept[0], HumanMessage), "the kept history starts at a round boundary"
    for i, message in enumerate(kept):
        if isinstance(message, AIMessage) and message.tool_calls:
            ids = [c["id"] for c in message.tool_calls]
            assert [getattr(m, "tool_call_id", None) for m in kept[i + 1 : i + 1 + len(ids)]] == ids
        if isinstance(message, ToolMessage):
            j = i - 1
            while isinstance(kept[j], ToolMessage):
                j -= 1
            assert isinstance(kept[j], AIMessage) and kept[j].tool_calls


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tools=st.lists(st.integers(0, 3), min_size=1, max_size=14),
    sizes=st.lists(st.integers(1, 120), min_size=14, max_size=14),
    window=st.integers(700, 5_000),
    keep=st.integers(0, 4),
)
def test_folding_never_splits_a_round_or_a_tool_call_from_its_results(
    tools: list[int], sizes: list[int], window: int, keep: int
) -> None:
    messages = _conversation(tools, sizes[: len(tools)])
    limits = HistoryLimits.resolve(window, keep_recent_rounds=keep, summary_max_tokens=150)
    update, after = _run(State(messages=messages), settings=limits)
    original_ids = [m.id for m in messages]
    kept_ids = [m.id for m in after]
    assert kept_ids == original_ids[len(original_ids) - len(kept_ids) :], "what is kept is a suffix"
    assert_well_formed(after)
    current = split_rounds(messages)[-1]
    assert after[-len(current) :] == current, "the current round is always kept whole"
    if "summary" in update:
        folded = messages[: len(messages) - len(after)]
        assert folded and update["summary_covers"] == folded[-1].id
        assert isinstance(messages[len(folded)], HumanMessage)
        assert has_sections(update["summary"])
    else:
        assert after == messages


def test_under_budget_nothing_changes() -> None:
    state = State(messages=_conversation([1, 2, 0]))
    assert _run(state) == ({}, state.messages)


def test_over_budget_the_oldest_rounds_fold_and_three_stay_verbatim() -> None:
    messages = _conversation([1] * 10, [60] * 10)
    update, after = _run(State(messages=messages), settings=HistoryLimits.resolve(3_000))
    assert len(split_rounds(after)) == 4  # three recent rounds + the current one
    assert update["summary_covers"] == messages[len(messages) - len(after) - 1].id
    assert "calculator(0+0) → 0" in update["summary"]


# -- corrupted marker and failing summary models ----------------------------------------------------


def test_corrupted_summary_marker_is_treated_as_covering_nothing() -> None:
    messages = _conversation([1, 1])
    mid_round = messages[1].id  # an assistant tool call, not the end of a round
    current = messages[-1].id
    assert checked_covers(messages, None) == (-1, False)
    assert checked_covers(messages, "gone-after-folding") == (-1, False)
    assert checked_covers(messages, messages[3].id) == (3, False)
    for bad in (mid_round, current, 12345, {"x": 1}, ""):
        assert checked_covers(messages, bad) == (-1, True)
        update, after = _run(State(messages=messages, summary="旧摘要", summary_covers=bad))  # type: ignore[arg-type]
        assert update == {"summary_covers": None} and after == messages


def _failing(kind: str) -> Any:
    def summarizer(old: str, messages: list[BaseMessage], lang: str, max_tokens: int) -> str | None:
        if kind == "raise":
            raise RuntimeError("endpoint down")
        if kind == "sleep":
            time.sleep(2)
        return None

    return summarizer


@pytest.mark.parametrize("kind", ["raise", "none", "sleep"])
def test_a_failing_summary_model_keeps_the_old_summary_and_every_message(kind: str) -> None:
    messages = _conversation([1] * 8, [80] * 8)
    limits = dataclasses.replace(HistoryLimits.resolve(1_500), summary_timeout=0.3)
    started = time.perf_counter()
    update, after = _run(
        State(messages=messages, summary="已讨论：\n- 旧的\n已决定：\n- （无）\n已完成：\n- （无）"),
        summarizer=_failing(kind),
        settings=limits,
    )
    assert update == {} and after == messages
    assert time.perf_counter() - started < 1.5


def test_a_model_summary_folds_the_same_under_invoke_and_ainvoke() -> None:
    """The async path awaits the summary model (no thread held) and makes the same update."""
    good = "Discussed:\n- port 5432\nDecided:\n- (none)\nDone:\n- calculator(2+2) → 4"
    state = State(messages=_conversation([1] * 8, [80] * 8))
    updates = []
    for run in ("invoke", "ainvoke"):
        model = ScriptedChatModel([good])
        node = make_summarize(builtin_registry(), model, settings=HistoryLimits.resolve(1_500))
        runtime = Runtime(context=Settings())
        if run == "invoke":
            updates.append(node.invoke(state, runtime=runtime))
        else:
            updates.append(asyncio.run(node.ainvoke(state, runtime=runtime)))
        assert len(model.calls) == 1
    blocking, awaited = updates
    assert blocking["summary"] == awaited["summary"] == good
    assert blocking["summary_covers"] == awaited["summary_covers"]
    assert [m.id for m in blocking["messages"]] == [m.id for m in awaited["messages"]] != []


def test_a_failed_summary_is_tried_once_per_turn_not_once_per_model_round() -> None:
    calls: list[int] = []

    def failing(old: str, messages: list[BaseMessage], lang: str, max_tokens: int) -> str | None:
        calls.append(len(messages))
        raise RuntimeError("endpoint down")

    state = State(messages=_conversation([1] * 8, [80] * 8))
    node = make_summarize(builtin_registry(), summarizer=failing, settings=HistoryLimits.resolve(1_500))
    assert node.invoke(state, runtime=Runtime(context=Settings())) == {}
    assert node.invoke(state, runtime=Runtime(context=Settings())) == {}
    assert len(calls) == 1
    later = State(messages=[*state.messages, AIMessage("a", id="a-x"), HumanMessage("next", id="h-next")])
    assert node.invoke(later, runtime=Runtime(context=Settings())) == {} and len(calls) == 2


@pytest.mark.parametrize(
    "reply", ["", "I cannot help with that.", "已讨论：\n- x\n已完成：\n- y", "已讨论：\n" + "- 很长\n" * 900]
)
def test_model_summary_garbage_is_rejected(reply: str) -> None:
    summarize = model_summarizer(ScriptedChatModel([reply]))
    assert summarize("", [HumanMessage("hi"), AIMessage("hello")], "zh", 200) is None


def test_model_summarizer_sends_the_rules_old_summary_and_folded_messages() -> None:
    good = "Discussed:\n- port 5432\nDecided:\n- (none)\nDone:\n- calculator(2+2) → 4"
    model = ScriptedChatModel([good])
    folded = _round(1, tag="x")
    assert model_summarizer(model)("Discussed:\n- older", folded, "en", 300) == good
    prompt = model.calls[0][-1].content
    for needed in (
        "verbatim",
        "To confirm",
        "Discussed:",
        "Current summary:\nDiscussed:\n- older",
        "calculator",
    ):
        assert needed in prompt
    zh = ScriptedChatModel(["已讨论：\n- a\n已决定：\n- b\n已完成：\n- c"])
    assert model_summarizer(zh)("", [HumanMessage("端口是 5432")], "zh", 300)
    assert "待确认" in zh.calls[0][-1].content and "原样照抄" in zh.calls[0][-1].content


def test_checked_summary_strips_code_fences() -> None:
    assert checked_summary("```\nDiscussed:\n- a\nDecided:\n- b\nDone:\n- c\n```", 100) == (
        "Discussed:\n- a\nDecided:\n- b\nDone:\n- c"
    )


# -- the extractive summary's rules -----------------------------------------------------------------


def _facts_thread() -> list[BaseMessage]:
    call = {"name": "read_file", "args": {"path": "/srv/app/config.yaml"}, "id": "c1"}
    return [
        HumanMessage("我们的服务跑在 /srv/app 下，数据库端口是 5432。内存上限 2048 MB。"),
        AIMessage("好的。"),
        HumanMessage("我们决定使用 PostgreSQL 16，订单号 ORD-2024-0042 先不处理。"),
        AIMessage("", tool_calls=[call]),
        ToolMessage(
            "Error: E1024 permission denied: /srv/app/config.yaml",
            tool_call_id="c1",
            name="read_file",
            status="error",
        ),
        AIMessage("读取失败，错误码 E1024。"),
        HumanMessage("数据库端口是 5433。HTTP 503 的问题已修复。"),
        AIMessage("收到。"),
    ]


def test_extractive_summary_has_three_sections_and_copies_verbatim() -> None:
    summary = extractive_summary("", _facts_thread(), max_tokens=1_000)
    assert has_sections(summary)
    discussed, rest = summary.split("已决定：")
    decided, done = rest.split("已完成：")
    assert "PostgreSQL 16" in decided and "ORD-2024-0042" in decided
    assert "read_file(/srv/app/config.yaml) → 失败：Error: E1024" in done
    assert "HTTP 503 的问题已修复" in done
    for token in ("/srv/app", "2048", "E1024", "ORD-2024-0042", "/srv/app/config.yaml"):
        assert token in summary
    assert "待确认：数据库端口 = 5432 / 5433" in discussed


def test_explicit_update_wins_over_the_old_value() -> None:
    first = extractive_summary("", _facts_thread()[:2])
    updated = extractive_summary(first, [HumanMessage("把数据库端口改为 6000。"), AIMessage("好")])
    assert "事实：数据库端口 = 6000（原为 5432，用户已更新）" in updated
    assert "待确认" not in updated


def test_english_summary_marks_conflicts_to_confirm() -> None:
    messages = [
        HumanMessage("The server port is 8080. We decided to use Redis 7.2 for the cache."),
        AIMessage("Noted."),
        HumanMessage("The server port is 9090."),
        AIMessage("OK."),
    ]
    summary = extractive_summary("", messages)
    assert summary.startswith("Discussed:") and "Decided:\n- We decided to use Redis 7.2" in summary
    assert "To confirm: server port = 8080 / 9090" in summary


def test_extractive_summary_is_deterministic_merges_and_respects_its_limit() -> None:
    thread = _facts_thread()
    assert extractive_summary("", thread) == extractive_summary("", thread)
    first = extractive_summary("", thread[:2], max_tokens=400)
    merged = extractive_summary(first, thread[2:], max_tokens=400)
    assert "/srv/app" in merged and "PostgreSQL 16" in merged
    many = [
        m for i in range(60) for m in (HumanMessage(f"计算 {i} × 3 的话题 {i}"), AIMessage(f"结果 {i * 3}"))
    ]
    small = extractive_summary(merged, many, max_tokens=200)
    from models.tokens import estimate_tokens

    assert estimate_tokens(small) <= 200 and has_sections(small)
    assert "待确认" in small  # conflicts are the last lines to go


def test_a_long_sentence_is_clipped_but_keeps_its_verbatim_tokens() -> None:
    text = (
        "请记一下："
        + "这是很长的说明，" * 30
        + "配置在 /etc/kb/agent.toml，超时 37 秒，错误码 ERR_TIMEOUT_504。"
    )
    summary = extractive_summary("", [HumanMessage(text), AIMessage("好")])
    for token in ("/etc/kb/agent.toml", "37", "ERR_TIMEOUT_504"):
        assert token in summary
    assert verbatim_tokens("v1.2.3 at C:\\data\\x.txt, 0x1F, 42%") == [
        "v1.2.3",
        "C:\\data\\x.txt",
        "0x1F",
        "42%",
    ]


def test_earlier_calculation_reads_results_from_the_summary_and_the_history() -> None:
    block = "<对话摘要>\n已讨论：\n- （无）\n已决定：\n- （无）\n已完成：\n- calculator(123 × 456) → 56088\n</对话摘要>"
    later = ToolMessage("7", tool_call_id="c9", name="calculator")
    messages = [SystemMessage(block), HumanMessage("3+4"), later, AIMessage("7"), HumanMessage("q")]
    assert earlier_calculation("把第一个问题的结果乘以 2", messages) == "(56088) * 2"
    assert earlier_calculation("把上一个结果加上 10", messages) == "(7) + 10"
    assert earlier_calculation("what is the first result divided by 4?", messages) == "(56088) / 4"
    assert earlier_calculation("今天几号", messages) is None
    assert earlier_calculation("把第一个问题的结果乘以 2", [HumanMessage("q")]) is None
