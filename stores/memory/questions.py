"""How long-term memory reads a user's question: what it is about, and whether it has a subject of its own.

One reading serves three places: the interaction history keeps only questions about a subject outside the
conversation (:mod:`stores.memory.history`), recall answers a question about the user as a whole with the
user's facts rather than by relevance to nothing (:mod:`stores.memory.store`), and the offline model
answers a question about the user from memory (``models.offline.memory_intents``).

A question is read by its parts, not matched as a phrase: who it is about (the user in the first person,
unless they ask how to do something), whether its numbers are joined by an operation, whether it names
a day or a time, and what is left of it once question words, pronouns, greetings and words that only
name "what you know about me" are set aside (its topic).
"""

from __future__ import annotations

import re
import unicodedata

from stores.text_analysis import term_set, tokenize

# -- whether it asks at all -------------------------------------------------------------------------
# A question word asks wherever it stands in Chinese, with or without a mark: "我喜欢什么样的回答", "我习惯
# 用左手还是右手" ("还是" between two choices; after the subject it means "still": "我还是喜欢…"), but not
# "什么都"/"什么也" (anything) nor "哪怕" (even if). English asks with a mark or by its first word.
_ZH_ASKS = re.compile(
    r"什么(?![都也])|哪(?!怕)|谁|啥|咋|怎|多少|多久|为何|为什么|是否|"
    r"几(?=[个点号时天次岁年月周位种样])|(?<![我他她们户在实是])还是(?=.)|"
    r"([\u4e00-\u9fff])[不没]\1|吗\s*[。.!！]?\s*$|呢\s*[。.]?\s*$"  # "在下雪呢！" tells
)
_EN_ASKS = re.compile(
    r"^\W*(?:what|which|who|whom|whose|where|when|why|how|do|does|did|is|are|am|can|could|should|would|will)\b"
)


def reads_as_question(text: str) -> bool:
    """Whether a sentence asks: a question mark, a Chinese question word anywhere, or an English sentence
    opening with a question word or an auxiliary."""
    plain = _plain(text).strip()
    return "?" in plain or bool(_ZH_ASKS.search(plain) or _EN_ASKS.search(plain))


# -- who the question is about ----------------------------------------------------------------------
# The user in the first person singular ("我们" is a team or a company, a subject of its own).
# Not the one who asks for something ("告诉我…", "帮我查…", "can you tell me…"): that "me" is the requester.
_FIRST_PERSON = re.compile(
    r"(?<![给帮替让叫])(?<!告诉)我(?!们)|\b(?:i|my|mine|myself)\b|\bi'(?:m|ve|d|ll)\b|"
    r"(?<!tell )(?<!give )(?<!show )(?<!send )(?<!help )(?<!let )(?<!remind )(?<!for )\bme\b"
)
# Asking how to do something, what one may or must do: a procedure the documents may hold, not a fact
# about the user ("我该怎么申请报销？", "how do I request a laptop?", "what do I need to bring?").
_PROCEDURE = re.compile(
    r"怎么|怎样|如何|应该|应当|该(?!是)|需要|要不要|能不能|能否|可以|可不可以|可否|有没有资格|"
    r"\bhow\s+(?:do|does|can|could|should|would|must|may|might|to)\b|"
    r"\b(?:can|could|may|should|must|shall|might)\s+i\b|\b(?:need|have|has|ought|got)\s+to\b|"
    r"\bdo\s+i\s+need\b|\bam\s+i\s+(?:allowed|eligible|entitled|supposed|required|able)\b"
)
# What the user likes, does, is or has: a question about the user even when it reads like a how-to
# ("how do I usually take my coffee?", "我一般喜欢怎么安排周末？").
_SELF_STATE = re.compile(
    r"喜欢|爱(?:吃|喝|看|听|玩)|偏好|讨厌|习惯|平时|平常|通常|一般|总是|经常|最爱|"
    r"\b(?:like|likes|love|loves|prefer|prefers|enjoy|enjoys|hate|hates|favou?rite|usually|normally|"
    r"typically|always|often)\b"
)

