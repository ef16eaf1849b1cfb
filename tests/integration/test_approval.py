"""delete_document end to end: permission, human approval through ``interrupt``, both retrievers, the CLI.

A real knowledge base (Chroma + BM25, hashing embedder), the real graph with the offline model, SQLite
checkpoints; the resume-in-a-new-process test runs a second Python process on the same data dir.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from typer.testing import CliRunner

from cli.app import app
from graph import build_graph
from graph.api import NoPendingApprovalError, open_agent
from graph.services import open_knowledge_base
from models.scripted import ScriptedChatModel, tool_call
from nodes.settings import Settings
from tests.integration.conftest import Backend
from tools.approval import InvalidApprovalError

ROOT = Path(__file__).resolve().parents[2]
ADMIN = {"roles": "admin"}


def _found(query: str, mode: str) -> set[str]:
    kb = open_knowledge_base(Settings())
    hits = kb.search(query, user_id="alice", groups=["public", "hr"], top_k=10, mode=mode)
    return {h["id"].split("#")[0] for h in hits}


def _indexed(source: str) -> dict[str, bool]:
    """Whether any chunk of ``source`` is in each store (Chroma, BM25, manifest)."""
    ids = open_knowledge_base(Settings()).index_ids()
    return {store: any(cid.startswith(source + "#") for cid in held) for store, held in ids.items()}


def _tool_messages(messages: list, name: str) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage) and m.name == name]


def test_approve_removes_the_document_from_both_retrievers(kb_home: Path) -> None:
    assert _indexed("rag.md") == {"chroma": True, "bm25": True, "manifest": True}
    assert "rag.md" in _found("RAG 检索增强生成", "bm25")
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t", "user_id": "alice"}}
    paused = graph.invoke({"messages": [HumanMessage("删除文档 rag.md")]}, config, context=Settings(**ADMIN))
    [pending] = paused["__interrupt__"]
    assert pending.value["tool"] == "delete_document" and pending.value["args"] == {"doc_id": "rag.md"}
    assert "rag.md" in pending.value["description"] and "BM25" in pending.value["description"]
    assert "rag.md" in _found("RAG 检索增强生成", "bm25")  # nothing happened while waiting

    done = graph.invoke(Command(resume={"approved": True}), config, context=Settings(**ADMIN))
    assert "已删除文档 rag.md" in done["messages"][-1].content
    assert _indexed("rag.md") == {"chroma": False, "bm25": False, "manifest": False}
    assert "rag.md" not in _found("RAG 检索增强生成", "hybrid")
    assert _indexed("agents.md")["chroma"] and open_knowledge_base(Settings()).stats()["documents"] == 2


def test_a_deleted_document_can_be_restored_from_the_trash_by_command(kb_home: Path, store_backend: Backend) -> None:
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t", "user_id": "alice"}}
    paused = graph.invoke({"messages": [HumanMessage("删除文档 rag.md")]}, config, context=Settings(**ADMIN))
    assert "trash 7 days" in paused["__interrupt__"][0].value["description"]
    done = graph.invoke(Command(resume={"approved": True}), config, context=Settings(**ADMIN))
    [result] = _tool_messages(done["messages"], "delete_document")
    trash_id = json.loads(result.content)["trash_id"]
    listed = CliRunner().invoke(app, ["trash", "list", "--json"])
    assert [(i["id"], i["source"]) for i in json.loads(listed.stdout)] == [(trash_id, "rag.md")]
    restored = CliRunner().invoke(app, ["trash", "restore", str(trash_id)])
    assert restored.exit_code == 0 and "restored rag.md" in restored.stdout
    assert _indexed("rag.md") == {"chroma": True, "bm25": True, "manifest": True}
    assert "rag.md" in _found("RAG 检索增强生成", "vector") and "rag.md" in _found("RAG 检索增强生成", "bm25")
    again = CliRunner().invoke(app, ["trash", "restore", str(trash_id)])
    assert again.exit_code == 2 and "nothing in the trash" in again.output
    assert "0 document(s)" in CliRunner().invoke(app, ["trash", "purge", "--all"]).stdout


def test_reject_changes_nothing_and_the_model_is_told(kb_home: Path) -> None:
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t", "user_id": "alice"}}
    graph.invoke({"messages": [HumanMessage("delete the document rag.md")]}, config, context=Settings(**ADMIN))
    done = graph.invoke(
        Command(resume={"approved": False, "reason": "still needed"}), config, context=Settings(**ADMIN)
    )
    [result] = _tool_messages(done["messages"], "delete_document")
    assert result.status == "error" and "rejected" in result.content and "still needed" in result.content
    assert _indexed("rag.md") == {"chroma": True, "bm25": True, "manifest": True}
    assert open_knowledge_base(Settings()).stats()["documents"] == 3


def test_an_approval_covers_one_call_only(kb_home: Path) -> None:
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t", "user_id": "alice"}}
    ctx = Settings(**ADMIN)
    graph.invoke({"messages": [HumanMessage("删除文档 rag.md")]}, config, context=ctx)
    graph.invoke(Command(resume={"approved": True}), config, context=ctx)
    again = graph.invoke({"messages": [HumanMessage("删除文档 agents.md")]}, config, context=ctx)
    assert again["__interrupt__"][0].value["args"] == {"doc_id": "agents.md"}  # asked again
    assert open_knowledge_base(Settings()).stats()["documents"] == 2


def test_a_malformed_answer_asks_again(kb_home: Path) -> None:
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t", "user_id": "alice"}}
    ctx = Settings(**ADMIN)
    graph.invoke({"messages": [HumanMessage("删除文档 rag.md")]}, config, context=ctx)
    for bad in ("yes", True, {"approved": "yes"}):
        again = graph.invoke(Command(resume=bad), config, context=ctx)
        [pending] = again["__interrupt__"]
        assert "error" in pending.value and pending.value["tool"] == "delete_document"
    assert open_knowledge_base(Settings()).stats()["documents"] == 3
    graph.invoke(Command(resume={"approved": False}), config, context=ctx)
    assert graph.get_state(config).interrupts == ()


def test_a_decision_applies_only_to_the_call_it_names(kb_home: Path) -> None:
    """The pending call is swapped for another after it was shown (same message and call ids): a decision
    naming the shown call is not applied to the new one, which is put to the person again."""
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t", "user_id": "alice"}}
    ctx = Settings(**ADMIN)
    paused = graph.invoke({"messages": [HumanMessage("删除文档 rag.md")]}, config, context=ctx)
    [shown] = paused["__interrupt__"]
    assert shown.value["args"] == {"doc_id": "rag.md"} and len(shown.value["digest"]) == 64
    pending = graph.get_state(config).values["messages"][-1]
    swapped = pending.model_copy(update={"tool_calls": [{**pending.tool_calls[0], "args": {"doc_id": "agents.md"}}]})
    graph.update_state(config, {"messages": [swapped]}, as_node="agent")
    decision = {"approved": True, "call_id": shown.value["call_id"], "digest": shown.value["digest"]}
    again = graph.invoke(Command(resume=decision), config, context=ctx)
    [asked] = again["__interrupt__"]
    assert asked.value["args"] == {"doc_id": "agents.md"} and "digest differs" in asked.value["error"]
    assert open_knowledge_base(Settings()).stats()["documents"] == 3  # nothing was deleted
    named = {"approved": True, "call_id": asked.value["call_id"], "digest": asked.value["digest"]}
    graph.invoke(Command(resume=named), config, context=ctx)
    assert _indexed("agents.md")["manifest"] is False and _indexed("rag.md")["manifest"] is True


def test_a_user_without_the_role_is_denied_through_the_graph(kb_home: Path) -> None:
    # The offline model is not offered the tool at all, and says why.
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t", "user_id": "bob"}}
    result = graph.invoke({"messages": [HumanMessage("删除文档 rag.md")]}, config)
    assert "kb:admin" in result["messages"][-1].content and "__interrupt__" not in result
    # A model that calls it anyway gets "permission denied"; the handler never runs, nothing is asked.
    scripted = ScriptedChatModel(
        [AIMessage("", tool_calls=[tool_call("delete_document", {"doc_id": "rag.md"})]), "ok"]
    )
    # the permission is under test, not the search: no translation call takes the script's first reply
    forced = build_graph(InMemorySaver(), model=scripted).invoke(
        {"messages": [HumanMessage("remove rag.md")]}, config, context={"cross_language": False}
    )
    [denied] = _tool_messages(forced["messages"], "delete_document")
    assert denied.status == "error" and "permission denied" in denied.content
    assert "__interrupt__" not in forced and open_knowledge_base(Settings()).stats()["documents"] == 3
    assert "delete_document" not in {t["function"]["name"] for t in scripted.tools_seen[0]}


def test_user_roles_setting_grants_the_role(kb_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_USER_ROLES", json.dumps({"alice": ["admin"]}))
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t", "user_id": "alice"}}
    paused = graph.invoke({"messages": [HumanMessage("删除文档 rag.md")]}, config)
    assert paused["__interrupt__"][0].value["tool"] == "delete_document"


RESUME_CHILD = """
import json, sys
from graph.api import open_agent
from nodes.settings import Settings
with open_agent(Settings(roles="admin")) as agent:
    answer = agent.resume("del", {"approved": True}, user_id="alice")
    print(json.dumps({"text": answer.text, "pending": answer.pending_approvals}))
