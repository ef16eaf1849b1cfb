"""The chat page at ``/ui``, in a real browser: Debian's Chromium driven by Playwright against ``langgraph dev``
with bearer tokens (alice: user; hana: user in group hr; bob: admin).

Each flow saves a screenshot in the test's temporary folder. Skipped with the reason where Chromium or
Playwright is missing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.browser import Page
from tests.fixtures.chat_server import blocking_calls, relative_home_server
from tests.fixtures.openai_server import OpenAIServer, ScriptedReply
from tests.fixtures.serve import DevServer

pytestmark = pytest.mark.server

INJECTION = "Office notice <script>alert('pwned')</script> <img src=x onerror=alert(1)> for the travel desk."
HR_TEXT = "The L5 salary band is 88,000 CNY per month."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    tmp = tmp_path_factory.mktemp("chat-page")
    docs = tmp / "docs"
    (docs / "hr").mkdir(parents=True)
    (docs / "travel.md").write_text(
        "# Travel policy\n\nEmployees fly economy on trips under six hours; hotels up to 600 CNY a night.\n",
        "utf-8",
    )
    (docs / "notice.md").write_text(f"# Notice board\n\n{INJECTION}\n", "utf-8")
    (docs / "old-policy.md").write_text(
        "# Old policy\n\nThe 2019 parking rules, replaced long ago.\n", "utf-8"
    )
    (docs / "hr" / "bands.md").write_text(f"# Compensation\n\n{HR_TEXT}\n", "utf-8")
    (docs / "hr" / ".groups").write_text("hr\n", "utf-8")
    srv = relative_home_server(tmp, docs)  # as the README starts it: KB_AGENT_HOME=./.kb-agent
    try:
        srv.start()
    except RuntimeError as exc:
        pytest.fail(f"{exc}\n{(tmp / 'server.log').read_text('utf-8', 'replace')[-3000:]}")
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def tab(browser: Any, server: DevServer, tmp_path: Path) -> Iterator[Page]:
    opened = Page(browser, server.url, tmp_path)
    try:
        yield opened
    finally:
        opened.close()


def test_a_wrong_token_is_refused_with_a_message_then_the_right_one_signs_in(tab: Page) -> None:
    page = tab.open()
    assert page.is_visible("#signin") and page.get_attribute("input[name=token]", "type") == "password"
    page.fill("input[name=token]", "not-a-token")
    page.press("input[name=token]", "Enter")
    page.wait_for_function(
        "() => document.getElementById('signin-note').textContent.includes('not accepted')"
    )
    assert page.is_hidden("#app")
    tab.sign_in("tok-alice")
    assert "alice" in page.inner_text("#who")
    assert "tok-alice" not in page.url and page.evaluate("sessionStorage.length") == 1
    tab.shot("signed-in")
    assert tab.errors() == [], tab.console


def test_a_calculation_streams_its_answer_with_a_live_tool_line(tab: Page) -> None:
    page = tab.sign_in("tok-alice")
    tab.ask("计算 6 × 7")
    tab.shot("calculation")
    assert page.get_attribute("#log .tool[data-tool=calculator]", "data-status") == "done"
    assert "42" in page.inner_text("#log .message.ai >> nth=-1")
    assert int(page.evaluate("document.body.dataset.streamed || '0'")) >= 1  # it arrived as a stream
    # the thread is listed, titled by its question, and reopens with its history
    # the list is refreshed after the answer is drawn: wait for it (the page may lag under load)
    page.wait_for_function("q => document.getElementById('threads').innerText.includes(q)", arg="计算 6 × 7")
    page.click("#new-thread")
    assert page.locator("#log .message").count() == 0
    page.click("#threads .thread >> nth=0")
    page.wait_for_selector("#log .message.ai")
    assert "42" in page.inner_text("#log")
    assert tab.errors() == [], tab.console


def test_a_citation_opens_the_passage_and_a_rating_is_recorded(tab: Page) -> None:
    page = tab.sign_in("tok-alice")
    tab.ask("What class do employees fly on short trips?")
    link = page.locator("#log a.citation[data-chunk='travel.md#0']").first
    link.click()
    page.wait_for_selector("#side:not([hidden])")
    tab.shot("citation")
    assert "economy" in page.inner_text("#side-body")
    page.press("body", "Escape")
    assert page.is_hidden("#side")
    page.click("#log .message.ai >> nth=-1 >> .rate-good")
    page.wait_for_selector("#log .rated")
    assert "recorded" in page.inner_text("#log .rated")
    assert tab.errors() == [], tab.console


def test_the_passage_route_shows_only_what_the_callers_groups_may_read(server: DevServer) -> None:
    chunk = "hr%2Fbands.md%230"
    alice = httpx.get(f"{server.url}/ui/api/passages/{chunk}", headers={"Authorization": "Bearer tok-alice"})
    hana = httpx.get(f"{server.url}/ui/api/passages/{chunk}", headers={"Authorization": "Bearer tok-hana"})
    nobody = httpx.get(f"{server.url}/ui/api/passages/{chunk}")
    assert alice.status_code == 404 and "88,000" not in alice.text
    assert hana.status_code == 200 and HR_TEXT in hana.json()["text"]
    assert nobody.status_code == 401


def test_an_injected_document_is_shown_as_text_and_runs_nothing(tab: Page) -> None:
    page = tab.sign_in("tok-alice")
    tab.ask("What does the office notice say about the travel desk?")
    page.locator("#log a.citation[data-chunk='notice.md#0']").first.click()
    page.wait_for_selector("#side:not([hidden])")
    page.wait_for_timeout(500)  # an onerror handler, were the markup live, would have fired by now
    tab.shot("injection")
    shown = page.inner_text("#side-body")
    assert "<script>alert('pwned')</script>" in shown and "<img src=x onerror=alert(1)>" in shown
    assert page.locator("#side-body script, #side-body img, #log script, #log img").count() == 0
    assert tab.dialogs == []
    csp = httpx.get(f"{tab.url}/ui/").headers["content-security-policy"]
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp and "unsafe-inline" not in csp


def test_an_admin_approves_the_deletion_shown(tab: Page) -> None:
    page = tab.sign_in("tok-bob")
    tab.ask("删除文档 old-policy.md")
    page.wait_for_selector("#approval:not([hidden])")
    assert "delete_document" in page.inner_text("#approval-what")
    assert json.loads(page.inner_text("#approval-args")) == {"doc_id": "old-policy.md"}
    assert page.evaluate("document.activeElement.id") == "reject"  # the safe choice: Enter deletes nothing
    tab.shot("approval")
    page.click("#approve")
    page.wait_for_function(
        "() => document.querySelector('#log .tool[data-tool=delete_document]')?.dataset.status === 'done'"
    )
    page.wait_for_selector("#send:not([disabled])")
    assert "old-policy.md" in page.inner_text("#log .message.ai >> nth=-1")
    assert page.is_hidden("#approval")
    assert tab.errors() == [], tab.console


def test_a_pending_memory_is_confirmed_and_a_kept_one_deleted(tab: Page) -> None:
    page = tab.sign_in("tok-hana")
    tab.ask("I was diagnosed with diabetes.")
    for _ in range(60):  # memories are written in the background after the answer
        page.click("#show-memories")
        page.wait_for_selector("#side:not([hidden])")
        if page.locator("#side-body .pending-memory").count():
            break
        page.wait_for_timeout(500)
    tab.shot("pending-memory")
    assert "diabetes" in page.inner_text("#side-body .pending-memory")
    page.click("#side-body .pending-memory button:text('Keep')")
    page.wait_for_selector("#side-body .memory")
    assert "diabetes" in page.inner_text("#side-body .memories")
    assert page.locator("#side-body .pending-memory").count() == 0
    page.click("#side-body .memory button:text('Delete')")
    page.wait_for_selector("#side-body .memories", state="detached")
    # nobody else sees hana's memories: the route answers for its caller only
    alice = httpx.get(f"{tab.url}/ui/api/memories", headers={"Authorization": "Bearer tok-alice"}).json()
    assert alice["pending"] == [] and not any("diabetes" in m["content"] for m in alice["memories"])
    assert tab.errors() == [], tab.console


def test_the_memories_panel_lists_the_questions_asked_apart_from_the_facts(tab: Page) -> None:
    page = tab.sign_in("tok-bob")
    tab.ask("remember that I prefer aisle seats")
    tab.ask("Which hotels does the travel policy allow?")  # kept as interaction history, after the answer
    for _ in range(60):  # memories are written in the background after the answer
        page.click("#show-memories")
        page.wait_for_selector("#side:not([hidden])")
        if page.locator("#side-body .history .memory").count():
            break
        page.wait_for_timeout(500)
    tab.shot("memories-apart")
    facts, asked = page.inner_text("#side-body .memories"), page.inner_text("#side-body .history")
    assert "aisle seats" in facts and "travel policy" not in facts
    assert "The user asked: Which hotels does the travel policy allow?" in asked and "aisle" not in asked
    headings = page.locator("#side-body h3").all_inner_texts()
    assert headings.index("Facts and preferences") < headings.index("Questions you asked")
    assert tab.errors() == [], tab.console


def test_the_interface_speaks_chinese_to_a_chinese_browser(
    browser: Any, server: DevServer, tmp_path: Path
) -> None:
    tab = Page(browser, server.url, tmp_path, locale="zh-CN")
    try:
        page = tab.sign_in("tok-alice")
        assert page.inner_text("#send") == "发送" and page.inner_text("label[for=question]") == "你的问题"
        assert page.evaluate("document.documentElement.lang") == "zh-CN"
        tab.shot("chinese")
    finally:
        tab.close()


def test_every_control_has_a_label_and_the_keyboard_reaches_them(tab: Page) -> None:
    page = tab.sign_in("tok-alice")
    assert page.evaluate("document.activeElement.name") == "question"  # ready to type after signing in
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "send"
    for _ in range(10):  # back through the chat (the empty state's example questions) to the sidebar
        page.keyboard.press("Shift+Tab")
        if not page.evaluate("document.getElementById('chat').contains(document.activeElement)"):
            break
    assert page.evaluate("document.activeElement.id") == "signout"  # the sidebar comes before the chat
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input, textarea, button')]
             .filter(e => !(e.labels?.length || e.getAttribute('aria-label') || e.textContent.trim()))
             .map(e => e.outerHTML)"""
    )
    assert unlabelled == []


