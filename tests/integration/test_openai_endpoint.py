"""End to end through the real OpenAI client: the whole graph against a loopback Chat Completions server.

No model override: ``build_graph()`` picks ``langchain_openai.ChatOpenAI`` from the run's ``Settings``
(``base_url`` + the key in ``KB_AGENT_API_KEY``), so these tests cover the request payload (system
prompt, tool schemas, tool-call / tool-result pairing), SSE streaming and tool-call chunk reassembly,
usage accounting into the budget, tool-call failures the model must recover from, endpoint error
mapping to ``ModelError``, and the loop's stop conditions.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph.state import CompiledStateGraph

from graph.builder import build_graph
from models.errors import ModelError
from nodes.settings import Settings
from tests.fixtures.openai_server import OpenAIServer, ScriptedReply
from tools.builtin import CALCULATOR, CURRENT_DATE

pytestmark = pytest.mark.timeout(60)

API_KEY = "test-key"
MODEL = "scripted-gpt"

Serve = Callable[..., OpenAIServer]


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_API_KEY", API_KEY)


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Start loopback servers on demand; all are stopped at the end of the test."""
    started: list[OpenAIServer] = []

    def start(script: Any = None, api_key: str = API_KEY) -> OpenAIServer:
        srv = OpenAIServer(script=script, api_key=api_key, model=MODEL).start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


@pytest.fixture
def graph() -> CompiledStateGraph:
    return build_graph()


def _ctx(server: OpenAIServer, **overrides: Any) -> Settings:
    return Settings(base_url=server.base_url, model=MODEL, model_max_retries=0, model_timeout=10, **overrides)


def _ask(graph: CompiledStateGraph, ctx: Settings, question: str) -> dict[str, Any]:
    return graph.invoke({"messages": [HumanMessage(question)]}, context=ctx)


def _calc(expression: str, call_id: str | None = None) -> dict[str, Any]:
    return {"name": "calculator", "arguments": {"expression": expression}, "id": call_id}


def _tool_messages(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def _assert_every_call_answered(messages: list[BaseMessage]) -> None:
    """Each assistant tool call is followed, right away and in order, by one tool message with its id."""
    for i, m in enumerate(messages):
        if isinstance(m, AIMessage) and (m.tool_calls or m.invalid_tool_calls):
            ids = [c["id"] for c in m.tool_calls] + [c["id"] for c in m.invalid_tool_calls]
            following = messages[i + 1 : i + 1 + len(ids)]
            assert [getattr(t, "tool_call_id", None) for t in following] == ids, (i, m)


def _wire_tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def _assert_system_first(request: dict[str, Any]) -> None:
    roles = [m["role"] for m in request["messages"]]
    assert roles[0] == "system", roles
    assert roles.count("system") == 1, roles
    assert "kb-agent" in request["messages"][0]["content"]


# --------------------------------------------------------------------------- 1. the plain tool loop
def test_tool_loop_round_trips_through_the_real_client(serve: Serve, graph: CompiledStateGraph) -> None:
    server = serve(
        [
            ScriptedReply(tool_calls=[_calc("123 * 456", "call_calc_1")]),
            ScriptedReply(content="123 × 456 = 56088"),
        ]
    )
    result = _ask(graph, _ctx(server), "What is 123 * 456?")

    final = result["messages"][-1]
    assert isinstance(final, AIMessage)
    assert "56088" in final.content
    assert final.tool_calls == []
    assert result["stop_reason"] is None
    assert len(server.requests) == 2

    first, second = server.requests
    # Not streamed: invoke() without a messages-mode stream asks for a plain completion.
    assert first["model"] == MODEL and not first.get("stream")
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    # The question, then (the turn's first round) the budget note: the only part every round changes.
    assert first["messages"][1]["content"].startswith("What is 123 * 456?\n\n<budget_left")
    for request in server.requests:
        _assert_system_first(request)

    # The tools offered, with the registry's JSON schemas, verbatim.
    offered = {t["function"]["name"]: t for t in first["tools"]}
    assert set(offered) == {
        "calculator",
        "get_current_date",
        "search_knowledge",
        "generate_summary",
        "submit_feedback",
        "knowledge_stats",
        "remember",
        "forget",
        "search_memories",
    }
    for spec in (CALCULATOR, CURRENT_DATE):
        entry = offered[spec.name]
        assert entry["type"] == "function"
        assert entry["function"]["parameters"] == spec.parameters
        assert entry["function"]["description"] == spec.description
    assert second["tools"] == first["tools"]

    # 2nd request: the assistant's tool call, then immediately its result with the same id.
    msgs = second["messages"]
    i = next(k for k, m in enumerate(msgs) if m["role"] == "assistant")
    assistant, tool = msgs[i], msgs[i + 1]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_calc_1"]
    call = assistant["tool_calls"][0]
    assert call["type"] == "function"
    assert call["function"]["name"] == "calculator"
    assert json.loads(call["function"]["arguments"]) == {"expression": "123 * 456"}
    assert tool == {"role": "tool", "tool_call_id": "call_calc_1", "content": "56088"}
    assert msgs[i + 2]["role"] == "user" and msgs[i + 2]["content"].startswith("<budget_left")
    assert msgs[i + 3 :] == []
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "user"]

    tool_msgs = _tool_messages(result["messages"])
    assert [(t.tool_call_id, t.content, t.status) for t in tool_msgs] == [("call_calc_1", "56088", "success")]
    _assert_every_call_answered(result["messages"])


