"""Cross-language search through the whole graph and the real OpenAI client, against the loopback server.

The knowledge base knows its languages from ingest; with a model, a question not written in one of them is
also searched translated into it (the model's reply), both searches fused; the answer is still asked for
the original question. The knob turns it off; a reply that is no translation leaves the question alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph.state import CompiledStateGraph

from graph.builder import build_graph
from graph.services import open_knowledge_base
from nodes.settings import Settings
from tests.fixtures.openai_server import OpenAIServer, ScriptedReply

pytestmark = pytest.mark.timeout(120)

ENGLISH = {
    "threads.md": "# Threads\n\nConversation threads are saved in a SQLite checkpoint database under the data "
    "directory, so a restart keeps them.\n",
    "chunks.md": "# Chunking\n\nDocuments are split into chunks of about 320 tokens, each with its heading.\n",
    "backups.md": "# Backups\n\nA full backup runs every night at two; copies are kept for thirty days.\n",
    "ports.md": "# Ports\n\nThe server listens on port 2024 unless another port is configured.\n",
    "trash.md": "# Trash\n\nDeleted documents stay in the trash for seven days before they are purged.\n",
    "groups.md": "# Access groups\n\nA search only returns chunks of the groups the caller belongs to.\n",
    "memory.md": "# Memory\n\nLong-term memories are facts about the user, recalled at the start of a turn.\n",
    "tools.md": "# Tools\n\nThe calculator evaluates arithmetic safely and refuses expressions that are too large.\n",
}
CHINESE = {
    "报销.md": "# 报销\n\n差旅费在附上发票后三十天内报销，超过期限需要部门经理签字。\n",
    "年假.md": "# 年假\n\n员工每年有十天年假，没用完的可以顺延到次年三月。\n",
}
QUESTION = "会话记录保存在什么地方？"  # asks what threads.md says, in words it does not share
TRANSLATION = "Where are conversation threads saved?"
ANSWER = "会话线程保存在数据目录下的 SQLite 检查点数据库里。"


def _ingest(home: Path, docs: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_HOME", str(home))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    folder = home.parent / f"{home.name}-docs"
    folder.mkdir(parents=True)
    for name, text in docs.items():
        (folder / name).write_text(text, encoding="utf-8")
    kb = open_knowledge_base(Settings(), create=True)
    kb.ingest([folder])
    kb.close()


class Endpoint:
    """The loopback server: a planning request (no tools) gets ``planning``, the agent's gets ``ANSWER``."""

    def __init__(self, planning: str) -> None:
        self.planning = planning
        self.server = OpenAIServer(script=self._reply, api_key="test-key", model="scripted-gpt")

    def _reply(self, body: dict[str, Any]) -> ScriptedReply:
        return ScriptedReply(content=ANSWER if body.get("tools") else self.planning)

    def planning_requests(self) -> list[dict[str, Any]]:
        return [body for body in self.server.requests if not body.get("tools")]

    def agent_requests(self) -> list[dict[str, Any]]:
        return [body for body in self.server.requests if body.get("tools")]


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    started: list[Endpoint] = []

    def start(planning: str) -> Endpoint:
        made = Endpoint(planning)
        made.server.start()
        started.append(made)
        monkeypatch.setenv("KB_AGENT_API_KEY", "test-key")
        monkeypatch.setenv("KB_AGENT_BASE_URL", made.server.base_url)
        monkeypatch.setenv("KB_AGENT_MODEL", "scripted-gpt")
        monkeypatch.setenv("KB_AGENT_MODEL_MAX_RETRIES", "0")
        return made

    yield start
    for made in started:
        made.server.stop()


def _ask(question: str, context: Any = None) -> dict[str, Any]:
    graph: CompiledStateGraph = build_graph()
    return graph.invoke({"messages": [HumanMessage(question)]}, context=context)


def _found_by(result: dict[str, Any]) -> dict[str, list[str]]:
    """Each passage's id and the queries whose search found it (none recorded for a single query)."""
    return {p["id"]: (p.get("metadata") or {}).get("sub_queries", []) for p in result["passages"]}


