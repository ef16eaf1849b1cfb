"""The knowledge base knows the languages it holds: told by script share, recorded per document at ingest."""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from pathlib import Path

import pytest

from stores.base import KnowsLanguages, PassageSearch
from stores.embeddings import HashingEmbedder
from stores.knowledge.knowledge_base import KnowledgeBase
from stores.knowledge.languages import languages_in, languages_of, written_in
from stores.knowledge.manifest import MANIFEST_FILE, FileRecord, Manifest

POSTGRES_URL = os.environ.get("KB_TEST_POSTGRES_URL", "")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("员工每年有十天年假，未用完的可以顺延到三月。", {"zh"}),
        ("Employees get ten days of annual leave every year.", {"en"}),
        # names, identifiers and numbers inside a sentence do not change its language
        ("用 Chroma 的 PersistentClient 保存向量，默认端口 8000。", {"zh"}),
        ("KB_AGENT_HOME 指向数据目录，里面有知识库和记忆。", {"zh"}),
        ("什么是 RAG？", {"zh"}),
        ("Is 知识库 the same as a vector store?", {"en"}),
        ("The 知识库 keeps its chunks in Chroma and its keywords in BM25 on disk.", {"en"}),
        # a passage in both languages is both
        ("Threads are kept in SQLite. 线程保存在 SQLite 数据库里。", {"zh", "en"}),
        ("What does 检索增强生成 mean?", {"zh", "en"}),
        ("线程 stored where?", {"zh", "en"}),
        ("１２３ + 456 = ???", set()),
        ("", set()),
    ],
)
def test_a_text_is_in_the_language_its_words_are_written_in(text: str, expected: set[str]) -> None:
    assert languages_in(text) == expected
    assert written_in(text) == (next(iter(expected)) if len(expected) == 1 else None)


def test_a_document_is_in_every_language_one_of_its_passages_is_written_in() -> None:
    assert languages_of(["第一节：安装。", "第二节：配置 KB_AGENT_HOME。"]) == {"zh"}
    assert languages_of(["第一节：安装。", "Appendix: the licence text, in English."]) == {"zh", "en"}
    assert languages_of(["42", "..."]) == frozenset()


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeBase:
    base = KnowledgeBase(tmp_path / "data", embedder=HashingEmbedder())
    yield base
    base.close()


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_ingest_records_each_documents_languages_and_the_kb_answers_from_them(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    _write(docs, "leave.md", "# Leave\n\nEmployees get ten days of annual leave every year.\n")
    assert kb.languages() == frozenset()  # nothing ingested
    kb.ingest([docs])
    assert kb.manifest.get("leave.md").languages == ["en"]
    assert kb.languages() == {"en"}
    _write(docs, "报销.md", "# 报销\n\n差旅费在附上发票后三十天内报销。\n")
    kb.ingest([docs])
    assert kb.manifest.get("报销.md").languages == ["zh"]
    assert kb.languages() == {"zh", "en"}
    kb.delete_document("报销.md")
    assert kb.languages() == {"en"}  # a deleted document no longer counts
    assert isinstance(kb, KnowsLanguages) and isinstance(kb, PassageSearch)


def test_languages_are_those_the_callers_groups_may_see(kb: KnowledgeBase, tmp_path: Path) -> None:
    _write(tmp_path / "pub", "a.md", "Chroma listens on port 8000 by default.\n")
    _write(tmp_path / "hr", "b.md", "高级工程师的薪资范围只对人事部门开放。\n")
    kb.ingest([tmp_path / "pub"])
    kb.ingest([tmp_path / "hr"], groups=["hr"])
    assert kb.languages(["public"]) == {"en"}
    assert kb.languages(["public", "hr"]) == {"zh", "en"}
    assert kb.languages(["nobody"]) == frozenset()


def test_a_restored_document_keeps_its_languages(kb: KnowledgeBase, tmp_path: Path) -> None:
    _write(tmp_path / "docs", "a.md", "线程保存在 SQLite 数据库里，重启后还在。\n")
    kb.ingest([tmp_path / "docs"])
    _, trash_id = kb.delete_to_trash("a.md")
    assert kb.languages() == frozenset()
    kb.restore(trash_id)
    assert kb.languages() == {"zh"}


def _forget_languages(kb_dir: Path) -> None:
    """What a manifest written before languages were recorded looks like: no such column."""
    with sqlite3.connect(kb_dir / MANIFEST_FILE) as db:
        db.execute("ALTER TABLE files DROP COLUMN languages")
        db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")


def test_an_index_from_before_counts_for_both_languages_until_an_ingest_learns_them(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    _write(docs, "a.md", "Passwords are rotated every ninety days and need twelve characters.\n")
    first = KnowledgeBase(tmp_path / "data", embedder=HashingEmbedder())
    first.ingest([docs])
    first.close()
    _forget_languages(first.kb_dir)

    kb = KnowledgeBase(tmp_path / "data", embedder=HashingEmbedder())
    assert kb.manifest.get("a.md").languages is None
    assert kb.languages() == {"zh", "en"}  # unknown: never narrowed by a guess
    other = _write(tmp_path / "more", "b.md", "Backups run every night at two.\n")
    kb.ingest([other])  # any ingest learns what the older records lack, from the chunks Chroma holds
    assert kb.manifest.get("a.md").languages == ["en"]
    assert kb.languages() == {"en"}
    kb.close()


def test_manifest_rows_keep_unknown_apart_from_no_language(tmp_path: Path) -> None:
    manifest = Manifest(tmp_path)
    manifest.apply(
        [
            FileRecord("old.md", "h1", 1, ["public"], ["old.md#0"], ["c1"]),
            FileRecord("digits.txt", "h2", 1, ["public"], ["digits.txt#0"], ["c2"], languages=[]),
            FileRecord("mixed.md", "h3", 1, ["eng"], ["mixed.md#0"], ["c3"], languages=["zh", "en"]),
        ],
        [],
    )
    assert manifest.get("old.md").languages is None
    assert manifest.get("digits.txt").languages == []
    assert manifest.get("mixed.md").languages == ["en", "zh"]
    assert sorted(manifest.languages_by_groups(), key=json.dumps) == sorted(
        [(["public"], None), (["public"], []), (["eng"], ["en", "zh"])], key=json.dumps
    )


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_ledger_from_before_languages_gets_the_column_with_every_row_unknown(
    tmp_path: Path, backend: str
) -> None:
    if backend == "postgres" and not POSTGRES_URL:
        pytest.skip("KB_TEST_POSTGRES_URL is not set (.ci/run starts Postgres and sets it)")
    url = POSTGRES_URL if backend == "postgres" else ""
    namespace = f"langs_{uuid.uuid4().hex[:8]}"
    old = Manifest(tmp_path, database_url=url, namespace=namespace)
    old.put(FileRecord("a.md", "h", 1, ["public"], ["a.md#0"], ["c"], languages=["en"]))
    with old._connect() as db:  # the table as an older release created it
        db.execute(f"ALTER TABLE {old.files} DROP COLUMN languages")
    old.close()
    reopened = Manifest(tmp_path, database_url=url, namespace=namespace)
    try:
        assert reopened.get("a.md").languages is None
        assert reopened.languages_by_groups() == [(["public"], None)]
        reopened.put(FileRecord("b.md", "h2", 1, ["public"], ["b.md#0"], ["c2"], languages=["zh"]))
        assert reopened.get("b.md").languages == ["zh"]
    finally:
        with reopened._connect() as db:
            db.execute(f"DROP TABLE {reopened.files}")
            db.execute(f"DROP TABLE {reopened.meta_table}")
        reopened.close()
