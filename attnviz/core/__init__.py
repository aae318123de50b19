"""The core: attention itself. Masks, scaled dot-product attention with every step kept,
``MultiHeadAttention``, and the devices it runs on.

May import: attnviz.limits, attnviz.i18n. Everything else imports it.
"""
