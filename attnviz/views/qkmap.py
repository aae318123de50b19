"""The Q/K map page's data: one head's map over a corpus, every head of a layer (computed in the
background by ``attnviz.analysis.qkcorpus``, shared by every session of the process), and the
explorer link of a point.

The numbers are ``attnviz.analysis.qkmap``'s and ``qkcorpus``'s, the figures ``attnviz.plots.qkmap``'s; the
page (``app_pages/qk_map.py``) arranges them, and ``python -m attnviz render --page qk-map``
writes the same record (``.json``) or figure (``.png``/``.html``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from attnviz.analysis import qkcorpus as Q
from attnviz.analysis.qkmap import DEFAULT_NORMALISATION, NORMALISATIONS, TRUST_MARGIN, trusted
from attnviz.analysis.qkmap import K_NEIGHBOURS as K_NEIGHBOURS  # the page reads these through this module
from attnviz.analysis.qkmap import trust_warning as trust_warning
from attnviz.i18n import N_, _, use
from attnviz.inputs.corpus import default_corpus
from attnviz.inputs.corpus import read_corpus as read_corpus
from attnviz.plots.qkmap import map_figure, overview_figure
from attnviz.plots.style import FigureStyle
from attnviz.settings.spec import OWN, setting

QK_METHODS = ("pca", "tsne")  # attnviz.analysis.qkmap.METHODS
QK_COLORS = ("position", "kind", "sentence")

COLOR_LABELS = {"position": N_("position in the sentence"), "kind": N_("token kind"), "sentence": N_("sentence")}
METHOD_LABELS = {"pca": N_("PCA (exact)"), "tsne": N_("t-SNE (seeded)")}
PART_LABELS = {"map": N_("one head"), "overview": N_("every head of the layer")}
NORM_LABELS = {"mips": N_("max inner product → nearest neighbour"),
               "attentionviz": N_("AttentionViz (scale, translate)")}


@dataclass(frozen=True)
class Settings:
    """The Q/K map page's own settings (the head and the layer are shared)."""

    qk_method: str = setting("pca", choices=QK_METHODS, pages=OWN, label=N_("Projection"),
                             help=N_("PCA: exact and deterministic. t-SNE: keeps neighbours together (seeded, so the "
                                     "map is stable), slower."))
    qk_norm: str = setting(DEFAULT_NORMALISATION, choices=NORMALISATIONS, pages=OWN, label=N_("Normalisation"),
                           help=N_("Before projecting. mips: each key gets one more coordinate so that, for every "
                                   "query, a nearer key has a larger dot product. attentionviz: AttentionViz's "
                                   "scaling and translation (a key of large norm can win from far away)."))
    qk_color: str = setting("position", choices=QK_COLORS, pages=OWN, label=N_("Colour by"),
                            help=N_("The token's position in its sentence, its kind (word, punctuation, special) or "
                                    "its sentence."))
    qk_part: str = setting("map", choices=("map", "overview"), pages=OWN, label=N_("Show"),
                           help=N_("One head's map, or every head of the layer as small multiples (PCA)."))


def head_record(state, lines: list[str] | None = None, progress=None) -> dict:
    """The map of ``state``'s model, layer and head over ``lines`` (default: the shipped
    corpus) by ``state.qk_map.qk_norm`` and ``state.qk_map.qk_method``, seeded by ``state.seed``."""
    lines = default_corpus() if lines is None else lines
    crun = Q.cached_corpus_run(state.config, lines, progress)
    own = state.qk_map
    return Q.head_map(crun, state.head, method=own.qk_method, seed=state.seed, normalisation=own.qk_norm)


def head_map_figure(state, style: FigureStyle, lines: list[str] | None = None):
    return map_figure(head_record(state, lines), state.qk_map.qk_color, style)


def overview_records(state, lines: list[str] | None = None, progress=None) -> list[dict]:
    lines = default_corpus() if lines is None else lines

    def part(lo, hi):
        return lambda f: progress(lo + (hi - lo) * f) if progress is not None else None

    crun = Q.cached_corpus_run(state.config, lines, part(0.0, 0.5))
    return Q.layer_overview(crun, seed=state.seed, normalisation=state.qk_map.qk_norm, progress=part(0.5, 1.0))


def untrusted_line(records: list[dict]) -> str | None:
    """One line above the overview naming the heads whose map does not follow attention
    (agreement not above the random baseline by ``TRUST_MARGIN``); None when every head's does."""
    bad = [str(rec["head"]) for rec in records if not trusted(rec)]
    if not bad:
        return None
    return _("Head(s) {heads} of {n}: agreement not above random placement by {m:.0f} points; do not read those maps "
             "as attention.").format(heads=", ".join(bad), n=len(records), m=100 * TRUST_MARGIN)


def explorer_values(record: dict, index: int, state) -> dict:
    """The settings that open point ``index``'s sentence in the explorer at the map's head,
    with that token as the query (by link name: what ``ViewState.with_`` and the session take)."""
    points = record["points"]
    if not 0 <= index < len(points):
        raise ValueError(f"Point {index} does not exist: the map has {len(points)}.")
    p = points[index]
    values = {"text": record["sentences"][p["sentence"]], "seq": 0, "head": int(record["head"]),
              "query": int(p["position"]), "view": "head", "model": state.model, "layer": int(record["layer"])}
    state.with_(**values)  # every value is one the explorer takes (raises otherwise)
    return values


def explorer_link(record: dict, index: int, state, base: str = "/") -> str:
    """The explorer's link for point ``index`` (``attnviz.settings.url``'s query string)."""
    return base + "?" + state.with_(**explorer_values(record, index, state)).query_string()


def overview_job(state, lines: list[str] | None = None):
    """The (one, shared) overview job of ``state``'s model, layer and corpus (``attnviz.jobs``)."""
    return Q.overview_in_background(state.config, default_corpus() if lines is None else lines, state.seed,
                                    state.qk_map.qk_norm)


def overview_key_of(state, lines: list[str]) -> tuple:
    return Q.overview_key(state.config, lines, state.seed, state.qk_map.qk_norm)


def qk_page_figure(state, style: FigureStyle, lines: list[str] | None = None):
    """The page's main figure for ``state.qk_map.qk_part`` (the overview computed here, in this thread)."""
    if state.qk_map.qk_part == "overview":
        return overview_figure(overview_records(state, lines), style, layer=state.layer)
    return head_map_figure(state, style, lines)


def qk_record_json(state, fmt: str, lines: list[str] | None = None) -> bytes:
    """What ``render --page qk-map --out map.json`` writes: one head's record (or, with
    ``qk_part=overview``, every head's) over ``lines`` (default: the shipped corpus), in
    the state's language."""
    if fmt != "json":
        raise ValueError("The Q/K map writes .json, .png, .svg or .html.")
    with use(state.lang):
        record = overview_records(state, lines) if state.qk_map.qk_part == "overview" else head_record(state, lines)
    return json.dumps(record, ensure_ascii=False).encode("utf-8")


def main_figure(state, style: FigureStyle, data: bytes | None = None):
    """The page's figure for the CLI (``data``: a corpus file's bytes; None: the shipped corpus)."""
    return qk_page_figure(state, style, None if data is None else read_corpus(data))


def numbers(state, fmt: str, data: bytes | None = None) -> bytes:
    return qk_record_json(state, fmt, None if data is None else read_corpus(data))
