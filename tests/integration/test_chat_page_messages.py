"""The chat page's answers, threads and approvals in a real browser (Debian's Chromium with Playwright),
against a ``langgraph dev`` whose model is a loopback OpenAI-protocol endpoint that answers from a script:
Markdown (code, a table, a hostile link, an image), a calculator call, a deletion to approve, answers
numbered so a regenerated one is told apart.

Each flow saves a screenshot in the test's temporary folder. Skipped with the reason where Chromium or
Playwright is missing.
"""

from __future__ import annotations

import itertools
import json
import re
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

MARKDOWN = (
    "Here is **the policy** in short, with `inline code` [travel.md#0].\n\n"
    '```python\nprint("economy")\n```\n\n'
    "| Trip | Class |\n|---|---|\n| under 6 h | economy |\n\n"
    "[click me](javascript:alert(1)) ![tracker](https://example.com/t.png) [the intranet](https://example.com/x)"
)
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
COUNTER = itertools.count(1)


def _last(body: dict[str, Any], role: str) -> str:
    """The last message of ``role``, without the budget note the agent appends to the question."""
    found = [m for m in body.get("messages", []) if m.get("role") == role]
    content = found[-1].get("content", "") if found else ""
    text = content if isinstance(content, str) else json.dumps(content)
    return re.sub(r"<budget_left>.*?</budget_left>", "", text, flags=re.S).strip()


def answer(body: dict[str, Any]) -> ScriptedReply:
    """The scripted model: what it says depends on the last question (and on a tool result after a call)."""
    if body.get("messages", [{}])[-1].get("role") == "tool":
        return ScriptedReply(content=f"The tool said: {_last(body, 'tool')[:80]}")
    question = _last(body, "user")
    if "markdown" in question:
        return ScriptedReply(content=MARKDOWN)
    if "multiply" in question:
        return ScriptedReply(tool_calls=[{"name": "calculator", "arguments": {"expression": "6 * 7"}}])
    if "delete" in question:
        return ScriptedReply(tool_calls=[{"name": "delete_document", "arguments": {"doc_id": "old-policy.md"}}])
    return ScriptedReply(content=f"Answer number {next(COUNTER)} to: {question[-60:]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    tmp = tmp_path_factory.mktemp("chat-page-messages")
    docs = tmp / "docs"
    docs.mkdir()
    (docs / "travel.md").write_text(
        "# Travel policy\n\n## Flights\n\nEmployees fly **economy** on trips under six hours.\n", "utf-8"
    )
    (docs / "old-policy.md").write_text("# Old policy\n\nThe 2019 parking rules.\n", "utf-8")
    (docs / "expenses.md").write_text("# Expense claims\n\nClaims are filed within 30 days.\n", "utf-8")
    with OpenAIServer(script=answer, api_key="test-key") as model:
        srv = relative_home_server(tmp, docs)
        srv.env.update(
            KB_AGENT_MODEL=model.model,
            KB_AGENT_BASE_URL=model.base_url,
            KB_AGENT_API_KEY="test-key",
            KB_AGENT_LONG_TERM_MEMORY="false",
            KB_AGENT_REWRITE_QUERY="false",
        )
        try:
            srv.start()
        except RuntimeError as exc:
            pytest.fail(f"{exc}\n{srv.log.read_text('utf-8', 'replace')[-3000:]}")
        try:
            yield srv
        finally:
            srv.stop()


@pytest.fixture
def tab(browser: Any, server: DevServer, tmp_path: Path) -> Iterator[Page]:
    opened = Page(browser, server.url, tmp_path, viewport=DESKTOP, permissions=["clipboard-read", "clipboard-write"])
    try:
        yield opened
    finally:
        opened.close()


def test_an_answer_in_markdown_shows_code_a_table_and_only_safe_links(tab: Page) -> None:
    page = tab.sign_in("tok-alice")
    tab.ask("Show me the policy in markdown")
    answer = page.locator("#log .message.ai").last
    assert answer.locator("strong").inner_text() == "the policy"
    assert answer.locator("code").first.inner_text() == "inline code"
    assert answer.locator(".code pre").inner_text().strip() == 'print("economy")'
    assert answer.locator("table td").all_inner_texts() == ["under 6 h", "economy"]
    assert "**" not in answer.inner_text() and "```" not in answer.inner_text() and "|---|" not in answer.inner_text()
    # no javascript: link, no image (nor its request), an https link that opens apart with no referrer
    assert answer.locator("a[href^='javascript']").count() == 0 and answer.locator("img").count() == 0
    assert "click me" in answer.inner_text()
    intranet = answer.locator("a", has_text="the intranet")
    assert intranet.get_attribute("href") == "https://example.com/x"
    assert "noopener" in (intranet.get_attribute("rel") or "")
    # the code block's copy button copies the code
    answer.locator(".copy-code").click()
    page.wait_for_function("() => document.querySelector('.copy-code').textContent === 'Copied'")
    assert page.evaluate("navigator.clipboard.readText()").strip() == 'print("economy")'
    tab.shot("markdown")
    assert tab.errors() == [], tab.console


HOSTILE_MARKDOWN = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<iframe src=javascript:alert(1)></iframe>",
    "[a](javascript:alert(1)) [b](JaVaScRiPt:alert(1)) [c](data:text/html,<script>alert(1)</script>)",
    "[d](vbscript:msgbox(1)) [e](  javascript:alert(1)) [f](java&#x09;script:alert(1))",
    "![x](https://example.com/x.png) ![y](javascript:alert(1))",
    "<a href=\"javascript:alert(1)\">g</a> <svg onload=alert(1)></svg> <style>*{}</style>",
    "```html\n<script>alert(1)</script>\n```",
    "| a | b |\n|---|---|\n| <img src=x onerror=alert(1)> | [h](javascript:alert(1)) |",
    "[i][ref]\n\n[ref]: javascript:alert(1)",
    "<https://example.com/ok> and <javascript:alert(1)>",
]


