"""Sentences that state a credential: refused whatever the value looks like.

A password, a PIN, a 口令, a lock's combination, a card's CVV or a 支付密码 is secret because of what it is,
not because of its shape: "my password is sunshine", "支付密码就是我生日" and "口令是天王盖地虎" say as much as
"pw: Tr0ub4dor&3". So a sentence is read for its grammar, in either order ("the PIN is …", "… is my PIN",
"uses … as its password", "用 … 做密码"); what fills the value's place is a value unless it is one of the
things people say *about* a credential without giving it: a question, a judgement ("too weak", "区分大小写的"),
a length ("6 位数字"), a place ("on a sticky note"), a mask ("******"). What logs someone in or opens a lock
is a credential too, named or not ("log in with admin / Falcon#92", "the padlock opens with 3-3-9").
"""

from __future__ import annotations

import re

# The words that name a credential. A compound that names something else is not one: 密码学
# (cryptography), 密码锁 (a combination lock), "password manager", "PIN codes should…" (no value follows).
_ZH_CREDENTIAL = (
    r"(?:(?:密保|安全|密码提示)(?:问题)?的?答案|密码(?![学锁箱本器机子盘键框栏])|口令|暗号|暗语|验证码|安全码|动态码"
    r"|提取码|授权码|(?:取件|取货|提货|开箱|开门|开锁|解锁|门禁|通行)码|助记词"
    r"|(?<![A-Za-z])(?:PIN|CVV2?|CVC)(?![A-Za-z])\s*码?"
    r"|卡?背面的?那?[三3]位数?字?)"
)
_EN_CREDENTIAL = (
    r"(?:\bpass(?:word|code|phrase|key)s?\b|\bpasswd\b|\bpwd\b|\bpw\b|\bpins?\b(?:\s+(?:codes?|numbers?)\b)?"
    r"|\b(?:wi-?fi|wlan|wpa2?|wireless|network)\s+keys?\b|\bkey\b"
    r"|\bcvv2?\b|\bcvc2?\b|\bcsc\b|\bcvn\b|\bcid\b|\bcard\s+verification\s+(?:value|code)\b|\bsecurity\s+code\b"
    r"|\bverification\s+code\b|\botp\b"
    r"|\bone[\s-]time\s+(?:code|pass(?:word|code))\b"
    r"|\batm\s+(?:number|code)\b"
    r"|\b(?:access|door|gate|entry|alarm|unlock|garage|building|lock|safe|login|sign[\s-]?in|2fa|mfa|sms|keypad"
    r"|vault|locker|padlock|suitcase|briefcase"
    r"|buzzer|intercom|(?:door|gate|entry)\s+(?:buzzer|intercom|lock|keypad)"
    r"|recovery|backup|auth(?:entication)?)\s+codes?\b"
    r"|\b(?:seed|recovery|mnemonic)\s+(?:phrase|words)\b|\b(?:wallet|bip-?39)\s+seed\b|\b(?:secret|security)\s+(?:question\s+)?answer\b"
    r"|\banswer\s+to\s+(?:my|the|his|her|our)\s+security\s+question\b(?:\s+['\"“‘][^'\"”’]{1,30}['\"”’])?"
    r"|\bcombination\b)"
)
CREDENTIAL = re.compile(rf"{_ZH_CREDENTIAL}|{_EN_CREDENTIAL}", re.I)
# A noun after the credential word makes the phrase about something else: "password policy", "密码长度".
_META_AFTER = re.compile(
    r"\s*(?:policy|policies|rules?|manager|managers|reset|length|strength|requirements?|field|box|hint"
    r"|prompt|change|changes|expiry|expiration|protected|protection|hash|hashing|complexity|format|lock"
    r"|attempts?|entry|screen|page|login|prompts?|recovery|generator|vault|of\s+factors|of\s+the\s+two"
    r"|规则|策略|长度|强度|管理|复杂度|要求|位数|格式|提示|输入|重置|找回|错误|保护|设置页|功能|输错)\b",
    re.I,
)
_LOCK = re.compile(r"\b(?:safe|lock|locker|padlock|vault|suitcase|briefcase|door|gym|bike)\b", re.I)

