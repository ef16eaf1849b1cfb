"""BM25Index: bilingual ranking, incremental updates, persistence, permission masks, batching, threads."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import stores.knowledge.bm25_index as bm25_index
from stores.knowledge.bm25_index import INDEX_FILE, BM25Index

DOCS = [
    ("leave#0", "员工请假制度：请假需提前三天在系统中提交申请，由直属主管审批。", ["public"]),
    ("reimburse#0", "差旅报销流程：提交发票和行程单，财务部在五个工作日内完成报销。", ["public"]),
    ("bm25#0", "BM25 ranks documents by term frequency and inverse document frequency.", ["public"]),
    ("vector#0", "Vector search embeds passages and compares them by cosine similarity.", ["public"]),
    ("salary#0", "薪资调整方案：2025 年度调薪预算为百分之五，仅限人力资源部查阅。", ["hr"]),
]


@pytest.fixture
def index(tmp_path: Path) -> BM25Index:
    idx = BM25Index(tmp_path / "bm25")
    idx.upsert(DOCS)
    return idx


def ids(hits: list[tuple[str, float]]) -> list[str]:
    return [chunk_id for chunk_id, _ in hits]


def test_chinese_query_finds_chinese_doc_first(index: BM25Index) -> None:
    hits = index.search("怎么请假？需要谁审批", k=3, groups={"public"})
    assert ids(hits)[0] == "leave#0"
    assert ids(index.search("报销要交什么材料", k=3))[0] == "reimburse#0"


def test_english_query_finds_english_doc_first(index: BM25Index) -> None:
    assert ids(index.search("How does BM25 rank a document?", k=3))[0] == "bm25#0"
    assert ids(index.search("embedding similarity", k=3, groups=["public"]))[0] == "vector#0"


def test_scores_positive_and_best_first(index: BM25Index) -> None:
    hits = index.search("document frequency search", k=10)
    assert hits and all(score > 0 for _, score in hits)
    assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
    assert "leave#0" not in ids(hits)  # no shared term: not returned at all, not even with score 0


def test_ties_break_by_id(tmp_path: Path) -> None:
    idx = BM25Index(tmp_path)
    idx.upsert([(f"c{i}", "identical text", ["public"]) for i in (3, 1, 2)])
    assert ids(idx.search("identical", k=2)) == ["c1", "c2"]


def test_upsert_same_id_replaces_text(index: BM25Index) -> None:
    index.upsert([("bm25#0", "关键词检索使用倒排索引。", ["public"])])
    assert "bm25#0" not in ids(index.search("inverse document frequency", k=5))
    assert ids(index.search("倒排索引", k=1)) == ["bm25#0"]
    assert len(index) == len(DOCS)


def test_remove(index: BM25Index) -> None:
    assert index.remove(["bm25#0", "nope"]) == 1
    assert "bm25#0" not in index.ids() and len(index) == len(DOCS) - 1
    assert "bm25#0" not in ids(index.search("BM25 term frequency", k=5))
    assert index.remove([]) == 0
    with pytest.raises(TypeError):
        index.remove("leave#0")


def test_persists_across_instances(index: BM25Index, tmp_path: Path) -> None:
    index.remove(["vector#0"])
    index.upsert([("new#0", "新增的文档", ["eng"])])
    before = index.search("文档 BM25", k=5)
    again = BM25Index(tmp_path / "bm25")
    assert (tmp_path / "bm25" / INDEX_FILE).is_file()
    assert again.ids() == index.ids()
    assert again.groups_of("new#0") == frozenset({"eng"})
    assert again.search("文档 BM25", k=5) == before
    with pytest.raises(KeyError):
        again.groups_of("vector#0")


def test_reload_sees_other_instances_writes(index: BM25Index, tmp_path: Path) -> None:
    index.warm()  # loaded and scored: from here on it answers from memory
    other = BM25Index(tmp_path / "bm25")
    other.upsert([("other#0", "来自另一个进程的文档", ["public"])])
    assert index.search("另一个进程", k=1) == []
    index.reload()
    assert ids(index.search("另一个进程", k=1)) == ["other#0"]


def test_group_filter(index: BM25Index) -> None:
    query = "调薪预算"
    assert index.search(query, k=5, groups={"public"}) == []
    assert ids(index.search(query, k=5, groups={"hr"})) == ["salary#0"]
    assert ids(index.search(query, k=5, groups={"public", "hr"})) == ["salary#0"]
    assert ids(index.search(query, k=5)) == ["salary#0"]  # None: admin/eval, unfiltered
    assert index.search(query, k=5, groups=set()) == []
    assert index.search(query, k=5, groups={"unknown"}) == []
    with pytest.raises(TypeError):
        index.search(query, k=5, groups="hr")


def test_chunk_without_groups_is_visible_only_unfiltered(index: BM25Index) -> None:
    index.upsert([("orphan#0", "孤立的文档没有权限组", [])])
    assert index.groups_of("orphan#0") == frozenset()
    assert index.search("孤立", k=5, groups={"public", "hr"}) == []
    assert ids(index.search("孤立", k=5)) == ["orphan#0"]


def test_hidden_chunks_do_not_take_top_k_slots(tmp_path: Path) -> None:
    idx = BM25Index(tmp_path)
    secret = [(f"secret#{i}", "季度预算 季度预算 季度预算 机密", ["finance"]) for i in range(10)]
    idx.upsert([*secret, ("public#0", "公开的季度预算说明，内容很长很长，包含许多其他词语", ["public"])])
    assert ids(idx.search("季度预算", k=1, groups={"public"})) == ["public#0"]
    assert ids(idx.search("季度预算", k=1))[0].startswith("secret#")  # they really do score higher
    assert len(idx.search("季度预算", k=5, groups={"public"})) == 1


def test_batch_defers_save_and_rebuild(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    idx = BM25Index(tmp_path)
    saves = 0
    real_save = idx.save

    def counting_save() -> None:
        nonlocal saves
        saves += 1
        real_save()

    monkeypatch.setattr(idx, "save", counting_save)
    with idx.batch():
        for i in range(200):
            idx.upsert([(f"c{i}", f"文档 {i} keyword{i}", ["public"])])
        idx.remove(["c0", "c1"])
        with idx.batch():  # nested: still one save, at the outermost end
            idx.upsert([("c2", "替换", ["public"])])
        assert saves == 0 and idx.rebuilds == 0
        assert BM25Index(tmp_path).ids() == set()  # nothing written yet
    assert saves == 1 and idx.rebuilds == 0  # rebuilds wait for a search
    assert len(BM25Index(tmp_path)) == 198
    assert ids(idx.search("keyword150", k=3)) == ["c150"]
    idx.search("文档", k=3)
    assert idx.rebuilds == 1  # 200 upserts + removes: one rebuild


def test_without_batch_each_call_saves_but_rebuild_stays_lazy(tmp_path: Path) -> None:
    idx = BM25Index(tmp_path)
    for i in range(20):
        idx.upsert([(f"c{i}", f"term{i}", ["public"])])
        assert len(BM25Index(tmp_path)) == i + 1  # saved by every call
    assert idx.rebuilds == 0
    idx.search("term3", k=1)
    idx.search("term4", k=1)
    assert idx.rebuilds == 1
    idx.upsert([("c3", "term3", ["public"])])  # unchanged text: nothing to rebuild
    idx.search("term3", k=1)
    assert idx.rebuilds == 1
    idx.warm()
    assert idx.rebuilds == 1


def test_concurrent_upserts_end_consistent(tmp_path: Path) -> None:
    idx = BM25Index(tmp_path)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(30):
                idx.upsert([(f"t{n}-{i}", f"线程{n} item{n}x{i} shared", [f"g{n}"])])
                if i % 10 == 0:
                    idx.search("shared", k=5, groups={f"g{n}"})
            idx.remove([f"t{n}-0"])
        except BaseException as exc:  # surfaced below: a thread's assert would otherwise be lost
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    expected = {f"t{n}-{i}" for n in range(4) for i in range(1, 30)}
    assert idx.ids() == expected
    assert BM25Index(tmp_path).ids() == expected
    for n in range(4):
        assert ids(idx.search(f"item{n}x7", k=1, groups={f"g{n}"})) == [f"t{n}-7"]
        assert len(idx.search("shared", k=100, groups={f"g{n}"})) == 29


@pytest.mark.parametrize(
    "query", ["你好", "hello, how are you?", "", "   ", "？！", "zzzunknownterm 未登录词汇"]
)
def test_queries_without_known_terms_return_nothing(index: BM25Index, query: str) -> None:
    assert index.search(query, k=5) == []


def test_edge_cases(tmp_path: Path) -> None:
    empty = BM25Index(tmp_path / "empty")
    assert empty.search("anything", k=5) == [] and len(empty) == 0
    only_stop_words = BM25Index(tmp_path / "stop")
    only_stop_words.upsert([("s#0", "你好，谢谢", ["public"])])
    assert only_stop_words.search("谢谢 thanks", k=5) == []
    small = BM25Index(tmp_path / "small")
    small.upsert(DOCS[:2])
    assert len(small.search("请假 报销", k=100)) == 2  # k beyond the corpus
    assert small.search("请假", k=0) == []


def test_long_query(index: BM25Index) -> None:
    query = ("我想了解一下员工请假制度和审批流程，" + "please explain the leave policy in detail " * 3) * 80
    query = query[:10_000]
    assert len(query) == 10_000
    assert ids(index.search(query, k=3, groups={"public"}))[0] == "leave#0"


def test_rejects_bad_items(tmp_path: Path) -> None:
    idx = BM25Index(tmp_path)
    with pytest.raises(TypeError):
        idx.upsert([("a", "text", "public")])  # a string is not a set of groups
    with pytest.raises(ValueError):
        idx.upsert([("", "text", ["public"])])
    with pytest.raises(TypeError):
        idx.upsert([("ok", "fine", ["public"]), ("b", None, ["public"])])  # type: ignore[list-item]
    assert len(idx) == 0  # validated before anything changed


def test_analyzer_change_flags_reindex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    BM25Index(tmp_path).upsert(DOCS)
    monkeypatch.setattr(bm25_index, "ANALYZER_VERSION", "next")
    stale = BM25Index(tmp_path)
    assert stale.needs_reindex
    stale.clear()
    assert len(stale) == 0 and not stale.needs_reindex
    assert not BM25Index(tmp_path).needs_reindex


def test_tags_are_saved_with_their_rows_and_any_untagged_write_forgets_them(tmp_path: Path) -> None:
    index = BM25Index(tmp_path)
    index.upsert([("a", "alpha text", ["public"]), ("b", "beta text", ["public"])], tags={"a": "h1"})
    index.tag_untagged({"a": "h0", "b": "h2", "gone": "h3"})  # tagged rows and ids not indexed: left alone
    assert BM25Index(tmp_path).tags() == {"a": "h1", "b": "h2"}
    rebuilds = index.rebuilds
    index.search("alpha", 5)
    index.upsert([("a", "alpha text", ["public"])], tags={"a": "h9"})  # same text, new tag: no rebuild
    index.search("alpha", 5)
    assert index.rebuilds == rebuilds + 1
    index.upsert([("b", "beta changed", ["public"])])  # written without a tag: unknown again
    index.remove(["a"])
    assert BM25Index(tmp_path).tags() == {"b": ""}


def test_a_file_from_before_tags_opens_with_every_row_untagged(tmp_path: Path) -> None:
    import sqlite3

    with sqlite3.connect(tmp_path / INDEX_FILE) as db:
        db.execute("CREATE TABLE chunks (id TEXT PRIMARY KEY, tokens TEXT NOT NULL, groups TEXT NOT NULL)")
        db.execute("""INSERT INTO chunks VALUES ('a', 'alpha', '["public"]')""")
    index = BM25Index(tmp_path)
    assert index.tags() == {"a": ""} and index.search("alpha", 5)[0][0] == "a"
    index.tag_untagged({"a": "h1"})
    assert BM25Index(tmp_path).tags() == {"a": "h1"}


def test_an_index_that_only_writes_holds_neither_its_rows_nor_their_terms(tmp_path: Path) -> None:
    """An ingest of a huge file writes rows it never searches: its memory must not grow with them."""
    import tracemalloc

    idx = BM25Index(tmp_path)
    rows = 12 * bm25_index.FLUSH_ROWS
    text = " ".join(f"term{n}" for n in range(120))  # ~1 KB of text, 120 distinct terms per chunk
    tracemalloc.start()
    try:
        with idx.batch():
            for start in range(0, rows, 250):
                idx.upsert([(f"big.txt#{n}", f"{text} row{n}", ["public"]) for n in range(start, start + 250)])
            written_meanwhile = len(BM25Index(tmp_path))  # another process sees the rows before the end
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # holding them takes > 40 MB (the joined rows, plus 4 bytes per term per row)
    assert peak < 12 * 1024 * 1024, f"peak {peak / 1024 / 1024:.1f} MiB while writing {rows} rows"
    assert written_meanwhile >= rows - bm25_index.FLUSH_ROWS
    assert len(idx) == rows and "big.txt#7" in idx and "big.txt#-1" not in idx
    assert ids(idx.search("row4242", k=1)) == ["big.txt#4242"]  # loaded and scored on the first search
    assert idx.remove(["big.txt#4242", "missing#0"]) == 1
    assert idx.search("row4242", k=1) == []


def test_removing_from_an_unloaded_index_counts_what_was_there(tmp_path: Path) -> None:
    BM25Index(tmp_path).upsert(DOCS)
    idx = BM25Index(tmp_path)  # unloaded: answers from the file
    with idx.batch():
        idx.upsert([("new#0", "新写入的文档", ["public"])])
        assert idx.remove(["leave#0", "new#0", "never#0"]) == 2
        assert idx.remove(["new#0"]) == 0
    assert idx.ids() == {cid for cid, _, _ in DOCS} - {"leave#0"}
    assert ids(idx.search("请假", k=3)) == []
    filler = [(f"filler#{n}", "填充 " * 200 + f"filler{n}", ["public"]) for n in range(500)]
    idx.upsert(filler)
    assert idx.vacuum() == 0  # nothing freed: the file is not rewritten
    idx.remove([cid for cid, _, _ in filler])
    assert idx.vacuum() > 0 and idx.vacuum() == 0  # freed pages given back, once