def test_no_flow_above_made_a_blocking_call_on_the_servers_event_loop(server: DevServer) -> None:
    assert blocking_calls(server) == []


SLOW_ANSWER = "The first part of a slow answer arrives now, " + "and the rest takes its time to come. " * 4


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """A server whose model (a loopback OpenAI-protocol endpoint) writes its answers slowly."""
    tmp = tmp_path_factory.mktemp("slow-chat-page")
    reply = ScriptedReply(content=SLOW_ANSWER, chunk_pause=4.0)
    with OpenAIServer(script=lambda body: reply, api_key="test-key") as model:
        srv = relative_home_server(tmp, None)
        srv.env.update(
            KB_AGENT_MODEL=model.model,
            KB_AGENT_BASE_URL=model.base_url,
            KB_AGENT_API_KEY="test-key",
            KB_AGENT_LONG_TERM_MEMORY="false",
            KB_AGENT_REWRITE_QUERY="false",
        )
        try:
            srv.start()
            yield srv
        finally:
            srv.stop()


def _run_statuses(server: DevServer, thread_id: str) -> list[str]:
    runs = httpx.get(f"{server.url}/threads/{thread_id}/runs", headers={"Authorization": "Bearer tok-alice"})
    return [run["status"] for run in runs.json()]


def test_escape_stops_the_answer_and_cancels_the_run(
    browser: Any, slow_server: DevServer, tmp_path: Path
) -> None:
    tab = Page(browser, slow_server.url, tmp_path)
    try:
        page = tab.sign_in("tok-alice")
        page.fill("textarea[name=question]", "Tell me the long story")
        page.press("textarea[name=question]", "Enter")
        page.wait_for_selector("#log .message.ai.streaming")
        page.press("textarea[name=question]", "Escape")
        page.wait_for_selector("#send:not([disabled])")
        assert "Stopped" in page.inner_text("#status") and page.is_hidden("#stop")
        thread_id = page.evaluate("document.body.dataset.thread")
        for _ in range(40):
            if "running" not in (statuses := _run_statuses(slow_server, thread_id)):
                break
            page.wait_for_timeout(250)
        assert statuses and "running" not in statuses and "success" not in statuses, statuses
        tab.shot("stopped")
    finally:
        tab.close()


