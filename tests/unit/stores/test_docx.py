""".docx ingest: sections by heading (English and Chinese styles), tables as rows, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from docx import Document

from stores.embeddings import HashingEmbedder
from stores.knowledge.documents import DocumentError, load
from stores.knowledge.knowledge_base import KnowledgeBase


def _docx(path: Path) -> Path:
    doc = Document()
    doc.core_properties.title = "差旅报销指南"
    doc.add_paragraph("适用于全体员工。")
    doc.add_heading("报销流程", level=1)
    doc.add_paragraph("出差结束后 30 天内提交报销单，附发票原件。")
    doc.add_heading("Approval", level=2)
    doc.add_paragraph("Claims above 5,000 CNY need the department head's approval.")
    table = doc.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "城市", "住宿上限"
    table.cell(1, 0).text, table.cell(1, 1).text = "北京", "600 元/晚"
    doc.save(path)
    return path


def test_sections_follow_the_headings(tmp_path: Path) -> None:
    loaded = load(_docx(tmp_path / "travel.docx"), tmp_path)
    assert loaded.title == "差旅报销指南" and loaded.source == "travel.docx"
    sections = {s.heading: s.text for s in loaded.sections}
    assert sections[""] == "适用于全体员工。"
    assert "30 天内" in sections["报销流程"]
    assert "5,000 CNY" in sections["报销流程 > Approval"]
    assert "北京 | 600 元/晚" in sections["报销流程 > Approval"]


def test_a_docx_is_searchable_and_cited(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    _docx(docs / "travel.docx")
    kb = KnowledgeBase(tmp_path / "data", embedder=HashingEmbedder())
    report = kb.ingest([docs])
    assert report.added == ["travel.docx"]
    hits = kb.search("北京住宿上限", top_k=1, mode="bm25")
    assert hits and hits[0]["id"].startswith("travel.docx#")


@pytest.mark.parametrize("content", [b"PK\x03\x04 not really a zip", b"plain text pretending"])
def test_a_corrupt_docx_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.docx"
    path.write_bytes(content)
    with pytest.raises(DocumentError, match=r"corrupt or unreadable \.docx"):
        load(path, tmp_path)


def test_an_empty_docx_says_so(tmp_path: Path) -> None:
    path = tmp_path / "empty.docx"
    Document().save(path)
    with pytest.raises(DocumentError, match="no text"):
        load(path, tmp_path)
