"""Example prompt pairs that mean something for the model chosen: what the Patching and Circuit
pages start from, and ``attnviz.example_pair``.

Two kinds of pair (a page's module names the one it opens with: ``EXAMPLE``):

- ``"swap"`` (for patching heads): on Watch it learn's tiny model, a repeat ``… A B … A`` (A = 8,
  B = 12) against the same with B and an earlier token swapped, so that both prompts hold the same
  tokens and only induction answers differently (the answer B against the swapped token);
- ``"break"`` (for finding the circuit): the earlier A replaced by the smallest ordinary token the
  prompt does not hold, so that nothing points back to B (the answer B against the corrupted
  prompt's own most likely next token).

Other models, for either kind:

- A tokenizer that spells common first names as one token each, its space included (GPT-2's
  byte-level BPE: "ĠMary"): the indirect-object pair of Wang et al. (2022), "When Mary and John
  went to the store, John gave a drink to" (answer " Mary" against " John") against the same with
  the second "John" changed to a third name; the names the first three of ``NAMES`` it spells so.
- Anything else: None (no pair of its tokens is known to mean something).

And one prompt for the logit lens (``example_fact``): a fact whose answer is one token, "The Eiffel Tower is
located in the city of" → " Paris", for a tokenizer that spells " Paris" as one token (SmolLM2, GPT-2), so that
the grid shows the layer where the answer arrives; the tiny model gets its swap pair's clean prompt.
"""

from __future__ import annotations

import torch

from attnviz.analysis.subjects import HFSubject, Subject, TinySubject
from attnviz.models.tiny import FIRST_TOKEN, token_name

REPEAT = "BOS 10 28 11 18 27 9 20 25 8 12 4 13 15 27 9 20 25 8"
SWAPPED = "BOS 10 12 11 18 27 9 20 25 8 28 4 13 15 27 9 20 25 8"  # the 12 after the earlier 8 and the 28 swapped
EARLIER_A = 9  # the position of the earlier copy of the repeat's last token
NAMES = ("Mary", "John", "Tom", "James", "Anna", "Paul", "Sarah", "David", "Alice", "Bob", "Mark", "Lisa")
# The Patching page's default pair, the tiny model's (the settings' defaults: attnviz.views.state)
DEFAULT_PAIR = {"clean": REPEAT, "corrupted": SWAPPED, "answer": "12", "wrong": "28"}
IOI = "When {a} and {b} went to the store, {c} gave a drink to"
KINDS = ("swap", "break")
FACT, FACT_ANSWER = "The Eiffel Tower is located in the city of", "Paris"


def _tiny(subject: TinySubject, kind: str, trace=None) -> dict:
    if kind == "swap":
        return dict(DEFAULT_PAIR)
    words = REPEAT.split()
    held = {subject.token(w, "token") for w in words}
    spare = next(t for t in range(FIRST_TOKEN, subject.vocabulary) if t not in held)
    words[EARLIER_A] = token_name(spare)
    corrupted = " ".join(words)
    ids = subject.ids(corrupted)
    run = trace(ids) if trace is not None else subject.stack.run(torch.tensor([ids]))
    logits = run.logits[0].clone()  # (V,): a copy, as a kept run is shared
    logits[subject.token("12", "answer")] = float("-inf")
    return {"clean": REPEAT, "corrupted": corrupted, "answer": "12", "wrong": token_name(int(logits.argmax()))}


def _names(subject: HFSubject) -> list[str] | None:
    """The first three of ``NAMES`` the tokenizer spells as one token with its space, as it spells them."""
    tok = subject.hf.tokenizer
    found = []
    for name in NAMES:
        ids = tok(" " + name, add_special_tokens=False)["input_ids"]
        if len(ids) == 1 and tok.convert_ids_to_tokens(ids)[0] not in (name, tok.unk_token):
            found.append((name, tok.convert_ids_to_tokens(ids)[0]))
        if len(found) == 3:
            return found
    return None


def example_fact(subject: Subject) -> dict | None:
    """{"text", "answer"}: the fact the Logit lens opens on (see the module doc), or the swap pair's clean prompt
    and answer (the tiny model); None where neither means something for ``subject``."""
    if isinstance(subject, HFSubject):
        tok = subject.hf.tokenizer
        ids = tok(" " + FACT_ANSWER, add_special_tokens=False)["input_ids"]
        if len(ids) == 1 and tok.convert_ids_to_tokens(ids)[0] != tok.unk_token:
            return {"text": FACT, "answer": tok.convert_ids_to_tokens(ids)[0], "wrong": ""}
    pair = example_prompts(subject, "swap")
    return None if pair is None else {"text": pair["clean"], "answer": pair["answer"], "wrong": pair["wrong"]}


def example_prompts(subject: Subject, kind: str = "swap", trace=None) -> dict | None:
    """{"clean", "corrupted", "answer", "wrong"} of ``kind`` ("swap" or "break") for ``subject``, or None
    where no pair is known to mean something for it (see the module doc). ``trace(ids)``: where a
    prompt's run comes from (the app's kept runs; by default the model now)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}.")
    if isinstance(subject, TinySubject):
        return _tiny(subject, kind, trace)
    names = _names(subject) if isinstance(subject, HFSubject) else None
    if names is None:
        return None
    (a, a_token), (b, b_token), (c, _c) = names
    return {"clean": IOI.format(a=a, b=b, c=b), "corrupted": IOI.format(a=a, b=b, c=c), "answer": a_token,
            "wrong": b_token}