def test_a_server_gone_mid_answer_is_said_and_the_thread_reloads_without_doubles(
    browser: Any, slow_server: DevServer, tmp_path: Path
) -> None:
    tab = Page(browser, slow_server.url, tmp_path)
    try:
        page = tab.sign_in("tok-alice")
        page.click("#new-thread")
        page.fill("textarea[name=question]", "Tell me another long story")
        page.press("textarea[name=question]", "Enter")
        page.wait_for_selector("#log .message.ai.streaming")
        slow_server.stop()  # the server goes away in the middle of the answer
        try:
            page.wait_for_selector("#status #reload")
            assert "cut off" in page.inner_text("#status")
            page.wait_for_selector("#log .message.ai.cut")  # marked as it is drawn, not before the notice
            assert page.locator("#log .message.ai.cut").count() == 1
            tab.shot("cut")
        finally:
            slow_server.start()  # back, on the same port with the same threads (the next tests use it too)
        page.click("#status #reload")
        page.wait_for_function("() => !document.querySelector('#log .streaming')")
        questions = page.locator("#log .message.human", has_text="Tell me another long story")
        assert questions.count() == 1
        assert page.locator("#log .message.ai").count() <= 1
        page.wait_for_function(
            "() => document.getElementById('threads').textContent.includes('another long')"
        )
        tab.shot("reloaded")
    finally:
        tab.close()