# What is said about a credential without giving it: judgements, lengths, places, masks, questions.
_EN_JUDGEMENT = re.compile(
    r"(?:(?:too|very|so|quite|really|pretty|rather|a\s+bit|kind\s+of|not|n't|never|still|also|always|usually"
    r"|probably|definitely|just|now|already|easy\s+to|hard\s+to|much|far|way|even|a\s+lot|slightly|somewhat"
    r"|more|less|most|least)\s+)*"
    r"(?:(?:long|short|strong|weak|safe|eas|hard|simpl|bett|wors)(?:i?er|i?est)"  # comparisons judge too
    r"|weak|strong|long|short|easy|hard|difficult|simple|complex|complicated|secure|insecure|safe|unsafe"
    r"|wrong|incorrect|correct|right|invalid|valid|expired|expiring|outdated|required|mandatory|optional"
    r"|case[\s-]sensitive|needed|missing|empty|blank|forgotten|lost|locked|changed|reset|compromised|leaked"
    r"|stolen|hacked|different|same|similar|unique|random|memorable|secret|private|confidential|hidden"
    r"|encrypted|hashed|stored|saved|kept|written|managed|generated|sent|shown|displayed|printed|protected"
    r"|fine|ok|okay|good|bad|great|terrible|awful|weird|annoying|impossible|useless|guessable|obvious"
    r"|known|unknown|shared|reused|temporary|remembered|enough|set|updated|accepted|rejected|working)"
    # the judgement is the whole predicate, or what follows qualifies it: "correct now", "changed every
    # month"; "correct horse battery staple" is a value that starts with an adjective
    r"(?=\s*$|[^\w\s]|\s+(?:to|for|and|but|or|now|again|enough|though|anyway|because|since|so|than|as|at|in"
    r"|on|by|with|too|already|yet|then|every|each|once|twice|regularly|daily|weekly|monthly|automatically"
    r"|after|before|when|if|until|from|here|there)\b)",
    re.I,
)
# Words that cannot begin a value: places, pronouns, questions, lengths, "the same", "a must".
_EN_NOT_VALUE = re.compile(
    r"(?:on|in|at|under|inside|behind|somewhere|there|here|below|above|attached|for|from|by|with|without"
    r"|what|which|where|when|who|whose|how|why|whether|it|this|that|these|those|something|anything|nothing"
    r"|everything|mine|yours|ours|theirs|one\s+of|at\s+least|at\s+most|the\s+(?:same|problem|issue|thing)"
    r"|an?\s+(?:secret|mess|problem|pain|joke|nightmare|hassle|issue|must|requirement|mix|combination)"
    r"|(?:the\s+)?(?:last\s+|first\s+)?(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|twelve)\s+"
    r"(?:characters?|chars?|digits?|letters?|symbols?|numbers?|words?|long|minutes?|mins?|hours?|seconds?"
    r"|days?|weeks?|months?|times|tries|attempts))\b",
    re.I,
)
_ZH_NOT_VALUE = re.compile(
    r"(?:不|没|太|很|挺|非常|比较|有点|有些|特别|超级|相当|好像|真|都|也|还|又|已经|已|必须|需要|要|应该|不能"
    r"|可以|会|能|区分|错|对|正确|过期|失效|无效|有效|空|一样|相同|不同|保密|加密|安全|复杂|简单|容易|难|强|弱"
    r"|长|短|重要|必填|必需|必要|至少|最少|最多|多少|什么|啥|哪|几|由|被|在|放在|写在|存在|记在|贴在|随机|请"
    r"|这|那|它|谁|怎么|为什么|如何"
    r"|[\d一二三四五六七八九十两]+\s*(?:位|个字符|个字|个数字|字符|个字母|分钟|小时|秒|天|周|个月|次|遍))"
)
# Where it is kept, said with any verb of putting: "taped under the router", "stuck to the fridge".
_PLACED = re.compile(
    r"(?:[a-z]+ed|written|hidden|stuck|put|kept|left)\s+(?:up\s+|down\s+)?(?:under|on|in|inside|behind|at|beside|next\s+to|near|above|below"
    r"|onto|into|to|somewhere)\b",
    re.I,
)
_MASK = re.compile(r"[*•●xX#._\-\s]+")
_QUESTION = re.compile(
    r"[?？]|吗|什么|多少|哪|啥|几位|是不是|\b(?:what|which|how|whether)\b|\b(?:ask(?:s|ed)?|wonder(?:s|ed)?)\s+if\b",
    re.I,
)
_CLAUSE_END = re.compile(r"[,，。;；!！?？\n]|\s(?:and|but|so|because|which|then)\s|(?:但是|不过|所以|因为)")
_DETERMINER = r"(?:my|the|our|his|her|its|their|your|a|an|this|that|its)"

