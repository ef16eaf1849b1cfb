"""Long-term memory through the whole graph: cross-thread recall, tools, failures, bad extraction output, CLI.

Tests that use the ``store`` fixture or the settings run on both storage backends (``store_backend``):
embedded (Chroma and SQLite under the data dir) and shared (a Chroma server and Postgres)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import typer
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from typer.testing import CliRunner

from cli import memory as memory_cli
from graph.builder import build_graph
from graph.services import RunMemory, open_memory
from models import ScriptedChatModel, tool_call
from models.extractor import ModelExtractor
from nodes.settings import Settings
from stores.embeddings import HashingEmbedder
from stores.memory.rules import EXTRACTION_PROMPT, ExtractionRequest
from stores.memory.store import ChromaMemoryStore
from stores.memory.updater import BackgroundMemoryUpdater
from tests.integration.conftest import Backend
from tools.builtin import builtin_registry
from tools.memory_tools import memory_tools

PREFERENCE = "用户喜欢简洁的中文回答"


@pytest.fixture
def store(tmp_path: Path, store_backend: Backend) -> ChromaMemoryStore:
    return ChromaMemoryStore(tmp_path / "mem", embedder=HashingEmbedder(), **store_backend.kwargs())


def config(thread: str, user: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": user}}


def ask(g: Any, text: str, thread: str, user: str) -> dict[str, Any]:
    return g.invoke({"messages": [HumanMessage(text)]}, config(thread, user))


def system_prompt(call: list[BaseMessage]) -> str:
    """What one request told the model besides the conversation: the rules (the one system message) and
    the turn's data, appended to the question's user message."""
    assert isinstance(call[0], SystemMessage)
    assert not any(isinstance(m, SystemMessage) for m in call[1:])
    question = call[-1]  # these turns answer in one round: the question is the request's last message
    assert isinstance(question, HumanMessage)
    return f"{call[0].text}\n\n{question.text}"


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_memory_from_one_thread_is_recalled_in_another_and_never_for_another_user(
    store: ChromaMemoryStore, background: bool
) -> None:
    memory: Any = BackgroundMemoryUpdater(store) if background else store
    model = ScriptedChatModel(["好的，我记住了。", "量子计算利用量子比特。", "Hello!"])
    g = build_graph(InMemorySaver(), model=model, memory=memory, knowledge=None)

    ask(g, "记住我喜欢简洁的中文回答", "thread-1", "alice")
    if background:
        assert memory.drain(10)
    [saved] = store.list("alice")
    assert (saved["memory_type"], saved["content"], saved["source_thread_id"]) == (
        "semantic",
        PREFERENCE,
        "thread-1",
    )

    result = ask(g, "介绍一下量子计算", "thread-2", "alice")
    prompt = system_prompt(model.calls[1])
    assert "<用户长期记忆" in prompt and PREFERENCE in prompt
    assert [m["id"] for m in result["memories"]] == [saved["id"]]

    other = ask(g, "Tell me about quantum computing", "thread-3", "bob")
    assert PREFERENCE not in system_prompt(model.calls[2]) and "user_memories" not in system_prompt(
        model.calls[2]
    )
    assert other["memories"] == [] and store.list("bob") == []


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_caller_without_memory_rights_gets_nothing_extracted_or_recalled(
    store: ChromaMemoryStore, background: bool
) -> None:
    """A ``reader`` has neither memory:write nor memory:read: the turn learns nothing and recalls nothing."""
    memory: Any = BackgroundMemoryUpdater(store) if background else store
    model = ScriptedChatModel(["好的。", "好的，我记住了。", "量子计算利用量子比特。"])
    g = build_graph(InMemorySaver(), model=model, memory=memory, knowledge=None)
    reader = Settings(roles="reader")
    g.invoke({"messages": [HumanMessage("记住我喜欢简洁的中文回答")]}, config("t-1", "alice"), context=reader)
    if background:
        memory.drain(10)
    assert store.list("alice") == []
    ask(g, "记住我喜欢简洁的中文回答", "t-2", "alice")  # the same user with the default role: learnt
    if background:
        assert memory.drain(10)
    assert [m["content"] for m in store.list("alice")] == [PREFERENCE]
    result = g.invoke({"messages": [HumanMessage("介绍一下量子计算")]}, config("t-3", "alice"), context=reader)
    assert result["memories"] == [] and PREFERENCE not in system_prompt(model.calls[2])


def test_forgetting_in_a_later_thread_removes_the_memory_from_the_prompt(store: ChromaMemoryStore) -> None:
    model = ScriptedChatModel(["好的。", "已忘掉。", "你好！"])
    g = build_graph(InMemorySaver(), model=model, memory=store, knowledge=None)
    ask(g, "记住我喜欢简洁的中文回答", "t1", "alice")
    ask(g, "忘掉关于简洁回答的记忆", "t2", "alice")
    assert store.list("alice") == []
    ask(g, "你好", "t3", "alice")
    assert PREFERENCE not in system_prompt(model.calls[2])
    actions = [(e.action, e.status) for e in store.audit.list(user_id="alice")]
    assert actions == [("DELETE", "applied"), ("ADD", "applied")]


# -- the tools ------------------------------------------------------------------------------------
def tool_graph(store: ChromaMemoryStore, script: list[Any]) -> tuple[Any, ScriptedChatModel]:
    registry = builtin_registry()
    for spec in memory_tools(lambda _settings: store):
        registry.register(spec)
    model = ScriptedChatModel(script)
    return build_graph(InMemorySaver(), model=model, registry=registry, knowledge=None), model


def tool_results(result: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in result["messages"] if m.type == "tool"]


def test_remember_and_forget_tools_act_for_the_runs_user_only(store: ChromaMemoryStore) -> None:
    bobs, _ = store.add("bob", "semantic", "用户喜欢喝咖啡")
    remember = AIMessage("", tool_calls=[tool_call("remember", {"content": "用户喜欢喝茶"})])
    g, _ = tool_graph(store, [remember, "记下了。"])
    result = ask(g, "请记住我喜欢喝茶", "t1", "alice")
    [saved] = store.list("alice")
    assert saved["content"] == "用户喜欢喝茶" and json.loads(tool_results(result)[0])["id"] == saved["id"]

    # the model cannot name the user: an extra argument is refused by the schema
    spoof = AIMessage("", tool_calls=[tool_call("remember", {"content": "用户喜欢喝酒", "user_id": "bob"})])
    g, _ = tool_graph(store, [spoof, "好的。"])
    assert tool_results(ask(g, "记住我喜欢喝酒", "t1", "alice"))[0].startswith("Error:")
    assert len(store.list("bob")) == 1

    steal = AIMessage("", tool_calls=[tool_call("forget", {"memory_id": bobs["id"]})])
    g, _ = tool_graph(store, [steal, "好的。"])
    assert "no memory" in tool_results(ask(g, "忘掉关于咖啡的记忆", "t2", "alice"))[0]
    assert store.get("bob", bobs["id"]) is not None

    unasked = AIMessage("", tool_calls=[tool_call("forget", {"memory_id": saved["id"]})])
    g, _ = tool_graph(store, [unasked, "好的。"])
    assert "does not ask to forget" in tool_results(ask(g, "今天天气如何", "t2", "alice"))[0]
    assert store.get("alice", saved["id"]) is not None

    forget = AIMessage("", tool_calls=[tool_call("forget", {"memory_id": saved["id"]})])
    g, _ = tool_graph(store, [forget, "已经忘掉了。"])
    assert json.loads(tool_results(ask(g, "忘掉我喜欢喝茶这件事", "t3", "alice"))[0])["forgotten"] is True
    assert store.list("alice") == []
    sources = {e.source for e in store.audit.list(user_id="alice")}
    assert sources == {"tool"}


def test_remember_tool_applies_the_sensitive_data_rule(store: ChromaMemoryStore) -> None:
    call = AIMessage("", tool_calls=[tool_call("remember", {"content": "用户的密码是 hunter22"})])
    g, _ = tool_graph(store, [call, "不能保存密码。"])
    assert "rule 4" in tool_results(ask(g, "记住我的密码是 hunter22", "t1", "alice"))[0]
    assert store.list("alice") == []


def test_search_memories_tool_lists_only_this_users_memories(store: ChromaMemoryStore) -> None:
    store.add("alice", "semantic", "用户喜欢喝茶")
    store.add("bob", "semantic", "用户喜欢喝茶和咖啡")
    call = AIMessage("", tool_calls=[tool_call("search_memories", {"query": "茶"})])
    g, _ = tool_graph(store, [call, "你喜欢喝茶。"])
    found = json.loads(tool_results(ask(g, "我喜欢什么饮料？", "t1", "alice"))[0])["memories"]
    assert [m["content"] for m in found] == ["用户喜欢喝茶"]


# -- extraction failure never touches the answer -------------------------------------------------
class Exploding:
    def __call__(self, request: ExtractionRequest) -> Any:
        raise RuntimeError("extraction endpoint down")


def slow_model(release: threading.Event) -> ScriptedChatModel:
    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        release.wait(10)
        return AIMessage('{"operations": []}')

    return ScriptedChatModel(reply)


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
@pytest.mark.parametrize("failure", ["raises", "garbage", "times out"])
def test_extraction_failure_keeps_the_answer_saved_and_unchanged(
    tmp_path: Path, failure: str, background: bool
) -> None:
    release = threading.Event()
    extractor: Any = {
        "raises": Exploding(),
        "garbage": ModelExtractor(ScriptedChatModel(["<html>502 Bad Gateway</html>"] * 2)),
        "times out": ModelExtractor(slow_model(release), timeout=0.2),
    }[failure]
    store = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder(), extractor=extractor)
    memory: Any = BackgroundMemoryUpdater(store) if background else store
    g = build_graph(InMemorySaver(), model=ScriptedChatModel(["这是答案。"]), memory=memory, knowledge=None)
    try:
        result = ask(g, "记住我喜欢简洁的中文回答", "t1", "alice")
        assert result["messages"][-1].content == "这是答案。"
        saved = g.get_state(config("t1", "alice")).values["messages"]
        assert [m.content for m in saved] == ["记住我喜欢简洁的中文回答", "这是答案。"]
        if background:
            assert memory.drain(10)
            assert memory.failed == (0 if failure == "garbage" else 1)
        assert store.list("alice") == []
        if failure == "garbage":
            [entry] = store.audit.list(user_id="alice")
            assert entry.rule == 1
    finally:
        release.set()


def test_background_extraction_does_not_delay_the_answer(tmp_path: Path) -> None:
    started, release = threading.Event(), threading.Event()

    class Blocking:
        def __call__(self, request: ExtractionRequest) -> Any:
            started.set()
            release.wait(10)
            return {
                "operations": [
                    {"action": "ADD", "type": "semantic", "content": PREFERENCE, "confidence": 0.9}
                ]
            }

    store = ChromaMemoryStore(tmp_path, embedder=HashingEmbedder(), extractor=Blocking())
    memory = BackgroundMemoryUpdater(store)
    g = build_graph(InMemorySaver(), model=ScriptedChatModel(["答案"]), memory=memory, knowledge=None)
    result = ask(g, "记住我喜欢简洁的中文回答", "t1", "alice")  # returns while extraction is blocked
    assert result["messages"][-1].content == "答案" and started.wait(5)
    assert not memory.drain(0.05) and store.list("alice") == []
    release.set()
    assert memory.drain(10) and memory.applied == 1 and len(store.list("alice")) == 1


def test_the_extraction_model_gets_the_rules_and_user_messages_only(store: ChromaMemoryStore) -> None:
    extraction = ScriptedChatModel(['{"operations": []}'])
    store.extractor = ModelExtractor(extraction)
    store.add("alice", "semantic", "用户住在杭州")
    messages = [HumanMessage("我在杭州"), AIMessage("助手：你是医生吧"), HumanMessage("记住我喜欢喝茶")]
    assert store.update_from_turn("alice", "t1", messages) == 0
    [call] = extraction.calls
    assert call[0].content == EXTRACTION_PROMPT
    payload = json.loads(str(call[1].content))
    assert payload["latest_user_message"] == "记住我喜欢喝茶"
    assert payload["earlier_user_messages"] == ["我在杭州"]
    assert [m["content"] for m in payload["existing_memories"]] == ["用户住在杭州"]
    assert "医生" not in str(call[1].content)


# -- bad extraction output through the configured model ------------------------------------------
def ops(*items: dict[str, Any]) -> str:
    return json.dumps({"operations": list(items)}, ensure_ascii=False)


def add(content: Any, **extra: Any) -> dict[str, Any]:
    return {
        "action": "ADD",
        "type": "semantic",
        "content": content,
        "target_id": None,
        "confidence": 0.95,
        **extra,
    }


BAD_OUTPUT = {
    "not JSON": ("记住我喜欢茶", "好的，已经记住了！", 1),
    "JSON without operations": ("记住我喜欢茶", '{"memories": ["用户喜欢茶"]}', 1),
    "wrong types": ("记住我喜欢茶", ops(add(["用户喜欢茶"], confidence="high")), 1),
    "unknown action": ("记住我喜欢茶", ops(add("用户喜欢茶", action="UPSERT")), 1),
    "10,000-character memory": ("记住我喜欢茶", ops(add("茶" * 10_000)), 4),
    "whitespace-only memory": ("记住我喜欢茶", ops(add(" \n\t ")), 4),
    "phone (zh)": ("记住我的手机号13812345678", ops(add("用户的手机号是13812345678")), 4),
    "ID card (zh)": ("记住我的身份证号", ops(add("用户的身份证号是11010519491231002X")), 4),
    "bank card (zh)": ("记住我的卡号", ops(add("用户的银行卡号是6222021234567890123")), 4),
    "password (zh)": ("记住我的密码", ops(add("用户的密码是 qwerty123")), 4),
    "password (en)": ("remember my password", ops(add("The user's password is qwerty123")), 4),
    "API key (en)": ("remember my key", ops(add("The user's OpenAI key is sk-abcdefghijklmnop1234")), 4),
    "e-mail not asked for": ("我喜欢茶", ops(add("The user's e-mail is a@example.com")), 4),
}


@pytest.mark.parametrize(("latest", "reply", "rule"), BAD_OUTPUT.values(), ids=BAD_OUTPUT.keys())
def test_bad_extraction_output_changes_nothing_and_is_audited(
    store: ChromaMemoryStore, latest: str, reply: str, rule: int
) -> None:
    store.extractor = ModelExtractor(ScriptedChatModel([reply]))
    assert store.update_from_turn("alice", "t1", [HumanMessage(latest)]) == 0
    assert store.list("alice") == []
    [entry] = store.audit.list(user_id="alice")
    assert (entry.status, entry.rule) == ("rejected", rule)
    for secret in ("13812345678", "11010519491231002X", "qwerty123", "sk-abcdefghijklmnop1234"):
        assert secret not in (entry.new_content or "")


def test_delete_without_intent_and_delete_of_another_users_id(store: ChromaMemoryStore) -> None:
    mine, _ = store.add("alice", "semantic", "用户喜欢喝茶")
    bobs, _ = store.add("bob", "semantic", "用户喜欢咖啡")
    delete = {"action": "DELETE", "type": "semantic", "target_id": mine["id"], "confidence": 0.99}
    store.extractor = ModelExtractor(
        ScriptedChatModel([ops(delete), ops({**delete, "target_id": bobs["id"]})])
    )
    assert store.update_from_turn("alice", "t1", [HumanMessage("我今天喝了茶")]) == 0
    assert store.update_from_turn("alice", "t1", [HumanMessage("忘掉关于咖啡的记忆")]) == 0
    assert store.get("alice", mine["id"]) and store.get("bob", bobs["id"])
    assert [(e.rule, e.memory_id) for e in store.audit.list(user_id="alice")] == [
        (3, bobs["id"]),
        (3, mine["id"]),
    ]


# -- the graph the server runs: memory resolved from each run's context ---------------------------
@pytest.mark.usefixtures("store_backend")
def test_run_memory_opens_the_store_of_the_runs_context(tmp_path: Path) -> None:
    ctx = Settings(data_dir=str(tmp_path / "home"), embedder="hashing", model="offline")
    model = ScriptedChatModel(["好的。", "你好。"])
    g = build_graph(InMemorySaver(), model=model, memory=RunMemory(), knowledge=None)
    g.invoke({"messages": [HumanMessage("I prefer short answers")]}, config("t1", "carol"), context=ctx)
    assert open_memory(ctx).drain(10)
    g.invoke({"messages": [HumanMessage("hi")]}, config("t2", "carol"), context=ctx)
    assert "The user prefers short answers" in system_prompt(model.calls[1])


# -- the command line -------------------------------------------------------------------------------
@pytest.mark.usefixtures("store_backend")
def test_memories_cli_manages_one_users_memories(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    app = typer.Typer()
    app.command()(lambda: None)  # a second command, so `memories` is a sub-command as in kb-agent
    memory_cli.register(app)
    run = CliRunner().invoke

    added = run(app, ["memories", "add", "用户喜欢简洁的中文回答", "--user", "alice", "--json"])
    assert added.exit_code == 0, added.output
    memory_id = json.loads(added.stdout)["memory_id"]
    run(app, ["memories", "add", "用户喜欢喝咖啡", "--user", "bob"])

    listed = json.loads(run(app, ["memories", "list", "--user", "alice", "--json"]).stdout)
    assert [m["content"] for m in listed] == [PREFERENCE]
    found = json.loads(run(app, ["memories", "search", "简洁", "--user", "alice", "--json"]).stdout)
    assert found[0]["id"] == memory_id

    edited = run(app, ["memories", "edit", memory_id, "用户喜欢简洁的英文回答", "--user", "alice"])
    assert edited.exit_code == 0 and "updated" in edited.stdout
    hijack = run(app, ["memories", "edit", memory_id, "用户喜欢喝酒", "--user", "bob"])
    assert hijack.exit_code == 1 and "rule 6" in hijack.stderr
    stolen = run(app, ["memories", "delete", memory_id, "--user", "bob"])
    assert stolen.exit_code == 1 and "rule 3" in stolen.stderr
    secret = run(app, ["memories", "add", "用户的密码是 hunter22", "--user", "alice"])
    assert secret.exit_code == 1 and "rule 4" in secret.stderr and "hunter22" not in secret.stderr

    assert run(app, ["memories", "delete", memory_id, "--user", "alice"]).exit_code == 0
    assert json.loads(run(app, ["memories", "list", "--user", "alice", "--json"]).stdout) == []
    history = json.loads(run(app, ["memories", "audit", "--user", "alice", "--json"]).stdout)
    assert [(e["action"], e["status"], e["source"]) for e in history] == [
        ("DELETE", "applied", "cli"),
        ("ADD", "rejected", "cli"),
        ("UPDATE", "applied", "cli"),
        ("ADD", "applied", "cli"),
    ]
    assert history[2]["old_content"] == PREFERENCE and history[2]["new_content"] == "用户喜欢简洁的英文回答"
    assert len(json.loads(run(app, ["memories", "list", "--user", "bob", "--json"]).stdout)) == 1


@pytest.mark.usefixtures("store_backend")
def test_a_high_risk_fact_waits_for_the_user_who_confirms_or_drops_it_by_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cli.app import app as kb_app
    from graph.api import open_agent
    from nodes.settings import Settings

    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "home"))
    with open_agent(Settings(user_id="dora")) as agent:
        first = agent.ask("记住我在吃降压药", thread_id="t1")
        assert agent.memory is not None and agent.memory.drain(10)
        second = agent.ask("你好", thread_id="t1")
    assert "降压药" not in json.dumps(
        agent.memories("dora"), ensure_ascii=False
    )  # nothing pending is recalled
    assert "还没有保存" in first.text and "memories confirm" in first.text  # the verdict, not "记住了"
    assert second.pending_memories == 1
    run = CliRunner().invoke
    held = json.loads(run(kb_app, ["memories", "pending", "--user", "dora", "--json"]).stdout)
    assert [e["status"] for e in held] == ["pending"] and "降压药" in held[0]["new_content"]
    shown = run(kb_app, ["memories", "pending", "--user", "dora"])
    assert "confirm ID" in shown.stdout
    confirmed = run(kb_app, ["memories", "confirm", str(held[0]["id"]), "--user", "dora"])
    assert confirmed.exit_code == 0, confirmed.output
    listed = json.loads(run(kb_app, ["memories", "list", "--user", "dora", "--json"]).stdout)
    assert any("降压药" in m["content"] for m in listed)
    again = run(kb_app, ["memories", "drop", str(held[0]["id"]), "--user", "dora"])
    assert again.exit_code == 2 and "no pending memory" in again.stderr


@pytest.mark.parametrize("background", [False, True], ids=["store", "background"])
def test_the_memory_tools_use_the_store_given_to_build_graph(
    store: ChromaMemoryStore, background: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``build_graph(memory=...)`` fixes where memories live: the model's remember tool writes there too,
    not into the settings' default store (which would then recall what the given store never saw)."""

    def settings_store(_services: object) -> ChromaMemoryStore:
        raise AssertionError("the memory tool opened the settings' store, not the one given to build_graph")

    monkeypatch.setattr("graph.services.Services.memory_store", settings_store)
    memory: Any = BackgroundMemoryUpdater(store) if background else store
    remember = AIMessage("", tool_calls=[tool_call("remember", {"content": "用户喜欢喝茶"})])
    g = build_graph(
        InMemorySaver(), model=ScriptedChatModel([remember, "记下了。"]), memory=memory, knowledge=None
    )
    ask(g, "请记住我喜欢喝茶", "t1", "alice")
    if background:
        assert memory.drain(10)
    assert [m["content"] for m in store.list("alice")] == ["用户喜欢喝茶"]


