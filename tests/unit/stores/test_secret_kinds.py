"""Secrets are found by what they are: the text is read in a normal form first (number words, Chinese
numerals, full-width forms, separators between digits), then each kind is checked by its own structure
(libphonenumber, Luhn, the IBAN checksum, credentials in a URL, vendor key formats, random-looking tokens),
and a sentence that states a credential (password, PIN, 口令, combination, CVV, 支付密码 …) is refused
whatever its value looks like. The audit keeps the kind of what was refused, never any part of it."""

from __future__ import annotations

import time
from typing import Any

import pytest

from stores.audit import AuditEntry, AuditStore
from stores.memory.checks import redact, sensitive_kinds
from stores.memory.rules import apply_operations, content_problem


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        # spaced PINs and PINs in Chinese numerals or words
        ("我的银行卡 PIN 是 5 8 3 1", "password"),
        ("ATM PIN: 4-4-1-2", "password"),
        ("取款密码是九五二七", "password"),
        ("门禁密码：幺三五七", "password"),
        ("my PIN is four four one two", "password"),
        ("my debit card PIN is 0 9 1 2", "password"),
        # 口令, combination, "uses X as its password"
        ("我们的口令是天王盖地虎", "password"),
        ("the combination to the safe is 12-34-56", "password"),
        ("the locker combination is thirty-two, eleven, five", "password"),
        ("the router uses sunflower as its password", "password"),
        ("Grandma uses her cat's name, Mittens, as her password", "password"),
        # a credential whatever its value looks like
        ("支付密码是我的生日 1990 年 3 月 15 日", "password"),
        ("支付密码就是我生日", "password"),
        ("my password is sunshine", "password"),
        ("the wifi password is correcthorse", "password"),
        ("the CVV on my Visa is 737", "password"),
        ("信用卡背面的安全码是 123", "password"),
        ("短信验证码 482913", "password"),
        # an IBAN without spaces, a database URL with its password, a Hugging Face token
        ("my IBAN is GB82WEST12345698765432", "bank_account"),
        ("转账到 DE89370400440532013000", "bank_account"),
        ("the database is postgresql://admin:Winter2024@db.internal:5432/prod", "credentials_url"),
        ("clone https://alice:ghx7Tq2wLm@git.example.com/repo.git", "credentials_url"),
        ("my Hugging Face token is hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456", "api_key"),
        ("hf_kQ8vR2nL5tW9yB3mD7xZ1cF6hJ4pS0gA", "api_key"),
        ("阿里云 AccessKey ID LTAI5tQx9WmZ3kP7rY2vN8bC", "api_key"),
        # a phone number in English words
        ("my cell is four one five, five five five, zero one three two", "phone"),
        ("我的手机是幺三八 幺二三四 五六七八", "phone"),
        # full-width forms and cards without a word naming them
        ("ｍｙ　ｐａｓｓｗｏｒｄ　ｉｓ　ｔｉｇｅｒ７", "password"),
        ("4111 1111 1111 1111 exp 12/29", "bank_card"),
        ("pay with 3782 822463 10005", "bank_card"),
        # what logs someone in or opens a lock, named or not
        ("for the admin page, log in with admin / Falcon#92", "password"),
        ("the family login is music.family / beatsbyus", "password"),
        ("the shed padlock opens with 3-3-9", "password"),
        ("电子锁，开门数字是零四一七", "password"),
        ("以后就拿名字拼音加 88 登录", "password"),
        ("淘宝的登录密码和 QQ 一样，都是 wxy19880512", "password"),
        ("ring my sister on oh seven seven zero zero, nine double zero, four six one", "phone"),
        ("爸爸的社保卡查询密码六个八", "password"),
        ("the code to disarm the alarm is 8 8 4 1", "password"),
        ("the bike lock is set to 0-5-2-9", "password"),
        ("口令我定成了 Hz_2019@home", "password"),
        ("wifi 连的时候输 jiejie520", "password"),
        ("keep their Amex CID, which is 4417", "password"),
        ("the storage unit padlock at 19-27-3", "password"),
        ("my email password is the same as the Wi-Fi one: harborlights", "password"),
        ("I set my phone's screen lock to 2580", "password"),
        ("防盗门的电子锁 4 7 1 1 进门", "password"),
        ("教务系统的密码跟学号后六位一样", "password"),
        ("debit card PIN? It's 0-8-1-5", "password"),
        ("she uses the word 'marmalade' to log into the iPad", "password"),
        ("the door buzzer code: star 4 4 0 9", "password"),
        ("the MySQL root password was reset to Marigold77", "password"),
        ("以后问起来就说暗号“长江长江我是黄河”", "password"),
        ("the vault code is 3 1 4 1 5 9", "password"),
        ("the Wi-Fi key for the guest network is visitor2024", "password"),
        ("my answer to the security question 'first pet' is Biscuit", "password"),
        ("快递柜的开箱码一般是 8 位，这次是 40715523", "password"),
        ("一卡通背面三位数：叁柒玖", "password"),
        ("QQ 密码一直没改过，还是九七年注册时的 qq970101", "password"),
        ("密码提示问题答案是“外婆家”", "password"),
        ("he logs into the pharmacy portal as jdoe1970 with Aspirin2day", "password"),
        ("the wallet seed starts with 'orbit lemon velvet'", "password"),
        ("we use 0420 for both the garage and the front gate", "password"),
        ("the PIN — written backwards — is 2-7-4-1", "password"),
        ("银行卡取现要输的六位数是 520 131", "password"),
        ("花呗支付密码，和他手机尾号一样", "password"),
        ("the safe opens when you dial 36 left, 12 right, 48 left", "password"),
        ("they gave the alarm company the passcode 'bluebird'", "password"),
        ("my driver license number is D1234-56789-01234", "id_card"),
        ("家里的无线网，九个八就能连上", "password"),
        ("港澳通行证号码 C12345678", "id_card"),
        ("the Wi-Fi network is 'Hollis' and the key is winter-orchard-52", "password"),
        ("I entered 7 3 1 9 at the door and it opened", "password"),
        ("the home alarm code? 0 8 0 8", "password"),
    ],
)
def test_each_kind_is_found(text: str, kind: str) -> None:
    assert kind in sensitive_kinds(text), sensitive_kinds(text)
    assert content_problem("semantic", text) is not None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I forgot my password again",
        "my password is too weak, I should change it",
        "the password must be at least 12 characters",
        "密码长度至少 12 位",
        "支付密码是 6 位数字",
        "密码是什么来着？",
        "what is the wifi password?",
        "密码是区分大小写的",
        "the password is on a sticky note under the keyboard",
        "The user's secret is that they love cats",
        "a combination of factors made it work",
        "the pin on the map is wrong",
        "订单号 20240315004212 已发货",
        "版本 1.2.3.4567 发布了",
        "the meeting is on 2024-03-15 at 10:30",
        "I paid 4,111.11 yuan",
        "客服电话 10086",
        "报警请拨 110",
        "one two three, let's go",
        "用户有三个孩子，一个八岁",
        "our IBAN format has 22 characters",
        "see https://example.com/docs?page=2",
        "the repo is huggingface.co/bert-base-uncased",
        "I love 🍕 and 🍣",
        "invoice 2024-0412-88 was paid on April 14",
        "银行提醒我别把生日当密码",
        "never use your birthday as your PIN",
        "the CVV is the three digits on the back",
        "play F#7 then C#m",
        "our lock combination gets changed every quarter",
        "I log in every morning at 9",
        "我记得密码是字母加数字的组合",
        "my new password is much longer than the old one",
        "the safe is at 221B Baker Street",
        "caller cid 4417",
        "验证码是六位数字",
        "he asked if 1234 is a bad PIN",
        "my password is the same as before",
        "I use 2 fingers to unlock the trackpad",
        "the lock 2019 model",
        "The user uses Face ID to unlock the phone",
        "I logged into the portal with my work account",
        "PIN, as you know, is private",
        "密码一般是 8 位，也可以更长",
        "the password's length isn't the user's problem",
        "I entered the year 1999 in the form",
        "my driver license expires 2026",
        "the key is under the mat",
        "2024 年就能进去",
    ],
)
def test_look_alikes_are_not_secrets(text: str) -> None:
    assert sensitive_kinds(text) == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("AWS access key id AKIAIOSFODNN7EXAMPLE for the backup bucket", "IOSFODNN"),
        ("the key is sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12, keep it", "Kl12"),
        ("IBAN DE89 3704 0044 0532 0130 00", "0130 00"),
        ("IBAN DE89 3704 0044 0532 0130 00", "3704"),
        ("我们的口令是天王盖地虎，别外传", "盖地虎"),
        ("PIN 是 5 8 3 1", "8 3 1"),
        ("postgresql://admin:Winter2024@db.internal:5432/prod", "Winter2024"),
    ],
)
def test_redaction_keeps_no_part_of_the_value(text: str, value: str) -> None:
    assert value not in redact(text)