# How Chinese sets or states a value: "是", "叫", "改成了", "定成了", "设置为", "用的是".
_ZH_SETS = r"(?:叫做?|是|为|(?:改|换|设|定|变)成了?|(?:改|设|定)为|设置[为成]|设置的是|用的是|是用)"
# "… is X", "…: X", "密码是 X", "set … to X", "口令改成了 X", and a value written right after the word.
_ASSIGN = re.compile(
    r"\s*(?:\b(?:for|of|to|on|at)\b\s+(?:[\w'’.-]+\s+){0,4}?)?"
    r"(?:[-(,]\s*[^-(),\n]{1,30}?\s*[-),]\s*)?"  # an aside: "PIN - written backwards - is …"
    r"(?:就|都|也|还|仍然|依然|一直|现在|目前|已经|已|又|被)?\s*"
    r"(?:\b(?:is|was|has\s+been|have\s+been)\s+(?:now\s+)?(?:set|changed|reset|updated|switched)\s+to\b"
    r"|\b(?:starts?|begins?|ends?)\s+with\b"
    r"|\b(?:is|was|are|were|will\s+be|has\s+been|have\s+been|became|becomes|remains|reads)\b"
    r"(?:\s+(?:now|still|just|simply|literally|actually|currently|always))?\s*(?:[:=]\s*)?"
    r"|[:=]\s*|\b(?:set|changed|reset|updated|switched)\s+to\b|\bto\b"
    rf"|{_ZH_SETS})\s*",
    re.I,
)
# A value right after the word: "支付密码 551234", "PIN 1234", "验证码 482913", 暗号“长江长江我是黄河”.
_RIGHT_AFTER = re.compile(
    r"\s*(?=[^\s\w]?[!-~]*\d|[\"“「『][^\"”」』]{1,40}[\"”」』])|\s+(?=['‘][^'’\s][^'’]{0,38}['’](?!\w))"
)
_EN_USE = re.compile(
    rf"\b(?:(?:use[sd]?|using|chose|choose|picked|pick)\s+(?P<value>(?:[^.;?\n]|[.?](?=\S)){{1,60}}?)\s+(?:as|for)"
    rf"|(?:set|made|make|have|has|had)\s+(?P<had>[^.;!?\n]{{1,60}}?)\s+as)\s+(?:{_DETERMINER}\s+)?(?:[\w-]+\s+){{0,2}}?(?P<word>{_EN_CREDENTIAL})",
    re.I,
)
_ZH_USE = re.compile(
    rf"(?:用(?!户)|拿|以(?![前后为上下及])|把|将)\s*(?P<value>[^,，。;；！?？\n]{{1,20}}?)\s*(?:来)?(?:做|当作?|作为|作|设为|设成|设置为|设置成"
    rf"|改成|改为)了?\s*(?:我|我们|他|她|你|您)?的?\S{{0,6}}?(?P<word>{_ZH_CREDENTIAL})",
    re.I,
)
_EN_BEFORE = re.compile(
    rf"(?P<value>[^\s,.;:!?]{{1,40}}(?:\s+[^\s,.;:!?]{{1,40}}){{0,2}}?)\s+(?:is|was|will\s+be|becomes|became)\s+"
    rf"(?:{_DETERMINER})\s+(?!(?:[\w-]+\s+){{0,2}}(?:bad|good|weak|strong|common|terrible|popular|typical|great"
    rf"|safe|secure|easy|obvious|poor|awful|lousy|fine|ok|okay)\b)(?:[\w-]+\s+){{0,3}}?(?P<word>{_EN_CREDENTIAL})",
    re.I,
)
_ZH_JUDGED = re.compile(r"最|常见|常用|简单|典型|流行|危险|不安全|容易|经典|糟糕|差劲|烂|弱|强")
_ZH_BEFORE = re.compile(
    rf"(?P<value>[^\s,，。;；!！?？\n]{{1,20}})\s*(?:就|也)?是\s*(?:我|我们|他|她|你|您|家里|公司)?的?"
    rf"(?:新|旧|现在的|目前的)?\S{{0,6}}?(?P<word>{_ZH_CREDENTIAL})",
    re.I,
)


