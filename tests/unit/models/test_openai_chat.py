"""The pass-through client sends exactly what ``ChatOpenAI`` sends, without the SDK's request walk.

Compared on the wire: the loopback OpenAI-compatible server records each request body as it arrived (keys
in their order), for the plain ``ChatOpenAI`` and for ``PassThroughChatOpenAI`` given the same messages and
tools, sync and async, streamed and not.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from openai._utils import maybe_transform
from openai.types.chat import completion_create_params
from pydantic import BaseModel

from models.openai_chat import PassThroughChatOpenAI
from tests.fixtures.openai_server import OpenAIServer, ScriptedReply


@tool
def lookup(query: str, limit: int = 3, filters: dict[str, list[str]] | None = None) -> str:
    """Search the notes (nested schema: the walk would recurse into it)."""
    return query


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return expression


CONVERSATION = [
    SystemMessage("规则：只根据资料回答。"),
    HumanMessage(
        content=[
            {"type": "text", "text": "这张图里是什么？ 1234 × 5"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ]
    ),
    AIMessage("", tool_calls=[{"name": "calculator", "args": {"expression": "1234 * 5"}, "id": "call_1"}]),
    ToolMessage("6170", tool_call_id="call_1"),
    AIMessage("结果是 6170。"),
    HumanMessage("再算一次 7 × 8，然后查 'policy'"),
]


def _client(cls: type[ChatOpenAI], srv: OpenAIServer, **kw: Any) -> Any:
    model = cls(model=srv.model, base_url=srv.base_url, api_key=srv.api_key, max_retries=0, **kw)
    return model.bind_tools([lookup, calculator])


def _wire(srv: OpenAIServer, send: Any) -> list[str]:
    """The bodies ``send`` made the server receive, serialised in their arrival order."""
    before = len(srv.requests)
    for cls in (ChatOpenAI, PassThroughChatOpenAI):
        srv.push(ScriptedReply(content="好的。"))
        send(cls)
    return [json.dumps(body, ensure_ascii=False) for body in srv.requests[before:]]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream", "astream"])
def test_the_server_receives_the_same_bytes_as_from_chat_openai(mode: str) -> None:
    with OpenAIServer() as srv:

        def send(cls: type[ChatOpenAI]) -> None:
            model = _client(cls, srv, stream_usage=True, extra_body={"top_k": 5})
            if mode == "invoke":
                model.invoke(CONVERSATION)
            elif mode == "ainvoke":
                asyncio.run(model.ainvoke(CONVERSATION))
            elif mode == "stream":
                list(model.stream(CONVERSATION))
            else:

                async def drain() -> None:
                    async for _ in model.astream(CONVERSATION):
                        pass

                asyncio.run(drain())

        plain, passed = _wire(srv, send)
    assert passed == plain
    body = json.loads(passed)
    assert body["messages"][1]["content"][1]["type"] == "image_url" and body["top_k"] == 5
    assert [t["function"]["name"] for t in body["tools"]] == ["lookup", "calculator"]


def test_the_bulk_goes_around_the_walk_and_the_walk_would_not_have_changed_it() -> None:
    model = PassThroughChatOpenAI(model="m", api_key="k").bind_tools([lookup, calculator])
    payload = model.bound._get_request_payload(CONVERSATION, **model.kwargs)
    assert payload["messages"] == [] and payload["tools"] == []
    wire = payload["extra_body"]
    assert len(wire["messages"]) == len(CONVERSATION) and len(wire["tools"]) == 2
    # If a future SDK gave these types aliases or formats, sending them around the walk would be wrong.
    walked = maybe_transform(
        {"model": "m", **wire}, completion_create_params.CompletionCreateParamsNonStreaming
    )
    assert walked == {"model": "m", **wire}


def test_structured_output_keeps_the_sdk_path() -> None:
    class Answer(BaseModel):
        text: str

    model = PassThroughChatOpenAI(model="m", api_key="k")
    payload = model._get_request_payload(CONVERSATION, response_format=Answer)
    assert "extra_body" not in payload and len(payload["messages"]) == len(CONVERSATION)


def test_a_request_without_tools_moves_only_its_messages() -> None:
    payload = PassThroughChatOpenAI(model="m", api_key="k")._get_request_payload(CONVERSATION)
    assert "tools" not in payload and "tools" not in payload["extra_body"]
    assert payload["messages"] == [] and len(payload["extra_body"]["messages"]) == len(CONVERSATION)


def test_by_default_the_client_is_langchain_openais_own_and_instrumentation_sees_the_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What an OpenAI-client wrapper (OpenTelemetry, Langfuse, wrap_openai) is handed: the real messages."""
    from models import get_chat_model
    from nodes.settings import Settings

    with OpenAIServer() as srv:
        srv.push(ScriptedReply(content="好的"))
        settings = Settings(model=srv.model, base_url=srv.base_url, api_key_env="KB_TEST_KEY", model_max_retries=0)
        monkeypatch.setenv("KB_TEST_KEY", srv.api_key)
        model = get_chat_model(settings)
        assert type(model) is ChatOpenAI
        seen: list[dict[str, Any]] = []
        create = model.client.create

        def instrumented(**kwargs: Any) -> Any:
            seen.append(kwargs)
            return create(**kwargs)

        monkeypatch.setattr(model.client, "create", instrumented)
        assert model.invoke([HumanMessage("你好")]).content == "好的"
    assert seen[0]["messages"] == [{"role": "user", "content": "你好"}]


def test_the_fast_path_is_an_opt_in_checked_against_the_releases_it_was_tested_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import models.openai_chat as openai_chat
    from models import get_chat_model
    from models.errors import ModelConfigError
    from nodes.settings import Settings

    settings = Settings(model="m-passthrough", base_url="http://127.0.0.1:9/v1", openai_passthrough=True)
    assert isinstance(get_chat_model(settings), PassThroughChatOpenAI)
    monkeypatch.setattr(openai_chat, "version", lambda package: "9.0.0")  # an upgrade nobody tested
    with pytest.raises(ModelConfigError, match=r"KB_AGENT_OPENAI_PASSTHROUGH .* outside"):
        get_chat_model(settings.replace(model="m-passthrough-upgraded"))
