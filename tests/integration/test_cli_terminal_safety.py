"""Escape sequences inside a document, a memory or a tool's output never reach the terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app

runner = CliRunner()
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31m\x9b1m\x07\x08\r"
CONTROLS = ("\x1b", "\x9b", "\x07", "\x08", "\r")


@pytest.fixture
def docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty documents folder, with a fresh data folder and the offline embedder."""
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    folder = tmp_path / "docs"
    folder.mkdir()
    return folder


@pytest.fixture
def hostile_kb(docs: Path) -> Path:
    (docs / "leave.md").write_text(
        f"# 年假{HOSTILE}\n\n员工的年假有 15 天{HOSTILE}，需提前两周申请。Annual leave is 15 days{HOSTILE}.\n"
    )
    result = runner.invoke(app, ["ingest", str(docs)])
    assert result.exit_code == 0, result.output
    return docs


def _clean(text: str) -> bool:
    return not any(control in text for control in CONTROLS)


@pytest.mark.parametrize("as_json", [False, True])
def test_search_prints_no_control_bytes(hostile_kb: Path, as_json: bool) -> None:
    result = runner.invoke(
        app, ["search", "年假 annual leave", "--mode", "bm25", *(["--json"] if as_json else [])]
    )
    assert result.exit_code == 0 and "15" in result.stdout
    assert _clean(result.stdout)


def test_ask_and_history_print_no_control_bytes(hostile_kb: Path) -> None:
    result = runner.invoke(app, ["ask", "年假有多少天？", "--thread", "esc"])
    assert result.exit_code == 0 and "15" in result.stdout
    assert _clean(result.output)
    history = runner.invoke(app, ["threads", "history", "esc", "--all"])
    assert history.exit_code == 0 and "15" in history.stdout and _clean(history.output)


def test_memories_and_tool_output_print_no_control_bytes(hostile_kb: Path) -> None:
    added = runner.invoke(app, ["memories", "add", f"I prefer tea{HOSTILE} in the morning", "--user", "eve"])
    assert added.exit_code == 0, added.output
    listed = runner.invoke(app, ["memories", "list", "--user", "eve"])
    assert "tea" in listed.stdout and _clean(listed.output)
    called = runner.invoke(app, ["tools", "call", "search_knowledge", "--args", '{"query": "annual leave"}'])
    assert called.exit_code == 0 and "15" in called.stdout and _clean(called.output)


RLO = "\u202e"  # right-to-left override: "invoice\u202efdp.exe" shows as "invoiceexe.pdf"
BIDI = (RLO, "\u202a", "\u202b", "\u202c", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069", "\u200f")


@pytest.fixture
def named_kb(docs: Path) -> Path:
    """Documents whose names carry a bidirectional override, an isolate and a newline."""
    (docs / f"invoice{RLO}dm.txt").write_text("Travel refunds are paid within ten days of the claim.\n")
    (docs / "rota\nfinal.md").write_text("# Rota\n\nThe on-call rota changes every Monday at nine.\n")
    (docs / "notes\u2067x\u2069.md").write_text("Parking permits are issued by the front desk.\n")
    return docs


@pytest.mark.parametrize("as_json", [False, True])
def test_names_with_bidi_controls_or_newlines_are_escaped_in_every_output(named_kb: Path, as_json: bool) -> None:
    flag = ["--json"] if as_json else []
    ingested = runner.invoke(app, ["ingest", str(named_kb), *flag])
    assert ingested.exit_code == 0, ingested.output
    for query, shown_as in [
        ("travel refunds claim", "invoice\\u202edm.txt"),
        ("on-call rota Monday", "rota\\nfinal.md"),
        ("parking permits desk", "notes\\u2067x\\u2069.md"),
    ]:
        found = runner.invoke(app, ["search", query, "--mode", "bm25", *flag])
        assert found.exit_code == 0, found.output
        assert not any(c in found.output for c in BIDI), repr(found.output)
        assert shown_as in found.output, repr(found.output)
        if not as_json:  # each hit stays on its own line: "1. <id> <score> (bm25)"
            first = found.stdout.splitlines()[0]
            assert first.startswith("1. ") and shown_as in first and "(bm25)" in first, repr(found.stdout)
    asked = runner.invoke(app, ["ask", "How fast are travel refunds paid?", "--thread", "bidi"])
    assert asked.exit_code == 0 and not any(c in asked.output for c in BIDI), repr(asked.output)


def test_messages_are_not_wrapped_when_the_output_is_not_a_terminal(docs: Path) -> None:
    (docs / "ok.txt").write_text("hello world\n")
    binary = docs / ("a-rather-long-file-name-" * 5 + ".txt")
    binary.write_bytes(bytes(range(256)) * 4)
    result = runner.invoke(app, ["ingest", str(docs)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.startswith("skipped ") and line.endswith("not text") and len(line) > 120 for line in lines), lines
    assert next(line for line in lines if line.startswith("added")).endswith("chunks written 1"), lines
