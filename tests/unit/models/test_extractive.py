"""What the offline model quotes from a passage, and how it frames the quote."""

from __future__ import annotations

from models.extractive import answer_from_passages, best_sentences, nothing_found, sentences


def test_a_wrapped_line_an_initial_or_an_abbreviation_does_not_end_a_sentence() -> None:
    text = (
        "Threads live in SQLite under the data dir, or in Postgres (`kb-agent serve`\n"
        "uses the deployment's). The hymn is known in English by John C. Messenger, as Dr. Smith wrote.\n"
        "Fresno is the largest U.S. city without an interstate.\n- a list item\n\n"
        "汉字的第一句。第二句换了\n行。"
    )
    assert sentences(text) == [
        "Threads live in SQLite under the data dir, or in Postgres (`kb-agent serve` uses the deployment's).",
        "The hymn is known in English by John C. Messenger, as Dr. Smith wrote.",
        "Fresno is the largest U.S. city without an interstate.",
        "- a list item",
        "汉字的第一句。",
        "第二句换了行。",
    ]


def test_the_sentence_that_continues_the_matching_one_is_quoted_with_it() -> None:
    text = (
        "Hyperbaric medicine uses special oxygen chambers to raise the pressure around the patient. "
        "Carbon monoxide poisoning and decompression sickness are sometimes treated using these devices. "
        "The ancient Greeks knew nothing of this. Oxygen was isolated in the eighteenth century."
    )
    quote = " ".join(best_sentences("What device treats carbon monoxide poisoning?", text))
    assert "oxygen chambers" in quote and "these devices" in quote


def test_a_sentence_holding_the_kind_of_answer_asked_for_is_preferred() -> None:
    text = (
        "The settlers of the colony came from England. Many settlers died in the first winter. "
        "On 12 May 1705 the assembly passed an act to naturalise the settlers still resident there. "
        "Settlers farmed in the English style."
    )
    assert any("1705" in s for s in best_sentences("When were the settlers naturalised?", text, limit=2))


def test_a_chinese_word_cut_differently_by_the_segmenter_still_matches() -> None:
    text = "他经常写赞美诗。这首赞美诗在英语中由约翰·梅信格翻译，以新的标题广为人知。后来它被谱成了曲。"
    quote = " ".join(best_sentences("这首赞美诗的英语翻译者是谁？", text, limit=1))
    assert "约翰·梅信格" in quote


def test_a_long_sentence_is_quoted_around_its_matching_clause_not_cut_at_its_start() -> None:
    filler = ", ".join(f"clause number {n} says nothing much" for n in range(40))
    text = f"{filler}, and the retention period of the trash is seven days, {filler}."
    [quote] = best_sentences("how long is the trash retention period?", text, limit=1)
    assert "retention period of the trash is seven days" in quote and quote.startswith("…") and len(quote) < 600


def test_passages_that_came_back_are_never_called_nothing() -> None:
    passage = {"id": "a.md#0", "text": "The office opens at nine."}
    for question in ("What is the capital of France?", "法国的首都是哪里？"):
        reply = answer_from_passages(question, [passage])
        assert "[a.md#0]" in reply and reply != nothing_found("法" in question)
        assert "nothing" not in reply and "没有找到" not in reply
    assert answer_from_passages("What is the capital of France?", []) == nothing_found(False)


def test_a_summary_of_passages_that_do_not_hold_the_topic_says_they_are_only_the_closest() -> None:
    from models.extractive import extractive_summary
    from models.offline.kb_intents import describe_kb_result

    unrelated = [{"id": "a.md#0", "text": "The office opens at nine."}]
    summary = extractive_summary("parking rules", unrelated)
    assert summary.startswith("The 1 passage closest to 'parking rules' (they may not be about it):")
    assert "[a.md#0]" in summary
    related = [{"id": "b.md#0", "text": "Parking rules: level B2 is for visitors."}]
    assert extractive_summary("parking rules", related).startswith("What 1 passage says about 'parking rules':")
    import json

    data = {"topic": "parking rules", "summary": summary, "sources": ["a.md#0"], "model": "offline-extractive"}
    chinese = describe_kb_result("generate_summary", json.dumps(data), True, "总结一下 parking rules")
    assert chinese is not None and chinese.startswith("知识库中与「parking rules」最接近的 1 段资料")