_MEMORY = re.compile(r"记得|记住|记着|记忆|\b(?:remember|recall|memor(?:y|ies))\b")

# The assistant as the subject ("你叫什么名字？", "are you a real model?"), unless the user asks it to do
# something or asks what it knows of a subject ("你能帮我查一下…吗", "can you tell me…", "do you know how…").
_SECOND_PERSON = re.compile(r"你|您|\b(?:you|your|yours|yourself)\b")
_REQUEST = re.compile(
    r"(?:你|您)(?:能|可以|可不可以|能不能|会不会|知道|了解|清楚)?(?:帮|给|替|告诉|讲|说说|解释|介绍|查|找|列|总结|翻译)|"
    r"(?:你|您)(?:知道|了解|清楚)|"
    r"\b(?:can|could|would|will)\s+you\b|\bdo\s+you\s+know\b|\bplease\b"
)

# -- what kind of question it is --------------------------------------------------------------------
_NUMERAL = r"(?:\d+(?:[.,]\d+)*|[零〇一二两三四五六七八九十百千万亿]+)"
_CALCULATION = re.compile(
    rf"{_NUMERAL}\s*(?:[-+*/×÷^＋－＊／]|\*\*|加上?|减去?|乘以?|除以|的?(?:平方根?|立方根?|\d*次方|次幂))|"
    rf"(?:平方根|立方根|开方|百分之|根号)\s*{_NUMERAL}|{_NUMERAL}\s*(?:%|percent\b)|"
    r"\b(?:plus|minus|times|multiplied|divided|squared|cubed|square\s+root|cube\s+root|to\s+the\s+power)\b|"
    r"计算|算一下|算算|帮我算|等于|\b(?:calculate|compute|sum\s+of|product\s+of)\b"
)
_CLOCK = re.compile(
    r"今天|今日|明天|昨天|后天|前天|大后天|今晚|今早|明早|今年|明年|去年|前年|(?:上|下|这|本|下下|上上)?(?:周|星期|礼拜)[一二三四五六日天末]?|"
    r"这个月|上个月|下个月|本月|几号|几点|几月|日期|现在时间|当前时间|什么时间|钟点|现在几|"
    r"\d+\s*月\s*\d+\s*[日号]|[一二三四五六七八九十]+月[一二三四五六七八九十]+[日号]|天[后前以]|还有(?:几|多少)天|"
    r"\b(?:today|tonight|tomorrow|yesterday|date|weekday|weekend|o'clock|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday|january|february|march|april|june|july|august|september|october|"
    r"november|december|calendar|noon|midnight)\b|"
    r"\b(?:this|next|last|coming|past)\s+(?:week|month|year|weekend|monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday)\b|\bwhat\s+time\b|\btime\s+is\s+it\b|哪天|"
    r"\b(?:what|which)\s+day\b|\bday\s+(?:is\s+it|of\s+the\s+(?:week|month))\b|"
    r"\bdays?\s+(?:until|till|since|from\s+now|ago|later|before|after)\b|\d{4}-\d{1,2}-\d{1,2}|"
    r"元旦|春节|除夕|国庆|中秋|端午|清明|元宵|圣诞|距离|"
    r"\b(?:christmas|new\s+year'?s?(?:\s+day|\s+eve)?|easter|thanksgiving|halloween|until|till)\b"
)

