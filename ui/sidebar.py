"""The sidebar: every control of the computation, each made from its declaration
(``ui.controls``), with the options that depend on this machine or on the run."""

from __future__ import annotations

import streamlit as st

from attnviz import cache
from attnviz.core.devices import available_devices
from attnviz.core.masks import WINDOW_KINDS
from attnviz.i18n import LANGUAGES, _, fixed
from attnviz.limits import MAX_LINES, MAX_TEXT_CHARS, MAX_TOKENS, head_choices
from attnviz.models.base import ModelError
from attnviz.models.door import Cap
from attnviz.models.door import open as open_model
from attnviz.models.registry import (
    MODEL_LABELS,
    RANDOM,
    ModelFacts,
    layer_count,
    model_facts,
)
from attnviz.views.catalogue import Page, models_for, opening_model, why_not
from attnviz.views.markdown import md
from attnviz.views.state import DEFAULTS, SETTINGS
from ui import picks
from ui.controls import MASK_NAMES, control, label_of, row
from ui.session import MORE, entered, live_names

LAID_OUT = ("lang", "text", "seq", "model", "stack", "layer", "d_model", "heads", "mask", "window", "pad_to", "device",
            "seed", "tokenize", "dropout", "projections", "positional", "colors", "present")


BEHIND_MORE = ("seed", "pad_to", "tokenize", "dropout", "projections", "positional", "colors")


# What a model's config.json says (its layers; its heads, width and mask), asked on every rerun and the same
# for every session: a few hundred bytes a model, kept in the byte-bounded cache's lookups share
# (limits.CACHE_SHARES) with the other small tables, so that the server keeps it within ATTNVIZ_CACHE_MB.
LOOKUPS = cache.named("lookups")


def _layer_count(model: str, stack: str) -> int:
    def counted() -> int:
        try:
            return layer_count(model, stack)
        except ModelError:
            return 1

    return LOOKUPS.get_or_compute(("layer-count", model, stack), counted)


def set_behind_more(ss, live=frozenset(BEHIND_MORE)) -> list[str]:
    """The settings behind "More settings" that differ from their defaults, as
    "label value" (a link's seed, an earlier change of the colour scale)."""
    out = []
    for name in BEHIND_MORE:
        if name not in live:
            continue
        default = DEFAULTS.value(name)
        value = ss.get(name, default)
        if value != default:
            shown = (_("on") if value else _("off")) if isinstance(value, bool) else str(value)
            out.append(f"{label_of(name)} {shown}")
    return out


def more_settings(sb, live=frozenset(BEHIND_MORE)) -> bool:
    """The "More settings" switch: the settings behind it are drawn only while it is on.

    Every widget is a message the server makes and sends on every run (a class joining
    at once waits for thirty runs of them), and these are the settings a lesson rarely
    changes. Closed, its own label names those that a link or an earlier change set,
    rather than their eight widgets (a class whose links each carry a seed drew all of
    them on every join) or a caption (one more message); they keep their values
    (``ui.session`` keeps every setting). The toggle's identity is its key, so a label
    that changes keeps its state.
    A new link starts with it closed; it is about the sidebar, not the view, so links do
    not carry it.
    """
    chosen = [] if st.session_state.get(MORE) else set_behind_more(st.session_state, live)
    label = _("More settings")
    if chosen:
        label += " · " + _("set: {settings}").format(settings=md(" · ".join(chosen)))
    return sb.toggle(label, key=MORE, help=_("Seed, padding, tokens, dropout, projections, positional encoding "
                                             "and the colour scale."))


def _model_facts(sb, model: str, stack: str) -> None:
    """One caption: the chosen model's layers, heads, width and mask, and why the random
    layer's settings are not drawn."""
    try:
        f = _facts(model, stack)
    except ModelError:
        return  # the page's run says what is wrong with the model
    sb.caption(_("**{model}**: {layers} layers × {heads} heads, width {width}, its own mask ({mask}). Width, heads, "
                 "mask, seed and the embedding settings belong to the random model.").format(
        model=md(model), layers=f.layers, heads=f.heads, width=f.width, mask=_(MASK_NAMES.get(f.mask, f.mask))))


def _facts(model: str, stack: str) -> ModelFacts:
    """``model_facts``, kept (a ``ModelError`` is not: the page's run says what is wrong with the model)."""
    return LOOKUPS.get_or_compute(("model-facts", model, stack), lambda: model_facts(model, stack))


