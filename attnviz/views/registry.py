"""The one list of pages and views: ``app.py`` builds its navigation from it, the CLI
takes ``--page`` and ``--view`` from it, and a link's path names a page in it."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from attnviz.i18n import N_


@dataclass(frozen=True)
class Page:
    path: str  # the URL path ("" for the explorer, the default page)
    name: str  # the page's name in links and in ``--page``
    script: str  # its file under pages/
    title: str  # marked for translation
    icon: str  # a Material icon name
    text: bool = True  # uses the sidebar's text and text-only controls
    modality: bool = False  # an image, audio or graph page (attnviz.views.modality)
    window: bool = False  # reads the sidebar's window whatever its mask (Mask lab's masks, Long sequences' patterns)
    random: bool = True  # runs the random layer's width, heads and mask (not: weights from a file, a trained model)


PAGES = (
    Page("", "explorer", "explorer.py", N_("Explorer"), "search"),
    Page("step-by-step", "step-by-step", "step_by_step.py", N_("Step by step"), "stairs"),
    Page("mask-lab", "mask-lab", "mask_lab.py", N_("Mask lab"), "grid_on", window=True),
    Page("cross-attention", "cross-attention", "cross_attention.py", N_("Cross-attention"), "swap_horiz"),
    Page("verify", "verify", "verify.py", N_("Verify against PyTorch"), "verified"),
    Page("gradients", "gradients", "gradients.py", N_("Gradients"), "trending_down"),
    Page("why-scale", "why-scale", "why_scale.py", N_("Why scale by √d_k"), "straighten"),
    Page("image-patches", "image-patches", "image_patches.py", N_("Image patches"), "image", text=False,
         modality=True),
    Page("audio-frames", "audio-frames", "audio_frames.py", N_("Audio frames"), "graphic_eq", text=False,
         modality=True),
    Page("graph-nodes", "graph-nodes", "graph_nodes.py", N_("Graph nodes"), "hub", text=False, modality=True),
    Page("long-sequences", "long-sequences", "long_sequences.py", N_("Long sequences"), "speed", window=True),
    Page("attention-file", "attention-file", "attention_file.py", N_("Your attention"), "upload_file", text=False,
         random=False),
    Page("qk-map", "qk-map", "qk_map.py", N_("Q/K map"), "scatter_plot"),
    Page("watch-it-learn", "watch-it-learn", "watch_it_learn.py", N_("Watch it learn"), "school", text=False,
         random=False),
)
PAGE_NAMES = tuple(p.name for p in PAGES)
INPUT_PAGES = tuple(p.name for p in PAGES if p.modality)  # image, audio and graph pages

VIEWS = ("grid", "head", "query", "mean", "mask", "output", "table", "model", "analysis", "roles", "flow", "norms",
         "neurons")
FIGURE_VIEWS = tuple(v for v in VIEWS if v != "table")  # views that are one figure
# The selection each view reads besides the sentence: the explorer draws only these
# widgets (the head grid, the mean and the output read neither).
VIEW_PICKS = {"head": ("head",), "table": ("head",), "mask": ("head",), "query": ("query",),
              "neurons": ("head", "query")}
VIEW_TITLES = {  # marked for translation; translated where shown
    "grid": N_("All heads"),
    "head": N_("One head"),
    "query": N_("Query focus"),
    "mean": N_("Mean over heads"),
    "mask": N_("Mask"),
    "output": N_("Output vectors"),
    "table": N_("Weights table"),
    "model": N_("Model view"),
    "analysis": N_("Head analysis"),
    "roles": N_("Head roles"),
    "flow": N_("Attention flow"),
    "norms": N_("Does the head matter"),
    "neurons": N_("Neuron view"),
}


def page(name: str) -> Page:
    return next(p for p in PAGES if p.name == name)


def page_of(url_or_path: str) -> str:
    """The page a link opens: the last path segment ("" and unknown paths: the explorer)."""
    s = url_or_path.strip()
    path = urlsplit(s).path if "://" in s or s.startswith("/") else ""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name if name in PAGE_NAMES else "explorer"