"""


def test_resume_in_a_new_process_from_the_checkpoint(kb_home: Path) -> None:
    with open_agent(Settings(roles="admin")) as agent:
        answer = agent.ask("删除文档 rag.md", thread_id="del", user_id="alice")
        assert answer.pending_approvals and answer.pending_approvals[0]["args"] == {"doc_id": "rag.md"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run(
        [sys.executable, "-c", RESUME_CHILD],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "已删除文档 rag.md" in result["text"] and result["pending"] == []
    assert open_knowledge_base(Settings()).stats()["documents"] == 2


def test_resume_bad_inputs_through_the_api(kb_home: Path) -> None:
    with open_agent(Settings(roles="admin")) as agent:
        agent.ask("计算 1+1", thread_id="calm", user_id="alice")
        with pytest.raises(NoPendingApprovalError, match="not waiting"):
            agent.resume("calm", {"approved": True}, user_id="alice")
        agent.ask("删除文档 rag.md", thread_id="del", user_id="alice")
        with pytest.raises(InvalidApprovalError, match="not an approval"):
            agent.resume("del", "yes please", user_id="alice")
        assert agent.pending_approvals("del", user_id="alice")  # still waiting, nothing lost
        with pytest.raises(Exception, match="another user"):
            agent.resume("del", {"approved": True}, user_id="mallory")
        inline = agent.ask(
            "删除文档 agents.md",
            thread_id="inline",
            user_id="alice",
            approve=lambda payload: {"approved": payload["args"]["doc_id"] == "agents.md"},
        )
        assert "已删除文档 agents.md" in inline.text and inline.pending_approvals == []


def test_cli_tools_call_permission_and_approval(kb_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_USER_ROLES", json.dumps({"alice": ["admin"]}))
    runner = CliRunner()
    args = ["tools", "call", "delete_document", "--args", '{"doc_id": "rag.md"}']
    denied = runner.invoke(app, [*args, "--user", "bob"])
    assert denied.exit_code == 4 and "permission denied" in denied.output
    refused = runner.invoke(app, [*args, "--user", "alice"], input="n\n")
    assert refused.exit_code == 5 and open_knowledge_base(Settings()).stats()["documents"] == 3
    approved = runner.invoke(app, [*args, "--user", "alice", "--json"], input="y\n")
    assert approved.exit_code == 0, approved.output
    assert '"deleted": "rag.md"' in approved.output.replace('\\"', '"')
    assert "rag.md" not in _found("RAG 检索增强生成", "bm25")
    bad = runner.invoke(app, ["tools", "call", "delete_document", "--args", "{nope"])
    assert bad.exit_code == 2 and "not valid JSON" in bad.output
    unknown = runner.invoke(app, ["tools", "call", "no_such_tool"])
    assert unknown.exit_code == 2 and "unknown tool" in unknown.output
    invalid = runner.invoke(app, ["tools", "call", "delete_document", "--args", "{}", "--user", "alice"])
    assert invalid.exit_code == 2 and "missing required argument 'doc_id'" in invalid.output  # as docs/tools.md says


def test_cli_tools_list(kb_home: Path) -> None:
    result = CliRunner().invoke(app, ["tools", "list", "--json", "--user", "bob"])
    assert result.exit_code == 0
    rows = {r["name"]: r for r in json.loads(result.output)}
    assert rows["delete_document"]["approval"] is True and rows["delete_document"]["allowed"] is False
    assert rows["delete_document"]["permissions"] == ["kb:admin"]
    assert rows["search_knowledge"]["allowed"] is True and rows["calculator"]["source"] == "builtin"
    admin = json.loads(CliRunner().invoke(app, ["tools", "list", "--json", "--roles", "admin"]).output)
    assert all(r["allowed"] for r in admin)


def test_cli_ask_prompts_inline(kb_home: Path) -> None:
    result = CliRunner().invoke(
        app, ["ask", "删除文档 rag.md", "--user", "alice"], input="y\n", env={"KB_AGENT_ROLES": "admin"}
    )
    assert result.exit_code == 0, result.output
    assert "approval needed" in result.output and "已删除文档 rag.md" in result.output
