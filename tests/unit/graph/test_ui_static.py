"""The chat page's static files: every module the page imports is served (with the page's policy), the
vendored renderer and sanitiser are the npm files their manifest names (version, digest, licence), and the
page's own code never parses a string as HTML."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import tomllib
from pathlib import Path

import httpx
import pytest

from graph.edge import Edge
from graph.ui import FILES, STATIC
from graph.ui_http import CSP

REPO = Path(__file__).resolve().parents[3]
VENDOR = STATIC / "vendor"
OWN_SCRIPTS = sorted(p for p in STATIC.glob("*.js"))


async def _not_found(scope: object, receive: object, send: object) -> None:
    raise AssertionError("a /ui request reached the server's own routes")


def _get(path: str) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=Edge(_not_found))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.get(path)

    return asyncio.run(go())


def test_every_file_the_page_loads_is_served_and_every_served_file_exists() -> None:
    shipped = {p.relative_to(STATIC).as_posix() for p in STATIC.rglob("*") if p.suffix in (".js", ".css", ".svg")}
    assert shipped == set(FILES)
    imported = set()
    for script in OWN_SCRIPTS:
        imported |= {m.removeprefix("./") for m in re.findall(r'from "(\./[^"]+)"', script.read_text("utf-8"))}
    page = (STATIC / "index.html").read_text("utf-8")
    imported |= {m for m in re.findall(r'/ui/static/([\w./-]+)', page)}
    assert imported <= set(FILES), imported - set(FILES)


@pytest.mark.parametrize("name", ["vendor/markdown-it.js", "vendor/purify.js", "markdown.js", "app.css"])
def test_a_static_file_is_served_with_its_type_and_the_pages_policy(name: str) -> None:
    answer = _get(f"/ui/static/{name}")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith(FILES[name])
    assert answer.headers["content-security-policy"] == CSP and answer.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    "path", ["/ui/static/vendor/vendor.json", "/ui/static/../ui.py", "/ui/static/%2e%2e/ui.py", "/ui/static/index.html"]
)
def test_nothing_else_is_served_from_the_static_folder(path: str) -> None:
    assert _get(path).status_code == 404


def test_the_vendored_files_are_the_npm_files_their_manifest_names() -> None:
    manifest = json.loads((VENDOR / "vendor.json").read_text("utf-8"))
    packages = {k: v for k, v in manifest.items() if not k.startswith("_")}
    assert set(packages) == {"markdown-it", "dompurify"}
    for name, entry in packages.items():
        data = (VENDOR / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name
        assert re.fullmatch(r"\d+\.\d+\.\d+", entry["version"]) and entry["licence"] and entry["from"]
        for licence in re.findall(r"LICENSE[\w.-]*\.txt", entry["licence"]):
            assert (VENDOR / licence).is_file(), licence
    assert b"markdown-it " + packages["markdown-it"]["version"].encode() in (VENDOR / "markdown-it.js").read_bytes()[:200]


def test_the_package_ships_the_vendored_files() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    assert "ui_static/vendor/*" in config["tool"]["setuptools"]["package-data"]["graph"]


@pytest.mark.parametrize("script", OWN_SCRIPTS, ids=lambda p: p.name)
def test_the_pages_own_code_never_parses_a_string_as_html(script: Path) -> None:
    code = script.read_text("utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "DOMParser"):
        assert sink not in code, f"{script.name} uses {sink}"
    if script.name == "markdown.js":  # the one place HTML is made: by markdown-it, turned into nodes by DOMPurify
        assert "RETURN_DOM_FRAGMENT: true" in code and "html: false" in code and 'md.disable(["image"])' in code
