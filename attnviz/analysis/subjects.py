"""What a patching sweep runs on (``attnviz.analysis.patching``): a causal LM's stack, how it
reads prompts (texts or token ids, within its positions and ``MAX_PATCH_TOKENS``) and spells
tokens, for a transformers folder and for Watch it learn's tiny model; anything else refused
with the reason it has no next token to patch toward."""

from __future__ import annotations

import numpy as np

from attnviz import limits
from attnviz.models.door import Cap
from attnviz.models.door import open as open_model
from attnviz.models.hf import HFModel
from attnviz.models.stacks import HFStack, TinyStack
from attnviz.models.tiny import AttentionOnly, read_token, token_name

# What each use of a subject needs that another model lacks: (the reason, who needs a causal LM).
PURPOSES = {"patch": ("it has no next token to patch toward", "Patching"),
            "lens": ("it has no unembedding (no language-model head) to read its residual stream through",
                     "The logit lens")}

PATCH_BOUND = (limits.MAX_PATCH_TOKENS, "patching takes at most {n} (MAX_PATCH_TOKENS: the residual sweep runs one "
               "patched copy per token at every layer)")


class Subject:
    """A causal LM ready to be patched: its stack, and how it reads prompts and spells tokens."""

    name: str
    stack: object
    vocabulary: int  # how many token ids there are

    def ids(self, prompt, bound: tuple[int, str] = PATCH_BOUND) -> list[int]: ...

    def token(self, word: str, role: str) -> int: ...

    def spelled(self, ids: list[int]) -> list[str]: ...


def _within(n: int, positions: int, name: str, bound: tuple[int, str] = PATCH_BOUND) -> None:
    """A prompt of ``n`` tokens fits ``name``'s positions and ``bound``: (the most tokens, the
    sentence that says why, with ``{n}`` for the number): patching's unless another is given."""
    if n > positions:
        raise ValueError(f"The prompt has {n} tokens; {name} reads at most {positions}.")
    if n > bound[0]:
        raise ValueError(f"The prompt has {n} tokens; " + bound[1].format(n=bound[0]) + ".")


class HFSubject(Subject):
    """A transformers causal LM of the registry (a folder the app lists, or a path)."""

    def __init__(self, model: HFModel) -> None:
        self.name, self.hf = model.name, model
        self.stack = HFStack(model.name, model.model, model.heads)
        cfg = model.model.config
        self.vocabulary = int(cfg.vocab_size)
        self.positions = int(getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
                             or limits.MAX_TOKENS)

    def ids(self, prompt, bound: tuple[int, str] = PATCH_BOUND) -> list[int]:
        if isinstance(prompt, str):
            ids = self.hf.tokenizer(prompt, add_special_tokens=True)["input_ids"]
        else:
            ids = [int(i) for i in prompt]
            V = self.vocabulary
            if any(not 0 <= i < V for i in ids):
                raise ValueError(f"Token ids must be in 0–{V - 1} for {self.name}.")
        if not ids:
            raise ValueError("The prompt is empty: type a few words.")
        _within(len(ids), self.positions, self.name, bound)
        return ids

    def token(self, word: str, role: str) -> int:
        tok = self.hf.tokenizer
        known = tok.convert_tokens_to_ids(word) if word else None  # one look-up (get_vocab built 49k entries: 29 ms)
        if known is not None and (known != tok.unk_token_id or word == tok.unk_token):
            return int(known)
        pieces = tok(word, add_special_tokens=False)["input_ids"] if word else []
        if pieces == [tok.unk_token_id]:  # a word the vocabulary lacks: the unknown token stands for any
            raise ValueError(f"The {role} “{word}” is not in {self.name}'s vocabulary (its tokenizer reads it as "
                             f"the unknown token {tok.unk_token}).")
        if len(pieces) == 1:
            return int(pieces[0])
        spelled = tok.convert_ids_to_tokens(pieces)
        hint = (f": its tokenizer spells it as {len(pieces)} tokens ({' '.join(spelled)}). Give one token, as the "
                f"tokenizer spells it (for example {spelled[0]})") if pieces else ""
        raise ValueError(f"The {role} “{word}” is not one token for {self.name}{hint}.")

    def spelled(self, ids: list[int]) -> list[str]:
        return self.hf.tokenizer.convert_ids_to_tokens(ids)


