"""Watch attention learn: a tiny attention-only model (``attnviz.models.tiny``) trained on
a task (``tasks``) in front of the class (``train``), in a worker process shared by every
session that asks for the same settings (``worker``); its heads' roles on a probe, as the
explorer names them (``roles``); the finished model loaded back, and the model a patching sweep names
(``trained``: ``subject_of``). A tiny vision-language model learning to look at the shape a question names
(``shapes``: the pictures and questions; ``look``: its training and where its heads look).

May import: attnviz.analysis, attnviz.cache, attnviz.core, attnviz.i18n, attnviz.jobs, attnviz.limits, attnviz.models,
attnviz.settings.
"""
