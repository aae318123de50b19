"""Watch attention learn: a tiny attention-only model (``attnviz.models.tiny``) trained on
a task (``tasks``) in front of the class (``train``), in a worker process shared by every
session that asks for the same settings (``worker``).

May import: ``attnviz.core``, ``attnviz.models``, ``attnviz.analysis``, ``limits``, ``i18n``.
"""
