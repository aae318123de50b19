import pytest

from attnviz import tokenize
from attnviz.tokens import graphemes


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I love AI", ["I", "love", "AI"]),
        ("我爱人工智能", ["我", "爱", "人", "工", "智", "能"]),
        ("Hello, world!", ["Hello", ",", "world", "!"]),
        ("mixed 中文 text", ["mixed", "中", "文", "text"]),
        ("日本語のテキスト", ["日", "本", "語", "の", "テ", "キ", "ス", "ト"]),
        ("한국어 문장", ["한", "국", "어", "문", "장"]),
        ("café naïve", ["café", "naïve"]),
        ("مرحبا بالعالم", ["مرحبا", "بالعالم"]),
        ("a\x00b\tc", ["a", "b", "c"]),  # control characters separate, never reach a label
        ("wait... what?!", ["wait", ".", ".", ".", "what", "?", "!"]),
    ],
)
def test_auto_mode(text, expected):
    assert tokenize(text) == expected


def test_emoji_sequences_stay_whole():
    family = "👨\u200d👩\u200d👧"
    coder = "👩🏽\u200d💻"
    assert tokenize(f"I ❤️ {coder} and {family} in 🇯🇵") == ["I", "❤️", coder, "and", family, "in", "🇯🇵"]
    assert tokenize("👍🏻👍🏿", "char") == ["👍🏻", "👍🏿"]


def test_combining_marks_attach():
    assert graphemes("e\u0301") == ["e\u0301"]
    assert tokenize("cafe\u0301", "char") == ["c", "a", "f", "e\u0301"]


def test_word_and_char_modes():
    assert tokenize("我爱人工智能 ok", "word") == ["我爱人工智能", "ok"]
    assert tokenize("I love", "char") == ["I", "l", "o", "v", "e"]


@pytest.mark.parametrize("text", ["", "   ", "\n\t ", "\u200b"])
def test_empty_text_is_rejected(text):
    with pytest.raises(ValueError, match="empty"):
        tokenize(text)


def test_cap_is_enforced_and_configurable():
    text = " ".join(["w"] * 513)
    with pytest.raises(ValueError, match="513 tokens; the limit is 512"):
        tokenize(text)
    assert len(tokenize(text, max_tokens=600)) == 513
    with pytest.raises(ValueError, match="limit is 3"):
        tokenize("a b c d", max_tokens=3)


def test_unknown_mode():
    with pytest.raises(ValueError, match="auto, word, char"):
        tokenize("x", mode="bpe")