def test_hostile_markdown_renders_to_nothing_that_runs(tab: Page) -> None:
    page = tab.sign_in("tok-alice")
    found = page.evaluate(
        """async (inputs) => {
             const { renderMarkdown } = await import("/ui/static/markdown.js");
             const box = document.createElement("div");
             for (const text of inputs) box.append(renderMarkdown(text));
             document.getElementById("log").append(box);
             await new Promise((done) => setTimeout(done, 300));  // an onerror, were it live, has fired
             const attributes = [...box.querySelectorAll("*")].flatMap((e) => [...e.attributes].map((a) => a.name));
             return {
               tags: [...new Set([...box.querySelectorAll("*")].map((e) => e.tagName.toLowerCase()))],
               attributes: [...new Set(attributes)],
               hrefs: [...box.querySelectorAll("[href]")].map((a) => a.getAttribute("href")),
               text: box.textContent,
             };
           }""",
        HOSTILE_MARKDOWN,
    )
    assert not {"script", "img", "iframe", "svg", "style", "object", "embed", "form"} & set(found["tags"]), found
    assert not [name for name in found["attributes"] if name.startswith("on") or name in ("style", "src")], found
    assert found["hrefs"] and all(h.startswith(("https://", "mailto:")) for h in found["hrefs"]), found["hrefs"]
    assert "<script>alert(1)</script>" in found["text"]  # shown as what it is
    assert tab.dialogs == [] and tab.errors() == [], tab.console


def test_sources_are_numbered_under_the_answer_with_title_heading_and_passage(tab: Page) -> None:
    page = tab.sign_in("tok-alice")
    tab.ask("Show me the policy in markdown")
    answer = page.locator("#log .message.ai").last
    assert answer.locator("a.citation").inner_text() == "[1]"
    source = answer.locator(".sources li").first
    page.wait_for_function("() => document.querySelector('.sources .source-title').textContent === 'Travel policy'")
    assert "Flights" in source.inner_text() and "travel.md" in source.inner_text()
    source.locator("button").hover()  # the passage on hover
    page.wait_for_selector(".sources .preview:not([hidden])")
    assert "economy" in source.locator(".preview").inner_text()
    source.locator("button").click()  # and in full on a click
    page.wait_for_selector("#side:not([hidden])")
    assert page.locator("#side-body strong").inner_text() == "economy"  # the passage's own Markdown
    tab.shot("sources")


def test_the_copy_button_copies_the_answer_as_written(tab: Page) -> None:
    page = tab.sign_in("tok-alice")
    tab.ask("hello there")
    page.locator("#log .message.ai .copy-answer").last.click()
    assert page.evaluate("navigator.clipboard.readText()").startswith("Answer number")


def test_a_tool_line_shows_arguments_and_result_once_collapsed(tab: Page) -> None:
    page = tab.sign_in("tok-alice")
    tab.ask("multiply six by seven")
    lines = page.locator("#log .tool[data-tool=calculator]")
    assert lines.count() == 1
    line = lines.first
    assert line.get_attribute("data-status") == "done" and line.get_attribute("open") is None
    summary = line.locator("summary").inner_text()
    assert "6 * 7" in summary and "42" in summary, summary
    line.locator("summary").click()
    assert '"expression": "6 * 7"' in line.inner_text()
    assert "scripted-gpt" in page.inner_text("#log .message.ai >> nth=-1 >> .model")  # which model answered
    tab.shot("tool-line")


def _answers(page: Any) -> list[str]:
    return page.locator("#log .message.ai .text").all_inner_texts()


