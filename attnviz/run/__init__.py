"""The run: ``AttentionConfig`` (a text run's settings), ``run(input, model)`` and
``compute(config)``, and the ``AttentionResult`` record every view reads.

May import: attnviz.cache, attnviz.core, attnviz.i18n, attnviz.inputs, attnviz.limits, attnviz.models,
attnviz.settings.spec.
"""