# Words that carry no subject: question words, pronouns, greetings and small talk, and the words of a
# question about what the assistant knows of the user ("你还记得我的什么信息？", "what do you know
# about me?"). What is left of a question without them is its topic.
_NO_SUBJECT_WORDS = (
    # asking
    "什么 啥 哪些 哪个 哪儿 哪 谁 几 多少 吗 呢 吧 呀 啊 嘛 么 请问 一下 来着 知道 告诉 说说 讲讲 说 讲 问 问问 "
    "what which who whom whose where when why how many much do does did is are am was were can could should "
    "would will 多久 "
    "tell say know wonder please 做 干 帮 帮忙 能 会 help "
    # people in the conversation
    "我 你 您 自己 用户 i me my mine myself you your yours user u ur ya "
    # greetings and small talk
    "你好 您好 早上好 中午好 下午好 晚上好 早安 晚安 嗨 哈喽 哈啰 在 在吗 在不在 忙 忙吗 好 最近 怎么样 还好 "
    "谢谢 多谢 辛苦 拜拜 再见 hello hi hey hiya morning afternoon evening there up going doing good fine well "
    "around thanks thank bye goodbye cheers "
    # what the assistant holds about the user
    "还 都 些 有 对 关于 跟 和 过 了 记得 记住 记着 记 记下 存 存了 保存 了解 认识 信息 资料 事 事情 东西 情况 内容 "
    "记忆 印象 一切 全部 所有 个人 方面 "
    "remember remembered recall recalled memory memories know knew known learn learned learnt store stored "
    "save saved keep kept note noted record recorded hold held information info thing things stuff detail "
    "details fact facts data anything everything something all so far yet got have has had about abt bout on of "
    "regarding concerning me"
)


def _plain(text: str) -> str:
    return unicodedata.normalize("NFKC", text or "").lower().replace("\u2019", "'")


def topic(text: str) -> set[str]:
    """The question's subject: its terms without question words, pronouns, greetings and the words of
    "what do you know about me"."""
    return set(tokenize(text)) - term_set(_NO_SUBJECT_WORDS)


def about_user(text: str) -> bool:
    """Whether ``text`` asks about the user themselves (what they like, where they live, what they asked):
    the user in the first person, unless they ask how to do something that is not their own habit."""
    plain = _plain(text)
    if not _FIRST_PERSON.search(plain):
        return False
    return not _PROCEDURE.search(plain) or bool(_SELF_STATE.search(plain))


def about_user_life(text: str) -> bool:
    """Whether ``text`` names what the user likes, does or usually is ("我平时喜欢喝什么？", "how do I
    usually take my coffee?"): only what is kept about them can answer it."""
    plain = _plain(text)
    return bool(_FIRST_PERSON.search(plain) and _SELF_STATE.search(plain))


def about_assistant(text: str) -> bool:
    """Whether ``text`` asks about the assistant itself (its name, what it is, what it can do), not asks it
    to do something or what it knows of a subject."""
    plain = _plain(text)
    return bool(_SECOND_PERSON.search(plain)) and not _REQUEST.search(plain)


def is_calculation(text: str) -> bool:
    """Whether ``text`` asks for arithmetic: numbers joined by an operation, or a request to calculate."""
    return bool(_CALCULATION.search(_plain(text)))


def names_a_time(text: str) -> bool:
    """Whether ``text`` names a day, a date or a time of day: the clock's and calendar's questions."""
    return bool(_CLOCK.search(_plain(text)))


def is_date_question(text: str) -> bool:
    """Whether ``text`` asks about a day or a time itself ("下周三是几号？", "how many days until
    Christmas?"): it names one, and nothing but numbers is left of it without the time words. A question
    that only mentions a time ("how many vacation days carry over to next year?") has a subject of its own."""
    plain = _plain(text)
    if not _CLOCK.search(plain):
        return False
    return all(re.fullmatch(_NUMERAL, term) for term in topic(_CLOCK.sub(" ", plain)))


def about_user_as_a_whole(text: str) -> bool:
    """A question about everything known of the user ("你还记得我的什么信息？", "what do you know about
    me?"): it names the user and nothing else, so no memory is more relevant to it than another."""
    plain = _plain(text)
    names_user = _FIRST_PERSON.search(plain) or _MEMORY.search(plain)  # "what do you remember?"
    return bool(names_user) and not topic(plain) and not names_a_time(plain)