def test_regenerate_replaces_the_last_answer_and_edit_resends_the_last_question(tab: Page) -> None:
    page = tab.sign_in("tok-alice")
    tab.ask("first question")
    tab.ask("second question")
    before = _answers(page)
    assert len(before) == 2 and "second question" in before[-1]
    page.click("#log .message.ai >> nth=-1 >> .regenerate")
    page.wait_for_function(f"() => !document.querySelector('#log .message.ai:last-of-type')?.textContent.includes({json.dumps(before[-1])}) && !document.querySelector('#log .streaming') && !document.getElementById('send').disabled")
    after = _answers(page)
    assert len(after) == 2 and after[0] == before[0] and after[1] != before[1] and "second question" in after[1]
    assert page.locator("#log .message.human", has_text="second question").count() == 1
    # only the last question can be edited: sent again, it replaces the last turn
    assert page.locator("#log .edit-question").count() == 1
    page.click("#log .edit-question")
    page.fill("textarea[name=edited-question]", "second question, edited")
    page.click("#log .edit-form button[type=submit]")
    page.wait_for_function("() => [...document.querySelectorAll('#log .message.ai .text')].some(e => e.textContent.includes('edited')) && !document.getElementById('send').disabled")
    assert page.locator("#log .message.human").all_inner_texts()[-1].startswith("second question, edited")
    assert page.locator("#log .message.human").count() == 2 and len(_answers(page)) == 2
    page.reload()  # and the thread's state agrees
    page.wait_for_selector("#log .message.ai")
    assert page.locator("#log .message.human").count() == 2
    tab.shot("regenerated")
    assert tab.errors() == [], tab.console


def test_regenerating_the_only_answer_of_a_thread_leaves_one_question_and_one_answer(
    tab: Page, server: DevServer
) -> None:
    page = tab.sign_in("tok-alice")
    tab.ask("the only question")
    before = _answers(page)
    thread_id = page.evaluate("document.body.dataset.thread")
    page.click("#log .message.ai >> nth=-1 >> .regenerate")
    page.wait_for_function(
        "old => { const a = document.querySelector('#log .message.ai:not(.streaming) .text');"
        " return a && a.textContent !== old && !document.getElementById('send').disabled; }",
        arg=before[0],
    )
    for _ in range(100):  # the run is over on the server too
        thread = httpx.get(f"{server.url}/threads/{thread_id}", headers={"Authorization": "Bearer tok-alice"}).json()
        if thread["status"] == "idle":
            break
        page.wait_for_timeout(100)
    page.reload()
    page.wait_for_selector("#log .message.ai")
    assert page.locator("#log .message.human").count() == 1 and len(_answers(page)) == 1
    assert _answers(page)[0] != before[0] and _answers(page)[0].startswith("Answer number")


def test_wrong_asks_for_an_optional_reason_that_is_sent_with_the_rating(tab: Page) -> None:
    page = tab.sign_in("tok-alice")
    tab.ask("a question to rate")
    page.click("#log .message.ai >> nth=-1 >> .rate-bad")
    page.wait_for_selector("input[name=wrong-reason]")
    assert page.evaluate("document.activeElement.name") == "wrong-reason"
    page.fill("input[name=wrong-reason]", "it cites the wrong year")
    with page.expect_request(lambda r: r.url.endswith("/feedback")) as sent:
        page.press("input[name=wrong-reason]", "Enter")
    assert json.loads(sent.value.post_data) | {} == {
        "message_id": json.loads(sent.value.post_data)["message_id"],
        "rating": "bad",
        "reason": "it cites the wrong year",
    }
    page.wait_for_selector("#log .rated")
    tab.shot("wrong-with-reason")


def test_the_open_thread_is_in_the_address_so_a_reload_and_a_link_open_it(
    tab: Page, browser: Any, server: DevServer, tmp_path: Path
) -> None:
    page = tab.sign_in("tok-alice")
    tab.ask("a question worth keeping")
    thread_id = page.evaluate("document.body.dataset.thread")
    assert f"thread={thread_id}" in page.url and "tok-" not in page.url
    page.reload()
    page.wait_for_selector("#log .message.ai")
    assert "a question worth keeping" in page.inner_text("#log")
    page.click("#new-thread")
    assert "thread=" not in page.url
    page.go_back()  # the browser's Back reopens it
    page.wait_for_selector("#log .message.ai")
    assert page.evaluate("document.body.dataset.thread") == thread_id
    other = Page(browser, server.url, tmp_path)  # a link opened in a new tab, signed in there
    try:
        linked = other.sign_in("tok-alice", f"?thread={thread_id}")
        linked.wait_for_selector("#log .message.ai")
        assert "a question worth keeping" in linked.inner_text("#log")
    finally:
        other.close()
    stranger = Page(browser, server.url, tmp_path)  # someone else's link: not found, nothing shown
    try:
        shown = stranger.sign_in("tok-bob", f"?thread={thread_id}")
        shown.wait_for_function("() => document.getElementById('status').textContent.includes('does not exist')")
        assert "worth keeping" not in shown.inner_text("body")
    finally:
        stranger.close()


