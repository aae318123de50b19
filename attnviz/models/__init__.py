"""Models: what turns an ``Input`` into per-layer attention (``base.Model``).

``random`` (one seeded layer), ``bert`` (a BERT-family encoder run with attnviz's own
attention) and ``registry`` (which models exist here, their files, loading each once per
process). May import: ``attnviz.core``, ``attnviz.inputs``, ``limits``, ``i18n``.
"""
