"""Which heads cause an answer, from a notebook: activation patching and direct logit attribution
(``attnviz.analysis.patching``: TransformerLens's definitions), offline.

    import attnviz
    p = attnviz.patch_heads("watch-it-learn", clean, corrupted, answer="14", wrong="11")
    p.heads, p.normalised(p.heads)        # (layers, heads)
    attnviz.patch_residual(model, clean, corrupted, answer=" Paris").residual   # (layers, positions)
    attnviz.logit_attribution(model, text, answer="ĠParis", wrong="ĠRome").heads

``model``: a model name the app offers (a listed folder, "local"), a Hugging Face folder's path,
``"watch-it-learn"`` (the model Watch it learn's default training trains, trained here first where it
never was: about 15 s) or an attnviz ``AttentionOnly`` model (``attnviz.models.tiny``). ``clean``
and ``corrupted``: texts or token ids, with the same number of tokens. ``answer`` and ``wrong``: one
token each, spelled as the model's tokenizer spells it, or its id (an int).
"""

from __future__ import annotations

from attnviz.analysis.patching import Attribution, Patching, logit_attribution_of, patch
from attnviz.learn.trained import subject_of


def patch_heads(model, clean, corrupted, *, answer: str | int, wrong: str | int | None = None) -> Patching:
    """``.heads`` (layers, heads): the metric on the corrupted run with one head's output (its z,
    before W_O, at every position) from the clean run; ``.clean``, ``.corrupted``: the metric on
    each run unpatched; the metric is logit[answer] − logit[wrong] at the last position, or the
    answer's log-probability without ``wrong`` (TransformerLens's
    ``get_act_patch_attn_head_out_all_pos``)."""
    return patch(subject_of(model), clean, corrupted, answer=answer, wrong=wrong)


def patch_residual(model, clean, corrupted, *, answer: str | int, wrong: str | int | None = None) -> Patching:
    """``.residual`` (layers, positions): the metric with the residual stream into a layer, at one
    position, from the clean run (TransformerLens's ``get_act_patch_resid_pre``)."""
    return patch(subject_of(model), clean, corrupted, answer=answer, wrong=wrong, heads=False, residual=True)


def logit_attribution(model, text, *, answer: str | int, wrong: str | int | None = None) -> Attribution:
    """``.heads`` (layers, heads): each head's output at the last position, divided by the final
    norm's scale, projected onto W_U[answer] − W_U[wrong] (TransformerLens's ``apply_ln=True``);
    the other parts (``.embeddings``, ``.mlps``, ``.attention_biases``, ``.biases``) with it sum to
    ``.logit_difference``. Without ``wrong``, in TransformerLens's convention (``center_unembed``):
    onto W_U[answer] − the mean of W_U's rows, so that the parts sum to the centred logit,
    logit[answer] − the mean logit over the vocabulary (``.logit_difference``; the softmax ignores
    the mean), the model's own uncentred logit beside it (``.raw_logit``)."""
    return logit_attribution_of(subject_of(model), text, answer=answer, wrong=wrong)