@pytest.mark.usefixtures("store_backend")
def test_memory_tables_show_ids_that_edit_and_delete_take_as_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    app = typer.Typer()
    app.command()(lambda: None)
    memory_cli.register(app)
    run = CliRunner().invoke
    long_fact = "用户在上海的一家做数据平台的公司工作，负责把各个业务线的报表迁移到新的仓库里，" * 3
    memory_id = json.loads(run(app, ["memories", "add", long_fact, "--user", "erin", "--json"]).stdout)[
        "memory_id"
    ]

    table = run(app, ["memories", "list", "--user", "erin"]).stdout
    assert memory_id in table and "ids shortened" not in table  # output to a program: whole ids
    assert memory_id in run(app, ["memories", "audit", "--user", "erin"]).stdout
    short = memory_cli.short_ids([memory_id])[memory_id]
    assert run(app, ["memories", "edit", short, "用户在深圳工作", "--user", "erin"]).exit_code == 0
    assert short in run(app, ["memories", "audit", "--user", "erin"]).stdout
    assert run(app, ["memories", "delete", short, "--user", "erin"]).exit_code == 0
    assert json.loads(run(app, ["memories", "list", "--user", "erin", "--json"]).stdout) == []


def test_a_terminal_gets_short_ids_never_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    monkeypatch.setattr(memory_cli, "out", Console(force_terminal=True, width=50, record=True))
    ids = ["mem_abcdef0123aa45", "mem_ffff000011cc67"]
    shown_as, caption = memory_cli.shown_ids(ids)
    assert shown_as == {"mem_abcdef0123aa45": "mem_abcdef01", "mem_ffff000011cc67": "mem_ffff0000"}
    assert caption and "as shown" in caption
    memory_cli._show(
        [{"id": one, "memory_type": "semantic", "content": "用户喜欢很长很长的回答" * 5} for one in ids], False
    )
    text = memory_cli.out.export_text()
    assert "mem_abcdef01 " in text and "mem_ffff0000 " in text  # the column gives way to nothing


def test_short_ids_grow_until_they_tell_ids_apart() -> None:
    ids = ["mem_abcdef0123aa", "mem_abcdef0199bb", "mem_ffff000011cc"]
    assert memory_cli.short_ids(ids) == {
        "mem_abcdef0123aa": "mem_abcdef012",
        "mem_abcdef0199bb": "mem_abcdef019",
        "mem_ffff000011cc": "mem_ffff0000",
    }