def _clause(text: str, start: int) -> int:
    """Where the clause that starts at ``start`` ends."""
    m = _CLAUSE_END.search(text, start, min(len(text), start + 120))
    return m.start() if m else min(len(text), start + 120)


_COMPOSITION = re.compile(
    r"字母|数字|符号|大写|小写|特殊字符|汉字|标点|加上?|和|与|及|混合|组合|\b(?:an?|the|mix|mixture"
    r"|combination|of|letters?|numbers?|digits?|symbols?|characters?|upper|lower|case|special|and|with|plus)\b",
    re.I,
)


def _is_value(value: str, *, zh: bool) -> bool:
    """Whether what fills a credential's place gives it, rather than saying something about it."""
    quoted = re.match(r"\s*[\"'“‘「『][^\"'”’」』]+[\"'”’」』]", value)
    value = value.strip(" \t\"'“”‘’「」『』《》()（）")
    if not value or _MASK.fullmatch(value):
        return False
    if quoted:
        return True  # a quoted value is said as one: 暗号“长江长江我是黄河”
    if _QUESTION.search(value):
        return False
    if CREDENTIAL.search(value):
        return False  # "use a password manager for my passwords": a value does not name a credential
    if _EN_NOT_VALUE.match(value) or _EN_JUDGEMENT.match(value) or _PLACED.match(value):
        return False
    if zh or re.match(r"[\u3400-\u9fff]", value):
        if _ZH_NOT_VALUE.match(value):
            return False
        if value.endswith("的") and not re.search(r"[A-Za-z\d]", value):
            return False  # "密码是公司统一设置的" describes it
    # "字母加数字的组合", "letters and numbers": what it is made of, not what it is
    return bool(_COMPOSITION.sub("", value).strip(" ,，、的了"))


def _wanted(word: str, value: str, before: str) -> bool:
    """Words with an everyday meaning name a credential only in context: a lower-case "pin" beside digits, a
    bare "combination" beside a lock or digits, "key" in a sentence about a network, "cid" beside a card."""
    bare = word.strip().lower()
    if bare in {"pin", "pins"} and word.strip() not in {"PIN", "PINs"}:
        return bool(re.search(r"\d", value))
    if bare == "key":  # "the key" is a network's only where the sentence is about one
        return bool(re.search(r"wi-?fi|wlan|wireless|network|router|hotspot|热点|无线", before[-60:], re.I))
    if bare == "cid":  # Amex's card code beside a card; "cid" alone is also a caller or case id
        near_card = re.search(r"amex|american\s+express|card|卡", before[-40:], re.I)
        return bool(near_card and re.fullmatch(r"\D{0,12}\d{3,4}\D{0,40}", value))
    if bare == "combination":
        return bool(_LOCK.search(before[-40:]) or _LOCK.search(value) or re.search(r"\d", value))
    return True


_SET_VERB = re.compile(r"\b(?:set|change[sd]?|reset|update[sd]?|switch(?:ed)?)\b", re.I)
# A credential named after its value ends the clause: "天王盖地虎是我们的口令", "sunflower is the password for
# the wifi"; "问题是密码太简单" goes on to say something about it.
_ENDS_CLAUSE = re.compile(r"\s*(?:$|[,，。;；!！.\n]|\b(?:for|on|at|of|to|now|too)\b|了|吧|啊|呢|哦)", re.I)