class _Writer:
    def add(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a secret must not be written")

    get = update = delete = find_same = add


@pytest.mark.parametrize(
    "content",
    [
        "The user's AWS access key id is AKIAIOSFODNN7EXAMPLE",
        "用户的 IBAN 是 GB82 WEST 1234 5698 7654 32",
        "The user's API key is sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12",
        "用户的支付密码是九五二七",
    ],
)
def test_the_audit_records_the_refusal_and_its_kind_but_no_part_of_the_value(
    tmp_path: Any, content: str
) -> None:
    audit = AuditStore(tmp_path)
    proposal = {"operations": [{"action": "ADD", "type": "semantic", "content": content, "confidence": 0.95}]}
    apply_operations(
        proposal,
        writer=_Writer(),
        audit=audit,
        user_id="alice",
        thread_id="t",
        latest_user_message="记住",
        snapshot=[],
    )
    [entry] = audit.list(user_id="alice")
    assert (entry.status, entry.rule) == ("rejected", 4) and "sensitive data" in (entry.reason or "")
    kept = " ".join(str(v) for v in entry.as_dict().values())
    for piece in ("AKIA", "EXAMPLE", "WEST", "7654", "Kl12", "Ab12", "九五二七", "9527"):
        assert piece not in kept, kept
    audit.close()


def test_the_audit_store_withholds_a_secret_any_caller_hands_it(tmp_path: Any) -> None:
    audit = AuditStore(tmp_path)
    audit.record(
        AuditEntry(
            user_id="alice",
            action="EXTRACT",
            status="failed",
            reason="ValueError: could not parse 'my password is Tr0ub4dor&3'",
        )
    )
    [entry] = audit.list(user_id="alice")
    assert "Tr0ub4dor" not in (entry.reason or "") and "password" in (entry.reason or "")
    audit.close()


@pytest.mark.parametrize(
    "text",
    [
        "密码" * 50_000,
        "1 " * 50_000,
        "my password is " + "a" * 100_000,
        "四" * 100_000,
        "one " * 25_000,
        "x" * 99_990 + " PIN 1234",
    ],
)
def test_very_long_text_is_checked_in_bounded_time(text: str) -> None:
    """A bound against runaway (quadratic) matching, in this process's CPU seconds so that a busy machine
    does not count: about 1.5 s here for 100,000 characters."""
    started = time.process_time()
    sensitive_kinds(text)
    redact(text)
    assert time.process_time() - started < 10.0


@pytest.mark.parametrize(
    "unit",
    ["password 12345678. ", "order 12345678 safe 4417, ", "security answer is Paris. ", "safe 1 2 3 4 5 6 7 8 9 "],
)
def test_a_long_text_full_of_nouns_and_values_is_bound_in_linear_time(unit: str) -> None:
    """Each value looks up its noun and its sentence nearby, never from the start of the text: about 1 s here
    for 100,000 characters (a lookup from the start took 3 to 10 s)."""
    text = (unit * 10_000)[:100_000]
    started = time.process_time()
    sensitive_kinds(text)
    assert time.process_time() - started < 4.0


def test_mixed_language_and_emoji_text_is_read_like_any_other() -> None:
    assert "password" in sensitive_kinds("🔐 我的 Netflix password 是 movie4U 😀")
    assert "phone" in sensitive_kinds("📞 call 我 at 一三八 1234 五六七八 🙏")
    assert sensitive_kinds("🎉 生日快乐 happy birthday 🎂 2024-03-15") == []


def test_each_kind_has_a_label_a_refusal_can_list() -> None:
    from stores.memory.secrets import LABELS

    for text in ("PIN 是 5 8 3 1", "IBAN GB82WEST12345698765432", "postgresql://a:b4Xy@h/db"):
        assert all(kind in LABELS for kind in sensitive_kinds(text))
    assert not any(", " in label for label in LABELS.values())  # a reason lists them joined by ", "
