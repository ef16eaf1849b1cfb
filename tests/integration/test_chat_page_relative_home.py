"""The chat page's routes under ``langgraph dev`` as the README starts it: ``KB_AGENT_HOME=./.kb-agent``, a path
relative to the server's working directory, with the runtime's blocking-call guard on (its default).

Resolving a relative path asks the process for its working directory (``os.getcwd``), which the guard
refuses on the event loop; every other server test sets an absolute home, so only these see it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from tests.fixtures.chat_server import blocking_calls, relative_home_server
from tests.fixtures.serve import DevServer

pytestmark = pytest.mark.server

ALICE = {"Authorization": "Bearer tok-alice"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    tmp = tmp_path_factory.mktemp("relative-home")
    docs = tmp / "docs"
    docs.mkdir()
    (docs / "travel.md").write_text(
        "# Travel policy\n\nEmployees fly economy on trips under six hours; hotels up to 600 CNY a night.\n",
        "utf-8",
    )
    srv = relative_home_server(tmp, docs)
    try:
        srv.start()
    except RuntimeError as exc:
        pytest.fail(f"{exc}\n{srv.log.read_text('utf-8', 'replace')[-3000:]}")
    try:
        yield srv
    finally:
        srv.stop()


def _answer(server: DevServer, question: str) -> tuple[str, dict[str, Any]]:
    client = get_sync_client(url=server.url, headers=ALICE)
    thread = client.threads.create()
    result = client.runs.wait(
        thread["thread_id"], "kb_agent", input={"messages": [{"role": "user", "content": question}]}
    )
    assert isinstance(result, dict), result
    return thread["thread_id"], result["messages"][-1]


def test_rating_an_answer_works_with_a_relative_home(server: DevServer) -> None:
    thread_id, answer = _answer(server, "What class do employees fly on short trips?")
    assert "economy" in answer["content"], answer
    rated = httpx.post(
        f"{server.url}/ui/api/threads/{thread_id}/feedback",
        headers=ALICE,
        json={"message_id": answer["id"], "rating": "bad", "reason": "too short"},
        timeout=30,
    )
    assert rated.status_code == 200, rated.text
    assert rated.json()["rating"] == "bad"


def test_every_page_route_answers_with_a_relative_home(server: DevServer) -> None:
    me = httpx.get(f"{server.url}/ui/api/me", headers=ALICE, timeout=30)
    assert me.status_code == 200 and me.json()["user"] == "alice", me.text
    passage = httpx.get(f"{server.url}/ui/api/passages/travel.md%230", headers=ALICE, timeout=30)
    assert passage.status_code == 200 and "economy" in passage.json()["text"], passage.text
    memories = httpx.get(f"{server.url}/ui/api/memories", headers=ALICE, timeout=30)
    assert memories.status_code == 200, memories.text


def test_no_blocking_call_was_caught_on_the_event_loop(server: DevServer) -> None:
    _answer(server, "计算 6 × 7")
    assert blocking_calls(server) == []
