"""The "Watch it learn" page's settings (``Settings``; its training's are ``LearnSettings``) and figures:
the loss with its phase change, each head's scores
over the steps, every head's attention on the probe at one checkpoint (titled with its role),
one head enlarged, the Head roles table, and which heads carry the repeat (activation patching
of the trained model and of its one-layer control)."""

from __future__ import annotations

# The imports "X as X" are what the Watch it learn page reads of the library below, through this module
# (a page imports no lower floor).
import json
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from attnviz import limits
from attnviz import plots as F
from attnviz.analysis.circuit import FoundCircuit, find_circuit
from attnviz.analysis.eap import score_edges
from attnviz.analysis.examples import DEFAULT_PAIR, example_prompts
from attnviz.analysis.patching import patch, runs
from attnviz.analysis.probe import PROBE_LENGTH as PROBE_LENGTH
from attnviz.analysis.probe import PROBE_SEED as PROBE_SEED
from attnviz.analysis.probe import tiny_model_scores as tiny_model_scores
from attnviz.analysis.probe import tiny_probe, tiny_roles
from attnviz.analysis.roles import SCORES
from attnviz.analysis.subjects import TinySubject
from attnviz.i18n import N_, _
from attnviz.learn.train import LENGTH as LENGTH
from attnviz.learn.train import VOCAB as VOCAB
from attnviz.learn.train import LearnSettings as LearnSettings  # the training's settings, which the page's entry names
from attnviz.learn.train import best, phase_change, probe_batch
from attnviz.learn.train import control_of as control_of  # the page reads the trainings through this module
from attnviz.learn.train import default_trainings as default_trainings
from attnviz.learn.train import start_defaults as start_defaults
from attnviz.learn.trained import knocked_out_loss as knocked_out_loss
from attnviz.learn.trained import load_trained as load_trained
from attnviz.learn.trained import parse_sequence as parse_sequence
from attnviz.learn.trained import predict as predict
from attnviz.learn.trained import token_name
from attnviz.learn.worker import TRAININGS as TRAININGS
from attnviz.learn.worker import key_of as key_of
from attnviz.learn.worker import trained_weights
from attnviz.models.tiny import AttentionOnly
from attnviz.plots.circuit import circuit_figure, circuit_title
from attnviz.plots.patching import head_patching_figure
from attnviz.settings.spec import OWN, layer_head, setting
from attnviz.views.patching import kept_runs
from attnviz.views.roles import head_title, role_rows


def _sequence(raw: str, taken: dict) -> str:
    parse_sequence(raw, LENGTH)  # raises a readable ValueError
    return raw


@dataclass(frozen=True)
class Settings:
    """The Watch it learn page's own settings, besides its training's (``LearnSettings``)."""

    checkpoint: int = setting(-1, lo=-1, hi=limits.MAX_LEARN_STEPS // limits.LEARN_EVERY, pages=OWN,
                              label=N_("Checkpoint"), help=N_("Which checkpoint's attention to show (-1: the latest)."))
    control: bool = setting(True, pages=OWN, label=N_("Train the one-layer control alongside"),
                            help=N_("The same task with one layer of twice the heads: it cannot form an induction "
                                    "head."))
    knockout: str = setting("none", convert=layer_head("none"), pages=OWN, label=N_("Knock out a head"),
                            help=N_("none, or layer.head (for example 1.0): that head's output is set to zero."))
    # A block of 7 tokens seen once, then again up to its 6th: an induction head predicts 25.
    sequence: str = setting("BOS 8 3 17 22 5 9 12 7 20 14 25 30 5 9 12 7 20 14", convert=_sequence, pages=OWN,
                            label=N_("Your sequence"),
                            help=N_("Token numbers 3–31 (or BOS, MARK, QUERY), separated by spaces."))


CHECKPOINT_SCORES = {"prefix_matching": N_("prefix matching"), "previous_token": N_("previous token"),
                     "copying": N_("copying")}


