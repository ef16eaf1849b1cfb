"""The seven memory rules, one by one, and every rejection recorded in the audit history with its rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stores.audit import AuditEntry
from stores.embeddings import HashingEmbedder
from stores.memory.checks import high_risk
from stores.memory.rules import (
    EXTRACTION_PROMPT,
    content_problem,
    has_forget_intent,
    has_remember_intent,
    normalise_content,
    parse_operations,
    redact,
    sensitive_kinds,
)
from stores.memory.store import ChromaMemoryStore


@pytest.fixture
def store(tmp_path: Path) -> ChromaMemoryStore:
    return ChromaMemoryStore(tmp_path, embedder=HashingEmbedder())


def op(action: str = "ADD", **fields: Any) -> dict[str, Any]:
    base = {"action": action, "type": "semantic", "content": "用户喜欢简洁的中文回答", "target_id": None}
    return {**base, "confidence": 0.95, **fields}


def run(
    store: ChromaMemoryStore, raw: Any, latest: str = "记住这个", user: str = "alice", snapshot: Any = None
) -> list[AuditEntry]:
    raw = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    shown = store.list(user) if snapshot is None else snapshot
    return store.apply(raw, user_id=user, thread_id="t1", latest_user_message=latest, snapshot=shown)


def applied(entries: list[AuditEntry]) -> int:
    return sum(e.status == "applied" for e in entries)


# -- rule 1: malformed output -> no change at all ------------------------------------------------
MALFORMED = {
    "not JSON": "好的，我记住了",
    "a JSON array": "[1, 2]",
    "no operations": '{"ops": []}',
    "operations not a list": '{"operations": {"action": "ADD"}}',
    "operation not an object": '{"operations": ["ADD"]}',
    "unknown action": json.dumps({"operations": [op("MERGE")]}),
    "action not a string": json.dumps({"operations": [op(action=1)]}),
    "content a number": json.dumps({"operations": [op(content=42)]}),
    "type a list": json.dumps({"operations": [op(type=["semantic"])]}),
    "target id a number": json.dumps({"operations": [op("DELETE", target_id=7)]}),
    "confidence a string": json.dumps({"operations": [op(confidence="0.9")]}),
    "confidence a boolean": json.dumps({"operations": [op(confidence=True)]}),
    "confidence missing": json.dumps(
        {"operations": [{"action": "ADD", "type": "semantic", "content": "用户喜欢茶"}]}
    ),
    "confidence above 1": json.dumps({"operations": [op(confidence=5)]}),
    "NaN confidence": '{"operations": [{"action": "ADD", "type": "semantic", "content": "abcd", "confidence": NaN}]}',
    "too many operations": json.dumps({"operations": [op(content=f"用户喜欢第{i}种茶") for i in range(51)]}),
    "empty reply": "",
}


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=MALFORMED.keys())
def test_rule_1_malformed_output_changes_nothing_and_is_audited(store: ChromaMemoryStore, raw: str) -> None:
    entries = run(store, raw)
    assert applied(entries) == 0 and store.list("alice") == []
    [entry] = store.audit.list(user_id="alice")
    assert (entry.status, entry.rule, entry.action) == ("rejected", 1, "MALFORMED")


def test_rule_1_one_bad_operation_rejects_the_whole_batch(store: ChromaMemoryStore) -> None:
    entries = run(store, {"operations": [op(), op("MERGE")]})
    assert applied(entries) == 0 and store.list("alice") == []
    assert "operation 1" in (entries[0].reason or "")


def test_rule_1_accepts_a_fenced_json_reply_and_a_dict() -> None:
    ops, error = parse_operations('```json\n{"operations": []}\n```')
    assert error is None and ops == []
    ops, error = parse_operations({"operations": [op()]})
    assert error is None and ops[0].action == "ADD" and ops[0].confidence == 0.95


# -- rule 2: confidence and IGNORE ---------------------------------------------------------------
@pytest.mark.parametrize(
    "proposal", [op(confidence=0.84), op("IGNORE", confidence=0.99), {"action": "IGNORE"}]
)
def test_rule_2_low_confidence_and_ignore_are_skipped(
    store: ChromaMemoryStore, proposal: dict[str, Any]
) -> None:
    entries = run(store, {"operations": [proposal]})
    assert applied(entries) == 0 and store.list("alice") == []
    assert [(e.status, e.rule) for e in store.audit.list(user_id="alice")] == [("rejected", 2)]


def test_rule_2_threshold_is_inclusive_at_0_85(store: ChromaMemoryStore) -> None:
    assert applied(run(store, {"operations": [op(confidence=0.85)]})) == 1


def test_rule_2_comes_before_rule_3(store: ChromaMemoryStore) -> None:
    record, _ = store.add("alice", "semantic", "用户喜欢简洁的中文回答")
    entries = run(
        store, {"operations": [op("DELETE", target_id=record["id"], confidence=0.5)]}, latest="hello"
    )
    assert entries[0].rule == 2


# -- rule 3: DELETE needs a forget intent and a target in this user's snapshot -------------------
def test_rule_3_delete_without_forget_intent_is_rejected(store: ChromaMemoryStore) -> None:
    record, _ = store.add("alice", "semantic", "用户喜欢简洁的中文回答")
    entries = run(store, {"operations": [op("DELETE", target_id=record["id"])]}, latest="今天天气怎么样")
    assert applied(entries) == 0 and store.get("alice", record["id"]) is not None
    assert (entries[0].rule, entries[0].status) == (3, "rejected") and "forget" in (entries[0].reason or "")


@pytest.mark.parametrize(
    "latest",
    ["忘掉关于简洁回答的记忆", "请删除这条记忆", "不要再记住这个", "forget that", "delete that memory"],
)
def test_rule_3_delete_with_forget_intent_and_known_target_applies(
    store: ChromaMemoryStore, latest: str
) -> None:
    record, _ = store.add("alice", "semantic", "用户喜欢简洁的中文回答")
    entries = run(store, {"operations": [op("DELETE", target_id=record["id"])]}, latest=latest)
    assert applied(entries) == 1 and store.get("alice", record["id"]) is None
    assert entries[0].old_content == "用户喜欢简洁的中文回答" and entries[0].new_content is None


def test_rule_3_delete_of_another_users_id_is_rejected(store: ChromaMemoryStore) -> None:
    bobs, _ = store.add("bob", "semantic", "用户喜欢喝茶")
    entries = run(store, {"operations": [op("DELETE", target_id=bobs["id"])]}, latest="忘掉喝茶的事")
    assert entries[0].rule == 3 and store.get("bob", bobs["id"]) is not None


def test_rule_3_target_must_be_in_the_snapshot_shown(store: ChromaMemoryStore) -> None:
    record, _ = store.add("alice", "semantic", "用户喜欢简洁的中文回答")
    entries = run(
        store, {"operations": [op("DELETE", target_id=record["id"])]}, latest="forget it", snapshot=[]
    )
    assert entries[0].rule == 3 and store.get("alice", record["id"]) is not None


# -- rule 4: type, length, sensitive data --------------------------------------------------------
@pytest.mark.parametrize(
    ("proposal", "reason"),
    [
        (op(type="preference"), "invalid memory type"),
        (op(type=None), "invalid memory type"),
        (op(content="abc"), "4–400"),
        (op(content="   \n\t  "), "4–400"),
        (op(content=None), "4–400"),
        (op(content="长" * 401), "4–400"),
        (op(content="长" * 10_000), "4–400"),
        (op(content="用户的手机号是13812345678"), "phone"),
        (op(content="The user's phone number is +1 415-555-0123"), "phone"),
        (op(content="用户的身份证号是11010519491231002X"), "ID"),
        (op(content="用户的银行卡号 6222 0212 3456 7890 123"), "bank-card"),
        (op(content="The user's card is 4111 1111 1111 1111"), "bank-card"),
        (op(content="用户的密码是hunter22"), "password"),
        (op(content="The user's password is hunter22"), "password"),
        (op(content="用户的 API key 是 sk-abcdefghijklmnop1234"), "API key"),
        (op(content="The user's token: ghp_abcdefghijklmnop12345"), "API key"),
        (op(content="用户的邮箱是 alice@example.com"), "e-mail"),
    ],
)
def test_rule_4_rejections_are_audited(
    store: ChromaMemoryStore, proposal: dict[str, Any], reason: str
) -> None:
    entries = run(store, {"operations": [proposal]}, latest="记住")
    assert applied(entries) == 0 and store.list("alice") == []
    [entry] = store.audit.list(user_id="alice")
    assert (entry.status, entry.rule) == ("rejected", 4) and reason in (entry.reason or "")
    assert len(entry.new_content or "") <= 520  # the audit keeps a bounded excerpt


def test_rule_4_audit_never_keeps_the_secret(store: ChromaMemoryStore) -> None:
    run(store, {"operations": [op(content="用户的密码是hunter22，手机13812345678")]})
    [entry] = store.audit.list(user_id="alice")
    assert "hunter22" not in (entry.new_content or "") and "13812345678" not in (entry.new_content or "")


def test_rule_4_length_is_counted_after_stripping(store: ChromaMemoryStore) -> None:
    assert content_problem("semantic", "  abcd  ") is None
    assert content_problem("semantic", "  abc  ") is not None
    assert content_problem("semantic", "长" * 400) is None


def test_rule_4_email_is_kept_when_the_user_asked_to_remember_it(store: ChromaMemoryStore) -> None:
    latest = "记住我的工作邮箱是 alice@example.com"
    entries = run(store, {"operations": [op(content="用户的工作邮箱是 alice@example.com")]}, latest=latest)
    assert applied(entries) == 1
    other = run(store, {"operations": [op(content="用户的邮箱是 eve@example.com")]}, latest=latest)
    assert other[0].rule == 4  # not the address the user gave


# -- rule 5: ADD is an upsert unique on (user, type, normalised content) ------------------------
def test_rule_5_duplicate_add_keeps_one_record_and_counts_nothing(store: ChromaMemoryStore) -> None:
    assert applied(run(store, {"operations": [op()]})) == 1
    again = run(store, {"operations": [op(content="  用户喜欢简洁的中文回答。 ")]})
    assert applied(again) == 0 and again[0].status == "unchanged"
    assert len(store.list("alice")) == 1
    assert applied(run(store, {"operations": [op(type="procedural")]})) == 1  # another type is another key
    assert applied(run(store, {"operations": [op()]}, user="bob")) == 1  # another user is another key


def test_rule_5_update_may_not_duplicate_another_memory(store: ChromaMemoryStore) -> None:
    first, _ = store.add("alice", "semantic", "用户喜欢喝茶")
    second, _ = store.add("alice", "semantic", "用户喜欢咖啡")
    entries = run(store, {"operations": [op("UPDATE", target_id=second["id"], content="用户喜欢喝茶")]})
    assert entries[0].rule == 5 and store.get("alice", second["id"])["content"] == "用户喜欢咖啡"
    assert first["id"] in (entries[0].reason or "")


# -- rule 6: UPDATE needs the target to be this user's and of the same type ----------------------
def test_rule_6_update_applies_with_old_and_new_content_audited(store: ChromaMemoryStore) -> None:
    record, _ = store.add("alice", "semantic", "用户喜欢咖啡")
    entries = run(store, {"operations": [op("UPDATE", target_id=record["id"], content="用户喜欢浓缩咖啡")]})
    assert applied(entries) == 1 and store.get("alice", record["id"])["content"] == "用户喜欢浓缩咖啡"
    assert (entries[0].old_content, entries[0].new_content) == ("用户喜欢咖啡", "用户喜欢浓缩咖啡")


@pytest.mark.parametrize("case", ["other user", "missing", "no target", "type mismatch"])
def test_rule_6_rejections(store: ChromaMemoryStore, case: str) -> None:
    mine, _ = store.add("alice", "semantic", "用户喜欢咖啡")
    bobs, _ = store.add("bob", "semantic", "用户喜欢喝茶")
    target = {
        "other user": bobs["id"],
        "missing": "mem_nope",
        "no target": None,
        "type mismatch": mine["id"],
    }[case]
    memory_type = "procedural" if case == "type mismatch" else "semantic"
    entries = run(
        store, {"operations": [op("UPDATE", target_id=target, type=memory_type, content="用户喜欢可可")]}
    )
    assert (entries[0].status, entries[0].rule) == ("rejected", 6)
    assert store.get("bob", bobs["id"])["content"] == "用户喜欢喝茶"
    assert store.get("alice", mine["id"])["content"] == "用户喜欢咖啡"


def test_rule_4_is_checked_before_rule_6(store: ChromaMemoryStore) -> None:
    entries = run(store, {"operations": [op("UPDATE", target_id="mem_nope", content="x")]})
    assert entries[0].rule == 4


# -- rule 7: writes and deletes scoped by user id at the storage layer ---------------------------
def test_rule_7_crafted_snapshot_still_cannot_delete_another_users_memory(store: ChromaMemoryStore) -> None:
    bobs, _ = store.add("bob", "semantic", "用户喜欢喝茶")
    crafted = store.list("bob")  # a buggy caller shows alice bob's memories
    entries = run(
        store, {"operations": [op("DELETE", target_id=bobs["id"])]}, latest="忘掉喝茶", snapshot=crafted
    )
    assert (entries[0].status, entries[0].rule) == ("rejected", 7)
    assert store.get("bob", bobs["id"]) is not None


def test_rule_7_a_second_delete_of_the_same_id_is_rejected(store: ChromaMemoryStore) -> None:
    record, _ = store.add("alice", "semantic", "用户喜欢喝茶")
    entries = run(store, {"operations": [op("DELETE", target_id=record["id"])] * 2}, latest="忘掉喝茶")
    assert [e.status for e in entries] == ["applied", "rejected"] and entries[1].rule == 7


def test_mixed_batch_applies_the_valid_operations_and_counts_them(store: ChromaMemoryStore) -> None:
    entries = run(
        store,
        {
            "operations": [
                op(),
                op(confidence=0.2),
                op(content="用户的密码是abc123"),
                op(content="用户住在杭州"),
            ]
        },
    )
    assert applied(entries) == 2
    assert [e.rule for e in entries] == [None, 2, 4, None]
    assert len(store.audit.list(user_id="alice")) == 4


# -- the checks themselves -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "忘掉关于简洁回答的记忆",
        "请忘记我喜欢咖啡",
        "帮我忘掉这个",
        "把我的生日忘了吧",
        "不要再记住我的地址",
        "删除那条关于咖啡的记忆",
        "forget that I like coffee",
        "Please forget my address",
        "can you forget what I said",
        "delete that memory",
        "remove my memories about tea",
        "don't remember this",
        "把关于我的记忆都删掉",
        "记住的那些全清掉",
        "delete everything you remember about me",
        "remove what you know about where I live",
    ],
)
def test_forget_intent_is_recognised(text: str) -> None:
    assert has_forget_intent(text)


@pytest.mark.parametrize(
    "text",
    [
        "我忘了密码",
        "我把钥匙忘了",
        "你忘了吗？",
        "记住我喜欢简洁的中文回答",
        "don't forget my birthday",
        "I forgot my keys",
        "I don't remember where it is",
        "what is the weather",
        "删掉这个文档",
        "我的记忆被删掉了吗？",
        "delete the file you saved yesterday",
        "",
    ],
)
def test_no_forget_intent(text: str) -> None:
    assert not has_forget_intent(text)


def test_remember_intent() -> None:
    assert has_remember_intent("记住我的邮箱") and has_remember_intent("please remember this")
    assert not has_remember_intent("不要再记住这个") and not has_remember_intent("I don't remember")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("手机 138 1234 5678", "phone"),
        ("电话：010-12345678", "phone"),
        ("call (415) 555-0123", "phone"),
        ("１３８１２３４５６７８", "phone"),  # full-width digits
        ("身份证 11010519491231002X", "id_card"),
        ("passport number E12345678", "id_card"),
        ("卡号：6222021234567890123", "bank_card"),
        ("4111-1111-1111-1111", "bank_card"),
        ("我的口令是 open-sesame", "password"),
        ("password: hunter22", "password"),
        ("OPENAI key sk-proj-abcdefghijklmnopqrstu", "api_key"),
        ("AKIAIOSFODNN7EXAMPLE", "api_key"),
        ("d41d8cd98f00b204e9800998ecf8427e", "api_key"),
        ("secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "api_key"),
        ("Bearer abcdefghijklmnop.qrstu", "api_key"),
        ("密钥是 abc_123456", "api_key"),
        ("write to bob.smith+kb@mail.example.org", "email"),
    ],
)
def test_sensitive_data_is_found(text: str, kind: str) -> None:
    assert kind in sensitive_kinds(text)
    assert "[REDACTED:" in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "用户喜欢简洁的中文回答",
        "The user prefers short answers, written on 2024-05-01",
        "用户 2023 年搬到了上海，工号 12345",
        "The user's passport expires in May 2025",
        "用户使用 Python 3.11 和 kb-agent v0.1.0",
        "The user stayed at the hotel 12345678 nights ago",
        "用户忘记了密码，需要重置",
        "The user's secret is that they love cats",
    ],
)
def test_ordinary_memories_are_not_sensitive(text: str) -> None:
    assert sensitive_kinds(text) == []


def test_email_is_allowed_only_on_request() -> None:
    assert sensitive_kinds("a@b.co", allow_email=True) == []
    assert content_problem("semantic", "用户邮箱 a@b.co", latest_user_message="记住我的邮箱 a@b.co") is None
    assert content_problem("semantic", "用户邮箱 a@b.co", latest_user_message="我的邮箱 a@b.co") is not None


def test_normalised_content_ignores_case_width_space_and_end_punctuation() -> None:
    assert normalise_content("  The User  likes TEA. ") == normalise_content("the user likes tea")
    assert normalise_content("用户喜欢ＡＢＣ。") == normalise_content("用户喜欢abc")


def test_extraction_prompt_states_the_contract() -> None:
    for needle in ('"operations"', "ADD|UPDATE|DELETE|IGNORE", "0.85", "4–400", "semantic", "procedural"):
        assert needle in EXTRACTION_PROMPT


def test_extraction_prompt_tells_the_model_a_correction_updates() -> None:
    assert "correction" in EXTRACTION_PROMPT and "UPDATEs the memory" in EXTRACTION_PROMPT
    assert "其实我不喜欢" in EXTRACTION_PROMPT


def test_offline_extractor_turns_an_explicit_correction_into_an_update() -> None:
    from stores.memory.extraction import OfflineExtractor
    from stores.memory.rules import ExtractionRequest

    old = {"id": "m1", "memory_type": "semantic", "content": "用户喜欢简洁的回答"}
    other = {"id": "m2", "memory_type": "semantic", "content": "用户喜欢喝茶"}
    request = ExtractionRequest("u", "其实我不喜欢简洁的回答，我喜欢详细的回答", (), (other, old))  # type: ignore[arg-type]
    [op] = OfflineExtractor()(request)["operations"]
    assert (op["action"], op["target_id"]) == ("UPDATE", "m1") and "详细" in op["content"]
    en_old = {"id": "m3", "memory_type": "semantic", "content": "The user prefers short answers"}
    en = ExtractionRequest("u", "Actually, I prefer detailed answers", (), (en_old,))  # type: ignore[arg-type]
    assert OfflineExtractor()(en)["operations"][0]["target_id"] == "m3"
    # without a correction marker, a new preference is a new memory
    plain = ExtractionRequest("u", "我喜欢详细的回答", (), (old,))  # type: ignore[arg-type]
    assert OfflineExtractor()(plain)["operations"][0]["action"] == "ADD"


@pytest.mark.parametrize("text", ["把关于我的记忆都删掉", "delete everything you remember about me"])
def test_a_request_to_delete_all_names_every_memory(text: str) -> None:
    from stores.memory.extraction import OfflineExtractor

    memories = [
        {"id": "m1", "memory_type": "semantic", "content": "The user lives in Beijing"},
        {"id": "m2", "memory_type": "preference", "content": "用户喜欢绿茶"},
    ]
    ops = OfflineExtractor.forget(text, memories)  # type: ignore[arg-type]
    assert sorted(op["target_id"] for op in ops if op["action"] == "DELETE") == ["m1", "m2"]


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("我对花生过敏", "用户对花生过敏"),
        ("对了，我在吃降压药", "用户在吃降压药"),
        ("I'm allergic to peanuts", "The user is allergic to peanuts"),
        ("my salary is 30k a month", "The user's salary is 30k a month"),
        ("I was diagnosed with diabetes", "The user was diagnosed with diabetes"),
        ("I have a mortgage of 2 million", "The user has a mortgage of 2 million"),
    ],
)
def test_an_unasked_fact_that_needs_confirmation_is_proposed(text: str, content: str) -> None:
    from stores.memory.extraction import OfflineExtractor
    from stores.memory.rules import ExtractionRequest

    ops = OfflineExtractor()(ExtractionRequest("u", text, (), ()))["operations"]  # type: ignore[arg-type]
    assert [(op["action"], op["content"]) for op in ops] == [("ADD", content)]
    assert high_risk(content) is not None  # so the rules hold it until the user confirms


@pytest.mark.parametrize(
    "text", ["我住在上海", "我觉得这个不对", "I moved last month", "我对花生过敏吗？", "他对花生过敏"]
)
def test_other_unasked_statements_and_questions_are_not_proposed(text: str) -> None:
    from stores.memory.extraction import OfflineExtractor
    from stores.memory.rules import ExtractionRequest

    assert OfflineExtractor()(ExtractionRequest("u", text, (), ()))["operations"] == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("Actually, these days I'd rather get long answers", "m1"),
        ("No, I now prefer long answers", "m1"),
        ("不对，我现在更喜欢详细的回答", "m2"),
        ("其实我最近更喜欢详细的回答", "m2"),
    ],
)
def test_a_preference_corrected_in_free_wording_updates_the_one_it_replaces(text: str, target: str) -> None:
    from stores.memory.extraction import OfflineExtractor
    from stores.memory.rules import ExtractionRequest

    memories = (
        {"id": "m1", "memory_type": "semantic", "content": "The user prefers short answers"},
        {"id": "m2", "memory_type": "semantic", "content": "用户喜欢简洁的回答"},
    )
    ops = OfflineExtractor()(ExtractionRequest("u", text, (), memories))["operations"]  # type: ignore[arg-type]
    assert [(op["action"], op["target_id"]) for op in ops] == [("UPDATE", target)]


@pytest.mark.parametrize(
    "text",
    [
        "I wonder why it failed",
        "I wanted to ask something",
        "我想知道为什么",
        "I'd like to know the policy",
        "I want to book a flight",
        "我想要订机票",
    ],
)
def test_sentences_that_only_start_like_a_preference_are_not_one(text: str) -> None:
    from stores.memory.extraction import OfflineExtractor
    from stores.memory.rules import ExtractionRequest

    assert OfflineExtractor()(ExtractionRequest("u", text, (), ()))["operations"] == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("remember that I was born in Harbin", "The user was born in Harbin"),
        ("remember that I were a teacher", "The user was a teacher"),
        ("remember I moved to Shenzhen last month", "The user moved to Shenzhen last month"),
        ("remember I went to Kyoto in 2019", "The user went to Kyoto in 2019"),
        ("remember that I study Japanese", "The user studies Japanese"),
        ("remember that I play the piano", "The user plays the piano"),
        ("remember that I can read Korean", "The user can read Korean"),
        ("remember that I've got two cats", "The user has got two cats"),
        ("remember that I'll travel in May", "The user will travel in May"),
        ("remember that I watch every match", "The user watches every match"),
        ("remember that I usually go to bed late", "The user usually goes to bed late"),
        ("remember that I need reading glasses", "The user needs reading glasses"),
    ],
)
def test_first_person_statements_become_correct_third_person(text: str, content: str) -> None:
    from stores.memory.extraction import OfflineExtractor
    from stores.memory.rules import ExtractionRequest

    ops = OfflineExtractor()(ExtractionRequest("u", text, (), ()))["operations"]  # type: ignore[arg-type]
    assert [op["content"] for op in ops] == [content]


@pytest.mark.parametrize(
    ("text", "target", "word"),
    [
        ("不是的，我目前住在南京", "home_zh", "南京"),
        ("其实我已经搬到苏州了", "home_zh", "苏州"),
        ("我现在在厦门", "home_zh", "厦门"),
        ("不是西安哦，我已经搬去青岛了", "home_zh", "青岛"),
        ("Correction: I relocated to Lisbon in May", "home_en", "Lisbon"),
        ("I'm in Oslo now, not Porto", "home_en", "Oslo"),
        ("我上周入职了字节跳动", "job", "字节跳动"),
        ("these days I work at a bakery", "job", "bakery"),
        ("update: I joined Fabrikam last week", "job", "Fabrikam"),
    ],
)
def test_a_new_value_for_a_single_valued_fact_updates_the_memory_holding_it(
    text: str, target: str, word: str
) -> None:
    from stores.memory.extraction import OfflineExtractor
    from stores.memory.rules import ExtractionRequest

    memories = (
        {"id": "pref", "memory_type": "semantic", "content": "用户喜欢简洁的回答"},
        {"id": "home_zh", "memory_type": "semantic", "content": "用户住在西安"},
        {"id": "home_en", "memory_type": "semantic", "content": "The user lives in Porto"},
        {"id": "job", "memory_type": "semantic", "content": "用户在华为工作"},
    )
    if target == "home_en":
        memories = tuple(m for m in memories if m["id"] != "home_zh")
    ops = OfflineExtractor()(ExtractionRequest("u", text, (), memories))["operations"]  # type: ignore[arg-type]
    assert [(op["action"], op["target_id"]) for op in ops] == [("UPDATE", target)]
    assert word in ops[0]["content"]


@pytest.mark.parametrize("text", ["我现在在开会", "I'm in a hurry now", "我在想这个问题", "I work hard"])
def test_statements_that_are_not_a_new_value_change_nothing(text: str) -> None:
    from stores.memory.extraction import OfflineExtractor
    from stores.memory.rules import ExtractionRequest

    memories = ({"id": "home", "memory_type": "semantic", "content": "用户住在西安"},)
    assert OfflineExtractor()(ExtractionRequest("u", text, (), memories))["operations"] == []  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "gone"), [("forget where I live", "home"), ("把我的工作单位忘掉", "job")])
def test_forgetting_a_fact_by_what_it_is_about_finds_it_in_any_wording(text: str, gone: str) -> None:
    from stores.memory.extraction import OfflineExtractor

    memories = [
        {"id": "home", "memory_type": "semantic", "content": "用户上个月搬到了厦门"},
        {"id": "job", "memory_type": "semantic", "content": "The user joined Fabrikam last week"},
        {"id": "tea", "memory_type": "semantic", "content": "The user likes green tea"},
    ]
    ops = OfflineExtractor.forget(text, memories)  # type: ignore[arg-type]
    assert [(op["action"], op["target_id"]) for op in ops] == [("DELETE", gone)]
