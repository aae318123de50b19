import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnviz import tokenize
from attnviz.inputs.tokens import graphemes


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


def test_combining_marks_attach_and_text_is_nfc():
    assert graphemes("e\u0301") == ["\u00e9"]  # NFC: decomposed and precomposed agree
    assert tokenize("cafe\u0301", "char") == ["c", "a", "f", "\u00e9"]
    assert graphemes("q\u0307\u0323") == ["q\u0323\u0307"]  # no precomposed form: one cluster, NFC order


def test_a_joiner_before_a_space_glues_nothing():
    assert tokenize("a\u200d b c") == ["a", "b", "c"]
    with pytest.raises(ValueError, match="empty"):
        tokenize("\u200d \u200d")


def test_decomposed_korean_is_one_token_per_syllable():
    import unicodedata

    nfd = unicodedata.normalize("NFD", "한국어")
    assert len(nfd) == 8
    assert tokenize(nfd) == ["한", "국", "어"]
    assert tokenize("\u1112\u1161\u11ab", "char") == ["한"]  # jamo L+V+T: one grapheme


def test_invisible_format_characters_never_reach_a_token():
    assert tokenize("a\u200bb c\ufeff") == ["ab", "c"]
    assert tokenize("x\u00ady") == ["xy"]  # soft hyphen


def test_word_and_char_modes():
    assert tokenize("我爱人工智能 ok", "word") == ["我爱人工智能", "ok"]
    assert tokenize("I love", "char") == ["I", "l", "o", "v", "e"]


@pytest.mark.parametrize("text", ["", "   ", "\n\t ", "\u200b"])
def test_empty_text_is_rejected(text):
    with pytest.raises(ValueError, match="empty"):
        tokenize(text)


def test_cap_is_enforced_and_configurable():
    from attnviz.limits import MAX_TOKENS

    text = " ".join(["w"] * (MAX_TOKENS + 1))
    with pytest.raises(ValueError, match=f"{MAX_TOKENS + 1} tokens; the limit is {MAX_TOKENS}"):
        tokenize(text)
    assert len(tokenize(text, max_tokens=MAX_TOKENS + 10)) == MAX_TOKENS + 1
    with pytest.raises(ValueError, match="limit is 3"):
        tokenize("a b c d", max_tokens=3)


def test_unknown_mode():
    with pytest.raises(ValueError, match="auto, word, char"):
        tokenize("x", mode="bpe")


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_the_ascii_fast_path_splits_as_the_grapheme_rules_do(text):
    from attnviz.inputs.tokens import _clusters, graphemes

    assert graphemes(text) == _clusters(text)


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80), st.sampled_from(["auto", "word"]))
def test_the_ascii_word_rule_is_the_grapheme_rule(text, mode):
    from attnviz.inputs.tokens import _split, _split_graphemes

    assert _split(text, mode) == _split_graphemes(text, mode)