def sidebar(page: Page) -> None:
    """The controls of the computation that ``page`` reads (``attnviz.views.state.reads``): a
    setting the page does not read is not drawn, and one that the current choice ignores (the
    random layer's width beside a pretrained model, the window of a mask without one) is hidden."""
    sb, ss = st.sidebar, st.session_state
    live = live_names(page.name)
    t = fixed()  # format_func runs outside this run's context in tests: bind the language now
    control("lang", sb, format_func=LANGUAGES.get)
    # In sight on every page: a lesson turns it on once (or opens a link with present=1, which also
    # closes the sidebar).
    control("present", sb)
    if "text" in live:
        control("text", sb, kind="text_area", height=110, max_chars=MAX_TEXT_CHARS,
                help_values={"lines": MAX_LINES, "tokens": MAX_TOKENS})
    lines = [ln for ln in str(ss.get("text", "")).splitlines() if ln.strip()]
    if "seq" in live and len(lines) > 1:
        if ss.get("seq", 0) >= len(lines):
            ss["seq"] = 0
        control("seq", sb, options=range(len(lines)), format_func=lambda i: f"{i + 1}: {lines[i][:40]}")
    pretrained = False
    if "model" in live:
        models = models_for(page)  # a page that patches, a long context: the models it can run
        opens = opening_model(page)
        if opens and entered() and ss.get("model") == DEFAULTS.model and "model" not in st.query_params:
            ss["model"] = opens  # its own model, opened on with no model named (another one chosen is linked)
        if ss.get("model") not in models:
            dropped, ss["model"] = ss.get("model"), models[0]
            if dropped not in (None, RANDOM):  # the default, moving between pages, goes without saying
                picks.toast(md(_("Using {used}: {model} {why}.").format(
                    model=dropped, why=_(why_not(page, dropped)), used=ss["model"])), icon=":material/swap_horiz:")
        control("model", sb, options=models, format_func=lambda m: t(MODEL_LABELS.get(m, m)))
        pretrained = ss["model"] != RANDOM and not page.reads_residual  # (a page that patches reads every layer)
        if "stack" in live and open_model(ss["model"]).can(Cap.STACKS) and page.stack is None:
            control("stack", sb)  # which of its three attentions (a page with its own stack always shows that)
        if pretrained and "layer" in live:  # the layers are the chosen model's
            layers = _layer_count(ss["model"], page.stack or
                                  ss.get("stack", "encoder"))
            if not 0 <= int(ss.get("layer", 0)) < layers:
                ss["layer"] = 0
            control("layer", sb, options=range(layers))
    random_layer = not pretrained and "d_model" in live
    if pretrained:
        # Its own heads, width and mask, in place of the random layer's settings, which do not
        # apply to it: greyed out they would show another model's values.
        _model_facts(sb, ss["model"], page.stack or ss.get("stack", "encoder"))
    elif random_layer:
        # One above the other: side by side they would need a row, one more element on every run.
        control("d_model", sb)
        control("heads", sb, options=head_choices(int(ss["d_model"])))
    if "mask" in live and not pretrained:
        control("mask", sb, format_func=lambda k: t(MASK_NAMES[k]))
    # Only a widget that can change something is drawn (each is a message on every run):
    # the window for a mask that reads it (or on a page that reads it anyway: Page.window),
    # the device where there is a choice (the explorer's caption names the device either way).
    windowed = "window" in live and (page.window or (not pretrained and ss.get("mask") in WINDOW_KINDS))
    devices = available_devices()
    labels = {d.name: d.label for d in devices}
    if "device" in live and ss.get("device") not in labels:
        ss["device"] = "cpu"
    choose_device = "device" in live and len(labels) > 1
    pair = row(sb, wrap=False) if windowed and choose_device else sb
    if windowed:
        control("window", pair)
    if choose_device:
        control("device", pair, options=list(labels), format_func=labels.get)
    if more_settings(sb, live):
        if "seed" in live and random_layer:
            control("seed", sb)
        for name in ("pad_to", "tokenize", "dropout", "projections", "positional"):
            if name in live and (random_layer or name == "pad_to"):
                control(name, sb, **({"step": 0.05} if name == "dropout" else {}))
        if "colors" in live:
            control("colors", sb)
    # A setting declared with sidebar=True that the layout above does not place yet.
    for name, entry in SETTINGS.items():
        if entry.spec.sidebar and name not in LAID_OUT and name in live:
            control(name, sb)
