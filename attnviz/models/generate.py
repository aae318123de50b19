"""Greedy generation with a causal LM, each new token with the attention that chose it.

Step t's token is the argmax of the logits at the last position; the attention kept for
it is that position's row (the query that produced it) over every token so far, in
every layer and head. ``transformers``' ``generate`` with its key/value cache computes
the same rows as one forward pass over the final sequence (tested).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnviz import limits


@dataclass(frozen=True)
class Generation:
    tokens: list[str]  # the context's tokens, then the generated ones
    context: int  # how many of ``tokens`` the text gave
    rows: torch.Tensor  # (n, layers, H, T): step t's query row over keys 0..context-1+t, zero beyond; T = len - 1
    probs: list[float]  # each generated token's probability under the model's raw logits

    @property
    def count(self) -> int:
        return len(self.tokens) - self.context


def chat_ids(model, question: str) -> list[int]:
    """``question`` as a user's turn in the model's own chat template, with the assistant's turn opened (its
    ``add_generation_prompt``): the ids an instruction-tuned model answers. ``ValueError`` for a tokenizer
    without a template."""
    tok = model.tokenizer
    if not getattr(tok, "chat_template", None):
        raise ValueError(f"{model.name} has no chat template: its tokenizer does not say how to ask it a question. "
                         "Turn “As a question” off to continue the sentence.")
    text = tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                   tokenize=False)
    return tok(text, add_special_tokens=False)["input_ids"]  # the template writes its own special tokens


def greedy(model, ids: list[int], n: int) -> Generation:
    """Up to ``n`` greedy tokens after ``ids`` (1 ≤ n ≤ ``limits.MAX_GENERATE``), with their
    attention; fewer when the model ends the text (its end-of-text token is the last)."""
    if not getattr(model, "causal", False):
        raise ValueError(f"{model.name} is not a causal language model: it generates no tokens.")
    if not 1 <= n <= limits.MAX_GENERATE:
        raise ValueError(f"Generate between 1 and {limits.MAX_GENERATE} tokens, not {n}.")
    cfg = model.model.config
    most = int(getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None) or limits.MAX_TOKENS)
    if len(ids) + n > most:
        raise ValueError(f"{model.name} reads at most {most} tokens: {len(ids)} + {n} generated is too many.")
    pad = model.tokenizer.pad_token_id
    if pad is None:
        pad = getattr(cfg, "eos_token_id", None) or 0
    with torch.no_grad():
        out = model.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                   max_new_tokens=n, do_sample=False, num_beams=1,
                                   output_attentions=True, output_logits=True, return_dict_in_generate=True,
                                   pad_token_id=pad)
    seq = out.sequences[0].tolist()  # context + n
    T = len(seq) - 1
    layers, H = len(out.attentions[0]), out.attentions[0][0].shape[1]
    n = len(seq) - len(ids)
    rows = torch.zeros(n, layers, H, T)
    for t, step in enumerate(out.attentions):  # step: per layer (1, H, q, keys so far)
        for layer, a in enumerate(step):
            rows[t, layer, :, : a.shape[-1]] = a[0, :, -1].float()
    probs = [float(torch.softmax(s[0].float(), -1)[seq[len(ids) + t]]) for t, s in enumerate(out.logits)]
    return Generation(model.tokenizer.convert_ids_to_tokens(seq), len(ids), rows, probs)
