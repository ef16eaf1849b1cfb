"""Sensitive data found by its own structure: each kind checked the way it is built.

Phone numbers by libphonenumber, card numbers by their issuer prefix and the Luhn digit, an IBAN by its
country's length and its mod-97 checksum, identity numbers by their layout and the word that names them,
credentials in a URL by the URL's user-info, API keys by their vendor's published format, and anything else
by looking random (three character classes, many switches between them). A shape that only resembles one
(an order number, a date, a version) fails its check.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import pairwise

Span = tuple[str, int, int]

EMAIL = re.compile(r"[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63})+")  # bounded: a long word costs one pass
_ID_CARD = r"[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx]"
_VALUE = r"\s*(?:number|no\.?|号码?|#)?\s*(?:是|为|:|=|is|was)?\s*"
# What names a personal identity number (China, passports, and the national ones of the US, Canada, the UK,
# Australia): the number that follows it is one, however it is grouped.
_ID_WORD = (
    r"身份证|证件号|护照|社保号|社会保险号|\bpassport|\bssn\b|social\s+security|\bsin\b|social\s+insurance"
    r"|\bni(?:no)?\b|national\s+insurance|\btfn\b|tax\s+file\s+number|driver'?s?\s+licen[cs]e|驾驶证|驾照"
    r"|通行证|居住证|居留证|军官证|\bgreen\s+card|residence\s+permit"
)
_KEY_WORD = (
    r"(?:api[\s_-]?key|secret(?:[\s_-]?(?:access[\s_-]?)?key)?|client[\s_-]?secret|app[\s_-]?secret|(?:auth|access"
    r"|bearer|bot|deploy|personal\s+access)?[\s_-]?tokens?|access[\s_-]?key(?:[\s_-]?id)?|accesskey(?:\s*id)?"
    r"|密钥|私钥|秘钥|令牌|访问令牌)"
)
# Published key formats: OpenAI/Anthropic/DeepSeek sk-, Stripe, GitHub, GitLab, Slack, AWS, Google,
# Hugging Face, Alibaba Cloud, Tencent Cloud, npm, PyPI, SendGrid, Telegram bots, Shopify, DigitalOcean.
_VENDOR_KEYS = re.compile(
    r"\b(?:(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}|(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|(?:AKIA|ASIA)[A-Z0-9]{12,}|AIza[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{20,}"
    r"|LTAI[A-Za-z0-9]{12,}|AKID[A-Za-z0-9]{13,}|npm_[A-Za-z0-9]{20,}|pypi-[A-Za-z0-9_-]{20,}"
    r"|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}|\d{8,10}:AA[A-Za-z0-9_-]{30,}|shp(?:at|ss|ca)_[a-f0-9]{20,}"
    r"|dop_v1_[a-f0-9]{30,}|GOCSPX-[A-Za-z0-9_-]{20,}|ya29\.[A-Za-z0-9_-]{20,})"
)
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("id_card", re.compile(rf"(?<!\d){_ID_CARD}(?![\dA-Za-z])")),
    ("id_card", re.compile(rf"(?:{_ID_WORD}){_VALUE}[a-z]{{0,2}}\s?\d(?:[\da-z-]|\s(?=\d)){{5,}}", re.I)),
    (
        "phone",
        re.compile(
            r"(?<![\w+])\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{2,4}[\s.-]?\d{3,4}[\s.-]?\d{3,4}(?!\d)"
        ),
    ),
    ("phone", re.compile(r"(?<![\d-])(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}(?![\d-])")),
    ("phone", re.compile(r"(?<!\d)0\d{2,3}-\d{7,8}(?!\d)")),
    (
        "phone",
        re.compile(
            r"(?:电话|手机|联系方式|拨打|打给|\bphone|\bmobile|\bcell|\btel\b|whatsapp|wechat|微信|\bcall|\bring"
            r"|\btext|\breach|\bdial)\D{0,12}\d[\d\s,-]{6,}\d",
            re.I,
        ),
    ),
    (
        "bank_card",
        re.compile(
            r"(?:银行卡|卡号|信用卡|储蓄卡|借记卡|card\s+number|credit\s+card|debit\s+card)\D{0,12}\d[\d\s.-]{10,}\d",
            re.I,
        ),
    ),
    ("api_key", _VENDOR_KEYS),
    ("api_key", re.compile(r"\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,}")),
    ("api_key", re.compile(r"\bbearer\s+[\w.~+/-]{12,}", re.I)),
    (
        "api_key",
        re.compile(
            rf"(?<![A-Za-z]){_KEY_WORD}(?![A-Za-z])\s*(?:id)?\s*(?:是|为|:|=|is|was)?\s*(?=[\w./+=-]*[\d_-])(?=[\w./+=-]*[A-Za-z])[\w./+=-]{{8,}}",
            re.I,
        ),
    ),
    (  # the whole block when it is there: header, body, footer
        "private_key",
        re.compile(
            r"-{2,}\s*begin\s+(?:[a-z0-9]+\s+)*private\s+key(?:\s+block)?[\s\S]*?"
            r"(?:-{2,}\s*end\s+(?:[a-z0-9]+\s+)*private\s+key(?:\s+block)?\s*-*|\Z)",
            re.I,
        ),
    ),
    (  # scheme://user:password@host, and a secret passed in a query string
        "credentials_url",
        re.compile(
            r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@]+:[^\s@/]+@[^\s/]+"
            r"|[?&][\w.-]{0,20}(?:token|api_?key|key|secret|password|passwd|pwd|sig|signature|credential"
            r"|auth)=[^&\s]{6,}",
            re.I,
        ),
    ),
    ("email", EMAIL),
    (  # a token that looks chosen as a password: letters, digits and a symbol inside it ("Falcon#92")
        "password",
        re.compile(
            r"(?<![\w@#$%&*./-])(?=[^\s@]{0,39}[A-Za-z])(?=[^\s@]{0,39}\d)(?=[^\s@]{6})[A-Za-z\d][\w]*[!#$%&~][^\s@/]{1,38}"
            r"(?<![.,;:!?])(?![^\s,;，。])"
        ),
    ),
)
# A hex digest-sized secret: digits and letters both, as a random one has.
_HEX = re.compile(r"(?<![0-9A-Fa-f])(?=[0-9A-Fa-f]{0,31}[a-fA-F])(?=[0-9A-Fa-f]{0,31}\d)[0-9A-Fa-f]{32,}(?![0-9A-Fa-f])")
# What is published rather than kept: a digest or a commit introduced as one, an SSH or PGP public key.
_PUBLISHED = re.compile(
    r"(?:\bsha-?(?:1|224|256|384|512)?(?:sum)?\b|\bmd5(?:sum)?\b|checksum|digest|\bhash(?:es)?\b|哈希|校验|摘要"
    r"|\bcommit\b|fingerprint|指纹|ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d+|public\s+key|公钥)"
    r"[^.。;；\n]{0,40}$",
    re.I,
)
# A webhook's URL is its credential: whoever holds the long token in its path can post as the hook.
_HOOK_URL = re.compile(r"\bhttps?://[^\s]*hook[^\s]*", re.I)
_HOOK_SECRET = re.compile(r"(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{16,}")
# A number its writer calls a card (工资卡, 借记卡, "debit card") with a payment card's length is one.
_CARD_WORD = re.compile(r"卡|\bcard\b", re.I)
_DIGIT_RUN = re.compile(r"(?<![\d+.])\+?\d(?:[\s.-]?\d){6,22}[Xx]?(?![.]?\d)")
_TOKENISH = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}")
_IBAN_START = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}\d{2}(?=[ -]?[A-Za-z0-9])")
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
    "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
    "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
    "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
    "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
    "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip
_PHONE_REGIONS = ("CN", "US")  # numbers without a country code are read as Chinese, then North American
# libphonenumber tries every number-like group; a text made of thousands of them (a dump, an attack) would
# cost seconds, so it stops after this many per region. The patterns above still read the whole text.
_PHONE_TRIES = 1000


def luhn(digits: str) -> bool:
    """The check digit every payment card carries."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _card_issuer(digits: str) -> bool:
    """An issuer prefix with its length: Visa, Mastercard, Amex, UnionPay, Discover, JCB, Diners."""
    n = len(digits)
    if digits[0] == "4":
        return n in {13, 16, 19}
    if digits[:2] in {"34", "37"}:
        return n == 15
    if digits[:2] in {"36", "38"} or "300" <= digits[:3] <= "305":
        return n == 14
    if "51" <= digits[:2] <= "55" or "2221" <= digits[:4] <= "2720":
        return n == 16
    return digits[0] in "3568" and 16 <= n <= 19