# --------------------------------------------------------------------------- 2. streamed
def test_streamed_run_yields_tokens_tool_events_and_reassembles_tool_call_chunks(
    serve: Serve, graph: CompiledStateGraph
) -> None:
    server = serve(
        [
            ScriptedReply(tool_calls=[_calc("123 * 456", "call_stream_1")]),
            ScriptedReply(content="123 × 456 = 56088"),
        ]
    )
    chunks: list[AIMessageChunk] = []
    custom: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    for mode, payload in graph.stream(
        {"messages": [HumanMessage("What is 123 * 456?")]},
        context=_ctx(server),
        stream_mode=["updates", "messages", "custom"],
    ):
        if mode == "messages":
            message, meta = payload
            if isinstance(message, AIMessageChunk):
                assert meta["langgraph_node"] == "agent"
                chunks.append(message)
        elif mode == "custom":
            custom.append(payload)
        elif mode == "updates":
            updates.append(payload)

    # The model was streamed over SSE, with usage requested in the stream.
    assert len(server.requests) == 2
    for request in server.requests:
        assert request["stream"] is True
        assert (request.get("stream_options") or {}).get("include_usage") is True
        _assert_system_first(request)

    # Tokens of the final answer arrive in pieces (the server splits content into 4).
    text_pieces = [c.content for c in chunks if isinstance(c.content, str) and c.content]
    assert len(text_pieces) >= 2
    assert "".join(text_pieces) == "123 × 456 = 56088"

    # The tool call itself came in several argument fragments...
    arg_fragments = [tc["args"] for c in chunks for tc in c.tool_call_chunks if tc.get("args")]
    assert len(arg_fragments) >= 2
    assert json.loads("".join(arg_fragments)) == {"expression": "123 * 456"}
    # ...and the agent's update holds the reassembled call.
    agent_updates = [u["agent"] for u in updates if "agent" in u]
    first_ai = agent_updates[0]["messages"][-1]
    assert first_ai.tool_calls == [
        {
            "name": "calculator",
            "args": {"expression": "123 * 456"},
            "id": "call_stream_1",
            "type": "tool_call",
        }
    ]
    assert first_ai.invalid_tool_calls == []

    # Custom events: executing, then done, for the calculator call.
    tool_events = [e for e in custom if e.get("type") == "tool_call"]
    assert [(e["tool"], e["status"]) for e in tool_events] == [
        ("calculator", "executing"),
        ("calculator", "done"),
    ]
    assert all(e["call_id"] == "call_stream_1" for e in tool_events)
    assert tool_events[0]["args"] == {"expression": "123 * 456"}

    # The calculator ran on the reassembled expression, and its result went back to the model.
    tool_updates = [u["tools"] for u in updates if "tools" in u]
    assert [(t.tool_call_id, t.content) for t in tool_updates[0]["messages"]] == [("call_stream_1", "56088")]
    assert _wire_tool_results(server.requests[1]) == [
        {"role": "tool", "tool_call_id": "call_stream_1", "content": "56088"}
    ]
    final = agent_updates[-1]["messages"][-1]
    assert isinstance(final, AIMessage) and final.content == "123 × 456 = 56088"


