"""Loading: formats, encodings, refusals with reasons, discovery, group sidecars, bounded streaming."""

from __future__ import annotations

import codecs
import hashlib
import io
import logging
import os
import time
import tracemalloc
import types
import warnings
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from stores.knowledge import documents
from stores.knowledge.chunking import chunk_document
from stores.knowledge.documents import DocumentError, LoadedDocument, Section, discover, load, read_groups
from stores.text_analysis import estimate_tokens
from tests.fixtures.docs import make_pdf

FIXTURES = Path(__file__).parents[2] / "fixtures" / "docs"


def write(path: Path, data: str | bytes, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode(encoding))
    return path


def sections_of(doc: LoadedDocument) -> list[Section]:
    return list(doc.sections)


# -- formats ----------------------------------------------------------------------------------


def test_chinese_markdown_title_heading_paths_front_matter_and_fences() -> None:
    doc = load(FIXTURES / "guide_zh.md", FIXTURES)
    assert doc.source == "guide_zh.md"
    assert doc.title == "知识库使用指南"
    assert doc.encoding == "utf-8"
    headings = [s.heading for s in sections_of(doc)]
    assert headings == [
        "知识库使用指南",
        "知识库使用指南 > 安装",
        "知识库使用指南 > 安装 > 配置",
        "知识库使用指南 > 常见问题",
    ]
    text = "\n".join(s.text for s in sections_of(doc))
    assert "不应出现的前言" not in text and "tags:" not in text  # front matter stripped
    assert "# 这不是标题" in sections_of(doc)[1].text  # a comment in a code fence is no heading
    assert all(not s.text.startswith("#") for s in sections_of(doc))  # heading lines are not body text


def test_english_markdown_sections() -> None:
    doc = load(FIXTURES / "guide_en.md", FIXTURES)
    assert doc.title == "User Guide"
    assert [s.heading for s in sections_of(doc)] == [
        "User Guide",
        "User Guide > Installation",
        "User Guide > Usage > Asking questions",
    ]
    assert sections_of(doc)[1].text.startswith("Install the package with pip.")


def test_markdown_without_h1_is_titled_by_stem_and_unclosed_front_matter_is_content(tmp_path: Path) -> None:
    path = write(tmp_path / "notes-2024.md", "---\nnot front matter after all\n\n## Part\n\nBody text.\n")
    doc = load(path, tmp_path)
    assert doc.title == "notes-2024"
    assert "not front matter after all" in sections_of(doc)[0].text
    assert sections_of(doc)[1] == Section("Part", "Body text.")


def test_html_drops_script_style_nav_and_splits_at_headings() -> None:
    doc = load(FIXTURES / "page.html", FIXTURES)
    assert doc.title == "Release Notes & News"
    text = "\n".join(s.text for s in sections_of(doc))
    for hidden in ("SCRIPT_SHOULD_NOT_APPEAR", "NAV_SHOULD_NOT_APPEAR", "color: red", "tracking"):
        assert hidden not in text
    assert [s.heading for s in sections_of(doc)] == [
        "Release 2.0",
        "Release 2.0 > Breaking changes",
        "Release 2.0 > 中文说明",
    ]
    assert (
        sections_of(doc)[0].text
        == "This release adds streaming ingestion. Large files no longer need much memory."
    )
    assert sections_of(doc)[1].text == "The config file moved.\n\nOld path: ~/.kb\n\nNew path: ~/.config/kb"
    assert sections_of(doc)[2].text == "本版本支持流式导入。\n大文件不再占用大量内存。"


def test_html_title_falls_back_to_first_h1_and_keeps_pre(tmp_path: Path) -> None:
    html = "<body><h1>Only &lt;H1&gt;</h1><pre>def f():\n    return 1</pre><p>after</p></body>"
    doc = load(write(tmp_path / "a.htm", html), tmp_path)
    assert doc.title == "Only <H1>"
    assert sections_of(doc) == [Section("Only <H1>", "def f():\n    return 1\n\nafter")]


def test_html_declared_charset_is_honoured(tmp_path: Path) -> None:
    html = '<html><head><meta charset="gbk"><title>说明</title></head><body><p>中文内容。</p></body></html>'
    doc = load(write(tmp_path / "gbk.html", html, encoding="gbk"), tmp_path)
    assert (doc.encoding, doc.title, sections_of(doc)[0].text) == ("gbk", "说明", "中文内容。")


