"""简体中文 and the text alternatives: every message translated, every page in Chinese,
generated descriptions on hand-made weights, a colour-blind-safe palette."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attnviz.i18n import LANGUAGES, _, catalogue, use
from tests.support.apphelp import app, figures, more_settings, no_errors, shown

ROOT = Path(__file__).resolve().parent.parent


def source_messages() -> set[str]:
    """Every _() and N_() message in the sources, extracted the way `make i18n` does."""
    from babel.messages.extract import extract_from_dir

    with open(ROOT / "babel.cfg") as f:
        from babel.messages.frontend import parse_mapping_cfg

        method_map, options_map = parse_mapping_cfg(f)
    found = set()
    for _file, _line, message, _comments, _context in extract_from_dir(
            str(ROOT), method_map, options_map, keywords={"_": None, "N_": None}):
        found.add(message)
    return found


def test_every_message_has_a_chinese_translation():
    zh = catalogue("zh")
    messages = source_messages()
    assert len(messages) > 250
    missing = sorted(m for m in messages if not zh.get(m))
    assert not missing, f"{len(missing)} messages have no Chinese translation (run `make i18n`): {missing[:5]}"
    for m in messages:  # placeholders survive translation
        assert sorted(re.findall(r"\{\w*\}", m)) == sorted(re.findall(r"\{\w*\}", zh[m])), m


def test_the_language_is_per_context_not_global():
    with use("zh"):
        assert _("Attention explorer") == "注意力探索器"
        with use("en"):
            assert _("Attention explorer") == "Attention explorer"
    assert _("Attention explorer") == "Attention explorer"
    assert set(LANGUAGES) == {"en", "zh"}


def texts(at) -> list[str]:
    out = []
    for kind in ("title", "subheader", "caption", "markdown", "info", "warning", "error", "success"):
        out += [shown(e.value) for e in getattr(at, kind)]
    for kind in ("selectbox", "multiselect", "text_area", "text_input", "number_input", "toggle", "slider",
                 "segmented_control"):
        for w in getattr(at, kind):
            out.append(w.label)
            if w.help:
                out.append(w.help)
    for fig in figures(at):
        title = fig["layout"].get("title", {})
        out.append(title.get("text", "") if isinstance(title, dict) else "")
        out += [a.get("text", "") for a in fig["layout"].get("annotations", [])]
    return [t for t in out if t]


def untranslated(found: list[str]) -> list[str]:
    zh = catalogue("zh")
    bad = []
    for text in found:
        for m, t in zh.items():
            if not m or t == m or not re.search("[A-Za-z]{3}", m):
                continue
            literal = re.split(r"\{\w*\}", m)[0].strip()
            if text == m or (len(literal) >= 24 and literal in text):
                bad.append(f"{m!r} in {text[:60]!r}")
    return bad


PAGES = [None, "step_by_step", "mask_lab", "cross_attention", "verify", "gradients", "why_scale", "image_patches",
         "audio_frames", "graph_nodes", "qk_map"]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_in_chinese_has_no_untranslated_string(page):
    at = app("lang=zh&mask=window&window=1", page=None if page is None else f"app_pages/{page}.py", timeout=120)
    no_errors(at)
    found = texts(at)
    assert any(re.search("[\u4e00-\u9fff]", t) for t in found)  # Chinese is there
    assert not untranslated(found), untranslated(found)[:5]


def test_the_explorer_views_in_chinese():
    at = app("lang=zh&view=mask")
    for view in ("head", "query", "mean", "mask", "output", "table", "model", "analysis"):
        at.segmented_control(key="view").set_value(view).run()
        no_errors(at)
        assert not untranslated(texts(at)), (view, untranslated(texts(at))[:3])


def test_an_unknown_language_falls_back_to_english_with_an_escaped_warning():
    at = app("lang=%5Bfr%5D(http%3A%2F%2Fe.example)")
    no_errors(at)
    (w,) = at.warning
    assert "\\[fr\\]" in w.value and "using English" in shown(w.value)
    assert at.markdown[0].value.startswith("# Attention explorer")


def test_the_cli_draws_chinese_titles(tmp_path):
    from attnviz import cli
    from attnviz.cli import render as cli_render

    state = cli.state_from({"lang": "zh", "heads": 2})
    fig = cli_render.figure_for(cli.RenderJob(state, Path("x.png")))
    assert fig.layout.title.text == "每个头的注意力权重"
    assert [a.text for a in fig.layout.annotations] == ["头 0", "头 1"]


# --- text alternatives --------------------------------------------------------------------


def hand_made(weights: list[list[float]], mask: str = "none", tokens=("the", "cat", "sat")):
    w = torch.tensor(weights, dtype=torch.float32).view(1, 1, len(tokens), len(tokens))
    m = None if mask == "none" else torch.ones(len(tokens), len(tokens), dtype=torch.bool).tril()
    return SimpleNamespace(
        weights=w, tokens=[list(tokens)], source_tokens=[list(tokens)], lengths=[len(tokens)],
        source_lengths=[len(tokens)], mask=m, mask_name=mask,
        mask_matrix=lambda n: m if m is not None else torch.ones(len(tokens), len(tokens), dtype=torch.bool))


def test_a_head_is_described_by_its_strongest_real_link_and_its_mask():
    from attnviz.analysis.describe import describe_head

    r = hand_made([[1, 0, 0], [0.61, 0.39, 0], [0.2, 0.5, 0.3]], mask="causal")
    # row 0 sees one key (1.0 by definition): the strongest *open* link is “cat” → “the”
    assert describe_head(r, 0, 0) == ("Head 0: “cat” attends most to “the” (0.61). "
                                      "2 of 3 rows have keys blocked by the causal mask.")
    with use("zh"):
        assert describe_head(r, 0, 0) == "头 0：“cat” 最关注 “the”（0.61）。 3 行中有 2 行的部分键被因果掩码屏蔽。"


def test_the_grid_and_a_query_are_described():
    from attnviz.analysis.describe import describe_grid, describe_query

    r = hand_made([[0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.05, 0.9, 0.05]])
    assert describe_grid(r, 0) == ("1 heads over 3 tokens; the strongest link is in head 0: “sat” attends to “cat” "
                                   "(0.90).")
    assert describe_query(r, 0, 1) == "“cat” attends most to “sat” (0.40 on average over heads); 1 of 1 heads agree."


def test_any_figure_gets_a_generated_description():
    from attnviz import plots as F
    from attnviz.analysis.describe import describe_figure

    fig = F.token_bars(["a", "b", "c"], {"‖∂/∂V‖": np.array([0.1, 2.5, 0.3])}, "gradient per key")
    assert describe_figure(fig) == "gradient per key. 1 series; the highest value is 2.5, for ‖∂/∂V‖ at “b”."
    m = F.matrix_figure(np.array([[0.0, 3.0], [-1.0, 1.0]]), ["x", "y"], ["p", "q"], "scores")
    assert describe_figure(m) == "scores. A heatmap of 2 × 2 cells; the largest value is 3 at row “x”, column “q”."


def test_descriptions_reach_screen_readers_presenter_mode_and_the_json_export():
    import json

    from attnviz import AttentionConfig, compute
    from attnviz.views.exports import run_json

    at = app("heads=2&mask=causal")
    charts = at.get("plotly_chart")
    assert charts[0].proto.alt.startswith("2 heads over 11 tokens")
    at = app("heads=2&present=1")
    assert any(c.value.startswith("2 heads over 11 tokens") for c in at.caption)
    data = json.loads(run_json(compute(AttentionConfig(text="I love AI", num_heads=2))))
    assert data["descriptions"][0]["all_heads"].startswith("2 heads over 3 tokens")
    assert len(data["descriptions"][0]["heads"]) == 2


def test_switching_presenter_mode_on_mid_session_says_how_to_hide_the_sidebar():
    at = more_settings(app("heads=2"))  # the switch is behind More settings
    assert not any("Presenter mode is on" in i.value for i in at.info)
    at.toggle(key="present").set_value(True).run()
    assert any("Presenter mode is on" in shown(i.value) for i in at.info)


@pytest.mark.parametrize("name", __import__("attnviz.plots.style", fromlist=["COLOR_SCALES"]).COLOR_SCALES)
def test_every_offered_colour_scale_keeps_its_order_in_greyscale(name):
    """A viewer without colour (or printing in grey) still reads low → high."""
    from attnviz.plots import colorscale
    from attnviz.plots import rgb_table as _rgb

    rgb = _rgb(colorscale(name), 64).astype(float) / 255
    lum = 0.2126 * rgb[:, 0] + 0.7152 * rgb[:, 1] + 0.0722 * rgb[:, 2]  # relative luminance (sRGB weights)
    steps = np.diff(lum)
    assert (steps >= -1e-3).all() or (steps <= 1e-3).all(), name
    assert abs(lum[-1] - lum[0]) > 0.5  # and the ends are far apart


def test_the_default_scale_is_colour_blind_safe():
    from attnviz.views.state import DEFAULTS

    assert DEFAULTS.colors in ("Viridis", "Cividis")


def test_no_colour_is_one_of_streamlits_theme_placeholders():
    """Streamlit's frontend swaps "#000001"… for theme colours: Magma's "#000004" turned purple."""
    from attnviz.plots import COLOR_SCALES, DIVERGING, MASK_COLORS, colorscale

    for name in (*COLOR_SCALES, DIVERGING, "Magma"):
        for _pos, color in colorscale(name):
            assert not re.fullmatch(r"#0000[0-9a-fA-F]{2}", color), (name, color)
    assert all(not re.fullmatch(r"#0000[0-9a-fA-F]{2}", c) for _p, c in MASK_COLORS)