def _card_number(digits: str) -> bool:
    """16 to 19 digits with a valid check digit; a shorter card only with its issuer's prefix."""
    if not digits.isdigit() or not 13 <= len(digits) <= 19 or not luhn(digits):
        return False
    return len(digits) >= 16 or _card_issuer(digits)


def _iban(text: str) -> Iterator[Span]:
    for m in _IBAN_START.finditer(text):
        country = m.group()[:2].upper()
        length = _IBAN_LENGTHS.get(country)
        if length is None:
            continue
        chars: list[str] = []
        pos = m.start()
        while pos < len(text) and len(chars) < length:
            ch = text[pos]
            if ch.isascii() and ch.isalnum():
                chars.append(ch.upper())
            elif not (
                ch in " -" and pos + 1 < len(text) and text[pos + 1].isascii() and text[pos + 1].isalnum()
            ):
                break
            pos += 1
        if len(chars) != length or (pos < len(text) and text[pos].isascii() and text[pos].isalnum()):
            continue
        code = "".join(chars)
        moved = code[4:] + code[:4]
        if int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1:
            yield "bank_account", m.start(), pos


def _digit_runs(text: str) -> Iterator[Span]:
    """Numbers written with spaces, dots or dashes between their digits, read as the digits alone."""
    for m in _DIGIT_RUN.finditer(text):
        compact = re.sub(r"[\s.+-]", "", m.group())
        if re.fullmatch(r"(?:86)?1[3-9]\d{9}", compact):
            yield "phone", m.start(), m.end()
        elif re.fullmatch(_ID_CARD, compact):
            yield "id_card", m.start(), m.end()
        elif _card_number(compact) or (
            compact.isdigit()
            and 16 <= len(compact) <= 19
            and _CARD_WORD.search(text, max(0, m.start() - 12), m.start())
        ):
            yield "bank_card", m.start(), m.end()