def test_gbk_text_is_decoded_and_its_encoding_reported() -> None:
    raw = (FIXTURES / "notes_gbk.txt").read_bytes()
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")  # the fixture really is GBK
    doc = load(FIXTURES / "notes_gbk.txt", FIXTURES)
    assert doc.encoding in {"gb18030", "gbk"}
    assert doc.title == "notes_gbk"
    assert sections_of(doc) == [
        Section("", "仓库管理规定：所有货物入库前必须登记。\n\n出库时需要主管签字确认，并核对数量。")
    ]


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        (codecs.BOM_UTF8 + "带 BOM 的文本".encode(), "utf-8-sig"),
        ("UTF-16 文本".encode("utf-16"), "utf-16"),  # NUL bytes, yet text: the BOM says so
        ("Привет, мир! Это тестовый документ на русском языке. ".encode("cp1251") * 4, "cp1251"),
    ],
)
def test_boms_and_guessed_encodings(tmp_path: Path, data: bytes, encoding: str) -> None:
    doc = load(write(tmp_path / "t.txt", data), tmp_path)
    assert doc.encoding == encoding
    assert "\ufeff" not in sections_of(doc)[0].text
    assert sections_of(doc)[0].text.split()[0] in {"带", "UTF-16", "Привет,"}


def test_crlf_is_normalised(tmp_path: Path) -> None:
    doc = load(write(tmp_path / "w.txt", "line one\r\nline two\r\n\r\n\r\n\r\npara two\r\n"), tmp_path)
    assert sections_of(doc)[0].text == "line one\nline two\n\npara two"


