"""A circuit found by the numbers: which head carries the answer, which earlier head feeds it and
through what, and why it attends where it does (Watch it learn's "the circuit, found by the
numbers", the Circuit page's summary).

1. Every head patched (``patching``): the **receiver** is the head of a layer after the first that
   brings back the most of the metric (normalised: (patched − corrupted) / (clean − corrupted)).
2. Every path into it patched, through its query, key and value (``pathpatch``): the **sender** is
   the head whose path brings back the most, and its component the one it goes through.
3. The cell the receiver attends to most from the last position, on the clean prompt, split into
   terms (``scoreattr``): the key part whose terms, summed over the query parts, are the largest.

On the tiny model's repeat ``… A B … A`` against the earlier A replaced, that is the induction
circuit: the induction head in layer 1 reads a previous-token head of layer 0 through its keys,
and attends to B because that head wrote "A came before me" there. A model of one layer has no
later head to compose with: it says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attnviz.analysis.patching import patch, runs
from attnviz.analysis.pathpatch import COMPONENTS, path_patching
from attnviz.analysis.scoreattr import attribute_score, key_side
from attnviz.analysis.subjects import Subject


def sweep_tokens(layers: int, heads: int, tokens: int) -> int:
    """The tokens of patched runs (rows × prompt tokens) ``find_circuit`` takes: every head, then every path
    from a head into each head of a later layer through q, k and v."""
    paths = 3 * heads * heads * layers * (layers - 1) // 2
    return (layers * heads + paths) * tokens


ONE_LAYER = ("{model} has one layer: its heads have no later head to compose with, so there is no circuit of heads to "
             "find, only each head's own effect on the answer.")


@dataclass
class FoundCircuit:
    """What ``find_circuit`` found (see the module doc); shares are normalised metrics."""

    model: str
    clean: str
    corrupted: str
    answer: str
    wrong: str | None
    heads: np.ndarray  # (layers, H): each head patched
    paths: dict[str, np.ndarray] = field(default_factory=dict)  # component -> (layers, H, layers, H), NaN: no path
    receiver: tuple[int, int] | None = None
    sender: tuple[int, int] | None = None
    through: str | None = None  # the component of the sender's path
    attended: int | None = None  # the key position the receiver attends to most from the last position
    key_part: str | None = None  # the key part that most raises that cell's score
    message: str = ""

    def into(self, component: str) -> np.ndarray:
        """(layers, H): every path into the receiver through ``component``, NaN where there is none."""
        layer, head = self.receiver
        return self.paths[component][:, :, layer, head]

    def to_dict(self) -> dict:
        def plain(a):
            return [plain(x) for x in a] if isinstance(a, np.ndarray) and a.ndim else (
                None if np.isnan(a) else float(a))
        return {"model": self.model, "clean": self.clean, "corrupted": self.corrupted, "answer": self.answer,
                "wrong": self.wrong, "heads": plain(self.heads), "paths": {c: plain(v) for c, v in self.paths.items()},
                "receiver": self.receiver, "sender": self.sender, "through": self.through,
                "attended": self.attended, "key_part": self.key_part, "message": self.message}


def find_circuit(subject: Subject, clean, corrupted, *, answer, wrong=None, progress=None, step=None,
                 trace=None, keep=None) -> FoundCircuit:
    """The circuit of ``subject`` between two prompts, found by the numbers (see the module doc);
    ``step`` runs each batch of patched runs, ``trace(ids)`` gives a prompt's run (``patching.runs``),
    ``keep(key, sweep)`` where the head sweep is kept (``patching.patch``: the Patching page's too)."""
    ran = runs(subject, clean, corrupted, answer=answer, wrong=wrong, trace=trace)
    p = patch(subject, clean, corrupted, answer=answer, wrong=wrong, ran=ran, step=step, keep=keep)
    heads = p.normalised(p.heads)  # (layers, H)
    found = FoundCircuit(subject.name, str(clean), str(corrupted), p.answer, p.wrong, heads)
    if subject.stack.layers < 2:
        found.message = ONE_LAYER.format(model=subject.name)
        return found
    for i, c in enumerate(COMPONENTS):
        report = None if progress is None else (lambda f, i=i: progress((i + f) / len(COMPONENTS)))
        found.paths[c] = path_patching(subject, clean, corrupted, answer=answer, wrong=wrong, component=c,
                                       progress=report, step=step, ran=ran).normalised()
    layer, head = np.unravel_index(int(np.argmax(heads[1:])), heads[1:].shape)
    found.receiver = (int(layer) + 1, int(head))
    best = {c: np.nanmax(found.into(c)) for c in COMPONENTS}
    found.through = max(COMPONENTS, key=lambda c: best[c])
    into = found.into(found.through)
    s, h = np.unravel_index(int(np.nanargmax(into)), into.shape)
    found.sender = (int(s), int(h))
    last = len(ran.clean_ids) - 1
    found.attended = int(ran.clean.weights[found.receiver[0]][0, found.receiver[1], last].argmax())
    a = attribute_score(subject, ran.clean_ids, layer=found.receiver[0], head=found.receiver[1], query=last,
                        key=found.attended, trace=lambda ids: ran.clean)  # the clean prompt's run, not again
    found.key_part = a.key_parts[int(np.argmax(key_side(a)))]
    r, snd = found.receiver, found.sender
    tokens = subject.spelled(ran.clean_ids)
    found.message = (f"L{r[0]} H{r[1]} brings back {heads[r]:.0%} of the answer. It reads L{snd[0]} H{snd[1]} through "
                     f"its {dict(q='queries', k='keys', v='values')[found.through]}: that path alone brings back "
                     f"{best[found.through]:.0%}. From the last position it attends most to “{tokens[found.attended]}” "
                     f"(position {found.attended}), and what raises that score most on the key side is "
                     f"{found.key_part.replace('H', ' H') if found.key_part.startswith('L') else found.key_part}.")
    return found
