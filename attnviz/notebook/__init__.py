"""Notebook API: attnviz's figures for attention weights computed anywhere else (a Hugging
Face model with ``output_attentions=True``, a TransformerLens cache, a NumPy file), drawn
offline in Jupyter.

- ``attention``: ``normalise`` turns every accepted shape and container into one checked
  ``Attention`` record (weights (layers, H, L, S) float32, tokens, flags);
- ``views``: ``show(attention, tokens, view=...)`` -> a Plotly figure ("grid", "head",
  "model", "query", "analysis", "rollout") and ``head_table``;
- ``bertviz``: ``head_view`` and ``model_view`` with BertViz 1.4.1's arguments, so that
  ``from attnviz import notebook as bertviz`` is the only change a BertViz notebook needs;
- ``circuitsvis``: ``attention_heads``, ``attention_pattern`` and ``attention_patterns`` with
  CircuitsVis's arguments;
- ``neuron``: ``neuron_view`` (BertViz's neuron view: q, k, q∘k, q·k and the weight of one
  query) for a run, a model name or folder, or an attnviz model;
- ``save_attention`` / ``load_attention`` (safetensors or npz, never pickle), checked from the header
  against the bounds before anything is decoded: the format lives in ``attnviz.inputs.attention_file``;
- ``longcontext``: ``long_view`` (a long text's attention, every head, and a KV-cache policy);
- ``patching``: ``patch_heads``, ``patch_residual`` and ``logit_attribution``: which heads cause an
  answer, for any causal LM folder and the model Watch it learn trains;
- ``lens``: ``logit_lens`` (what each layer would predict: the logit lens in two forms, or a tuned lens),
  ``train_lens`` (a tuned lens trained here, in tuned-lens 0.2.0's format) and ``lens_view`` (the Logit lens
  page's figures: the grid, the answer through the points, a step in parts);
- ``circuits``: ``composition_scores``, ``path_patch``, ``score_attribution`` and ``circuit``: how
  heads work together and why a head attends where it does; ``edge_attribution`` (EAP, EAP-IG),
  ``circuit_faithfulness`` and ``faithfulness_curve``: which edges carry an answer; ``example_pair``:
  prompts that mean something for a model;
- ``vl``: ``vl_attention`` (a vision-language model's attention from its text to its pictures, laid out on
  each picture's patches, with each patch's box in the picture) and ``vl_view`` (one token's attention drawn
  over the picture, per head of a layer, or its share on the picture by layer and head);
- ``page``: HTML, offline: notebook outputs carry plotly.js in a session's first view only
  (``include_plotlyjs`` sends it again), returned and saved HTML is self-contained.

Messages and titles are in English: the notebook API speaks to programmers.

May import: attnviz.analysis, attnviz.i18n, attnviz.inputs, attnviz.learn (the model Watch it learn trains),
attnviz.limits, attnviz.models, attnviz.plots, attnviz.run (and numpy, torch, safetensors, plotly; IPython
when it is there, found at run time). Never a view, ``ui`` or Streamlit.
"""

from attnviz.inputs.attention_file import load_attention, save_attention  # noqa: F401
from attnviz.inputs.handover import Attention, normalise  # noqa: F401
from attnviz.notebook.bertviz import head_view, model_view  # noqa: F401
from attnviz.notebook.circuits import (  # noqa: F401
    circuit,
    circuit_faithfulness,
    circuit_view,
    composition_scores,
    edge_attribution,
    example_pair,
    faithfulness_curve,
    path_patch,
    score_attribution,
)
from attnviz.notebook.circuitsvis import attention_heads, attention_pattern, attention_patterns  # noqa: F401
from attnviz.notebook.lens import lens_view, logit_lens, train_lens  # noqa: F401
from attnviz.notebook.longcontext import long_view  # noqa: F401
from attnviz.notebook.neuron import neuron_view  # noqa: F401
from attnviz.notebook.patching import logit_attribution, patch_heads, patch_residual  # noqa: F401
from attnviz.notebook.views import VIEWS, head_table, show  # noqa: F401
from attnviz.notebook.vl import vl_attention, vl_view  # noqa: F401
from attnviz.plots.html import Rendered, include_plotlyjs, to_html  # noqa: F401
