"""attnviz.inputs.corpus: the Q/K map's shipped sentences, a user's lines and their bounds."""


import numpy as np
import pytest

from attnviz import AttentionConfig, limits
from attnviz.analysis import qkcorpus as QC
from attnviz.inputs.corpus import default_corpus, read_corpus


def test_the_shipped_corpus_is_a_few_hundred_varied_sentences():
    lines = default_corpus()
    assert 200 <= len(lines) <= limits.MAX_CORPUS_LINES and len(set(lines)) == len(lines)
    cjk = [s for s in lines if any("\u3040" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff" or "\uac00" <= c <= "\ud7af"
                                   for c in s)]
    assert len(cjk) >= 20
    repeated = [s for s in lines if any(n > 1 for n in
                                        np.unique([w.strip(",.!?").lower() for w in s.split()
                                                   if w.strip(",.!?").lower() not in ("the", "a", "and")],
                                                  return_counts=True)[1])]
    assert len(repeated) >= 20
    assert max(map(len, lines)) <= limits.MAX_CORPUS_LINE_CHARS


@pytest.mark.parametrize("text, words", [
    ("\n".join(["a b"] * (limits.MAX_CORPUS_LINES + 1)), f"the limit is {limits.MAX_CORPUS_LINES}"),
    ("x" * (limits.MAX_CORPUS_LINE_CHARS + 1), f"the limit is {limits.MAX_CORPUS_LINE_CHARS} per sentence"),
    ("   \n\n ", "empty"),
    ("é" * (limits.MAX_CORPUS_BYTES // 2 + 1), "KB"),
])
def test_corpus_bounds_are_refused_with_a_message(text, words):
    with pytest.raises(ValueError, match=words):
        read_corpus(text)


def test_an_upload_must_be_utf8_and_small():
    with pytest.raises(ValueError, match="not UTF-8"):
        read_corpus(b"\xff\xfe caf\xe9")
    with pytest.raises(ValueError, match="limit"):
        read_corpus(b"a\n" * (limits.MAX_CORPUS_BYTES // 2 + 1))
    assert read_corpus("  one\ttwo \n\n three ".encode()) == ["one two", "three"]


def test_a_corpus_over_the_token_bound_is_refused(monkeypatch):
    monkeypatch.setattr(limits, "MAX_CORPUS_TOKENS", 50)
    with pytest.raises(ValueError, match="the limit is 50"):
        QC.corpus_run(AttentionConfig(), default_corpus()[:40])
