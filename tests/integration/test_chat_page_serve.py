"""The chat page's thread and documents flows on ``kb-agent serve`` (Aegra on Postgres and Redis), where the
LangGraph API is another implementation: the thread in the address, rename, delete, regenerate from the
checkpoint before the last question, and the documents area. In Debian's Chromium with Playwright;
skipped with the reason when the Python 3.12 server venv, Postgres, redis-server or Chromium is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.browser import Page
from tests.fixtures.serve import (
    ServeProcess,
    ingest_old_policy,
    private_database,
    private_redis,
    serve_env,
    server_kb_agent,
)

pytestmark = pytest.mark.server

QUESTION = "计算 12 × 12"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    exe = server_kb_agent()
    tmp = tmp_path_factory.mktemp("serve-chat-page")
    with private_redis(tmp) as redis_url, private_database() as database_url:
        env = serve_env(tmp / "home", database_url, redis_url)
        ingest_old_policy(tmp, env)
        srv = ServeProcess(exe, env, tmp / "server.log").start()
        try:
            yield srv
        finally:
            srv.stop()


@pytest.fixture
def tab(browser: Any, server: ServeProcess, tmp_path: Path) -> Iterator[Page]:
    opened = Page(browser, server.url, tmp_path)
    try:
        yield opened
    finally:
        opened.close()


def test_a_thread_is_in_the_address_renamed_regenerated_and_deleted(tab: Page, server: ServeProcess) -> None:
    page = tab.sign_in("tok-alice")
    tab.ask(QUESTION)
    thread_id = page.evaluate("document.body.dataset.thread")
    assert f"thread={thread_id}" in page.url
    page.reload()
    page.wait_for_selector("#log .message.ai")
    assert "144" in page.inner_text("#log .message.ai")
    page.click("#log .message.ai >> nth=-1 >> .regenerate")
    page.wait_for_function("() => !document.querySelector('#log .streaming') && !document.getElementById('send').disabled")
    page.reload()
    page.wait_for_selector("#log .message.ai")
    assert page.locator("#log .message.human").count() == 1 and page.locator("#log .message.ai").count() == 1
    page.locator(f"#threads li[data-thread='{thread_id}'] .rename-thread").click()
    page.fill("input[name=thread-title]", "Twelve squared")
    page.press("input[name=thread-title]", "Enter")
    page.wait_for_function("() => document.getElementById('threads').textContent.includes('Twelve squared')")
    page.locator(f"#threads li[data-thread='{thread_id}'] .delete-thread").click()
    page.click("#threads .confirm-delete")
    page.wait_for_function("() => !document.getElementById('threads').textContent.includes('Twelve squared')")
    gone = httpx.get(f"{server.url}/threads/{thread_id}", headers={"Authorization": "Bearer tok-alice"})
    assert gone.status_code == 404
    tab.shot("serve-threads")
    assert tab.errors() == [], tab.console


def test_the_documents_area_on_this_runtime(tab: Page, tmp_path: Path) -> None:
    page = tab.sign_in("tok-root")
    page.click("#show-documents")
    page.wait_for_selector("#doc-list tr[data-source='old-policy.md']")
    notes = tmp_path / "notes.md"
    notes.write_text("# Meeting notes\n\nThe office moves in May.\n", "utf-8")
    page.set_input_files("#doc-file", str(notes))
    page.wait_for_selector(".upload[data-name='notes.md'][data-status=done]")
    page.wait_for_selector("#doc-list tr[data-source='notes.md']")
    assert "Meeting notes" in page.inner_text("#doc-list tr[data-source='notes.md']")
    tab.shot("serve-documents")
    assert tab.errors() == [], tab.console
