"""The roles probe, with one owner: the input a model's heads are scored on for the roles a
sentence cannot show (induction, duplicate-token), run through the shared results cache and
scored with ``attnviz.analysis.roles``'s definitions.

A probe is ``PROBE_LENGTH`` seeded random tokens of the model's own vocabulary, then the same
tokens again, so that every token of the second half has an earlier copy (duplicate-token) and
a token that followed it (induction):

- for a model of the registry (the random layer, MiniLM, a Hugging Face folder): whole words
  of its tokenizer's vocabulary (``vocabulary``; the random layer, which has none, takes the
  shipped corpus's words), as a text (``probe_text``), run with the same settings as the run
  it scores (``probe_scores``);
- for Watch it learn's tiny model: BOS, then token ids (``tiny_probe``); its checkpoints
  record every score on it (``tiny_scores``), so that they can be followed as it learns.

The explorer, the attention-file page, the CLI and Watch it learn all ask here.
"""

from __future__ import annotations

import numpy as np
import torch

from attnviz import cache
from attnviz.analysis.roles import head_roles, head_scores
from attnviz.inputs.corpus import default_corpus
from attnviz.models.base import ModelError
from attnviz.models.door import open as open_model
from attnviz.models.random import RANDOM
from attnviz.models.tiny import BOS, FIRST_TOKEN, AttentionOnly
from attnviz.run.result import AttentionResult
from attnviz.run.run import RESULTS, shared_result

PROBE_LENGTH = 12  # a probe's random tokens, before they repeat
PROBE_SEED = 0


def vocabulary(model: str) -> list[str]:
    """The whole words a probe may draw from for ``model``: its tokenizer's vocabulary without
    specials and sub-word pieces (a GPT-2 "Ġword" or a SentencePiece "▁word" is the word it
    starts), or, for the tokenizer-free random layer, the words of the shipped corpus. Loads
    the model (once per process)."""
    if model == RANDOM:
        return sorted({w.lower() for line in default_corpus() for w in line.split() if w.isascii() and w.isalpha()})
    tokenizer = getattr(open_model(model).load(), "tokenizer", None)
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    words = {t.lstrip("Ġ▁") for t in vocab}
    return sorted(w for w in words if len(w) >= 3 and w.isascii() and w.isalpha() and w.islower())


def probe_text(words: list[str], length: int = PROBE_LENGTH, seed: int = PROBE_SEED) -> str:
    """A probe as text: ``length`` seeded random words of ``words``, then the same again."""
    words = sorted(set(words))
    if len(words) < 2:
        raise ValueError("This model's vocabulary has fewer than 2 whole words: no probe can be made for the roles "
                         "that need one (induction, duplicate-token).")
    pick = np.random.default_rng(seed).choice(len(words), size=length, replace=len(words) < length)
    half = [words[i] for i in pick]
    return " ".join(half + half)


def probe_ids(vocab: int, length: int, seed: int = PROBE_SEED, low: int = 0) -> list[int]:
    """Seeded random token ids in [low, vocab), ``length`` of them, then the same again."""
    if vocab - low < 2 or length < 2:
        raise ValueError("a probe needs a vocabulary of at least 2 tokens and a length of at least 2.")
    half = np.random.default_rng(seed).integers(low, vocab, size=length).tolist()
    return half + half


# --- a model of the registry ----------------------------------------------------------------


def probe_text_of(result: AttentionResult) -> str | None:
    """The probe this run's model is scored on; None where the run cannot be repeated on other
    text (weights from a file, an image, a sound, a graph) or its model has no whole words."""
    if result.config is None or result.kind != "text":
        return None
    model = result.config.model
    try:  # a folder's path and its config's time: another folder of that name is another probe
        where = None if model == RANDOM else open_model(model).key
    except ModelError:
        return None
    # Kept in the byte-bounded lookups share (limits.CACHE_SHARES): a sentence per model folder.
    return cache.named("lookups").get_or_compute(("probe-text", model, where), lambda: _text_of(model, where))


def _text_of(model: str, where) -> str | None:
    """Once per model folder: reading a tokenizer's vocabulary (30k entries for MiniLM) took
    25 ms, on every rerun of the roles view. Holds a sentence, never a run."""
    try:
        return probe_text(vocabulary(model))
    except ValueError:  # a vocabulary with no whole words, a model that cannot load: no probe
        return None


def probe_scores(result: AttentionResult) -> dict[str, np.ndarray] | None:
    """``head_scores`` of the same model and settings on its probe, every layer: the probe's
    run comes from the shared results cache (``attnviz.run.run.shared_result``), its scores are
    kept beside it. None without a probe."""
    text = probe_text_of(result)
    if text is None:
        return None
    config = result.config.with_(text=text, source="", pad_to=0)

    def scored():
        try:
            r = shared_result(config)
        except ValueError:
            return None
        k = r.lengths[0]
        return head_scores(r.layer_weights[:, 0, :, :k, :k].numpy(), r.tokens[0][:k])  # {score: (layers, H)}

    return RESULTS.get_or_compute(("probe-scores", config), scored)


# --- Watch it learn's tiny model ------------------------------------------------------------


def tiny_probe(vocab: int) -> list[int]:
    """BOS, then ``PROBE_LENGTH`` seeded random ordinary tokens, then the same tokens again."""
    return [BOS] + probe_ids(vocab, PROBE_LENGTH, PROBE_SEED, low=FIRST_TOKEN)


def tiny_weights(model: AttentionOnly) -> np.ndarray:
    """Every layer's weights on ``tiny_probe(model.vocab)``: (layers, H, L, L)."""
    with torch.no_grad():
        _logits, weights = model(torch.tensor([tiny_probe(model.vocab)]))  # [(1, H, L, L)]
    return torch.stack([w[0] for w in weights]).numpy()  # (layers, H, L, L)


def tiny_scores(weights: np.ndarray, vocab: int) -> dict[str, np.ndarray]:
    """``head_scores`` of the tiny model's ``weights`` (layers, H, L, L) on its probe."""
    return head_scores(weights, [str(t) for t in tiny_probe(vocab)])


def tiny_model_scores(model: AttentionOnly) -> dict[str, np.ndarray]:
    """``model``'s scores on its probe: {score: (layers, H)}."""
    return tiny_scores(tiny_weights(model), model.vocab)


def tiny_roles(scores: dict) -> np.ndarray:
    """(layers, H) role names ("" for none): every score, the probe's roles too, read on the probe."""
    s = {k: np.asarray(v, dtype=np.float64) for k, v in scores.items()}
    return head_roles(s, s)


def tiny_record(model: AttentionOnly) -> dict[str, list]:
    """A checkpoint's roles for its JSON record: {score: (layers, H) as lists}."""
    return {k: v.tolist() for k, v in tiny_model_scores(model).items()}
