"""Numbers computed from a run: head statistics and rollout, contributions (weighted value
norms, knock-out, the neuron view's numbers), text alternatives, the walkthrough of one
head, verification against PyTorch, gradients, the √d_k sweep, the joint map of one head's
queries and keys over a corpus (qkmap).

May import: ``attnviz.core``, ``attnviz.inputs``, ``attnviz.models``, ``attnviz.run``.
Never a figure.
"""