def test_threads_are_renamed_searched_and_deleted_after_a_confirmation(tab: Page, server: DevServer) -> None:
    page = tab.sign_in("tok-hana")
    tab.ask("about parking")
    tab.ask("more about parking")
    page.click("#new-thread")
    tab.ask("about flights")
    item = page.locator("#threads li", has_text="about flights")
    item.locator(".rename-thread").click()
    page.fill("input[name=thread-title]", "Flights, renamed")
    page.press("input[name=thread-title]", "Enter")
    page.wait_for_function("() => document.getElementById('threads').textContent.includes('Flights, renamed')")
    threads = httpx.post(f"{server.url}/threads/search", json={}, headers={"Authorization": "Bearer tok-hana"}).json()
    assert "Flights, renamed" in [t["metadata"].get("title") for t in threads]
    page.fill("#thread-search", "parking")
    assert page.locator("#threads .thread").all_inner_texts()[0].startswith("about parking")
    assert page.locator("#threads .thread").count() == 1
    page.fill("#thread-search", "")
    doomed = page.locator("#threads li", has_text="about parking")
    doomed.locator(".delete-thread").click()
    assert page.evaluate("document.activeElement.className") == "keep-thread"  # the safe choice has the focus
    tab.shot("delete-thread")
    page.click("#threads .confirm-delete")
    page.wait_for_function("() => !document.getElementById('threads').textContent.includes('about parking')")
    threads = httpx.post(f"{server.url}/threads/search", json={}, headers={"Authorization": "Bearer tok-hana"}).json()
    assert "about parking" not in [t["metadata"].get("title") for t in threads]
    assert tab.errors() == [], tab.console


def test_the_empty_conversation_greets_and_offers_questions_from_the_document_titles(tab: Page) -> None:
    page = tab.sign_in("tok-alice")
    page.wait_for_selector("#examples button")
    assert page.inner_text("#empty-hello") == "Hello, alice."
    assert "3 documents in English" in page.inner_text("#empty-holds")
    examples = page.locator("#examples button").all_inner_texts()
    assert len(examples) == 3
    assert {"“Travel policy”", "“Old policy”", "“Expense claims”"} == {e[e.index("“") : e.index("”") + 1] for e in examples}
    tab.shot("empty-state")
    page.locator("#examples button").first.click()  # asks it
    page.wait_for_selector("#log .message.ai:not(.streaming)")
    assert page.is_hidden("#empty")


def test_an_approval_card_in_chinese_focuses_reject_and_a_rejection_shows_once(
    browser: Any, server: DevServer, tmp_path: Path
) -> None:
    tab = Page(browser, server.url, tmp_path, locale="zh-CN", viewport=PHONE, color_scheme="dark")
    try:
        page = tab.sign_in("tok-bob")
        tab.ask("please delete the old policy")
        page.wait_for_selector("#approval:not([hidden])")
        what = page.inner_text("#approval-what")
        assert "从知识库删除文档" in what and "old-policy.md" in what, what
        assert page.evaluate("document.activeElement.id") == "reject"
        assert not tab.scrolls_sideways()
        tab.shot("approval-zh-phone-dark")
        page.fill("#approval-reason", "还要用")
        page.keyboard.press("Shift+Tab")  # back from the reason to ... and Enter on Reject
        page.focus("#reject")
        page.keyboard.press("Enter")
        page.wait_for_function(
            "() => document.querySelector('#log .tool[data-tool=delete_document]')?.dataset.status === 'approval_denied'"
        )
        page.wait_for_selector("#send:not([disabled])")
        log = page.inner_text("#log")
        assert page.locator("#log .tool[data-tool=delete_document]").count() == 1
        assert "已拒绝" in log and "还要用" in log
        for operator_words in ("do not retry", "Error:", "kb-agent", "/memories", "mem_", "KB_AGENT"):
            assert operator_words not in log and operator_words not in page.inner_text("#approval"), operator_words
        page.reload()  # the thread's state says the same
        page.wait_for_selector("#log .tool[data-tool=delete_document]")
        assert page.get_attribute("#log .tool[data-tool=delete_document]", "data-status") == "approval_denied"
        assert "do not retry" not in page.inner_text("#log")
        tab.shot("rejected-zh")
    finally:
        tab.close()


def test_no_flow_above_made_a_blocking_call_on_the_servers_event_loop(server: DevServer) -> None:
    assert blocking_calls(server) == []
