"""The chat page's layout in a real browser (Debian's Chromium with Playwright): a desktop (1280x800) and a
phone (390x844), light and dark, English and Chinese, 200% zoom; and axe-core's accessibility checks on the
chat, the approval card, the memories panel and the documents area.

Each flow saves a screenshot in the test's temporary folder. The axe checks skip with the reason where
axe-core is not at hand (``KB_TEST_AXE``; ``.ci/run`` provides it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.browser import Page, axe_source, serious_violations
from tests.fixtures.chat_server import relative_home_server
from tests.fixtures.serve import DevServer

pytestmark = pytest.mark.server

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
CITED = "What class do employees fly on short trips?"
DARK_BACKGROUND = "rgb(17, 20, 24)"
LIGHT_BACKGROUND = "rgb(246, 247, 249)"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    tmp = tmp_path_factory.mktemp("chat-page-layout")
    docs = tmp / "docs"
    docs.mkdir()
    (docs / "travel.md").write_text(
        "# Travel policy\n\n## Flights\n\nEmployees fly economy on trips under six hours; hotels up to 600 CNY "
        "a night. A_very_long_identifier_without_any_break_that_would_push_a_narrow_column_sideways_if_let.\n",
        "utf-8",
    )
    (docs / "old-policy.md").write_text("# Old policy\n\nThe 2019 parking rules, replaced long ago.\n", "utf-8")
    (docs / "差旅.md").write_text("# 差旅规定\n\n员工乘坐经济舱出差。\n", "utf-8")
    srv = relative_home_server(tmp, docs)
    try:
        srv.start()
    except RuntimeError as exc:
        pytest.fail(f"{exc}\n{srv.log.read_text('utf-8', 'replace')[-3000:]}")
    try:
        yield srv
    finally:
        srv.stop()


def _tab(browser: Any, server: DevServer, tmp_path: Path, **options: Any) -> Page:
    return Page(browser, server.url, tmp_path, **options)


@pytest.fixture
def phone(browser: Any, server: DevServer, tmp_path: Path) -> Iterator[Page]:
    opened = _tab(browser, server, tmp_path, viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        yield opened
    finally:
        opened.close()


def _box(page: Any, selector: str) -> dict[str, float]:
    return page.locator(selector).bounding_box()


def test_on_a_phone_the_threads_are_a_drawer_and_nothing_scrolls_sideways(phone: Page) -> None:
    page = phone.sign_in("tok-alice")
    assert page.is_hidden("#sidebar") and page.is_visible("#open-threads")
    assert _box(page, "#chat")["width"] >= 380  # the conversation has the whole width
    phone.ask(CITED)
    assert not phone.scrolls_sideways(), page.evaluate("document.documentElement.scrollWidth")
    phone.shot("phone-answer")
    page.click("#open-threads")
    page.wait_for_selector("#sidebar", state="visible")
    assert page.get_attribute("#open-threads", "aria-expanded") == "true"
    assert page.evaluate("document.activeElement.id") == "new-thread"
    page.wait_for_timeout(300)  # slid in
    phone.shot("phone-drawer")
    page.click("#threads .thread >> nth=0")  # opening a thread closes the drawer
    page.wait_for_selector("#sidebar", state="hidden")
    page.click("#open-threads")
    page.wait_for_selector("#sidebar", state="visible")
    page.keyboard.press("Escape")
    page.wait_for_selector("#sidebar", state="hidden")
    assert phone.errors() == [], phone.console


def test_on_a_phone_a_cited_passage_is_a_full_screen_sheet(phone: Page) -> None:
    page = phone.sign_in("tok-alice")
    phone.ask(CITED)
    page.locator("#log a.citation").first.click()
    page.wait_for_selector("#side:not([hidden])")
    sheet = _box(page, "#side")
    assert (sheet["x"], sheet["y"], sheet["width"], sheet["height"]) == (0, 0, PHONE["width"], PHONE["height"])
    assert "economy" in page.inner_text("#side-body") and not phone.scrolls_sideways()
    phone.shot("phone-passage")
    page.click("#close-side")
    assert page.is_hidden("#side") and page.evaluate("document.activeElement.name") == "question"


def test_the_question_box_grows_with_its_text(phone: Page) -> None:
    page = phone.sign_in("tok-alice")
    empty = _box(page, "#question")["height"]
    page.fill("#question", "\n".join(f"line {i}" for i in range(6)))
    grown = _box(page, "#question")["height"]
    assert grown > empty * 2, (empty, grown)
    page.fill("#question", "\n".join(f"line {i}" for i in range(80)))
    assert _box(page, "#question")["height"] <= PHONE["height"] * 0.45  # then it scrolls, the page does not
    assert not phone.scrolls_sideways()


def test_on_a_phone_the_documents_area_fits_in_chinese(browser: Any, server: DevServer, tmp_path: Path) -> None:
    tab = _tab(browser, server, tmp_path, locale="zh-CN", viewport=PHONE, color_scheme="dark")
    try:
        page = tab.sign_in("tok-bob")
        page.click("#open-threads")
        page.click("#show-documents")
        page.wait_for_selector("#documents-view .docs-table")
        assert page.inner_text("#documents-title") == "文档"
        page.wait_for_selector("#sidebar", state="hidden")  # the drawer closed
        assert not tab.scrolls_sideways()
        tab.shot("phone-documents-zh-dark", full_page=True)
    finally:
        tab.close()


def _background(page: Any) -> str:
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


def test_dark_mode_follows_the_system_and_the_toggle_is_kept(browser: Any, server: DevServer, tmp_path: Path) -> None:
    tab = _tab(browser, server, tmp_path, viewport=DESKTOP, color_scheme="dark")
    try:
        page = tab.sign_in("tok-alice")
        assert _background(page) == DARK_BACKGROUND
        assert page.get_attribute("#theme", "aria-pressed") == "true"
        tab.ask(CITED)
        tab.shot("desktop-dark")
        page.click("#theme")
        assert _background(page) == LIGHT_BACKGROUND and page.get_attribute("#theme", "aria-pressed") == "false"
        page.reload()
        page.wait_for_selector("#app:not([hidden])")
        assert _background(page) == LIGHT_BACKGROUND  # the person's choice outlives a reload
        tab.shot("desktop-light-chosen")
    finally:
        tab.close()


def test_at_200_percent_zoom_the_page_fits_and_stays_readable(browser: Any, server: DevServer, tmp_path: Path) -> None:
    # 1280x800 at 200%: a window of 640x400 CSS pixels, each drawn twice as large
    tab = _tab(browser, server, tmp_path, viewport={"width": 640, "height": 400}, device_scale_factor=2)
    try:
        page = tab.sign_in("tok-alice")
        tab.ask(CITED)
        assert not tab.scrolls_sideways()
        send = _box(page, "#send")
        assert send["x"] + send["width"] <= 640 and send["y"] + send["height"] <= 400
        assert page.evaluate("parseFloat(getComputedStyle(document.body).fontSize)") >= 16
        tab.shot("zoom-200")
    finally:
        tab.close()


@pytest.mark.parametrize("size", ["desktop", "phone"])
@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_the_chat_in_each_size_scheme_and_language(
    browser: Any, server: DevServer, tmp_path: Path, size: str, scheme: str, locale: str
) -> None:
    viewport = PHONE if size == "phone" else DESKTOP
    tab = _tab(browser, server, tmp_path, locale=locale, viewport=viewport, color_scheme=scheme)
    try:
        page = tab.sign_in("tok-alice")
        tab.ask("差旅怎么坐飞机？" if locale == "zh-CN" else CITED)
        assert not tab.scrolls_sideways()
        assert _background(page) == (DARK_BACKGROUND if scheme == "dark" else LIGHT_BACKGROUND)
        if locale == "zh-CN":
            assert page.inner_text("#send") == "发送"
        tab.shot(f"chat-{size}-{scheme}-{locale}")
        assert tab.errors() == [], tab.console
    finally:
        tab.close()


# ---- accessibility (axe-core) ------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_axe_finds_nothing_serious_on_the_chat(
    browser: Any, server: DevServer, tmp_path: Path, scheme: str, size: str
) -> None:
    axe_source()
    viewport = PHONE if size == "phone" else DESKTOP
    tab = _tab(browser, server, tmp_path, viewport=viewport, color_scheme=scheme)
    try:
        page = tab.sign_in("tok-alice")
        assert serious_violations(page) == []  # the empty conversation
        tab.ask(CITED)
        assert serious_violations(page) == []
        if size == "phone":
            page.click("#open-threads")
            page.wait_for_selector("#sidebar", state="visible")
            assert serious_violations(page) == []
    finally:
        tab.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_nothing_serious_on_the_approval_card(
    browser: Any, server: DevServer, tmp_path: Path, scheme: str
) -> None:
    axe_source()
    tab = _tab(browser, server, tmp_path, viewport=DESKTOP, color_scheme=scheme)
    try:
        page = tab.sign_in("tok-bob")
        tab.ask("删除文档 old-policy.md")
        page.wait_for_selector("#approval:not([hidden])")
        assert serious_violations(page) == []
        tab.shot(f"axe-approval-{scheme}")
        page.click("#reject")
        page.wait_for_selector("#send:not([disabled])")
    finally:
        tab.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_nothing_serious_on_the_memories_panel(
    browser: Any, server: DevServer, tmp_path: Path, scheme: str
) -> None:
    axe_source()
    tab = _tab(browser, server, tmp_path, viewport=DESKTOP, color_scheme=scheme)
    try:
        page = tab.sign_in("tok-hana")
        tab.ask("remember that I prefer aisle seats")
        for _ in range(60):  # memories are written in the background after the answer
            page.click("#show-memories")
            page.wait_for_selector("#side:not([hidden])")
            if page.locator("#side-body .memory").count():
                break
            page.wait_for_timeout(500)
        assert serious_violations(page) == []
        tab.shot(f"axe-memories-{scheme}")
    finally:
        tab.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_nothing_serious_on_the_documents_view(
    browser: Any, server: DevServer, tmp_path: Path, scheme: str
) -> None:
    axe_source()
    tab = _tab(browser, server, tmp_path, viewport=DESKTOP, color_scheme=scheme)
    try:
        page = tab.sign_in("tok-bob")
        page.click("#show-documents")
        page.wait_for_selector("#documents-view .docs-table")
        assert serious_violations(page) == []
        tab.shot(f"axe-documents-{scheme}")
    finally:
        tab.close()


def test_the_axe_check_does_see_a_serious_violation(browser: Any, server: DevServer, tmp_path: Path) -> None:
    axe_source()
    tab = _tab(browser, server, tmp_path, viewport=DESKTOP)
    try:
        page = tab.sign_in("tok-alice")
        page.evaluate("document.getElementById('chat').append(document.createElement('button'))")  # no name
        assert "button-name" in [v["id"] for v in serious_violations(page)]
    finally:
        tab.close()