# --------------------------------------------------------------------------- 3. usage
@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize(
    "usages", [[(11, 7), (11, 7)], [(120, 30), (250, 4)]], ids=["default-usage", "custom-usage"]
)
def test_budget_tokens_are_the_endpoints_reported_usage(
    serve: Serve, graph: CompiledStateGraph, streamed: bool, usages: list[tuple[int, int]]
) -> None:
    server = serve(
        [
            ScriptedReply(tool_calls=[_calc("2 + 2", "call_u1")], usage=usages[0]),
            ScriptedReply(content="4", usage=usages[1]),
        ]
    )
    ctx = _ctx(server)
    question = {"messages": [HumanMessage("2 + 2?")]}
    if streamed:
        state: dict[str, Any] = {}
        for mode, payload in graph.stream(question, context=ctx, stream_mode=["values", "messages"]):
            if mode == "values":
                state = payload
    else:
        state = graph.invoke(question, context=ctx)

    assert len(server.requests) == 2
    assert all(bool(r.get("stream")) is streamed for r in server.requests)
    expected = sum(p + c for p, c in usages)
    assert state["budget"]["tokens"] == expected
    assert state["budget"]["rounds"] == 2
    assert state["budget"]["tool_calls"] == 1
    if usages == [(11, 7), (11, 7)]:
        assert expected == 36  # the fixture's default: 18 per call
    # Later requests tell the model what is left, from the real usage.
    assert f"~{200_000 - sum(usages[0])} tokens" in server.requests[1]["messages"][-1]["content"]


# --------------------------------------------------------------------------- 4. parallel calls
def test_two_tool_calls_in_one_reply_get_two_results_in_call_order(
    serve: Serve, graph: CompiledStateGraph
) -> None:
    server = serve(
        [
            ScriptedReply(
                tool_calls=[
                    _calc("6 * 7", "call_first"),
                    {"name": "get_current_date", "arguments": {}, "id": "call_second"},
                ]
            ),
            ScriptedReply(content="6 × 7 = 42, and I know today's date."),
        ]
    )
    result = _ask(graph, _ctx(server), "What is 6*7 and what is today's date?")

    assert len(server.requests) == 2
    assert "42" in result["messages"][-1].content
    tool_msgs = _tool_messages(result["messages"])
    assert [(t.tool_call_id, t.name, t.status) for t in tool_msgs] == [
        ("call_first", "calculator", "success"),
        ("call_second", "get_current_date", "success"),
    ]
    assert tool_msgs[0].content == "42"
    assert {"date", "time", "weekday", "timezone"} <= set(json.loads(tool_msgs[1].content))
    _assert_every_call_answered(result["messages"])

    msgs = server.requests[1]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert [c["id"] for c in msgs[2]["tool_calls"]] == ["call_first", "call_second"]
    assert [c["function"]["name"] for c in msgs[2]["tool_calls"]] == ["calculator", "get_current_date"]
    assert [m["tool_call_id"] for m in msgs[3:5]] == ["call_first", "call_second"]
    assert msgs[3]["content"] == "42"
    assert json.loads(msgs[4]["content"])["date"] == json.loads(tool_msgs[1].content)["date"]


