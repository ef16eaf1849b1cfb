"""Rerankers reorder candidates by relevance and keep the retrieval order whenever they fail."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from models import ScriptedChatModel
from models.rerank import (
    HTTPReranker,
    LLMReranker,
    Reranker,
    RerankerSettingError,
    cut_below,
    parse_json_object,
    reranker_from_setting,
)
from stores.base import Passage

PASSAGES: list[Passage] = [
    {
        "id": f"doc#{i}",
        "text": text,
        "source": "doc",
        "score": 0.5 - i / 10,
        "retrievers": ["bm25"],
        "metadata": {},
    }
    for i, text in enumerate(["差旅概述", "酒店住宿每晚上限 500 元", "交通费用", "餐补标准"])
]


@dataclass
class RerankServer:
    """A loopback ``/v1/rerank`` endpoint; ``reply`` maps the request body to (status, body text)."""

    reply: Callable[[dict[str, Any]], tuple[int, str]]
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    url: str = ""


@pytest.fixture
def server() -> Iterator[RerankServer]:
    state = RerankServer(reply=lambda body: (500, "unset"))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(body)
            state.headers.append(dict(self.headers))
            status, text = state.reply(body)
            if status == 0:  # hang until the test is over
                state.release.wait(10)
                status, text = 200, "{}"
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield state
    state.release.set()
    httpd.shutdown()
    httpd.server_close()


def _by_keyword(body: dict[str, Any]) -> tuple[int, str]:
    """Scores documents mentioning 酒店 highest, like a cross-encoder would for a hotel question."""
    scored = [
        {"index": i, "relevance_score": (0.9 if "酒店" in doc else 0.1 * i)}
        for i, doc in enumerate(body["documents"])
    ]
    scored.sort(key=lambda r: -r["relevance_score"])
    return 200, json.dumps({"results": scored[: body["top_n"]]})


def test_http_reranker_orders_by_relevance_score(server: RerankServer) -> None:
    server.reply = _by_keyword
    reranker = HTTPReranker(server.url, model="bge-reranker-v2-m3", api_key="sk-test")
    ranked = reranker.rerank("酒店每晚能报销多少？", PASSAGES, top_k=3)
    assert [p["id"] for p in ranked] == ["doc#1", "doc#3", "doc#2"]
    assert ranked[0]["score"] == 0.9 and ranked[0]["retrievers"] == ["bm25", "rerank"]
    assert ranked[0]["metadata"]["pre_rerank_score"] == PASSAGES[1]["score"]
    assert server.requests == [
        {
            "query": "酒店每晚能报销多少？",
            "documents": [p["text"] for p in PASSAGES],
            "top_n": 3,
            "model": "bge-reranker-v2-m3",
        }
    ]
    assert server.headers[0]["Authorization"] == "Bearer sk-test"
    assert PASSAGES[1]["score"] == 0.4  # the input passages are not modified
    assert "sk-test" not in repr(reranker)


def test_http_reranker_fills_up_from_input_order_when_the_endpoint_returns_fewer(
    server: RerankServer,
) -> None:
    server.reply = lambda body: (200, json.dumps({"results": [{"index": 2, "relevance_score": 0.7}]}))
    ranked = HTTPReranker(server.url + "/rerank").rerank("q", PASSAGES, top_k=3)
    assert [p["id"] for p in ranked] == ["doc#2", "doc#0", "doc#1"]
    assert "model" not in server.requests[0]


def test_dashscope_style_output_wrapper_is_understood(server: RerankServer) -> None:
    results = [{"index": 3, "relevance_score": 0.8}, {"index": 0, "relevance_score": 0.2}]
    server.reply = lambda body: (200, json.dumps({"output": {"results": results}}))
    assert [p["id"] for p in HTTPReranker(server.url).rerank("q", PASSAGES, 2)] == ["doc#3", "doc#0"]


@pytest.mark.parametrize(
    "reply",
    [
        (500, '{"error": "boom"}'),
        (200, "not json"),
        (200, '{"data": []}'),
        (200, '{"results": [{"index": 9, "relevance_score": 1}]}'),
        (200, '{"results": [{"index": 0, "relevance_score": "high"}]}'),
        (200, '{"results": [{"index": 0, "relevance_score": 1}, {"index": 0, "relevance_score": 1}]}'),
        (0, ""),
    ],
    ids=["500", "not-json", "no-results", "bad-index", "bad-score", "duplicate-index", "timeout"],
)
def test_http_reranker_failure_keeps_the_input_order(
    server: RerankServer, reply: tuple[int, str], caplog: pytest.LogCaptureFixture
) -> None:
    server.reply = lambda body: reply
    with caplog.at_level(logging.WARNING, logger="models.rerank"):
        ranked = HTTPReranker(server.url, api_key="sk-secret", timeout=0.2).rerank("q", PASSAGES, top_k=2)
    assert ranked == PASSAGES[:2]
    assert "keeping the retrieval order" in caplog.text and "sk-secret" not in caplog.text


def test_an_unreachable_endpoint_keeps_the_input_order() -> None:
    assert HTTPReranker("http://127.0.0.1:9/v1", timeout=0.5).rerank("q", PASSAGES, 4) == PASSAGES


def test_nothing_to_rerank_makes_no_request(server: RerankServer) -> None:
    reranker = HTTPReranker(server.url)
    assert reranker.rerank("q", [], 5) == [] and reranker.rerank("q", PASSAGES, 0) == []
    assert server.requests == []


def test_llm_reranker_scores_all_passages_in_one_call() -> None:
    model = ScriptedChatModel(['```json\n{"scores": [2, 9.5, 0, 6]}\n```'])
    ranked = LLMReranker(model).rerank("酒店每晚能报销多少？", PASSAGES, top_k=3)
    assert [p["id"] for p in ranked] == ["doc#1", "doc#3", "doc#0"]
    assert ranked[0]["score"] == pytest.approx(0.95) and ranked[0]["retrievers"] == ["bm25", "rerank"]
    assert len(model.calls) == 1
    prompt = "\n".join(str(m.content) for m in model.calls[0])
    assert "[1] 酒店住宿每晚上限 500 元" in prompt and "共 4 个" in prompt


def test_a_minimum_score_drops_weak_reranked_passages_but_never_unscored_ones() -> None:
    ranked = LLMReranker(ScriptedChatModel(['{"scores": [2, 9.5, 0, 6]}'])).rerank("q", PASSAGES, top_k=4)
    assert [p["id"] for p in cut_below(ranked, 0.5)] == ["doc#1", "doc#3"]
    assert cut_below(ranked, 0.0) == ranked
    unscored = LLMReranker(ScriptedChatModel(["garbage"])).rerank("q", PASSAGES, 3)
    assert cut_below(unscored, 0.9) == unscored  # a failed rerank keeps the fused order, uncut


@pytest.mark.parametrize(
    "reply",
    [
        "no idea",
        '{"scores": [1, 2]}',
        '{"scores": [1, 2, 3, "x"]}',
        '{"scores": [1, 2, 3, 11]}',
        '{"score": 1}',
        "",
    ],
    ids=["garbage", "too-few", "not-a-number", "out-of-range", "wrong-key", "empty"],
)
def test_llm_reranker_malformed_reply_keeps_the_input_order(reply: str) -> None:
    assert LLMReranker(ScriptedChatModel([reply])).rerank("q", PASSAGES, 3) == PASSAGES[:3]


def test_llm_reranker_timeout_keeps_the_input_order() -> None:
    release = threading.Event()

    def hang(messages: list[BaseMessage], tools: list[dict]) -> str:
        release.wait(10)
        return '{"scores": [1, 2, 3, 4]}'

    try:
        assert LLMReranker(ScriptedChatModel(hang), timeout=0.05).rerank("q", PASSAGES, 2) == PASSAGES[:2]
    finally:
        release.set()


def test_setting_names_the_reranker() -> None:
    model = ScriptedChatModel([])
    assert reranker_from_setting("", model) is None and reranker_from_setting(" off ", None) is None
    llm = reranker_from_setting("llm", model)
    assert isinstance(llm, LLMReranker) and llm.model is model and isinstance(llm, Reranker)
    http = reranker_from_setting("https://api.jina.ai/v1#jina-reranker-v2-base-multilingual", None, "k")
    assert isinstance(http, HTTPReranker)
    assert (http.url, http.model) == ("https://api.jina.ai/v1/rerank", "jina-reranker-v2-base-multilingual")
    assert reranker_from_setting("http://localhost:8000/rerank", None).url == "http://localhost:8000/rerank"
    with pytest.raises(RerankerSettingError, match="needs a chat model"):
        reranker_from_setting("llm", None)
    with pytest.raises(RerankerSettingError, match="unknown reranker"):
        reranker_from_setting("cohere", model)


def test_json_is_found_inside_chatter() -> None:
    assert parse_json_object('Here: {"a": {"b": 1}} and {"c": 2}') == {"a": {"b": 1}}
    assert parse_json_object('{broken {"ok": true}') == {"ok": True}
    assert parse_json_object("[1, 2]") is None and parse_json_object("") is None
