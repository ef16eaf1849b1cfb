"""The chat page's documents area against a live ``langgraph dev``: an admin lists, searches, uploads (with
progress), deletes to the trash and restores; a reader sees only what their groups may read and changes
nothing; a bad upload is refused with the reason and loses nothing; the route and ``kb-agent documents
list`` agree. In Debian's Chromium with Playwright where the flow is the page's; over HTTP where it is the
route's. Screenshots in the test's temporary folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.browser import Page
from tests.fixtures.chat_server import TOKENS, blocking_calls, relative_home_server
from tests.fixtures.serve import DevServer

pytestmark = pytest.mark.server

ROLES = {**TOKENS, "tok-rita": {"user": "rita", "roles": ["reader"]}}
MAX_FILE_KIB = 10
MAX_BODY = 4096  # smaller than the largest file: an upload may still be as large as ingest accepts


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    tmp = tmp_path_factory.mktemp("chat-page-documents")
    docs = tmp / "docs"
    (docs / "hr").mkdir(parents=True)
    (docs / "travel.md").write_text("# Travel policy\n\nEmployees fly economy on short trips.\n", "utf-8")
    (docs / "expenses.md").write_text("# Expense claims\n\nClaims are filed within 30 days.\n", "utf-8")
    (docs / "hr" / "bands.md").write_text("# Salary bands\n\nThe L5 band is 88,000 CNY a month.\n", "utf-8")
    (docs / "hr" / ".groups").write_text("hr\n", "utf-8")
    srv = relative_home_server(tmp, docs, ROLES)
    srv.env["KB_AGENT_MAX_FILE_MB"] = str(MAX_FILE_KIB / 1024)
    srv.env["KB_AGENT_MAX_BODY_BYTES"] = str(MAX_BODY)
    try:
        srv.start()
    except RuntimeError as exc:
        pytest.fail(f"{exc}\n{srv.log.read_text('utf-8', 'replace')[-3000:]}")
    try:
        yield srv
    finally:
        srv.stop()


def _listed(server: DevServer, token: str, query: str = "") -> list[str]:
    answer = httpx.get(f"{server.url}/ui/api/documents", params={"q": query} if query else None, headers=_as(token))
    assert answer.status_code == 200, answer.text
    return [d["source"] for d in answer.json()["documents"]]


def _open_documents(tab: Page, token: str) -> Any:
    page = tab.sign_in(token)
    page.click("#show-documents")
    page.wait_for_selector("#documents-view:not([hidden]) #doc-list :is(table, .none)")
    return page


def _rows(page: Any) -> list[str]:
    return page.locator("#doc-list tbody tr").evaluate_all("rows => rows.map(r => r.dataset.source)")


def test_an_admin_uploads_with_progress_deletes_to_the_trash_and_restores(
    browser: Any, server: DevServer, tmp_path: Path
) -> None:
    tab = Page(browser, server.url, tmp_path, viewport={"width": 1280, "height": 800})
    try:
        page = _open_documents(tab, "tok-bob")
        assert set(_rows(page)) == {"travel.md", "expenses.md"}  # an admin too reads by their groups
        assert "Travel policy" in page.inner_text("#doc-list tr[data-source='travel.md']")
        page.fill("#doc-search", "travel")
        page.wait_for_function("() => document.querySelectorAll('#doc-list tbody tr').length === 1")
        page.fill("#doc-search", "")
        page.wait_for_function("() => document.querySelectorAll('#doc-list tbody tr').length === 2")
        visa = tmp_path / "visa.md"
        visa.write_text("# Visa rules\n\nA visa is booked by the travel desk.\n", "utf-8")
        page.fill("#doc-groups", "")
        page.set_input_files("#doc-file", str(visa))
        page.wait_for_selector(".upload[data-name='visa.md'][data-status=done]")
        assert page.get_attribute(".upload[data-name='visa.md'] progress", "value") == "100"
        assert "Added" in page.inner_text(".upload[data-name='visa.md']")
        page.wait_for_selector("#doc-list tr[data-source='visa.md']")
        assert "Visa rules" in page.inner_text("#doc-list tr[data-source='visa.md']")
        assert page.locator("#doc-list tr[data-source='visa.md'] td").nth(5).inner_text() == "bob"  # who added it
        assert page.locator("#doc-list tr[data-source='travel.md'] td").nth(5).inner_text() == "—"  # the operator
        tab.shot("documents-uploaded")
        page.click("#doc-list tr[data-source='visa.md'] .delete-doc")
        assert page.evaluate("document.activeElement.textContent") == "Cancel"  # the safe choice first
        page.click("#doc-list tr[data-source='visa.md'] .confirm-delete-doc")
        page.wait_for_selector("#doc-list tr[data-source='visa.md']", state="detached")
        page.wait_for_selector("#doc-trash li[data-source='visa.md']")
        assert "visa.md" not in _listed(server, "tok-bob")
        tab.shot("documents-trash")
        page.click("#doc-trash li[data-source='visa.md'] .restore-doc")
        page.wait_for_selector("#doc-list tr[data-source='visa.md']")
        assert "visa.md" in _listed(server, "tok-bob")
        visa.write_text("# Visa rules\n\nA visa is booked by the travel desk, two weeks ahead.\n", "utf-8")
        page.set_input_files("#doc-file", str(visa))  # the same name again: it replaces, and says so
        page.wait_for_function(
            "() => [...document.querySelectorAll(\".upload[data-name='visa.md']\")].some(u => u.textContent.includes('Replaced'))"
        )
        page.click("#documents-back")
        page.wait_for_selector("#ask-form", state="visible")
        assert tab.errors() == [], tab.console
    finally:
        tab.close()


def test_a_refused_upload_says_why_on_the_page(browser: Any, server: DevServer, tmp_path: Path) -> None:
    tab = Page(browser, server.url, tmp_path)
    try:
        page = _open_documents(tab, "tok-bob")
        big = tmp_path / "big.md"
        big.write_text("# Big\n\n" + "words " * (MAX_FILE_KIB * 300), "utf-8")
        page.set_input_files("#doc-file", str(big))
        page.wait_for_selector(".upload[data-name='big.md'][data-status=error]")
        assert "larger than" in page.inner_text(".upload[data-name='big.md']")
        assert "big.md" not in _rows(page)
        tab.shot("documents-refused")
    finally:
        tab.close()


def test_a_reader_sees_only_what_their_groups_may_read_and_changes_nothing(
    browser: Any, server: DevServer, tmp_path: Path
) -> None:
    tab = Page(browser, server.url, tmp_path)
    try:
        page = _open_documents(tab, "tok-alice")
        assert "hr/bands.md" not in _rows(page) and "travel.md" in _rows(page)
        assert page.locator("#doc-upload *").count() == 0 and page.locator(".delete-doc").count() == 0
        tab.shot("documents-reader")
    finally:
        tab.close()
    assert "hr/bands.md" in _listed(server, "tok-hana")
    assert "hr/bands.md" not in _listed(server, "tok-rita")
    assert "88,000" not in httpx.get(f"{server.url}/ui/api/documents", headers=_as("tok-alice")).text
    for token in ("tok-alice", "tok-rita"):
        refused = [
            httpx.post(f"{server.url}/ui/api/documents?name=x.md", content=b"# X\n", headers=_as(token)),
            httpx.delete(f"{server.url}/ui/api/documents/travel.md", headers=_as(token)),
            httpx.get(f"{server.url}/ui/api/trash", headers=_as(token)),
            httpx.post(f"{server.url}/ui/api/trash/1/restore", headers=_as(token)),
        ]
        assert [r.status_code for r in refused] == [403] * 4, [r.text for r in refused]
    assert httpx.get(f"{server.url}/ui/api/documents").status_code == 401
    assert "x.md" not in _listed(server, "tok-bob")


@pytest.mark.parametrize(
    ("name", "body", "status", "says"),
    [
        ("tool.exe", b"MZ", 415, "cannot be added"),
        ("../escape.md", b"# Escape\n", 422, "without folders"),
        ("sub/dir.md", b"# Dir\n", 422, "without folders"),
        (".hidden.md", b"# Hidden\n", 422, "without folders"),
        ("empty.md", b"", 422, "empty"),
        ("large.txt", b"x" * (MAX_FILE_KIB * 1024 + 1), 413, "larger than"),
        ("broken.pdf", b"%PDF-1.4 not really a pdf", 422, "was not added"),
    ],
)
def test_a_bad_upload_is_refused_with_the_reason_and_loses_nothing(
    server: DevServer, name: str, body: bytes, status: int, says: str
) -> None:
    before = _listed(server, "tok-bob")
    answer = httpx.post(f"{server.url}/ui/api/documents", params={"name": name}, content=body, headers=_as("tok-bob"))
    assert answer.status_code == status, answer.text
    assert says in answer.json()["detail"]
    assert _listed(server, "tok-bob") == before


def test_an_upload_in_a_group_is_read_only_by_that_group(server: DevServer) -> None:
    added = httpx.post(
        f"{server.url}/ui/api/documents",
        params={"name": "bonus.md", "groups": "hr"},
        content=b"# Bonus rules\n\nBonuses are paid in March.\n",
        headers=_as("tok-bob"),
    )
    assert added.status_code == 200 and added.json()["groups"] == ["hr"], added.text
    assert "bonus.md" in _listed(server, "tok-hana") and "bonus.md" not in _listed(server, "tok-alice")
    passage = httpx.get(f"{server.url}/ui/api/passages/bonus.md%230", headers=_as("tok-alice"))
    assert passage.status_code == 404


def test_an_upload_may_be_as_large_as_ingest_accepts_while_other_bodies_keep_their_limit(server: DevServer) -> None:
    text = "# Long notes\n\n" + "Notes about the office move. " * ((MAX_FILE_KIB * 1024 - 600) // 29)
    assert MAX_BODY < len(text.encode()) < MAX_FILE_KIB * 1024
    added = httpx.post(
        f"{server.url}/ui/api/documents", params={"name": "long.md"}, content=text.encode(), headers=_as("tok-bob")
    )
    assert added.status_code == 200, added.text
    other = httpx.post(f"{server.url}/threads", json={"metadata": {"title": "x" * MAX_BODY}}, headers=_as("tok-bob"))
    assert other.status_code == 413


def test_the_route_and_the_cli_list_the_same_documents(server: DevServer) -> None:
    workdir = server.log.parent / "langgraph-dev"
    listed = subprocess.run(
        [sys.executable, "-m", "cli", "documents", "list", "--json", "--groups", "public"],  # bob's groups
        cwd=workdir, env=server.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    from_cli = [(d["source"], d["title"], d["chunks"], d["added_by"]) for d in json.loads(listed.stdout)]
    answer = httpx.get(f"{server.url}/ui/api/documents", headers=_as("tok-bob")).json()["documents"]
    assert from_cli == [(d["source"], d["title"], d["chunks"], d["added_by"]) for d in answer]
    assert {"bob"} <= {d["added_by"] for d in answer}


def test_no_flow_above_made_a_blocking_call_on_the_servers_event_loop(server: DevServer) -> None:
    assert blocking_calls(server) == []
