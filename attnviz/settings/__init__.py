"""Settings declared once: ``spec`` (the declaration a dataclass field carries) and ``url``
(links <-> values, derived from the declarations).

May import: attnviz.limits, attnviz.i18n.
"""
