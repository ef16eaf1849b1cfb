"""Cross-language search: the model gives the query in the knowledge base's other language, both are searched."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from models import ScriptedChatModel
from models.offline import OfflineChatModel
from nodes import prompts
from nodes.query_planning import QueryPlan, plan_queries, retrieve_planned, translation_targets
from stores.base import Passage

BOTH = frozenset({"zh", "en"})
EN_ONLY = frozenset({"en"})
ZH_ONLY = frozenset({"zh"})


def _reply(**values: Any) -> str:
    return json.dumps(values, ensure_ascii=False)


def _system(model: ScriptedChatModel, call: int = 0) -> str:
    return str(model.calls[call][0].content)


@pytest.mark.parametrize(
    ("question", "languages", "targets"),
    [
        ("向量库的数据放在哪个目录？", EN_ONLY, ["en"]),
        ("向量库的数据放在哪个目录？", BOTH, ["en"]),
        ("向量库的数据放在哪个目录？", ZH_ONLY, []),  # the knowledge base holds only the question's language
        ("Which folder holds the vector data?", BOTH, ["zh"]),
        ("Which folder holds the vector data?", EN_ONLY, []),
        ("Chroma 的数据目录在哪？", EN_ONLY, ["en"]),  # a product name does not make a question English
        ("where does 向量库 keep 数据?", BOTH, ["zh", "en"]),  # mixed: written whole in neither language
        ("where does 向量库 keep 数据?", ZH_ONLY, ["zh"]),
        ("１２３４５？", BOTH, []),  # no letters: nothing to translate
        ("🙂🙂", BOTH, []),
        ("向量库的数据放在哪个目录？", frozenset(), []),  # an empty knowledge base
    ],
)
def test_the_question_is_translated_into_each_kb_language_it_is_not_written_in(
    question: str, languages: frozenset[str], targets: list[str]
) -> None:
    assert translation_targets(question, languages) == targets


def test_a_first_question_gets_one_translation_call_and_both_queries_are_searched() -> None:
    model = ScriptedChatModel([_reply(translations={"en": "Where is the vector store's data kept?"})])
    plan = plan_queries("向量库的数据放在哪个目录？", [], model, languages=EN_ONLY)
    assert plan.sub_queries == ["向量库的数据放在哪个目录？", "Where is the vector store's data kept?"]
    assert plan.standalone == plan.original == "向量库的数据放在哪个目录？"  # the answer is for the question
    assert plan.translated == {"en": "Where is the vector store's data kept?"}
    assert plan.model_calls == 1 and plan.fallbacks == []
    system = _system(model)
    assert "英文" in system and '"en"' in system  # a Chinese question gets the Chinese prompt, naming English
    assert "向量库的数据放在哪个目录" in str(model.calls[0][-1].content)


def test_an_english_question_over_chinese_documents_is_asked_in_chinese() -> None:
    model = ScriptedChatModel([_reply(translations={"zh": "年假没用完可以顺延吗？"})])
    plan = plan_queries("Can unused annual leave be carried over?", [], model, languages=BOTH)
    assert plan.sub_queries == ["Can unused annual leave be carried over?", "年假没用完可以顺延吗？"]
    assert "Chinese" in _system(model) and "translate" in _system(model)


def test_a_follow_up_is_rewritten_and_translated_in_the_same_call() -> None:
    history: list[BaseMessage] = [
        HumanMessage("备份多久做一次？"),
        AIMessage("每天夜里两点做一次全量备份。"),
    ]
    model = ScriptedChatModel(
        [_reply(query="备份保留多少天？", translations={"en": "How many days are backups kept?"})]
    )
    plan = plan_queries("那保留多久？", history, model, languages=BOTH)
    assert plan.model_calls == 1 and len(model.calls) == 1
    assert plan.standalone == "备份保留多少天？"
    assert plan.sub_queries == ["备份保留多少天？", "How many days are backups kept?"]
    assert "改写" in _system(model) and "英文" in _system(model)


def test_a_kb_in_the_questions_language_only_asks_for_no_translation() -> None:
    model = ScriptedChatModel([])  # any call would raise ScriptExhausted
    plan = plan_queries("报销需要附发票吗？", [], model, languages=ZH_ONLY)
    assert plan == QueryPlan("报销需要附发票吗？", "报销需要附发票吗？", ["报销需要附发票吗？"], 0, [])
    english = ScriptedChatModel([_reply(query="Do expense claims need receipts attached?")])
    history: list[BaseMessage] = [HumanMessage("How are expenses paid back?"), AIMessage("Within 30 days.")]
    plan = plan_queries("Do they need receipts?", history, english, languages=EN_ONLY)
    assert plan.sub_queries == ["Do expense claims need receipts attached?"]
    assert _system(english) == prompts.REWRITE_PROMPT["en"]  # the plain rewrite


def test_a_mixed_question_is_searched_in_both_languages() -> None:
    model = ScriptedChatModel(
        [
            _reply(
                translations={
                    "zh": "向量库把数据存在哪里？",
                    "en": "Where does the vector store keep its data?",
                }
            )
        ]
    )
    plan = plan_queries("where does 向量库 keep 数据?", [], model, languages=BOTH)
    assert plan.sub_queries == [
        "where does 向量库 keep 数据?",
        "向量库把数据存在哪里？",
        "Where does the vector store keep its data?",
    ]


@pytest.mark.parametrize("model", [None, OfflineChatModel()], ids=["no-model", "offline"])
def test_a_model_that_follows_no_instructions_is_never_asked_to_translate(model: Any) -> None:
    plan = plan_queries("向量库的数据放在哪个目录？", [], model, languages=EN_ONLY)
    assert plan.sub_queries == ["向量库的数据放在哪个目录？"] and plan.model_calls == 0


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("好的，我来翻译一下", "not_json"),
        ("", "empty"),
        (_reply(translations="Where is the data?"), "malformed"),
        (_reply(translations={"fr": "Où sont les données ?"}), "malformed"),
        (_reply(translations={"en": "   "}), "empty"),
        (_reply(translations={"en": "向量库的数据放在哪个目录"}), "unchanged"),
        (_reply(translations={"en": "数据在 data 目录下面"}), "wrong_language"),
        (_reply(translations={"en": "where " * 200}), "too_long"),
    ],
)
def test_an_unusable_translation_falls_back_to_the_question_alone(reply: str, reason: str) -> None:
    plan = plan_queries("向量库的数据放在哪个目录？", [], ScriptedChatModel([reply]), languages=EN_ONLY)
    assert plan.sub_queries == ["向量库的数据放在哪个目录？"]
    assert plan.fallbacks == [f"translate:{reason}"] and plan.translated == {}
    assert plan.model_calls == 1


def test_a_translation_at_the_top_level_of_the_reply_is_understood() -> None:
    model = ScriptedChatModel(['```json\n{"en": "Which directory holds the vectors?"}\n```'])
    plan = plan_queries("向量存在哪个目录？", [], model, languages=EN_ONLY)
    assert plan.translated == {"en": "Which directory holds the vectors?"}


def test_a_failed_combined_call_falls_back_on_both_steps_and_a_bad_half_only_on_its_own() -> None:
    history: list[BaseMessage] = [HumanMessage("Chroma 是什么？"), AIMessage("一个向量数据库。")]
    broken = plan_queries("它默认监听哪个端口？", history, ScriptedChatModel(["not json"]), languages=EN_ONLY)
    assert broken.sub_queries == ["它默认监听哪个端口？"]
    assert broken.fallbacks == ["rewrite:not_json", "translate:not_json"]
    half = plan_queries(
        "它默认监听哪个端口？",
        history,
        ScriptedChatModel([_reply(query="Chroma 默认监听哪个端口？", translations={"en": ""})]),
        languages=EN_ONLY,
    )
    assert half.sub_queries == ["Chroma 默认监听哪个端口？"] and half.fallbacks == ["translate:empty"]
    other_half = plan_queries(
        "它默认监听哪个端口？",
        history,
        ScriptedChatModel([_reply(translations={"en": "Which port does Chroma listen on by default?"})]),
        languages=EN_ONLY,
    )
    assert other_half.standalone == "它默认监听哪个端口？" and other_half.fallbacks == ["rewrite:malformed"]
    assert other_half.sub_queries == ["它默认监听哪个端口？", "Which port does Chroma listen on by default?"]


def test_decomposed_sub_queries_come_first_and_the_translation_after_them() -> None:
    model = ScriptedChatModel(
        [
            _reply(translations={"en": "vacation days and travel reimbursement"}),
            _reply(queries=["年假有几天", "差旅怎么报销"]),
        ]
    )
    plan = plan_queries("年假和差旅报销", [], model, decompose=True, languages=EN_ONLY)
    assert plan.sub_queries == ["年假有几天", "差旅怎么报销", "vacation days and travel reimbursement"]
    assert plan.model_calls == 2


def test_a_passage_only_the_translation_finds_comes_back_fused_and_says_which_query_found_it() -> None:
    english = {"id": "guide.md#3", "text": "Threads are stored in SQLite under the data directory."}
    other = {"id": "notes.md#0", "text": "无关的笔记。"}

    def search(query: str) -> list[Passage]:
        return [english, other] if query.startswith("Where") else [other]

    plan = plan_queries(
        "线程存在哪里？",
        [],
        ScriptedChatModel([_reply(translations={"en": "Where are threads stored?"})]),
        languages=EN_ONLY,
    )
    fused = retrieve_planned(plan, search, top_k=5)
    assert [p["id"] for p in fused] == ["notes.md#0", "guide.md#3"]
    assert fused[1]["metadata"]["sub_queries"] == ["Where are threads stored?"]
