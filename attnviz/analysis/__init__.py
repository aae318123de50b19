"""Numbers computed from a run: head statistics and rollout, contributions (weighted value
norms, knock-out, the neuron view's numbers), text alternatives, the walkthrough of one
head, verification against PyTorch, gradients, the √d_k sweep, the joint map of one head's
queries and keys over a corpus (qkmap).

May import: attnviz.cache, attnviz.core, attnviz.i18n, attnviz.inputs, attnviz.jobs, attnviz.limits,
attnviz.models, attnviz.run. Never a figure.
"""
