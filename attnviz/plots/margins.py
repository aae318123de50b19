"""Room for a figure's tick labels, axis titles, colour bar and legend, reserved before Plotly draws.

Plotly's ``automargin`` (on in every template) measures the labels after drawing and,
when a margin is too small for them, draws the whole figure again. The figures start
from 10 px margins, so every heatmap was drawn twice: in Chromium the second pass was
about 40 % of a 64-token grid's draw (96 ms against 55 ms with the room reserved), on
every load and every redraw. An estimate of the room the labels need, made here from
their text, keeps the first pass the only one.

``automargin`` stays on: an estimate that falls short (a font wider than the one
assumed, a label past ``LONGEST_EM``) costs the redraw it cost before, never a clipped
label. Too generous only leaves white space; ``tests/test_margins.py`` measures what
Plotly needs in Chromium and holds the estimates between the two.

Widths are those of DejaVu Sans, the figures' font (``attnviz.plots.style.FONT_FAMILY``),
in em (× the font size in px).
"""

from __future__ import annotations

import html
import math
import unicodedata
from collections.abc import Iterable

from attnviz.plots.style import plain_label

# Labels longer than this (about 30 lowercase letters) are left to automargin: reserving
# room for one long token would squeeze every chart of its text.
LONGEST_EM = 20.0

_NARROW, _WIDE = set("ijlt.,:;'|!Ifr()[]{} "), set("mwMW@%")


def _char_em(c: str) -> float:
    if c.isascii():
        if c in _NARROW:
            return 0.4
        if c in _WIDE:
            return 1.05
        return 0.74 if c.isupper() else 0.64
    if c == "\u2212":  # the minus sign of Plotly's negative ticks
        return 0.84
    category = unicodedata.category(c)
    if category in ("Mn", "Me", "Cf"):  # combining marks, the invisible suffixes of repeated labels
        return 0.0
    if category == "So":  # emoji and other symbols
        return 1.3
    return 1.05 if unicodedata.east_asian_width(c) in ("W", "F") else 0.75


_ASCII_EM = {chr(i): _char_em(chr(i)) for i in range(128)}


def text_em(text: str) -> float:
    """Width of an (HTML-escaped) label in em. Measured each time, nothing kept: an ASCII label (a
    table's look-up a letter) takes about as long as a look-up in a cache of labels would, and a
    server keeps nothing per label it is sent."""
    text = html.unescape(text)
    if text.isascii():
        return sum(map(_ASCII_EM.__getitem__, text))
    return sum(_char_em(c) for c in text)


def labels_em(labels: Iterable[str]) -> float:
    """The widest label's width in em, at most ``LONGEST_EM``. Measured without the
    invisible suffixes that tell repeats apart (no width), so each token is measured once."""
    return min(LONGEST_EM, max((text_em(t) for t in {plain_label(t) for t in labels}), default=0.0))


_SIN45 = math.sin(math.pi / 4)


def left(labels: Iterable[str], font_size: int, *, title: bool = False) -> int:
    """A y axis on the left: its widest label, and its title beside it."""
    return math.ceil(labels_em(labels) * font_size + 14 + (font_size + 15 if title else 0))


def bottom(labels: Iterable[str], font_size: int, *, angle: int = 0, title: bool = False) -> int:
    """An x axis below the plot, labels level (angle 0), turned 45° or upright (90°), and its title."""
    line = 1.4 * font_size
    if angle == 90:  # upright: the widest label's length, and Plotly's tick padding
        labels_px = labels_em(labels) * font_size + 0.5 * font_size + 15
    else:
        labels_px = (labels_em(labels) * font_size + line) * _SIN45 + 15 if angle else 1.25 * font_size + 15
    return math.ceil(labels_px + (font_size + 15 if title else 0))


def top(labels: Iterable[str], font_size: int, title: str = "") -> int:
    """The room above a plot whose x axis is on top, its labels upright: the figure's title (each of its
    lines), the axis title, then the widest label, so that neither title runs into the other."""
    lines = 1 + title.count("<br>")
    return math.ceil(45 + lines * 1.69 * font_size + bottom(labels, font_size, angle=90, title=True))


def ticks_em(lo: float, hi: float) -> float:
    """The widest tick label of a colour bar from ``lo`` to ``hi``, in em: Plotly steps by
    1, 2 or 5 × 10ᵏ; a step of a twelfth of the range is as fine as it goes."""
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):  # flat, unknown or unbounded: 0–1
        lo, hi = 0.0, 1.0
    span = max(abs(lo), abs(hi))
    step = 10 ** math.floor(math.log10((hi - lo) / 12))
    step = next(m * step for m in (1, 2, 5, 10) if m * step >= (hi - lo) / 12)
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    widest = f"{-span if lo < 0 else span:.{decimals}f}".replace("-", "\u2212")
    return text_em(widest)


def colorbar(title: str, font_size: int, lo: float | None = 0.0, hi: float | None = 1.0) -> int:
    """A vertical colour bar on the right from ``lo`` to ``hi`` (None: unknown), titled above."""
    lo, hi = (0.0, 1.0) if lo is None or hi is None else (float(lo), float(hi))
    return math.ceil(max(82 + ticks_em(lo, hi) * font_size, text_em(title) * font_size + 58))


def legend(names: Iterable[str], font_size: int) -> int:
    """A vertical legend on the right: a swatch and the widest name."""
    return math.ceil(labels_em(names) * font_size + 74)
