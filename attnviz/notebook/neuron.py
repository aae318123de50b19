"""BertViz's neuron view, offline: for one head and one query token, each key's k, the
elementwise product q∘k (a column per dimension of the head), its sum q·k, the scaled score
(plus the position bias where the model adds one, as T5 does) and the weight after softmax.
Where the model rotates q and k by position (rotary positions, as LLaMA does), the q and k
shown are the rotated ones, which its scores use; the title says so.

BertViz's ``neuron_view.show(model, model_type, tokenizer, sentence_a, sentence_b=None,
display_mode='dark', layer=None, head=None, html_action='view')`` needs its own patched
model classes (``bertviz.transformers_neuron_view``) that return q and k. attnviz's models
give them already, so ``neuron_view`` takes what attnviz runs:

- a run (``attnviz.compute(...)``'s ``AttentionResult``), drawn as it is;
- a model name or folder as the app's model picker knows it ("random", "minilm-l6", or a
  Hugging Face folder on this machine), run on ``sentence_a``;
- a model object of attnviz's (``attnviz.models``), run on ``sentence_a``.

``model_type`` and ``tokenizer`` are accepted for BertViz's calls and not needed: a model
reads with its own tokenizer. ``sentence_b`` (BertViz's sentence pair) is refused with a
message, not silently dropped. Nothing is downloaded: a name that is not on this machine
gets the model registry's message.
"""

from __future__ import annotations

from attnviz import limits
from attnviz.analysis.contributions import neuron_row
from attnviz.notebook.bertviz import DISPLAY_MODES
from attnviz.plots import FigureStyle, escape_label
from attnviz.plots.contributions import neuron_figure
from attnviz.plots.html import Rendered, check_action, deliver
from attnviz.run.config import AttentionConfig
from attnviz.run.result import AttentionResult
from attnviz.run.run import compute, run


def _run(model_or_run, sentence_a: str | None, layer: int):
    if isinstance(model_or_run, AttentionResult):
        if sentence_a is not None:
            raise ValueError("neuron_view: a run is drawn as it is; pass a model (or its name) to run sentence_a.")
        return model_or_run
    if not sentence_a or not str(sentence_a).strip():
        raise ValueError("neuron_view: sentence_a is required to run a model.")
    if isinstance(model_or_run, str):
        return compute(AttentionConfig(text=str(sentence_a), model=model_or_run, layer=layer))
    if not hasattr(model_or_run, "read_text") or not hasattr(model_or_run, "forward"):
        raise ValueError(f"neuron_view: expected a run, a model name or an attnviz model, got "
                         f"{type(model_or_run).__name__} (a transformers model: give its folder's path).")
    inp = model_or_run.read_text([str(sentence_a)], pad_to=0, tokenize_mode="auto", positional=True,
                                 max_tokens=limits.MAX_TOKENS)
    mask = "none" if getattr(model_or_run, "honours_masks", False) else "padding"
    return run(inp, model_or_run, mask=mask, layer=layer)


def neuron_view(model_or_run, sentence_a: str | None = None, sentence_b: str | None = None, *,
                model_type: str | None = None, tokenizer=None, display_mode: str = "dark", layer: int | None = None,
                head: int | None = None, query: int | str | None = None, html_action: str = "view"):
    """BertViz's neuron view of ``head`` (default 0) at ``layer`` (default 0; a run: its own
    layer) for ``query`` (a position; default the last real token; "all": one figure per
    real token). Returns a ``Rendered`` (``html_action="return"``) or shows it in Jupyter."""
    del model_type, tokenizer  # BertViz's; a model here reads with its own tokenizer
    check_action(html_action)
    if display_mode not in DISPLAY_MODES:
        raise ValueError(f"display_mode must be 'dark' or 'light', not {display_mode!r}.")
    if sentence_b is not None:
        raise ValueError("neuron_view: sentence_b (a sentence pair) is not supported; attnviz runs one sentence.")
    result = _run(model_or_run, sentence_a, 0 if layer is None else int(layer))
    h = 0 if head is None else int(head)
    if not 0 <= h < result.heads:
        raise ValueError(f"head {h} does not exist: the layer has {result.heads} heads (0–{result.heads - 1}).")
    n, last = 0, result.lengths[0] - 1
    if query == "all":
        queries = list(range(last + 1))
    else:
        i = last if query is None else int(query)
        if not 0 <= i <= last:
            raise ValueError(f"query {i} is not a real token: choose 0–{last}.")
        queries = [i]
    style = FigureStyle(theme=DISPLAY_MODES[display_mode])
    figures = []
    for i in queries:
        try:
            r = neuron_row(result, n, h, i)
        except ValueError as e:
            raise ValueError(f"neuron_view: {e}") from None
        keys = result.source_tokens[n][: len(r.dot)]
        bias = "" if r.bias is None else " plus the position bias"
        title = (f"layer {result.layer}, head {h}, query “{escape_label(result.tokens[n][i])}” ({i}): the row of "
                 f"q∘k sums to q·k; × {r.scale:.4g}{bias} gives the score; softmax gives the weight"
                 + ("; q and k rotated by position (rotary)" if r.rotary else ""))
        figures.append(neuron_figure(r.q, r.k, r.product, r.dot, r.scaled, r.weight, r.visible, keys, title, style,
                                     bias=r.bias))
    return deliver(Rendered(figures), html_action)