# A value said later in the same sentence, after a comparison or an aside: "登录密码和 QQ 一样，都是 …",
# "取款密码我设的是 …", "Wifi 密码记一下：…". There only a value that looks chosen counts.
_LATER = re.compile(
    rf"[^。.!！?？\n]{{0,40}}?(?:{_ZH_SETS}|:|=|\bis\b|输入?|\benter\b|\btype\b)\s*(?:[^\s!-~。，]{{1,12}}\s*)?"
    r"(?P<value>(?=[!-~]*(?:\d[!-~]*[A-Za-z]|[A-Za-z][!-~]*\d|[!#$%&*@^~]))[!-~]{4,}|\d{3,}(?![\d.,%]))",
    re.I,
)
# A judgement then a colon: what follows the colon is the value.
_COLON = re.compile(r"[^。.!！?？\n:]{0,60}:\s*(?P<value>[^\s,，。;；]+)")
# Advice and refusals name a value without setting it: "别把生日当密码", "never use your name as a password".
_NEGATED = re.compile(r"(?:别|不要|不能|不可|不|勿|\bnever|\bdon'?t|\bdo\s+not|\bnot)\s*$", re.I)


_ANSWERED = re.compile(r"\s*[?？]\s*(?:(?:it'?s|it\s+is|that'?s|是|就是)\s*|(?=\d(?:[\s-]?\d){2,}))", re.I)
# Personal data a credential is made from: naming it gives the credential away.
_PERSONAL = (
    r"生日|出生|学号|工号|手机号|电话|身份证|车牌|门牌|名字|姓名|拼音|纪念日|结婚|卡号|尾号|后[四六八]位|前[四六八]位"
    r"|birth(?:day|date)|phone\s+number|student\s+(?:id|number)|employee\s+(?:id|number)|name"
    r"|anniversary|licen[cs]e\s+plate|zip\s+code|last\s+(?:four|six|4|6)\s+digits"
)
_DERIVED = re.compile(
    rf"\s*[,，]?\s*(?:跟|和|与|同)(?P<source>[^，。,;；!！?？\n]{{1,20}}?(?:{_PERSONAL})[^，。,;；!！?？\n]{{0,8}}?)(?:一样|相同|一致)"
    rf"|\s*(?:is|was)\s+the\s+same\s+as\s+(?P<en>[^,.;!?\n]{{0,30}}?(?:{_PERSONAL})[^,.;!?\n]{{0,20}})",
    re.I,
)


def _forward(text: str) -> list[tuple[int, int]]:
    """The credential first: "the PIN is …", "密码：…", "口令改成了 …", "支付密码 551234"."""
    spans = []
    for m in CREDENTIAL.finditer(text):
        word, after = m.group(), m.end()
        if _META_AFTER.match(text, after):
            continue
        zh = bool(re.search(r"[\u3400-\u9fff]", word + text[after : after + 3]))
        answered = _ANSWERED.match(text, after)  # "debit card PIN? It's 0-8-1-5"
        if answered:
            end = _clause(text, answered.end())
            if _is_value(text[answered.end() : end], zh=zh):
                spans.append((answered.end(), end))
            continue
        derived = _DERIVED.match(text, after)  # "密码跟学号后六位一样": given by what it is made from
        if derived:
            group = "source" if derived.group("source") else "en"
            if not CREDENTIAL.search(derived.group(group)):
                spans.append((derived.start(group), derived.end()))
                continue
        assign = _ASSIGN.match(text, after) or _RIGHT_AFTER.match(text, after)
        if assign is None:
            later = _LATER.match(text, after)
            if later and not CREDENTIAL.search(text, after, later.start("value")):
                spans.append((later.start("value"), later.end("value")))
            continue
        if assign.group().strip().lower() == "to" and not _SET_VERB.search(
            text, max(0, m.start() - 30), m.start()
        ):
            continue  # "gave my password to my brother" does not set it
        start = assign.end()
        end = _clause(text, start)
        value = text[start:end]
        if text[end : end + 1] in {"?", "？"}:
            continue
        if _is_value(value, zh=zh) and _wanted(word, value, text[: m.start()]):
            spans.append((start, end))
            continue
        colon = _COLON.match(text, start)  # "is the same as the Wi-Fi one: harborlights"
        if (
            colon
            and _is_value(colon.group("value"), zh=zh)
            and _wanted(word, colon.group("value"), text[: m.start()])
        ):
            spans.append((colon.start("value"), colon.end("value")))
            continue
        later = _LATER.match(text, end)  # "一般是 8 位，这次是 40715523"
        if later and not CREDENTIAL.search(text, end, later.start("value")):
            spans.append((later.start("value"), later.end("value")))
    return spans