# --------------------------------------------------------------------------- 5. malformed arguments
def test_malformed_json_arguments_become_an_error_result_and_the_loop_goes_on(
    serve: Serve, graph: CompiledStateGraph
) -> None:
    server = serve(
        [
            ScriptedReply(
                tool_calls=[{"name": "calculator", "arguments": '{"expression": "1+', "id": "call_bad_json"}]
            ),
            ScriptedReply(tool_calls=[_calc("1 + 1", "call_fixed")]),
            ScriptedReply(content="1 + 1 = 2"),
        ]
    )
    result = _ask(graph, _ctx(server), "What is 1+1?")  # must not raise

    assert len(server.requests) == 3
    assert result["messages"][-1].content == "1 + 1 = 2"
    assert result["stop_reason"] is None
    bad_ai = result["messages"][1]
    assert isinstance(bad_ai, AIMessage)
    assert bad_ai.tool_calls == []
    assert [c["id"] for c in bad_ai.invalid_tool_calls] == ["call_bad_json"]

    tool_msgs = _tool_messages(result["messages"])
    assert [(t.tool_call_id, t.status) for t in tool_msgs] == [
        ("call_bad_json", "error"),
        ("call_fixed", "success"),
    ]
    assert "not valid JSON" in tool_msgs[0].content
    assert "calculator" in tool_msgs[0].content
    assert tool_msgs[1].content == "2"
    _assert_every_call_answered(result["messages"])

    # The model's next request carries that error, right after the call it answers.
    msgs = server.requests[1]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "user"]
    assert [c["id"] for c in msgs[2]["tool_calls"]] == ["call_bad_json"]
    assert msgs[3]["tool_call_id"] == "call_bad_json"
    assert "not valid JSON" in msgs[3]["content"]


# --------------------------------------------------------------------------- 6. unknown tool
def test_unknown_tool_name_gets_an_error_listing_the_available_tools(
    serve: Serve, graph: CompiledStateGraph
) -> None:
    server = serve(
        [
            ScriptedReply(tool_calls=[{"name": "delete_everything", "arguments": {}, "id": "call_evil"}]),
            ScriptedReply(content="I cannot do that; no such tool exists."),
        ]
    )
    result = _ask(graph, _ctx(server), "Delete everything.")

    assert len(server.requests) == 2
    assert result["messages"][-1].content == "I cannot do that; no such tool exists."
    [tool_msg] = _tool_messages(result["messages"])
    assert tool_msg.tool_call_id == "call_evil"
    assert tool_msg.status == "error"
    assert "unknown tool 'delete_everything'" in tool_msg.content
    assert "calculator" in tool_msg.content and "get_current_date" in tool_msg.content

    [wire] = _wire_tool_results(server.requests[1])
    assert wire["tool_call_id"] == "call_evil"
    assert "available tools: calculator, get_current_date, search_knowledge" in wire["content"]


# --------------------------------------------------------------------------- 7. endpoint errors
def test_rejected_api_key_raises_model_error(serve: Serve, graph: CompiledStateGraph) -> None:
    server = serve([ScriptedReply(content="never sent")], api_key="the-right-key")
    with pytest.raises(ModelError) as info:
        _ask(graph, _ctx(server), "hi")

    err = info.value
    assert type(err) is ModelError
    assert not isinstance(err, openai.OpenAIError)
    assert isinstance(err.__cause__, openai.AuthenticationError)
    message = str(err)
    assert "API key" in message
    assert "KB_AGENT_API_KEY" in message
    assert server.base_url in message
    assert API_KEY not in message  # the key itself is never echoed
    assert len(server.requests) == 1  # one attempt, no retries


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_endpoint_raises_model_error(graph: CompiledStateGraph) -> None:
    base_url = f"http://127.0.0.1:{_free_loopback_port()}/v1"
    ctx = Settings(base_url=base_url, model=MODEL, model_max_retries=0, model_timeout=5)
    with pytest.raises(ModelError) as info:
        _ask(graph, ctx, "hi")

    err = info.value
    assert type(err) is ModelError
    assert isinstance(err.__cause__, openai.APIConnectionError)
    assert "cannot reach" in str(err)
    assert base_url in str(err)