# The stream reaches the page up to the answer's first words, then ends as if the server had closed it
# cleanly; the rest is still read (and dropped), so the server sees no disconnect and the run goes on.
END_STREAM_EARLY = """
const realFetch = window.fetch.bind(window);
window.fetch = async (input, init) => {
  const response = await realFetch(input, init);
  if (!String(input).includes("/runs/stream")) return response;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const body = new ReadableStream({
    async start(controller) {
      let seen = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        controller.enqueue(value);
        seen += decoder.decode(value, { stream: true });
        if (seen.includes("The first")) break;
      }
      controller.close();
      (async () => { try { while (!(await reader.read()).done); } catch {} })();
    },
  });
  return new Response(body, { status: response.status, headers: response.headers });
};
"""


def test_a_stream_that_ends_before_its_run_is_not_taken_for_the_answer(
    browser: Any, slow_server: DevServer, tmp_path: Path
) -> None:
    tab = Page(browser, slow_server.url, tmp_path)
    tab.context.add_init_script(END_STREAM_EARLY)
    try:
        page = tab.sign_in("tok-alice")
        page.click("#new-thread")
        page.fill("textarea[name=question]", "Tell me a third long story")
        page.press("textarea[name=question]", "Enter")
        page.wait_for_selector("#send:not([disabled])")  # the stream has ended, the run has not
        page.wait_for_function("() => document.getElementById('status').textContent.includes('still')")
        slow_server.stop()  # the server goes away before the run is done
        page.wait_for_selector("#status #reload", timeout=15_000)
        assert "cut off" in page.inner_text("#status")
        tab.shot("cut")
        page.click("#status #reload")  # still gone: the notice and its button stay
        page.wait_for_timeout(500)
        assert "cut off" in page.inner_text("#status") and page.locator("#status #reload").count() == 1
        slow_server.start()
        page.click("#status #reload")
        page.wait_for_function("() => !document.querySelector('#log .streaming')")
        questions = page.locator("#log .message.human", has_text="Tell me a third long story")
        assert questions.count() == 1
        assert page.locator("#log .message.ai").count() <= 1
    finally:
        tab.close()


def test_a_token_that_stops_being_accepted_asks_for_a_new_one_once(tab: Page) -> None:
    page = tab.sign_in("tok-alice")
    page.evaluate("sessionStorage.setItem('kb-agent-token', 'revoked-token')")
    page.click("#new-thread")  # lists the threads with the token that is no longer accepted
    page.wait_for_selector("#signin:not([hidden])")
    assert "no longer accepted" in page.inner_text("#signin-note")
    page.wait_for_timeout(1000)
    failures = [line for line in tab.console if "401" in line]
    assert len(failures) <= 1, tab.console  # one refused request, then the page waits for a token: no loop