def _named_after(text: str) -> list[tuple[int, int]]:
    """The value first: "… is my PIN", "uses … as its password", "用 … 做密码", "… 是我们的口令"."""
    spans = []
    for pattern, zh in ((_EN_USE, False), (_ZH_USE, True), (_EN_BEFORE, False), (_ZH_BEFORE, True)):
        for m in pattern.finditer(text):
            group = "had" if "had" in pattern.groupindex and m.group("had") is not None else "value"
            value = m.group(group)
            if _META_AFTER.match(text, m.end()) or _QUESTION.search(
                text[m.start() : _clause(text, m.end()) + 1]
            ):
                continue
            if pattern in (_EN_BEFORE, _ZH_BEFORE) and not _ENDS_CLAUSE.match(text, m.end()):
                continue
            if pattern is _ZH_BEFORE and _ZH_JUDGED.search(text, m.end("value"), m.start("word")):
                continue  # "123456 是最常见的密码" judges an example, it sets nothing
            if _NEGATED.search(text[max(0, m.start() - 12) : m.start()]):
                continue
            if _is_value(value, zh=zh) and _wanted(m.group("word"), value, text[: m.start(group)]):
                spans.append((m.start(group), m.end(group)))
    return spans


# What opens a lock or logs someone in is its credential, named or not: "log in with admin / Falcon#92",
# "our Spotify login is fam / beats", "the padlock opens with 3-3-9", "拿 … 登录", "电子锁，开门数字是 0417".
_LOGIN = re.compile(
    r"\b(?:log(?:s|ged|ging)?[\s-]?(?:in(?:to)?|on)|sign(?:s|ed|ing)?[\s-]?in(?:to)?|login|credentials?)\b"
    r"(?:\s+(?:[\w'’.-]+\s+){0,4}?(?:is|are|with|using|as)|\s*[:=])\s*"
    r"(?P<value>[^\s,;]+\s*[/:|]\s*[^\s,;]+|(?=\S*[A-Za-z])(?=\S*\d)[^\s,;]{4,})",
    re.I,
)
_USED_FOR_LOCK = re.compile(
    r"\b(?:use[sd]?|using|chose|picked)\s+(?P<value>\d(?:[\s-]?\d){2,11})\s+(?:for|on|as)\s+(?:[\w'’-]+\s+){0,4}?"
    r"(?:garage|gate|door|lock|safe|alarm|locker|padlock|keypad|vault)s?\b",
    re.I,
)
_OPENS_WITH = re.compile(
    r"\b(?:opens?|unlocks?|opened|unlocked)\s+(?:with|using|by\s+entering|by\s+typing)\s+(?P<value>\d[\d\s-]{1,12}\d)",
    re.I,
)
# A value then what it opens: "九个八就能连上", "1234 就能开门".
_ZH_OPENS = re.compile(
    r"(?<![\w.])(?P<value>\d{3,}|(?=[!-~]*[A-Za-z])(?=[!-~]*\d)[!-~]{4,})\s*(?:就|便|才)?(?:能|可以)?"
    r"(?:连上|连接|登录|登上|解锁|打开|开门|进门|进去)"
)
_ZH_LOGS_IN = re.compile(
    r"(?:用(?!户)|拿|以(?![前后为上下及])|输入)\s*(?P<value>[^,，。;；！?？\n]{1,20}?)\s*(?:来)?(?:登录|登陆|解锁|开门|开锁|开机|付款|支付)"
)
_EN_LOGS_IN = re.compile(
    r"\b(?:use[sd]?|using|types?|typed|enters?|entered)\s+(?P<value>[^.;!?\n]{1,40}?)\s+to\s+"
    r"(?:log\s*(?:into|in|onto|on)|sign\s*in(?:to)?|unlock|open|get\s+into|access)\b",
    re.I,
)
# A value said as one: quoted, with a digit, or introduced as a word or code ("the word 'marmalade'").
_SAID_AS_VALUE = re.compile(
    r"['\"“‘][^'\"”’]+['\"”’]|\d{3,}|\bthe\s+(?:word|code|number|phrase|passcode)\s+\S", re.I
)
_LOCKED = re.compile(
    r"(?:锁|保险箱|保险柜|门禁|密码箱|警报|\bpadlock|\bkeypad|\blocker|\bsafe\b|\block\b|\balarm\b)"
    rf"(?:[^。.!！?？\n]{{0,24}}?(?:{_ZH_SETS}|:|=|\bis\b|\b(?:set|changed)\s+to\b|(?P<to>\bto\b))\s*"
    r"(?P<value>\d(?:[\s-]?\d){2,11})|\s*(?P<read>\d(?:[\s-]\d){2,11}))(?![\d.%])",
    re.I,
)