# --------------------------------------------------------------------------- 8. stop conditions
def test_repeated_identical_calls_stop_the_turn(serve: Serve, graph: CompiledStateGraph) -> None:
    server = serve(lambda body: ScriptedReply(tool_calls=[_calc("1 + 1")]))
    result = _ask(graph, _ctx(server), "What is 1+1?")  # must not raise

    assert len(server.requests) == 3  # the 3rd identical request is not run
    assert result["stop_reason"] == "repeated_call"
    final = result["messages"][-1]
    assert isinstance(final, AIMessage)
    assert final.tool_calls == []
    assert final.response_metadata.get("kb_agent_stop") == "repeated_call"
    assert "same arguments" in final.content and "3 times" in final.content

    tool_msgs = _tool_messages(result["messages"])
    assert len(tool_msgs) == 2
    assert all(t.status == "success" and t.content == "2" for t in tool_msgs)
    assert result["budget"]["tool_calls"] == 2
    _assert_every_call_answered(result["messages"])


def test_round_budget_stops_a_model_that_never_stops_calling(serve: Serve, graph: CompiledStateGraph) -> None:
    def always_another(body: dict[str, Any]) -> ScriptedReply:
        n = sum(1 for m in body["messages"] if m["role"] == "tool")
        return ScriptedReply(tool_calls=[_calc(f"{n} + 1")])

    server = serve(always_another)
    result = _ask(graph, _ctx(server, max_rounds=3), "Count for me.")  # must not raise

    assert len(server.requests) == 3
    assert result["stop_reason"] == "rounds"
    final = result["messages"][-1]
    assert isinstance(final, AIMessage)
    assert final.tool_calls == []
    assert final.response_metadata.get("kb_agent_stop") == "rounds"
    assert "budget" in final.content and "model rounds (3)" in final.content
    assert [t.content for t in _tool_messages(result["messages"])] == ["1", "2", "3"]
    assert result["budget"]["rounds"] == 3
    _assert_every_call_answered(result["messages"])


# --------------------------------------------------------------------------- tool calls without an id
@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
def test_a_tool_call_without_an_id_gets_one_on_receipt_and_the_loop_goes_on(
    serve: Serve, graph: CompiledStateGraph, streamed: bool
) -> None:
    server = serve(
        [
            ScriptedReply(tool_calls=[{**_calc("6 * 7"), "omit_id": True}, {**_calc("1 + 1"), "omit_id": True}]),
            ScriptedReply(content="6 × 7 = 42"),
        ]
    )
    inputs = {"messages": [HumanMessage("What is 6 * 7?")]}
    if streamed:
        messages: list[BaseMessage] = list(inputs["messages"])
        for mode, chunk in graph.stream(inputs, context=_ctx(server), stream_mode=["updates", "messages"]):
            if mode == "updates":
                for update in chunk.values():
                    messages += (update or {}).get("messages", [])
    else:
        messages = graph.invoke(inputs, context=_ctx(server))["messages"]
    assert messages[-1].content == "6 × 7 = 42"
    _assert_every_call_answered(messages)
    ids = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert len(ids) == 2 and all(ids) and len(set(ids)) == 2
    assert len(server.requests) == 2
    second = server.requests[1]["messages"]
    assistant = next(m for m in second if m["role"] == "assistant")
    sent = [c["id"] for c in assistant["tool_calls"]]
    assert all(sent) and len(set(sent)) == 2
    results = _wire_tool_results(server.requests[1])
    assert [(t["tool_call_id"], t["content"]) for t in results] == [(sent[0], "42"), (sent[1], "2")]
