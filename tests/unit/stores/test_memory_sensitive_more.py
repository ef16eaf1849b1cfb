"""The memory filter catches PEM private keys and phone numbers written in Chinese numerals."""

from __future__ import annotations

import pytest

from stores.memory.checks import redact, sensitive_kinds
from stores.memory.rules import content_problem

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "-----END RSA PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    "text",
    [
        PEM,
        "记住我的私钥：-----BEGIN PRIVATE KEY----- MIIBVQIBADANBg",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "-----BEGIN EC PRIVATE KEY-----",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----",
        "the key starts with ----- begin private key -----",
    ],
)
def test_pem_private_keys_are_sensitive(text: str) -> None:
    assert "private_key" in sensitive_kinds(text)
    redacted = redact(text)
    assert "[REDACTED:" in redacted and "MIIB" not in redacted and "PRIVATE KEY" not in redacted.upper()
    assert content_problem("semantic", text[:400]) is not None


@pytest.mark.parametrize(
    "text",
    [
        "我的手机号是一三八一二三四五六七八",
        "电话：一三八 一二三四 五六七八",
        "手机 幺三八一二三四五六七八",
        "用户的号码是一三九〇〇〇〇一二三四",
        "号码 一五零零零零零一二三四",
        "call me on 138一二三四五六七八",
        "记住我的手机 壹叁捌壹贰叁肆伍陆柒捌",
    ],
)
def test_phone_numbers_in_chinese_numerals_are_sensitive(text: str) -> None:
    assert "phone" in sensitive_kinds(text)
    redacted = redact(text)
    assert "[REDACTED:phone]" in redacted and "五六七八" not in redacted and "伍陆柒捌" not in redacted


@pytest.mark.parametrize(
    "text",
    [
        "用户喜欢一二三四五六七八九十这样的顺序编号",
        "用户在二〇二四年搬到上海",
        "The user's public key is ssh-ed25519 in the README",
        "-----BEGIN CERTIFICATE----- is a public certificate header",
        "用户有三个孩子，一个八岁",
    ],
)
def test_ordinary_text_with_chinese_numerals_or_public_keys_is_not_sensitive(text: str) -> None:
    assert sensitive_kinds(text) == []


def test_the_email_rule_the_readme_states() -> None:
    memory = "用户的邮箱是 li.lei@example.com"
    assert content_problem("semantic", memory, allow_email=True) is None  # the user's own command
    assert content_problem("semantic", memory, latest_user_message="记住我的邮箱 li.lei@example.com") is None
    assert (
        content_problem("semantic", memory, latest_user_message="我的邮箱是 li.lei@example.com") is not None
    )
    assert (
        content_problem("semantic", memory, latest_user_message="remember my e-mail: me@other.org")
        is not None
    )


@pytest.mark.parametrize(
    "text",
    [
        "my SIN is 046 454 286",
        "Social insurance number: 046-454-286",
        "My NI number is QQ 12 34 56 C",
        "NINO AB123456C",
        "tax file number 123 456 782",
        "我的社保号是 1234 5678 90",
        "SSN 078 05 1120",
    ],
)
def test_national_identity_numbers_are_sensitive_however_grouped(text: str) -> None:
    assert "id_card" in sensitive_kinds(text)


@pytest.mark.parametrize(
    "text",
    [
        "the sin of pride is one of seven",
        "I live at 46 454 Main Street",
        "our tax file is 3 pages long",
        "passport photos cost 40 yuan",
    ],
)
def test_words_that_name_an_identity_number_without_one_are_not_sensitive(text: str) -> None:
    assert "id_card" not in sensitive_kinds(text)
