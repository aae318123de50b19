"""Settings declared once: ``spec`` (the declaration a dataclass field carries) and ``url``
(links <-> values, derived from the declarations). May import: ``limits``, ``i18n``.
"""