def _published(text: str, start: int) -> bool:
    """Whether the token at ``start`` is introduced as a digest, a commit or a public key."""
    return bool(_PUBLISHED.search(text, max(0, start - 60), start))


def _hex_secrets(text: str) -> Iterator[Span]:
    for m in _HEX.finditer(text):
        if not _published(text, m.start()):
            yield "api_key", m.start(), m.end()


def _hook_urls(text: str) -> Iterator[Span]:
    for m in _HOOK_URL.finditer(text):
        path = m.group().split("://", 1)[1].split("/", 1)[-1]
        if any(_HOOK_SECRET.fullmatch(part) for part in re.split(r"[/?&=]", path)):
            yield "credentials_url", m.start(), m.end()


def _random_tokens(text: str) -> Iterator[Span]:
    """A long token that looks random: lower case, upper case and digits, switching often between them."""
    for m in _TOKENISH.finditer(text):
        token = m.group()
        if _published(text, m.start()):
            continue
        classes = [ch.islower() - ch.isupper() if ch.isalpha() else 2 * ch.isdigit() for ch in token]
        if not all(c in classes for c in (1, -1, 2)):
            continue
        switches = sum(a != b for a, b in pairwise(classes))
        if len(token) >= 32 or switches >= 0.25 * len(token):
            yield "api_key", m.start(), m.end()


def _phone_numbers(text: str) -> Iterator[Span]:
    """Phone numbers in any written form (dots, spaces, 0086, area codes), as libphonenumber finds valid
    ones grouped as their country groups them; a run of digits that is no valid number (an order number, a
    date) is not one, nor is "2024-0412-88", which only a 2-4-4 reading makes a number."""
    if sum(ch.isdigit() for ch in text) < 7:
        return
    from phonenumbers import Leniency, PhoneNumberMatcher

    for region in _PHONE_REGIONS:
        for match in PhoneNumberMatcher(
            text, region, leniency=Leniency.STRICT_GROUPING, max_tries=_PHONE_TRIES
        ):
            yield "phone", match.start, match.end



# A number dialled with a trunk 0 (06 45 23 87 19, 07823 456712, 090-4417-2286), or grouped in three or more
# parts (612 34 56 78), may be of any of these countries; only such a run is read for them.
_TRUNK_REGIONS = (
    "GB", "FR", "DE", "JP", "AU", "KR", "IT", "ES", "NL", "BE", "CH", "AT", "IE", "NZ", "SE", "TW", "PT", "PL", "IN", "BR",
)  # fmt: skip


def dialled_abroad(text: str, start: int, end: int) -> bool:
    """A trunk-0 or grouped number valid and grouped as one of these countries writes it, and not the tail
    of a longer code ("1Z 999 AA1 01 2345 6784")."""
    raw = text[start:end]
    trunk = re.fullmatch(r"0\d(?:[\s.-]?\d){7,11}", raw)
    grouped = len(re.findall(r"[\s.-]", raw)) >= 3 and 9 <= sum(ch.isdigit() for ch in raw) <= 11
    if not (trunk or grouped) or re.search(r"[A-Za-z0-9]\s$", text[max(0, start - 2) : start]):
        return False

    from phonenumbers import Leniency, PhoneNumberMatcher

    for region in _TRUNK_REGIONS:
        found = next(iter(PhoneNumberMatcher(raw, region, leniency=Leniency.STRICT_GROUPING)), None)
        if found is not None and found.end - found.start == len(raw):
            return True
    return False


def structural_findings(text: str) -> list[Span]:
    """(kind, start, end) of every span of ``text`` (in normal form) that is sensitive by its structure."""
    spans = [(kind, m.start(), m.end()) for kind, p in _PATTERNS for m in p.finditer(text)]
    spans += _digit_runs(text)
    spans += _iban(text)
    spans += _random_tokens(text)
    spans += _hex_secrets(text)
    spans += _hook_urls(text)
    spans += _phone_numbers(text)
    return spans