class TinySubject(Subject):
    """Watch it learn's attention-only model: tokens are numbers, and BOS, MARK, QUERY."""

    def __init__(self, model: AttentionOnly, name: str) -> None:
        self.name, self.model, self.vocabulary = name, model, int(model.vocab)
        self.stack = TinyStack(name, model)

    def ids(self, prompt, bound: tuple[int, str] = PATCH_BOUND) -> list[int]:
        words = prompt.replace(",", " ").split() if isinstance(prompt, str) else [str(int(i)) for i in prompt]
        if not words:
            raise ValueError("The prompt is empty: type tokens, for example BOS 5 9 12 5 9.")
        ids = [self.token(w, "token") for w in words]
        _within(len(ids), self.model.length, self.name, bound)
        return ids

    def token(self, word: str, role: str) -> int:
        w = str(word).strip()
        t = read_token(w)
        if t is not None and 0 <= t < self.model.vocab:
            return t
        raise ValueError(f"The {role} “{w[:20]}” is not one of {self.name}'s tokens: 3–{self.model.vocab - 1}, or BOS, "
                         "MARK, QUERY.")

    def spelled(self, ids: list[int]) -> list[str]:
        return [token_name(i) for i in ids]


def registry_subject(model: str, purpose: str = "patch") -> Subject:
    """A model of the registry (a name the app offers, or a folder), refused with the reason
    where it is no causal LM (``purpose``: what it is for, a key of ``PURPOSES``)."""
    handle = open_model(model)
    if handle.problem:
        raise ValueError(handle.problem)
    if not handle.can(Cap.PATCHABLE, Cap.LOADS):
        reason, who = PURPOSES[purpose]
        raise ValueError(f"{model} is {handle.what}: {reason}. {who} needs a causal language model: a GPT-2, LLaMA or "
                         "GPT-NeoX folder, a GGUF file, smollm2-135m, or watch-it-learn.")
    return HFSubject(handle.load())


def two_prompts(subject: Subject, clean, corrupted) -> tuple[list[int], list[int]]:
    """Both prompts' ids; ``ValueError`` naming both counts and where they first differ, unless equal in length."""
    a, b = subject.ids(clean), subject.ids(corrupted)
    if len(a) != len(b):
        at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        sa, sb = subject.spelled(a), subject.spelled(b)
        first = (f"“{sa[at]}” against “{sb[at]}”" if at < min(len(a), len(b)) else
                 f"where the {'corrupted' if len(a) > len(b) else 'clean'} one ends")
        raise ValueError(f"The clean prompt has {len(a)} tokens and the corrupted one {len(b)}: patching puts one "
                         f"run's activations into the other position by position, so both need as many. They first "
                         f"differ at position {at} ({first}). Clean: {_spelled_line(sa)}; corrupted: "
                         f"{_spelled_line(sb)}.")
    return a, b


def _spelled_line(tokens: list[str], most: int = 40) -> str:
    """A prompt's tokens as its tokenizer spells them, on one line (the first ``most``)."""
    return " | ".join(tokens[:most]) + (f" | … ({len(tokens) - most} more)" if len(tokens) > most else "")


def token_id(subject: Subject, token, role: str) -> int:
    """A token given as the tokenizer spells it, or as its id (an int)."""
    if isinstance(token, (int, np.integer)) and not isinstance(token, bool):
        V = subject.vocabulary
        if not 0 <= int(token) < V:
            raise ValueError(f"The {role} {int(token)} is not a token id of {subject.name}: ids are 0–{V - 1}.")
        return int(token)
    return subject.token(token, role)


def spelled_answer(subject: Subject, given, token: int) -> str:
    """How a record names an answer: as it was given, or, given as an id, as the tokenizer spells it."""
    return given if isinstance(given, str) else subject.spelled([token])[0]


def answer_ids(subject: Subject, answer, wrong) -> tuple[int, int | None]:
    """The answer's and the wrong token's ids (``None`` without a wrong token), each given as the
    tokenizer spells it or as an id; refused where they are one."""
    a = token_id(subject, answer, "answer")
    w = None if wrong is None or str(wrong).strip() == "" else token_id(subject, wrong, "wrong token")
    if w is not None and w == a:
        raise ValueError("The answer and the wrong token are the same token: their logit difference is always 0.")
    return a, w