def test_pdf_pages_become_sections_and_pypdf_stays_quiet(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(
        tmp_path / "docs" / "tiny.pdf", make_pdf(["Hello PDF page one.", "", "Third page text."], "Tiny")
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        doc = load(path, tmp_path)
    assert (doc.source, doc.title, doc.encoding) == ("docs/tiny.pdf", "Tiny", "binary")
    assert sections_of(doc) == [Section("p.1", "Hello PDF page one."), Section("p.3", "Third page text.")]
    caplog.set_level(logging.DEBUG)
    with pytest.raises(DocumentError, match=r"^corrupt or unreadable PDF: "):
        load(write(tmp_path / "bad.pdf", os.urandom(4096)), tmp_path)
    with pytest.raises(DocumentError, match="corrupt or unreadable PDF"):
        load(write(tmp_path / "cut.pdf", make_pdf(["x"])[:300]), tmp_path)
    assert not [r for r in caplog.records if r.name.startswith("pypdf")]
    assert logging.getLogger("pypdf").level == logging.NOTSET  # restored after loading


def test_pdf_without_text_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "scan.pdf", make_pdf(["", ""]))
    with pytest.raises(DocumentError, match=r"PDF has no extractable text \(scanned\?\)"):
        load(path, tmp_path)


@pytest.mark.parametrize(("password", "expected"), [("secret", None), ("", "Locked text.")])
def test_encrypted_pdf_opens_only_without_a_user_password(
    tmp_path: Path, password: str, expected: str | None
) -> None:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(["Locked text."]))))
    writer.encrypt(user_password=password, owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    path = write(tmp_path / "locked.pdf", out.getvalue())
    if expected is None:
        with pytest.raises(DocumentError, match=r"^encrypted PDF \(needs a password\)$"):
            load(path, tmp_path)
    else:
        assert sections_of(load(path, tmp_path)) == [Section("p.1", expected)]


def test_metadata_source_hash_and_size(tmp_path: Path) -> None:
    path = write(tmp_path / "a" / "b" / "Notes.MD", "# T\n\nbody\n")
    doc = load(path, tmp_path)
    assert doc.source == "a/b/Notes.MD"
    assert doc.content_hash == hashlib.sha256(path.read_bytes()).hexdigest()
    assert doc.size == path.stat().st_size
    assert isinstance(doc.sections, list)
    assert load(path, path).source == "Notes.MD"  # a root that is the file itself


# -- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("empty.txt", b"", "^empty file$"),
        ("blank.md", b" \n\t\r\n  \n", "^empty file$"),
        ("blank16.txt", "  \n\u3000 ".encode("utf-16"), "^empty file$"),
        ("only-front-matter.md", b"---\ntitle: x\n---\n", "^no text content$"),
        ("script-only.html", b"<script>alert(1)</script>", "^no text content$"),
        ("nul.txt", b"MZ\x90\x00\x03\x00\x00\x00\x04\x00" * 100, "^looks like a binary file, not text$"),
        ("control.md", bytes(range(1, 9)) * 500, "^looks like a binary file, not text$"),
        ("random.pdf", b"%PDF-1.7\n" + bytes(range(256)) * 8, "^corrupt or unreadable PDF: "),
        ("empty.pdf", b"", "^empty file$"),
        ("report.docx", b"PK\x03\x04", r"^corrupt or unreadable \.docx: "),
        ("slides.pptx", b"PK\x03\x04", r"^unsupported file type '\.pptx' \(supported: \.docx, \.htm"),
        ("Makefile", b"all:\n", r"^unsupported file type '\(no suffix\)'"),
    ],
)
def test_refusals_say_why(tmp_path: Path, name: str, data: bytes, message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        load(write(tmp_path / name, data), tmp_path)


def test_missing_file_is_a_document_error(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match=r"^cannot read file: "):
        load(tmp_path / "gone.md", tmp_path)
    assert issubclass(DocumentError, ValueError)


# -- discovery and groups ----------------------------------------------------------------------


def test_discover_walks_folders_skipping_hidden_unsupported_and_sidecars(tmp_path: Path) -> None:
    for name in ["b.md", "a.txt", "sub/c.html", "sub/deep/d.pdf", "e.MARKDOWN", "f.htm"]:
        write(tmp_path / "kb" / name, "x")
    for name in [".hidden.md", ".git/config.md", "sub/.cache/x.txt", "img.png", "a.txt.groups", ".groups"]:
        write(tmp_path / "kb" / name, "x")
    single = write(tmp_path / "single.md", "x")
    found = discover([tmp_path / "kb", single, tmp_path / "kb" / "a.txt", tmp_path / "kb" / "img.png"])
    kb = tmp_path / "kb"
    assert found == sorted(
        [(kb / n, kb) for n in ["a.txt", "b.md", "e.MARKDOWN", "f.htm", "sub/c.html", "sub/deep/d.pdf"]]
        + [(single, tmp_path)],
        key=lambda pair: pair[0].as_posix(),
    )
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        discover([tmp_path / "missing"])


def test_groups_file_sidecar_beats_nearest_folder_file(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    write(root / ".groups", "staff\n")
    write(root / "hr" / ".groups", "hr, managers\n# a comment line\nhr\n")
    own = write(root / "hr" / "pay.md", "x")
    write(root / "hr" / "pay.md.groups", "payroll，finance\n\n")
    other = write(root / "hr" / "leave.md", "x")
    deep = write(root / "hr" / "2024" / "q1.md", "x")
    top = write(root / "intro.md", "x")
    assert read_groups(own, root) == ["payroll", "finance"]
    assert read_groups(other, root) == ["hr", "managers"]
    assert read_groups(deep, root) == ["hr", "managers"]
    assert read_groups(top) == ["staff"]
    lonely = write(tmp_path / "elsewhere" / "x.md", "x")
    assert read_groups(lonely, tmp_path / "elsewhere") is None
    write(tmp_path / ".groups", "outside-root")
    assert read_groups(lonely, tmp_path / "elsewhere") is None  # the search stops at root
    assert read_groups(lonely) == ["outside-root"]


# -- streaming ----------------------------------------------------------------------------------


def test_streamed_markdown_matches_in_memory_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same sections, title, encoding and hash either way (GBK, CRLF, fences, front matter, big sections)."""
    parts = ["---\ndraft: true\n---\n", "# 大文件\r\n\r\n"]
    for n in range(400):
        parts.append(f"## 第{n}章\r\n\r\n" + f"第{n}章正文，第一句。第二句！\r\n\r\n" * 40)
        if n % 50 == 0:
            parts.append("```\r\n# 代码里的注释\r\n```\r\n")
    parts.append("## 长节\n\n" + "长段落。" * 200_000)  # one section far beyond SECTION_CHARS
    path = write(tmp_path / "big.md", "".join(parts), encoding="gbk")
    in_memory = load(path, tmp_path)
    monkeypatch.setattr(documents, "STREAM_THRESHOLD", 1024)
    streamed = load(path, tmp_path)
    assert isinstance(streamed.sections, types.GeneratorType)
    assert isinstance(in_memory.sections, list)
    assert (
        (streamed.title, streamed.encoding, streamed.content_hash, streamed.size)
        == (
            in_memory.title,
            in_memory.encoding,
            in_memory.content_hash,
            in_memory.size,
        )
        == ("大文件", "gb18030", hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_size)
    )
    got = list(streamed.sections)
    assert got == in_memory.sections
    assert [s.heading for s in got[:2]] == ["大文件 > 第0章", "大文件 > 第1章"]
    assert all(len(s.text) <= documents.SECTION_CHARS for s in got)
    assert sum(s.heading == "大文件 > 长节" for s in got) >= 3
    assert "# 代码里的注释" in got[0].text


def test_fifty_megabytes_stream_with_bounded_memory(tmp_path: Path) -> None:
    """A 50 MB text is hashed, decoded and chunked block by block: peak Python memory stays far below its size."""
    path = tmp_path / "big.txt"
    paragraph = "".join(
        f"Sentence {k} of paragraph {{n}} covers widget {{m}} and its upkeep. " for k in range(8)
    )
    chinese = "".join(f"第{{n}}段第{k}句说明部件{{m}}的维护周期与检查要求。" for k in range(6))
    with path.open("w", encoding="utf-8") as fh:
        n = 0
        while fh.tell() < 50 * 1024 * 1024:
            fh.write(
                "".join(f"{paragraph}\n\n{chinese}\n\n".format(n=i, m=i * 7) for i in range(n, n + 1000))
            )
            n += 1000
    started = time.perf_counter()
    tracemalloc.start()
    try:
        doc = load(path, tmp_path)
        assert isinstance(doc.sections, types.GeneratorType)
        chunks = longest = 0
        for chunk in chunk_document(doc, ["g"]):
            chunks += 1
            if chunks % 997 == 0:
                longest = max(longest, estimate_tokens(chunk.text))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert doc.content_hash == hashlib.sha256(path.read_bytes()).hexdigest()
    assert chunks > 40_000 and 0 < longest <= 320
    assert peak < 64 * 1024 * 1024, f"peak {peak / 2**20:.1f} MB"
    print(f"50 MB: {chunks} chunks in {time.perf_counter() - started:.1f} s, peak {peak / 2**20:.1f} MB")


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("Fucci2 reporter mice\n\nThe cell cycle is seen live.", "Fucci2 reporter mice"),
        ("Does aspirin prevent strokes?\n\nA trial of 2,000 adults.", "Does aspirin prevent strokes?"),
        ("短兵\n\n短兵在中国文化当中是对尺寸较短的冷兵器的统称。", "短兵"),
        ("\ufeff\n  Release notes 2.1\n\nFixed the importer.", "Release notes 2.1"),
        # the file name: a first sentence, a clause, one paragraph only, two lines, a long line
        ("仓库管理规定：所有货物入库前必须登记。\n\n出库时需要签字。", "paper"),
        ("Dear team,\n\nthe meeting moved.", "paper"),
        ("Only one paragraph here.", "paper"),
        ("Line one\nline two\n\nbody", "paper"),
        ("x" * 201 + "\n\nbody", "paper"),
    ],
)
def test_a_plain_text_title_is_its_first_line_when_that_line_is_a_title(
    tmp_path: Path, text: str, title: str
) -> None:
    path = tmp_path / "paper.txt"
    path.write_text(text, encoding="utf-8")
    doc = load(path, tmp_path)
    assert doc.title == title
    assert "".join(s.text for s in sections_of(doc)).startswith(text.lstrip("\ufeff \n")[:10])  # text kept whole


def test_a_streamed_text_file_finds_its_title_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "STREAM_THRESHOLD", 100)
    path = tmp_path / "big.txt"
    path.write_text("Quarterly report\n\n" + "Revenue grew. " * 50, encoding="utf-8")
    assert load(path, tmp_path).title == "Quarterly report"
