"""Keyword analysis for BM25: jieba precise mode, stop words, a light stemmer, numbers kept."""

from __future__ import annotations

import re
import threading

import jieba
import pytest

from stores.text_analysis import EN_STOP_WORDS, ZH_STOP_WORDS, stem, tokenize, tokenize_many


def test_chinese_uses_precise_mode_without_overlapping_tokens() -> None:
    tokens = tokenize("中华人民共和国是一个伟大的国家")
    assert tokens == ["中华人民共和国", "伟大", "国家"]
    search_mode = set(jieba.lcut_for_search("中华人民共和国"))
    assert {"中华", "人民", "共和国"} <= search_mode  # what search mode would have added
    assert not {"中华", "人民", "共和国"} & set(tokens)


def test_chinese_sentence_drops_function_words() -> None:
    assert tokenize("我们如何在知识库中检索文档") == ["知识库", "检索", "文档"]
    assert tokenize("请问报销需要哪些材料？") == ["报销", "需要", "材料"]


@pytest.mark.parametrize(
    "text", ["你好", "您好，谢谢！", "hello, how are you?", "Hi! Thanks.", "请问你们的是什么？"]
)
def test_greetings_and_stop_words_only_give_nothing(text: str) -> None:
    assert tokenize(text) == []


@pytest.mark.parametrize("text", ["", " ", "  \n\t ", "，。！？", "...---!!!"])
def test_empty_whitespace_and_punctuation_give_nothing(text: str) -> None:
    assert tokenize(text) == []


@pytest.mark.parametrize(
    "forms",
    [
        ["index", "indexes", "indexed", "indexing", "Indexes"],
        ["retrieve", "retrieves", "retrieved", "retrieving", "retrieval"],
        ["query", "queries", "queried"],
        ["configure", "configured", "configuring", "configuration", "configurations"],
        ["validate", "validated", "validating", "validation"],
        ["embed", "embeds", "embedded", "embedding", "embeddings"],
        ["run", "runs", "running"],
        ["document", "documents", "documentation"],
        ["apply", "applies", "applied", "applying"],
        ["policy", "policies"],
        ["process", "processes", "processed", "processing"],
        ["use", "uses", "used", "using"],
        ["update", "updates", "updated", "updating"],
        ["need", "needs", "needed"],
        ["cache", "caches", "cached"],
    ],
)
def test_stemmer_conflates_inflections(forms: list[str]) -> None:
    stems = {token for form in forms for token in tokenize(form)}
    assert len(stems) == 1, stems


def test_stemmer_keeps_distinct_words_apart_and_leaves_non_words_alone() -> None:
    assert len({stem(w) for w in ["index", "indigo", "retrieve", "query", "queue", "embed", "ember"]}) == 7
    assert stem("status") == "status" and stem("class") == "class" and stem("analysis") == "analysis"
    assert stem("bm25") == "bm25" and stem("привет") == "привет"


def test_lower_cases_and_normalises_full_width() -> None:
    assert tokenize("BM25 Index") == tokenize("bm25 index") == ["bm25", "index"]
    assert tokenize("ＢＭ２５") == ["bm25"]


def test_mixed_chinese_and_english() -> None:
    assert tokenize("用 BM25 检索 Chinese documents") == ["用", "bm25", "检索", "chines", "document"]
    assert tokenize("用BM25检索中文文档") == ["用", "bm25", "检索", "中文", "文档"]


def test_numbers_are_kept() -> None:
    tokens = tokenize("公司年假政策规定每年15天，版本2.5，2024年生效")
    assert {"15", "2.5", "2024", "年"} <= set(tokens)
    assert tokenize("error 404 on port 8080") == ["error", "404", "port", "8080"]


def test_english_contractions_and_possessives() -> None:
    assert tokenize("Don't index the user's files") == ["index", "user", "fil"]


def test_no_punctuation_or_stop_word_ever_comes_out() -> None:
    text = "你好！请问：在知识库里，如何用 BM25（关键词检索）找到 the documents？Thanks — it's great... 😀"
    tokens = tokenize(text)
    assert tokens
    assert all(re.fullmatch(r"\w+(\.\w+)*", token) for token in tokens), tokens
    assert not set(tokens) & (ZH_STOP_WORDS | EN_STOP_WORDS)


def test_long_query_tokenizes() -> None:
    text = ("检索增强生成把知识库的文档交给模型。Retrieval augmented generation grounds answers. " * 200)[
        :10_000
    ]
    tokens = tokenize(text)
    assert len(text) == 10_000
    assert {"检索", "知识库", "文档", stem("retrieval"), stem("answers")} <= set(tokens)


def test_tokenize_many() -> None:
    assert tokenize_many(["你好", "数据库索引", "Indexes"]) == [[], ["数据库", "索引"], ["index"]]


def test_concurrent_first_use_is_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    import stores.text_analysis as text

    monkeypatch.setattr(text, "_jieba_cut", None)  # force the lazy initialisation again
    results: list[list[str]] = []
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        results.append(tokenize("员工请假制度的审批流程"))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [["员工", "请假", "制度", "审批", "流程"]] * 8


def test_a_long_text_read_again_is_segmented_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pasted page is read by keyword search, memory recall and the offline rules: one segmentation."""
    import stores.text_analysis as text

    calls: list[str] = []
    cut = text._segmenter()
    monkeypatch.setattr(text, "_segmenter", lambda: lambda piece: calls.append(piece) or cut(piece))
    page = "项目组讨论了发布计划和预算。" * 400 + "这次的独有内容是第七版手册。"
    first = tokenize(page)
    first.append("changed by a caller")
    segmented = len(calls)
    assert tokenize(page) == first[:-1] and len(calls) == segmented > 0
    tokenize("短句不缓存")
    tokenize("短句不缓存")
    assert len(calls) == segmented + 2  # short texts are cheap: read each time