def loss_figure(checkpoints: list[dict], control: list[dict] | None, style: F.FigureStyle) -> go.Figure:
    steps = [c["step"] for c in checkpoints]
    series = {_("loss on the repeat"): [c["loss_repeat"] for c in checkpoints],
              _("loss elsewhere"): [c["loss_other"] for c in checkpoints]}
    control_name = _("one-layer control: loss on the repeat")
    if control:
        n = len(checkpoints)
        series[control_name] = [c["loss_repeat"] for c in control[:n]] + [None] * max(0, n - len(control))
    change = phase_change(checkpoints)
    mark = None if change is None else (change["step"], _("phase change: step {s} ({t} s)").format(
        s=change["step"], t=f"{change['seconds']:.1f}"))
    return F.lines_figure(steps, series, _("loss as it learns"), style, x_title=_("step"), y_title=_("loss (nats)"),
                          log_x=False, mark=mark, dash=(control_name,))


def main_figure(state, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    """The page's first chart, for ``render --page watch-it-learn``: the loss of ``state.learn``'s training (and of
    its one-layer control where the page trains one), read from the runs folder, where the app's worker keeps them;
    trained here first where no one has (seeded, on one thread: the page's numbers)."""
    records = _records(state)
    control = records["control"]["checkpoints"] if records["control"] else None
    return loss_figure(records["training"]["checkpoints"], control, style)


def numbers(state, fmt: str, data: bytes | None = None) -> bytes:
    """Every number the loss chart draws, for ``render --page watch-it-learn --out x.json``: the training's record
    (each checkpoint's losses, head scores and attention on the probe) and its control's."""
    return json.dumps(_records(state), sort_keys=True).encode("utf-8")


def _records(state) -> dict:
    def record(settings) -> dict:
        trained_weights(settings)
        return TRAININGS.progress(key_of(settings)).record

    return {"training": record(state.learn), "control": record(control_of(state.learn)) if state.watch.control
            else None}


def scores_figure(checkpoints: list[dict], score: str, style: F.FigureStyle) -> go.Figure:
    steps = [c["step"] for c in checkpoints]
    heads = [(h["layer"], h["head"]) for h in checkpoints[0]["heads"]] if checkpoints else []
    series = {f"L{layer} H{head}": [next(h[score] for h in c["heads"] if (h["layer"], h["head"]) == (layer, head))
                                    for c in checkpoints] for layer, head in heads}
    # short: three of these stand side by side at 1366 px, and a legend already names every head
    title = _("{score} score").format(score=_(CHECKPOINT_SCORES[score]))
    return F.lines_figure(steps, series, title, style, x_title=_("step"), y_title=_("score of each head"), log_x=False)


def heads_figure(checkpoint: dict, tokens: list[int], style: F.FigureStyle, title: str | None = None,
                 roles=None) -> go.Figure:
    """Every (layer, head)'s attention on the probe at ``checkpoint``: a row per layer, each
    titled with its role where ``roles`` (layers, H) names one (``views.roles.head_title``), every
    block labelled with the probe's tokens (the grid's own plan: as many as fit)."""
    w = np.asarray(checkpoint["weights"], dtype=np.float32)  # (layers, H, L, L)
    labels = [token_name(t) for t in tokens]
    data = [F.matrix_data(w[layer, h], labels, labels, head_title(layer, h, "" if roles is None else roles[layer, h]),
                          None)
            for layer in range(w.shape[0]) for h in range(w.shape[1])]
    return F.grid_figure(data, style, title=title or _("every head on the probe at step {s}").format(
        s=checkpoint["step"]), cols=w.shape[1])


def opened_head_figure(weights: list, tokens: list[int], layer: int, head: int, role: str, style: F.FigureStyle
                ) -> go.Figure:
    """One head's attention on ``tokens``, large enough to read (``weights``: (layers, H, L, L))."""
    labels = [token_name(t) for t in tokens]
    w = np.asarray(weights, dtype=np.float32)[layer, head]  # (L, L)
    return F.heatmap_figure(F.matrix_data(w, labels, labels, _("head {head} on your sequence").format(
        head=head_title(layer, head, role)), None), style)


def roles_at(checkpoint: dict):
    """(layers, H) role names recorded at ``checkpoint``, or None (a record made before roles were)."""
    return tiny_roles(checkpoint["roles"]) if "roles" in checkpoint else None


def trained_roles_table(scores: dict) -> list[dict]:
    """A row per layer × head: its role and every score (``analysis.roles.SCORES``) on the roles probe."""
    return role_rows({c: np.asarray(scores[c]) for c in SCORES}, tiny_roles(scores))


def probe_words(vocab: int) -> str:
    """The roles probe as the page writes tokens: "BOS 27 21 …"."""
    return " ".join(token_name(t) for t in tiny_probe(vocab))


def probe_tokens(settings) -> list[int]:
    return probe_batch(settings).ids[0].tolist()


def summary(checkpoints: list[dict], control: list[dict] | None, change: dict | None, layers: int) -> str:
    """What the curves say, in one or two sentences."""
    first, last = checkpoints[0], checkpoints[-1]
    share = last["loss_repeat"] / first["loss_repeat"]
    text = (_("Phase change at step {s} ({t} s).").format(s=change["step"], t=f"{change['seconds']:.1f}")
            if change else _("No phase change yet."))
    text += " " + _("Loss on the repeat: {a} → {b} ({p} of its start); best prefix matching in the last layer {pm}, "
                    "best previous token in layer 0 {pt}.").format(
        a=f"{first['loss_repeat']:.2f}", b=f"{last['loss_repeat']:.2f}", p=f"{share:.0%}",
        pm=f"{best(last, 'prefix_matching', layers - 1):.2f}", pt=f"{best(last, 'previous_token', 0):.2f}")
    if control:
        c0, c1 = control[0], control[-1]
        text += " " + _("The one-layer control: prefix matching {pm}, loss on the repeat {p} of its start.").format(
            pm=f"{best(c1, 'prefix_matching'):.2f}", p=f"{c1['loss_repeat'] / c0['loss_repeat']:.0%}")
    return text


# Which heads carry the repeat: the Patching page's example (``attnviz.analysis.examples``), a repeat whose
# last token 8 was followed by 12 the first time, against the same tokens with that 12 and an
# earlier 28 swapped, so that the earlier copy of 8 was followed by 28.
REPEAT = {"clean": DEFAULT_PAIR["clean"], "corrupted": DEFAULT_PAIR["corrupted"], "answer": "12", "wrong": "28"}
CARRIES = 0.5  # a head carries the repeat when it alone brings back this share of the logit difference


def _kept(subject: TinySubject, key: str | None) -> dict:
    """``trace`` and ``keep`` for a trained model's prompts and sweeps: from the results cache by its
    training's ``key`` (``patching.kept_runs``), shared by this page's patching and circuit; none without one."""
    if key is None:
        return {}
    trace, keep = kept_runs(subject, ("learn", key))
    return {"trace": trace, "keep": keep}


def _patch_repeat(subject: TinySubject, key: str | None):
    kept = _kept(subject, key)
    ran = runs(subject, REPEAT["clean"], REPEAT["corrupted"], answer=REPEAT["answer"], wrong=REPEAT["wrong"],
               trace=kept.get("trace"))
    return patch(subject, REPEAT["clean"], REPEAT["corrupted"], answer=REPEAT["answer"], wrong=REPEAT["wrong"],
                 ran=ran, keep=kept.get("keep"))


def carry_repeat(model: AttentionOnly, control: AttentionOnly | None = None,
                 keys: tuple[str | None, str | None] = (None, None)) -> dict:
    """Every head of the trained ``model`` (and of its one-layer ``control``) patched from the
    repeat into the corrupted repeat. Each head's share is what it brings back of the two-layer
    model's logit difference, clean − corrupted: the difference that induction makes, the one
    yardstick for both (the control's own difference is small, and split between its heads).
    ``keys``: the two trainings' keys, under which their prompts' runs and sweeps are kept."""
    patched = {"model": _patch_repeat(TinySubject(model, "model"), keys[0])}
    if control is not None:
        patched["control"] = _patch_repeat(TinySubject(control, "control"), keys[1])
    gap = patched["model"].clean - patched["model"].corrupted
    out = {"gap": gap}
    for name, p in patched.items():
        share = (p.heads - p.corrupted) / gap if abs(gap) > 1e-9 else np.zeros_like(p.heads)  # (layers, H)
        layer, head = np.unravel_index(int(np.argmax(share)), share.shape)
        out[name] = {"clean": p.clean, "corrupted": p.corrupted, "heads": p.heads, "share": share,
                     "best": (int(layer), int(head)), "best_share": float(share[layer, head]),
                     "carries": [(int(a), int(b)) for a, b in zip(*np.nonzero(share >= CARRIES), strict=True)]}
    return out


def learned_circuit(model: AttentionOnly, control: AttentionOnly | None = None,
                    keys: tuple[str | None, str | None] = (None, None)) -> dict[str, FoundCircuit]:
    """The circuit of the trained ``model`` (and of its one-layer ``control``), found by the numbers
    (``attnviz.analysis.circuit``) on the circuit's repeat pair: the clean repeat against the earlier A
    replaced (``attnviz.analysis.examples``). The control's says it has no later head to compose with.
    ``keys`` as for ``carry_repeat``: the clean repeat's run is the one the patching above made."""
    out = {}
    for name, m, key in (("model", model, keys[0]), ("control", control, keys[1])):
        if m is not None:
            subject = TinySubject(m, name)
            kept = _kept(subject, key)
            pair = example_prompts(subject, "break", trace=kept.get("trace"))
            out[name] = find_circuit(subject, pair["clean"], pair["corrupted"], answer=pair["answer"],
                                     wrong=pair["wrong"], **kept)
    return out


def learned_edges(model: AttentionOnly, found: FoundCircuit, key: str | None = None) -> dict:
    """The trained ``model``'s circuit found again by EAP-IG on the inputs (every edge scored at once,
    ``attnviz.analysis.eap``) on the pair ``found`` ran: {"top": the three edges of largest |score|,
    "key_edge": the name of the edge from the circuit's sender into the receiver through its component,
    "rank": that edge's place by |score|, from 1}."""
    subject = TinySubject(model, "model")
    kept = _kept(subject, key)
    ran = runs(subject, found.clean, found.corrupted, answer=found.answer, wrong=found.wrong, trace=kept.get("trace"))
    e = score_edges(subject, found.clean, found.corrupted, answer=found.answer, wrong=found.wrong,
                    method="eap-ig-inputs", ran=ran)
    out = {"top": e.top(3), "key_edge": None, "rank": None}
    if found.receiver is not None:
        (s, h), (r, g) = found.sender, found.receiver
        out["key_edge"] = f"a{s}.h{h}->a{r}.h{g}<{found.through}>"
        out["rank"] = e.ranked().index(out["key_edge"]) + 1
    return out


def edges_summary(edges: dict) -> str:
    """EAP-IG's view of the circuit, in a sentence."""
    top = ", ".join(f"{n} ({v:+.2f})" for n, v in edges["top"])
    words = _("EAP-IG on the inputs scores every edge at once; its top three: {top}.").format(top=top)
    if edges["key_edge"] is not None:
        words += " " + _("The path patching's key edge, {edge}, ranks {rank} of them all.").format(
            edge=edges["key_edge"], rank=edges["rank"])
    return words


def circuit_figure_of(found: FoundCircuit, style: F.FigureStyle, threshold: float = 0.1) -> go.Figure:
    """The trained model's circuit as a graph: the paths that bring back ``threshold`` of the answer or more."""
    return circuit_figure(found.heads, found.paths, threshold, circuit_title(threshold), style)


def carry_figure(carry: dict, name: str, style: F.FigureStyle) -> go.Figure:
    title = _("the trained model's heads") if name == "model" else _("the one-layer control's heads")
    return head_patching_figure(carry[name]["share"], title, style)


def carry_summary(carry: dict) -> str:
    """Which head carries the repeat, in a sentence or two, and the control's best."""
    m = carry["model"]
    text = _("On the repeat the trained model's logit difference, 12 against 28, is {clean}; on the corrupted repeat "
             "{corrupted}.").format(clean=f"{m['clean']:.2f}", corrupted=f"{m['corrupted']:.2f}")
    if m["carries"]:
        layer, head = m["best"]
        text += " " + _("Head L{layer} H{head} carries the repeat: patched alone from the clean run, it brings back "
                        "{share} of that difference.").format(layer=layer, head=head, share=f"{m['best_share']:.0%}")
    else:
        text += " " + _("No head alone brings back half of it (the best, L{layer} H{head}, {share}).").format(
            layer=m["best"][0], head=m["best"][1], share=f"{m['best_share']:.0%}")
    c = carry.get("control")
    if c is not None:
        text += " " + _("The one-layer control (its own difference {clean} against {corrupted}): its best head, "
                        "H{head}, brings back {share} of the two-layer model's difference.").format(
            clean=f"{c['clean']:.2f}", corrupted=f"{c['corrupted']:.2f}", head=c["best"][1],
            share=f"{c['best_share']:.0%}")
    return text
