"""Views: what turns a run and the state a link restores into figures, tables and captions.

- ``catalogue``: the one table of pages and views (every page, the CLI and links read it);
- the views' functions, by what they draw: ``weights`` (every head, one head, a query, the mean,
  the mask, the output, the weights table), ``layers`` (the model view, the head analysis and
  rollout, attention flow), ``roles`` (head roles as every page names them), ``contributions``
  (does the head matter: weighted value norms and knock-out), ``neurons`` (the neuron view);
- ``selection`` (the selection checked against the run), ``markdown`` (user text shown safely);
- ``state`` (``ViewState``: everything a link restores, each page's own settings nested), ``pages``
  (any page's figure and numbers for the CLI, from the module its entry in the catalogue names);
- the pages' modules, each its own settings, run, figures and record: ``explorer``, ``stepbystep``,
  ``masklab``, ``cross``, ``verify``, ``gradients``, ``whyscale``, ``modality`` (image, audio, graph),
  ``longseq``, ``attention_file``, ``qkmap``, ``learn``, ``patching`` (two prompts' activation
  patching, its sweep a background job), ``circuit``, ``longcontext``, ``lens`` (the logit lens);
  ``generation`` (a causal LM's generated tokens) and ``exports`` (CSV/JSON). The app's pages and the
  CLI draw through here, so both show the same.

May import: attnviz.analysis, attnviz.core, attnviz.i18n, attnviz.inputs, attnviz.jobs, attnviz.learn,
attnviz.limits, attnviz.models, attnviz.notebook, attnviz.plots, attnviz.run, attnviz.settings. Never Streamlit.
"""