# A combination written as a lock's dial reads it, near the lock: "the padlock at 19-27-3".
_DIAL = re.compile(
    r"(?:锁|保险箱|保险柜|密码箱|\bpadlock|\blocker|\bsafe\b|\block\b)[^。.!！?？\n]{0,30}?"
    r"(?<![\d-])(?P<value>\d{1,2}(?:\s*-\s*\d{1,2}){2,3}"
    r"|(?:\d{1,2}\s*(?:left|right|clockwise|counter-?clockwise|向?[左右])\W{0,3}){3,4})(?![\d-])",
    re.I,
)
_ENTERED = re.compile(
    r"(?:输入?|键入|\benter(?:ed)?\b|\btyped?\b)(?:[^\n，。,.;]{0,12}?(?:是|为|:|\bis\b))?\s*"
    r"(?P<value>(?=\S*[A-Za-z])(?=\S*\d)[!-~]{4,}|\d(?:[\s-]?\d){3,})(?![\d.%])",
    re.I,
)
_CONNECTS = re.compile(
    r"wi-?fi|连接?|登录|登陆|解锁|开门|进门|门禁|取现|取款|付款|支付|\blog\s*in|\bsign\s*in|\bunlock|\bconnect|\bwithdraw"
    r"|\bpay|\bdoor|\bgate|\bopen(?:s|ed)?\b",
    re.I,
)


# Digits that are a code, not a count: "用 3 张卡" counts cards (a measure word follows), "用 8864" is a code.
_CODE_DIGITS = re.compile(r"(?<!\d)\d+(?!\d)(?!\s*[个张次位只条件台本把块元天年月周日号点分秒岁斤米层楼种部])")


def _access(text: str) -> list[tuple[int, int]]:
    """Spans that say what logs someone in or opens a lock."""
    spans = []
    for pattern in (_LOGIN, _OPENS_WITH, _USED_FOR_LOCK, _ZH_OPENS, _ZH_LOGS_IN, _EN_LOGS_IN, _LOCKED, _DIAL):
        for m in pattern.finditer(text):
            if _NEGATED.search(text[max(0, m.start() - 12) : m.start()]):
                continue
            if (
                "to" in pattern.groupindex
                and m.group("to")
                and not _SET_VERB.search(text, max(0, m.start() - 40), m.start())
            ):
                continue  # "set the screen lock to 2580" sets it; "walk to the lock at 1030" does not
            if pattern is _EN_LOGS_IN and not (
                _is_value(m.group("value"), zh=False) and _SAID_AS_VALUE.search(m.group("value"))
            ):
                continue
            if pattern is _ZH_LOGS_IN and not (
                _is_value(m.group("value"), zh=True) and _CODE_DIGITS.search(m.group("value"))
            ):
                continue
            group = "read" if "read" in pattern.groupindex and m.group("read") else "value"
            spans.append((m.start(group), m.end(group)))
    for m in _ENTERED.finditer(text):  # what is typed to connect or log in: "连的时候输 jiejie520"
        sentence = text[max(0, m.start() - 40) : m.end() + 20]
        if _CONNECTS.search(sentence) and not _NEGATED.search(text[max(0, m.start() - 12) : m.start()]):
            spans.append((m.start("value"), m.end("value")))
    return spans


def credential_statements(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` (already in normal form) that give a credential's value."""
    spans = _access(text)
    if not CREDENTIAL.search(text):
        return spans
    return spans + _forward(text) + _named_after(text)