def _wire(body: dict[str, Any]) -> str:
    """The text of every message a request sent."""
    return "\n".join(str(m.get("content") or "") for m in body["messages"])


def test_a_chinese_question_finds_the_english_passage_through_its_translation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoint: Any
) -> None:
    _ingest(tmp_path / "home", ENGLISH, monkeypatch)
    model = endpoint(json.dumps({"translations": {"en": TRANSLATION}}))
    result = _ask(QUESTION)

    found = _found_by(result)
    assert TRANSLATION in found.get("threads.md#0", []), found
    [planning] = model.planning_requests()
    assert QUESTION in _wire(planning) and '"en"' in _wire(planning)
    [agent] = model.agent_requests()
    # the answer is asked for the user's own question, with the English passage before the model
    assert QUESTION in _wire(agent) and "threads.md#0" in _wire(agent) and TRANSLATION not in _wire(agent)
    assert result["messages"][-1].text == ANSWER


@pytest.mark.parametrize("where", ["deployment-setting", "per-run-knob"])
def test_the_knob_turns_cross_language_search_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoint: Any, where: str
) -> None:
    _ingest(tmp_path / "home", ENGLISH, monkeypatch)
    model = endpoint(json.dumps({"translations": {"en": TRANSLATION}}))
    if where == "deployment-setting":
        monkeypatch.setenv("KB_AGENT_CROSS_LANGUAGE", "false")
    result = _ask(QUESTION, {"cross_language": False} if where == "per-run-knob" else None)
    assert model.planning_requests() == []  # no translation asked: one model call, the answer's
    assert all(TRANSLATION not in queries for queries in _found_by(result).values())
    assert result["messages"][-1].text == ANSWER


@pytest.mark.parametrize(
    "reply",
    ["Sure! The question in English is: where are threads saved?", '{"translations": {"en": 42}}'],
    ids=["not-json", "malformed"],
)
def test_a_reply_that_is_no_translation_leaves_the_question_searched_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoint: Any, reply: str
) -> None:
    _ingest(tmp_path / "home", ENGLISH, monkeypatch)
    model = endpoint(reply)
    result = _ask(QUESTION)
    assert len(model.planning_requests()) == 1
    assert all(not queries for queries in _found_by(result).values())  # one query: nothing fused
    assert result["messages"][-1].text == ANSWER and QUESTION in _wire(model.agent_requests()[0])


def test_a_mixed_language_question_is_asked_for_in_the_kbs_language(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoint: Any
) -> None:
    """Written whole in neither language, it is wanted in English, the one the knowledge base holds."""
    _ingest(tmp_path / "home", ENGLISH, monkeypatch)
    mixed = "are conversation threads kept 重启以后?"
    model = endpoint(json.dumps({"translations": {"en": "Are conversation threads kept after a restart?"}}))
    result = _ask(mixed)
    [planning] = model.planning_requests()
    assert mixed in _wire(planning) and '"en"' in _wire(planning) and '"zh"' not in _wire(planning)
    assert "Are conversation threads kept after a restart?" in _found_by(result).get("threads.md#0", [])


def test_a_corpus_in_the_questions_language_only_asks_for_no_translation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoint: Any
) -> None:
    _ingest(tmp_path / "home", CHINESE, monkeypatch)
    model = endpoint(json.dumps({"translations": {"en": "Do expense claims need receipts?"}}))
    result = _ask("报销要不要附发票？")
    assert model.planning_requests() == []
    assert "报销.md#0" in _found_by(result)
    # the same corpus asked in English is searched in Chinese too
    model = endpoint(json.dumps({"translations": {"zh": "报销需要附上发票吗？"}}))
    result = _ask("Do I have to attach receipts to an expense claim?")
    assert len(model.planning_requests()) == 1 and '"zh"' in _wire(model.planning_requests()[0])
    assert "报销需要附上发票吗？" in _found_by(result).get("报销.md#0", [])
