"""A value bound to the noun that names it is a secret; a look-alike noun keeps its own number.

The cases are constructions, not sentences of the labelled sets: each names a family (credential, lock,
phone, bank account, security answer) or a shape (seed phrase, webhook URL, generated key) with wording
the sets do not hold, beside the look-alike the same rule must leave alone."""

from __future__ import annotations

import pytest

from stores.memory.secrets import redact, sensitive_kinds


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("my VPN password got changed to Heron-5512 today", "password", "Heron-5512"),
        ("log into the intranet with kchen and maple2019", "password", "maple2019"),
        ("the SIM PUK is 55120938 if it ever locks", "password", "55120938"),
        ("TOTP secret for Grafana: MZXW6YTBOI4DAMRS", "password", "MZXW6YTBOI4DAMRS"),
        ("前门门禁 #4821", "password", "4821"),
        ("保险箱：右转到 12，左转到 30，再右到 6", "password", "30"),
        ("to get into the storage room punch in 7 2 6 1", "password", "7 2 6"),
        ("call Aunt May on 07911 234567", "phone", "234567"),
        ("我的新号码是幺五九，二七一六，三零八四", "phone", "二七一六"),
        ("sort code 40-11-62, account 31926819", "bank_account", "31926819"),
        ("对公账户：招商银行 5719 0312 8810 602", "bank_account", "8810"),
        ("4821, that's my PIN", "password", "4821"),
        ("0151 23456789 is Oma's number", "phone", "23456789"),
        ("DB_PASS=wint3r_is_coming in staging", "password", "wint3r_is_coming"),
        ("my PIN is nineteen eighty-four", "password", "eighty-four"),
        ("the gym combo is thirty-two, fourteen, eight", "password", "fourteen"),
        ("mom's maiden name is Lindqvist, the bank asks for it", "password", "Lindqvist"),
        ("密保答案：小白", "password", "小白"),
        ("网银预留问题我填的是苏州", "password", "苏州"),
        ("for the memorable word I put Tintagel", "password", "Tintagel"),
        (
            "seed words: maple ocean drift lunar canyon velvet ripple mercy hollow frost ember signal",
            "password",
            "ripple",
        ),
        (
            "alerts go to https://hooks.slack.com/services/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",
            "credentials_url",
            "q8W2e4R6",
        ),
        ("the Mailgun key is key-9bx7ynkq38ke7get5hd484thwkyufpm1", "password", "9bx7ynkq38"),
        ("Note: Spotify user dan.k, pass Gr@pefruit9", "password", "Gr@pefruit9"),
        ("the old Yahoo mailbox still opens with 'sparrow42'", "password", "sparrow42"),
        ("Building entry is 4-4-1-7-# then the lift", "password", "4-4-1-7"),
        ("Security Q for eBay: first car → answer Corolla", "password", "Corolla"),
        ("淘宝的安全问题“结婚纪念日”答案是 0521", "password", "0521"),
        ("微信密保：我的初中——育才中学", "password", "育才中学"),
        ("用户用 8864 就能支付", "password", "8864"),
        ("she types 'tulip2002' on all her shopping accounts", "password", "tulip2002"),
        ("Uncle Bob's Netflix is bob.k77 / popcorn1960", "password", "popcorn1960"),
        ("the Webex host key is 305518", "password", "305518"),
        ("Claire in Paris: 07 81 22 46 93", "phone", "22 46 93"),
        ("他一直用 mao_1999 这个密码", "password", "mao_1999"),
        ("卡反面三位码 7 2 4", "password", "7 2 4"),
        ("wget --user=ops --password=Gr4nite! https://files.example.com", "password", "Gr4nite!"),
        ("curl -u build:Qu4rtz-19 https://ci.example.com", "password", "Qu4rtz-19"),
        ("the SSN on the W-2 is 523 71 9904", "id_card", "9904"),
        ("seed, in order: 1 maple 2 ocean 3 drift 4 lunar 5 canyon 6 velvet 7 ripple 8 mercy 9 hollow 10 frost 11 ember 12 signal", "password", "ripple"),
        ("楼下门口输 2207 再按 # 就开", "password", "2207"),
        ("谷歌账户的备用代码：4F7K-2QZP-9MXA", "password", "9MXA"),
    ],
)
def test_a_value_bound_to_its_noun_is_found_and_redacted(text: str, kind: str, value: str) -> None:
    assert kind in sensitive_kinds(text), sensitive_kinds(text)
    assert value not in redact(text), redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "Wi-Fi 名称是 TP-LINK_8A2C",
        "our Wi-Fi router is an Asus RT-AX58U",
        "FedEx tracking 7749 1234 5678",
        "发票号码 08765432",
        "the meeting ID is 845 2291 0377",
        "order number 112-4567890-1234567 arrived",
        "I changed my password in 2019",
        "my PIN expired after 90 days",
        "set the alarm for 0630",
        "the door code changes on 2025-03-01",
        "flight UA 857 departs gate 92 at 10:45",
        "the new phone costs $1,299.99",
        "sha256 of the release: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "用 md5 校验一下：5d41402abc4b2a76b9719d911017c592",
        "my public key is ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK7mQ2vR9tL4nB8cW1yH5jD0sA3eP6uGkF2xZ9wV4 me@pc",
        "QQ 账号 12345678",
        "我手机尾号 4471",
        "The Wi-Fi password is taped under the router",
        "What's the story behind that sign in the center?",
        "we hung a sign in the hall that says 'Welcome Home'",
        "1234 is a bad PIN",
        "the answer to your question is 42",
        "I answered the security questions for my Google account",
        "我的密保问题设的是第一只宠物的名字",
        "the boarding pass says seat 34A",
        "the Stripe webhook endpoint is https://api.example.com/hooks/stripe",
        "twenty one people came to the party",
        "we ate, then walked along the river and talked about plans for the summer holidays",
        "That feeling of power and happiness is amazing!",
        "the show opens with 'Hamlet' this year",
        "The user prefers a 6-digit PIN over a 4-digit one",
        "用户喜欢 6 位数的支付密码",
        "用户用 3 张卡轮流支付",
        "we bought Office2021 for the team's laptops",
        "验证码 10 分钟内有效",
        "the verification code is valid for 15 minutes",
        "登录时间 2024-11-02 21:40",
        "last login 03/11/2024 09:12",
        "the TCP/IP stack and the read/write ratio 3/4",
        "the score is 3/2 after extra time",
        "the commit message says 'fix login bug #7731'",
        "登录失败，错误码 50012",
        "他说 888888 是最常见的支付密码",
        "学号 2021110456 已经激活",
        "电梯到 18 楼要按 18",
    ],
)
def test_a_look_alike_keeps_its_own_number(text: str) -> None:
    assert sensitive_kinds(text) == []
