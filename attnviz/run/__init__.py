"""The run: ``AttentionConfig`` (a text run's settings), ``run(input, model)`` and
``compute(config)``, and the ``AttentionResult`` record every view reads.

May import: ``attnviz.core``, ``attnviz.inputs``, ``attnviz.models``, ``settings.spec``.
"""
