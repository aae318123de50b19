"""The core: attention itself. Masks, scaled dot-product attention with every step kept,
``MultiHeadAttention``, the devices it runs on, and the most likely next tokens under logits (``nexttoken``).

May import: attnviz.limits, attnviz.i18n. Everything else imports it.
"""
