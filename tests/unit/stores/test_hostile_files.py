"""Hostile files (zip bombs, paragraph bombs, huge PDFs) are refused with one line; the batch goes on.

Each bomb is built here, in a temporary folder; the memory cases run in a subprocess that reports its
peak RSS growth so the bound is measured, not assumed. The peak is the kernel's VmHWM: ``ru_maxrss`` of a
child starts at its parent's peak (kept across fork and exec), which would hide the child's own.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from docx import Document

from stores.embeddings import HashingEmbedder
from stores.knowledge import load_limits
from stores.knowledge.documents import DocumentError, load
from stores.knowledge.knowledge_base import KnowledgeBase

ROOT = Path(__file__).parents[3]
PEAK_MIB = 200  # what a refused bomb may add to the process; before the bounds they took gigabytes


def _plain_docx() -> bytes:
    buf = io.BytesIO()
    document = Document()
    document.add_paragraph("An ordinary paragraph.")
    document.save(buf)
    return buf.getvalue()


def _docx_with(path: Path, body: str = "", zeros: dict[str, int] | None = None) -> Path:
    """A real .docx whose body gets ``body`` spliced in (and ``zeros`` members of that many MiB of zeros)."""
    source = zipfile.ZipFile(io.BytesIO(_plain_docx()))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "word/document.xml" and body:
                text = data.decode()
                at = text.index("<w:body>") + len("<w:body>")
                data = (text[:at] + body + text[at:]).encode()
            out.writestr(info.filename, data, compresslevel=9)
        for name, mib in (zeros or {}).items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            with out.open(info, "w", force_zip64=True) as member:
                for _ in range(mib):
                    member.write(bytes(2**20))
    return path


def _random_runs(count: int) -> str:
    """One paragraph of ``count`` runs with random revision ids: deflates only ~4x, so no ratio catches it."""
    ids = os.urandom(4 * count).hex()
    return "<w:p>" + "".join(f'<w:r w:rsidR="{ids[8 * n : 8 * n + 8]}"/>' for n in range(count)) + "</w:p>"


def _bombs(folder: Path) -> dict[str, Path]:
    return {
        "paragraphs": _docx_with(folder / "paragraphs.docx", "<w:p/>" * 5_000_000),
        "runs": _docx_with(folder / "runs.docx", _random_runs(1_500_000)),
        "inflate": _docx_with(folder / "inflate.docx", zeros={"word/media/image1.png": 600}),
    }


_MEASURE = """
import json, re, sys
from pathlib import Path
from stores.knowledge.documents import DocumentError, load
import docx, lxml.etree, pypdf  # imported before the baseline: they are not the file's cost
def peak_mib():
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) / 1024
path = Path(sys.argv[1])
before = peak_mib()
try:
    load(path, path.parent)
    why = None
except DocumentError as exc:
    why = str(exc)
print(json.dumps({"why": why, "peak_growth_mib": peak_mib() - before, "peak_rss_mib": peak_mib()}))
"""


@pytest.mark.parametrize("kind", ["paragraphs", "runs", "inflate"])
def test_a_docx_bomb_is_refused_in_bounded_memory(tmp_path: Path, kind: str) -> None:
    bomb = _bombs(tmp_path)[kind]
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(bomb)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    print(f"{kind}: {bomb.stat().st_size} bytes on disk, {result}")  # the figure the issue asks for
    assert result["why"] and "\n" not in result["why"]
    assert result["peak_growth_mib"] < PEAK_MIB


def test_the_bomb_messages_name_the_bound(tmp_path: Path) -> None:
    bombs = _bombs(tmp_path)
    with pytest.raises(DocumentError, match=r"XML elements|inflates"):
        load(bombs["paragraphs"], tmp_path)
    with pytest.raises(DocumentError, match="XML elements"):
        load(bombs["runs"], tmp_path)
    with pytest.raises(DocumentError, match=r"unzips to|inflates"):
        load(bombs["inflate"], tmp_path)


def test_too_many_paragraphs_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load_limits, "MAX_DOCX_PARAGRAPHS", 50)
    doc = Document()
    for n in range(60):
        doc.add_paragraph(f"paragraph {n}")
    doc.save(tmp_path / "long.docx")
    with pytest.raises(DocumentError, match="over 50 paragraphs"):
        load(tmp_path / "long.docx", tmp_path)


def test_files_over_their_size_bound_are_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("stores.knowledge.documents.MAX_HTML_BYTES", 1000)
    monkeypatch.setattr("stores.knowledge.documents.MAX_PDF_BYTES", 1000)
    (tmp_path / "big.html").write_text("<p>" + "word " * 1000 + "</p>")
    (tmp_path / "big.pdf").write_bytes(b"%PDF-1.4\n" + b"0" * 2000)
    with pytest.raises(DocumentError, match=r"HTML of .* is over the .* limit"):
        load(tmp_path / "big.html", tmp_path)
    with pytest.raises(DocumentError, match=r"PDF of .* is over the .* limit"):
        load(tmp_path / "big.pdf", tmp_path)


def test_a_pdf_over_the_page_bound_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pypdf import PdfWriter

    monkeypatch.setattr("stores.knowledge.pdf_loader.MAX_PDF_PAGES", 10)
    writer = PdfWriter()
    for _ in range(11):
        writer.add_blank_page(width=200, height=200)
    writer.write(tmp_path / "pages.pdf")
    with pytest.raises(DocumentError, match="11 pages, over the 10 limit"):
        load(tmp_path / "pages.pdf", tmp_path)


def test_a_pdf_stream_that_inflates_past_the_bound_is_refused(tmp_path: Path) -> None:
    import zlib

    content = zlib.compress(
        b"BT /F1 12 Tf 10 10 Td (x) Tj ET\n" * (2 * load_limits.MAX_PDF_STREAM_BYTES // 32)
    )
    pdf = _pdf_with_content(content)
    (tmp_path / "inflate.pdf").write_bytes(pdf)
    with pytest.raises(DocumentError, match="PDF is over a bound"):
        load(tmp_path / "inflate.pdf", tmp_path)


def _pdf_with_content(stream: bytes) -> bytes:
    """A one-page PDF whose content stream is ``stream`` (FlateDecode), with a correct xref table."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_a_bomb_is_skipped_and_the_rest_of_the_batch_ingests(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    _docx_with(docs / "bomb.docx", "<w:p/>" * 5_000_000)
    (docs / "leave.md").write_text("# Leave\n\nAnnual leave is 15 days.\n")
    kb = KnowledgeBase(tmp_path / "kb", embedder=HashingEmbedder(dim=64))
    report = kb.ingest([docs])
    assert report.added == ["leave.md"]
    [(path, why)] = report.skipped
    assert path.endswith("bomb.docx") and "inflates" in why
