"""Chunking: stable ids and hashes, sentence-aware splits in Chinese and English, size limits, metadata."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stores.knowledge import chunking
from stores.knowledge.chunking import Chunk, chunk_document
from stores.knowledge.documents import LoadedDocument, Section, load
from stores.text_analysis import estimate_tokens
from tests.fixtures.docs import make_pdf

FIXTURES = Path(__file__).parents[2] / "fixtures" / "docs"


def doc_of(*sections: Section, source: str = "s.md", title: str = "T") -> LoadedDocument:
    return LoadedDocument(source, title, list(sections), "utf-8", "0" * 64, 0)


def chunks_of(path: Path, root: Path, **kwargs: int) -> list[Chunk]:
    return list(chunk_document(load(path, root), ["g"], **kwargs))


ZH_SENTENCES = [
    f"第{n}条规定要求所有{thing}在使用之前必须经过检查{end}"
    for n, (thing, end) in enumerate(
        [("设备", "。"), ("工具", "！"), ("材料", "？"), ("车辆", "。"), ("仪器", "。"), ("文件", "！")] * 6
    )
]
EN_SENTENCES = [
    f"Rule {n} says every {thing} must be checked before anyone uses it{end}"
    for n, (thing, end) in enumerate([("device", "."), ("tool", "!"), ("vehicle", "?"), ("form", ".")] * 8)
]


def test_ids_and_hashes_are_stable_across_loads(tmp_path: Path) -> None:
    path = tmp_path / "kb" / "guide.md"
    path.parent.mkdir()
    path.write_text((FIXTURES / "guide_zh.md").read_text(encoding="utf-8") * 3, encoding="utf-8")
    first = chunks_of(path, tmp_path, max_tokens=40, overlap_tokens=8)
    second = chunks_of(path, tmp_path, max_tokens=40, overlap_tokens=8)
    assert first == second
    assert [c.id for c in first] == [f"kb/guide.md#{n}" for n in range(len(first))]
    assert len({c.hash for c in first}) > 1
    assert all(re.fullmatch(r"[0-9a-f]{16}", c.hash) for c in first)


def test_an_edit_only_changes_the_chunks_from_the_edited_one_on(tmp_path: Path) -> None:
    body = "\n\n".join(" ".join(EN_SENTENCES[i : i + 3]) for i in range(0, 30, 3))
    edited_body = body.replace("Rule 12 says every device", "Rule 12 says each device")
    path = tmp_path / "g.md"
    page = "# Guide\n\n{0}\n\n## Middle\n\n{1}\n\n## End\n\n{0}\n"
    path.write_text(page.format(body, body), encoding="utf-8")
    before = chunks_of(path, tmp_path, max_tokens=60, overlap_tokens=10)
    path.write_text(page.format(body, edited_body), encoding="utf-8")
    after = chunks_of(path, tmp_path, max_tokens=60, overlap_tokens=10)
    changed = [n for n, (a, b) in enumerate(zip(before, after, strict=True)) if a.hash != b.hash]
    assert changed, "the edit must show"
    assert {before[n].metadata["section"] for n in changed} == {"Guide > Middle"}
    assert len(changed) <= 2  # the chunk holding the sentence, and the next one if it overlaps
    assert before[: changed[0]] == after[: changed[0]]  # earlier ids, texts and hashes unchanged
    assert [c.id for c in before] == [c.id for c in after]


def test_chinese_splits_between_sentences() -> None:
    doc = doc_of(Section("规定", "".join(ZH_SENTENCES)))
    chunks = list(chunk_document(doc, [], max_tokens=60, overlap_tokens=30))
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.text[-1] in "。！？", chunk.text
        pieces = re.findall(r"[^。！？]+[。！？]", chunk.text)
        assert "".join(pieces) == chunk.text and all(p in ZH_SENTENCES for p in pieces)
    sentences = [set(re.findall(r"[^。！？]+[。！？]", c.text)) for c in chunks]
    assert any(a & b for a, b in itertools.pairwise(sentences)), "overlap repeats a whole sentence"


def test_english_splits_after_sentence_ends() -> None:
    doc = doc_of(Section("Rules", " ".join(EN_SENTENCES)))
    chunks = list(chunk_document(doc, [], max_tokens=50, overlap_tokens=0))
    assert len(chunks) > 5
    for chunk in chunks:
        pieces = re.findall(r"Rule \d+ [^.!?]+[.!?]", chunk.text)
        assert " ".join(pieces) == chunk.text and all(p in EN_SENTENCES for p in pieces), chunk.text


@pytest.mark.parametrize(
    "text",
    [
        "".join(ZH_SENTENCES) * 5,
        " ".join(EN_SENTENCES) * 5,
        "无标点的长中文文本" * 400,
        "supercalifragilistic" * 500,
        "a b c d e f g h " * 600,
        "１２３４５６７８ 12345678 " * 300,
        "\n".join(f"line {n}: 日志 entry, value={n * 37}" for n in range(800)),
    ],
)
def test_chunks_respect_max_tokens_and_are_trimmed(text: str) -> None:
    chunks = list(chunk_document(doc_of(Section("", text)), [], max_tokens=100, overlap_tokens=20))
    assert chunks
    for chunk in chunks:
        assert estimate_tokens(chunk.passage) <= 100  # what is embedded fits, heads included
        assert chunk.text == chunk.text.strip() and chunk.text


def test_metadata_is_scalar_and_names_the_section() -> None:
    doc = load(FIXTURES / "guide_zh.md", FIXTURES)
    chunks = list(chunk_document(doc, ["hr", " finance ", "hr", ""]))
    assert [c.metadata["section"] for c in chunks] == [
        "知识库使用指南",
        "知识库使用指南 > 安装",
        "知识库使用指南 > 安装 > 配置",
        "知识库使用指南 > 常见问题",
    ]
    for n, chunk in enumerate(chunks):
        assert chunk.metadata == {
            "source": "guide_zh.md",
            "title": "知识库使用指南",
            "section": chunk.metadata["section"],
            "position": n,
            "groups": "hr,finance",
        }
        assert all(isinstance(v, str | int | float | bool) for v in chunk.metadata.values())
    assert "```bash\n# 这不是标题\npip install kb-agent\n```" in chunks[1].text


def test_pdf_and_html_sections_reach_metadata(tmp_path: Path) -> None:
    pdf = tmp_path / "m.pdf"
    pdf.write_bytes(make_pdf(["First page.", "Second page."]))
    assert [c.metadata["section"] for c in chunks_of(pdf, tmp_path)] == ["p.1", "p.2"]
    html = chunks_of(FIXTURES / "page.html", FIXTURES)
    assert all("SCRIPT_SHOULD_NOT_APPEAR" not in c.text for c in html)
    assert html[0].metadata["title"] == "Release Notes & News"


def test_empty_sections_give_no_chunks_and_bad_sizes_are_refused() -> None:
    assert list(chunk_document(doc_of(Section("a", "   \n\n  ")), [])) == []
    with pytest.raises(ValueError, match="overlap_tokens"):
        list(chunk_document(doc_of(Section("a", "x")), [], max_tokens=10, overlap_tokens=10))


def test_fast_token_count_is_in_use_and_agrees_with_estimate_tokens_on_every_bmp_char() -> None:
    assert chunking._measure is chunking._count_tokens, (
        "estimate_tokens changed: update chunking._count_tokens to match (the slow path is in use)"
    )
    reference = estimate_tokens.__wrapped__
    for code in range(0x10000):
        char = chr(code)
        for text in (char, f"ab{char}cde", f"12{char}3", char * 5):
            assert chunking._count_tokens(text) == reference(text), hex(code)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([*"aZ9０ 。，.!\n\t中ü\u3000가²٣-\U0001f600", "abcd", "1234"])).map("".join))
def test_fast_token_count_agrees_with_estimate_tokens(text: str) -> None:
    assert chunking._count_tokens(text) == estimate_tokens.__wrapped__(text)


PAPER_TITLE = "Visualization of the cell cycle in mouse embryos with a Fucci2 reporter"


def paper(tmp_path: Path, title: str = PAPER_TITLE) -> Path:
    body = "\n\n".join(" ".join(EN_SENTENCES[n : n + 8]) for n in range(0, 32, 8))
    path = tmp_path / "0000a7737b393f6c.txt"
    path.write_text(f"{title}\n\n{body}", encoding="utf-8")
    return path


def test_every_chunk_of_a_split_document_is_embedded_under_its_title(tmp_path: Path) -> None:
    chunks = chunks_of(paper(tmp_path), tmp_path, max_tokens=120, overlap_tokens=10)
    assert len(chunks) > 2
    for chunk in chunks:
        assert chunk.metadata["title"] == PAPER_TITLE
        assert chunk.passage.startswith(PAPER_TITLE)
        assert chunk.passage.count(PAPER_TITLE) == 1  # never twice, also where the text starts with it
        assert estimate_tokens(chunk.passage) <= 120
    # the title line split off its text is not a chunk of its own: every chunk carries it
    assert all(chunk.text != PAPER_TITLE for chunk in chunks)
    assert [c.metadata["position"] for c in chunks] == list(range(len(chunks)))


def test_a_markdown_section_is_embedded_under_its_heading_path_once() -> None:
    doc = doc_of(Section("Guide > Installing", " ".join(EN_SENTENCES)), title="Guide")
    chunks = list(chunk_document(doc, ["g"], max_tokens=80, overlap_tokens=10))
    assert len(chunks) > 1
    # the heading path already names the title: it is not repeated above it
    assert all(c.passage.startswith("Guide > Installing\n") and c.passage.count("Guide") == 1 for c in chunks)


def test_a_new_title_re_embeds_chunks_whose_text_is_unchanged(tmp_path: Path) -> None:
    before = chunks_of(paper(tmp_path), tmp_path, max_tokens=120, overlap_tokens=10)
    after = chunks_of(paper(tmp_path, PAPER_TITLE.replace("mouse", "horse")), tmp_path, max_tokens=120, overlap_tokens=10)
    pairs = list(zip(before, after, strict=True))
    assert len(pairs) > 1 and all(a.text == b.text and a.hash != b.hash for a, b in pairs)


def test_a_document_that_is_only_its_title_keeps_one_chunk() -> None:
    chunks = list(chunk_document(doc_of(Section("", "T")), ["g"]))
    assert [c.text for c in chunks] == ["T"]
