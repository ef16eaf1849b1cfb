"""The offline model decides in one place whether a request asks the documents something."""

from __future__ import annotations

import pytest

from models.offline.questions import asks_the_documents


@pytest.mark.parametrize(
    "request_text",
    [
        "线程存在哪里？",
        "文档切块大概多大",
        "检索用的是什么融合方法",
        "回收站里的文档能恢复吗",
        "How big are the chunks?",
        "where do threads live",
        "Is PDF supported",
        "chunk size?",
        "请解释一下 RRF",
        "介绍一下回收站",
        "说说长期记忆的规则",
        "explain hybrid search to me",
        "tell me about access groups",
        "I want to know how ingest handles duplicates",
        "能帮我查一下服务器怎么启动吗",
        "can you tell me where memories are stored?",
        "你知道嵌入模型是哪个吗",
        "写配置文件要注意什么？",
        "一个片段最多多长",
        "服务器离数据库多远都可以吗",
        "tell me about the trash",
    ],
)
def test_a_question_or_a_request_to_be_told_asks_the_documents(request_text: str) -> None:
    assert asks_the_documents(request_text)


@pytest.mark.parametrize(
    "request_text",
    [
        "帮我写首诗",
        "给我编个故事",
        "能写一段自我介绍吗",
        "translate this",
        "Could you write a haiku about retrieval?",
        "please rewrite my last message",
        "嗯",
        "哦哦",
        "好的",
        "ok",
        "thanks!",
        "what should I do",
        "我该怎么办",
        "你是谁",
        "你能做什么？",
        "what can you do?",
        "你好",
        "good morning",
        "I moved to Shenzhen last month",
        "以后叫我老王",
        "make it shorter",
        "tell me a story about a cat",
        "给我讲个睡前故事",
        "and then?",
        "还有吗",
        "what do you reckon, is it fine?",
        "你怎么认为",
    ],
)
def test_a_request_that_asks_nothing_of_the_documents_is_not_taken_for_a_question(request_text: str) -> None:
    assert not asks_the_documents(request_text)


def test_a_bare_phrase_asks_the_documents_only_when_it_names_a_retrieved_heading() -> None:
    garage = {"id": "garage.md#0", "heading": "Parking", "text": "Level B2 is reserved for visitors."}
    desk = {"id": "front-desk.md#0", "heading": "前台 › 访客登记", "text": "来访人员出示证件。"}
    assert asks_the_documents("parking", [garage])
    assert asks_the_documents("访客登记", [desk])
    assert asks_the_documents("front desk", [desk])  # the file's name is a heading too
    assert not asks_the_documents("parking", [desk])
    assert not asks_the_documents("translate this", [garage, desk])
