"""Views: the one registry of pages and views (``registry``), the state a link restores
(``state``), and what turns a run and a state into a figure or a file: ``explorer``
(with ``neurons``, its neuron view),
``pages`` (every page's main figure), ``modality`` (image, audio, graph), ``generation``
(a causal LM's generated tokens), ``roles`` (head roles as every page names them),
``selection``, ``files`` and ``learn_report`` (``python -m attnviz learn``). The app's
pages and the CLI draw through here, so both show the same.

May import everything below it: ``attnviz.plots``, ``attnviz.analysis``, ``attnviz.run``,
``attnviz.settings``. Never Streamlit.
"""
