"""The explorer page through Streamlit's AppTest: controls, URL state, bad input."""

import json

import numpy as np
import pytest

from attnviz import AttentionConfig, compute
from attnviz.plots import plain_label
from tests.support.apphelp import (
    app,
    figures,
    grid_heads,
    heatmaps,
    more_settings,
    no_errors,
    open_downloads,
    warnings_shown,
    z,
)


def test_default_run_shows_the_grid_and_mirrors_the_url():
    at = app()
    no_errors(at)
    figs = figures(at)
    assert len(grid_heads(figs[0])) == 4
    assert not dict(at.query_params)  # every setting at its default: the link is the page's address alone
    assert [b.label for b in at.button] == ["Download…"] and not at.download_button  # the files wait in its dialog


def _qp(at, name):
    v = at.query_params[name]
    return v[-1] if isinstance(v, list) else v


def test_heads_control_changes_the_grid_and_the_url():
    at = app()
    at.selectbox(key="heads").set_value(8).run()
    no_errors(at)
    assert len(grid_heads(figures(at)[0])) == 8
    assert _qp(at, "heads") == "8"


def test_the_model_watch_it_learn_trains_gives_way_to_the_random_one_saying_where_it_is_drawn():
    at = app("model=watch-it-learn")
    no_errors(at)
    assert "model" not in at.query_params and len(grid_heads(figures(at)[0])) == 4  # the default: not written
    assert [t.value.replace("\\", "").replace("\u200b", "") for t in at.toast] == [  # as it reads (views.markdown)
        "Using random: watch-it-learn is drawn on Watch it learn, patched on Patching."]


def test_heads_offered_only_divide_d_model():
    at = app()
    at.selectbox(key="d_model").set_value(8).run()
    assert set(at.selectbox(key="heads").options) == {"1", "2", "4", "8"}


def test_mask_control_changes_the_weights():
    at = app("mask=none")
    w_none = z(grid_heads(figures(at)[0])[0])
    assert (w_none[np.triu_indices_from(w_none, 1)] > 0).all()
    at.selectbox(key="mask").set_value("causal").run()
    w_causal = z(grid_heads(figures(at)[0])[0])
    assert (w_causal[np.triu_indices_from(w_causal, 1)] == 0).all()


@pytest.mark.parametrize("key, value", [("seed", 3), ("window", 1), ("pad_to", 14), ("dropout", 0.3)])
def test_numeric_controls_recompute(key, value):
    at = more_settings(app("mask=window"))
    before = z(grid_heads(figures(at)[0])[0])
    widget = at.number_input(key=key) if key != "dropout" else at.slider(key=key)
    widget.set_value(value).run()
    no_errors(at)
    after = z(grid_heads(figures(at)[0])[0])
    assert before.shape != after.shape or not np.array_equal(before, after)
    assert _qp(at, key) == str(value)


def test_positional_and_tokenize_controls():
    at = more_settings(app())
    before = z(grid_heads(figures(at)[0])[0])
    at.toggle(key="positional").set_value(False).run()
    assert not np.array_equal(before, z(grid_heads(figures(at)[0])[0]))
    at.selectbox(key="tokenize").set_value("char").run()
    assert z(grid_heads(figures(at)[0])[0]).shape[0] > 20


def test_view_changes_do_not_recompute(monkeypatch):
    import attnviz.run.run as run

    calls = []
    real = run.compute
    monkeypatch.setattr(run, "compute", lambda cfg: calls.append(cfg) or real(cfg))
    run.RESULTS.clear()
    at = more_settings(app())
    assert len(calls) == 1
    at.selectbox(key="colors").set_value("Cividis").run()
    assert figures(at)[0]["layout"]["coloraxis"]["colorscale"][0][1] == "#00224e"  # Cividis
    at.segmented_control(key="view").set_value("head").run()
    at.selectbox(key="head").set_value(2).run()
    at.segmented_control(key="view").set_value("query").run()
    at.selectbox(key="query").set_value(3).run()
    at.segmented_control(key="view").set_value("mean").run()
    no_errors(at)
    assert len(calls) == 1  # only views changed
    at.number_input(key="seed").set_value(9).run()
    assert len(calls) == 2


@pytest.mark.parametrize("view, n_charts", [("head", 1), ("query", 1), ("mean", 1), ("mask", 2), ("output", 1),
                                            ("table", 0)])
def test_each_view(view, n_charts):
    """The chosen view alone, right under the selector: the grid is a view like the others."""
    at = app()
    at.segmented_control(key="view").set_value(view).run()
    no_errors(at)
    assert len(figures(at)) == n_charts
    if view in ("output", "table"):
        assert at.dataframe


def test_query_focus_uses_the_chosen_token():
    at = app("view=query&query=2&heads=2")
    fig = figures(at)[0]
    bars = [t for t in fig["data"] if t["type"] == "bar"]
    assert len(bars) == 2
    r = compute(AttentionConfig(num_heads=2, mask="causal"))
    np.testing.assert_allclose(z({"z": bars[1]["y"]}), r.weights[0, 1, 2].numpy(), atol=1e-7)


def test_the_followed_query_follows_a_new_sentence_and_stays_out_of_the_link():
    at = app("view=query&heads=2")
    assert at.selectbox(key="query").value == -1 and "query" not in at.query_params
    words = "The quick brown fox jumps over the lazy dog and runs far away"
    at.text_area(key="text").set_value(words).run()
    no_errors(at)
    r = compute(AttentionConfig(text=words, num_heads=2, mask="causal"))
    last = r.lengths[0] - 1
    title = figures(at)[0]["layout"]["title"]["text"]
    assert f"(position {last})" in title and "query" not in at.query_params  # the new sentence's last token
    bars = [t for t in figures(at)[0]["data"] if t["type"] == "bar"]
    np.testing.assert_allclose(z({"z": bars[1]["y"]}), r.weights[0, 1, last].numpy(), atol=1e-7)


def test_a_chosen_query_past_a_shorter_sentence_says_so_and_falls_back():
    at = app("view=query&heads=2&query=12&text=The+quick+brown+fox+jumps+over+the+lazy+dog+and+runs+far+away")
    assert at.selectbox(key="query").value == 12 and at.query_params["query"] == "12"  # a choice: in the link
    at.text_area(key="text").set_value("I love AI").run()
    no_errors(at)
    assert any("past the last token" in i.value for i in at.info), [i.value for i in at.info]
    assert at.selectbox(key="query").value == -1 and "query" not in at.query_params


def test_batch_selector_shows_the_chosen_sentence():
    at = app()
    at.text_area(key="text").set_value("I love AI\n我爱人工智能").run()
    no_errors(at)
    at.selectbox(key="seq").set_value(1).run()
    fig = grid_heads(figures(at)[0])[0]
    assert [plain_label(s) for s in fig["y"]] == ["我", "爱", "人", "工", "智", "能"]


def test_url_restores_the_view():
    at = app("text=I+love+AI&heads=2&d_model=32&mask=none&seed=5&view=head&head=1&colors=Magma")
    no_errors(at)
    assert not at.warning
    assert at.selectbox(key="heads").value == 2 and at.segmented_control(key="view").value == "head"
    head = figures(at)[0]
    r = compute(AttentionConfig(text="I love AI", num_heads=2, d_model=32, mask="none", seed=5))
    np.testing.assert_array_equal(z(heatmaps(head)[0]), r.weights[0, 1].numpy())


def test_a_new_link_in_the_same_session_wins_over_every_value_it_had():
    at = app("text=I+love+AI&heads=2&seed=5&view=head&head=1")
    no_errors(at)
    assert at.session_state["seed"] == 5 and at.session_state["view"] == "head"
    at.query_params.clear()
    at.query_params["text"] = "a new link"  # back/forward, or a link opened in this tab
    at.query_params["heads"] = "8"
    at.run()
    no_errors(at)
    assert at.selectbox(key="heads").value == 8 and at.text_area(key="text").value == "a new link"
    assert at.session_state["seed"] == 0 and at.session_state["view"] == "grid"  # not this session's old values
    assert "seed" not in at.query_params and _qp(at, "heads") == "8"  # the link: what differs from the defaults


@pytest.mark.parametrize(
    "query, name",
    [("heads=3", "heads"), ("device=cuda", "device"), ("mask=sideways", "mask"), ("window=-2", "window"),
     ("seed=abc", "seed"), ("text=", "text"), ("d_model=7", "d_model"), ("dropout=2", "dropout")],
)
def test_invalid_url_parameters_warn_and_fall_back(query, name):
    at = app(query)
    no_errors(at)
    assert any(f"{name}=" in w for w in warnings_shown(at)), warnings_shown(at)
    assert figures(at)  # still draws, with the default


def test_cuda_link_on_a_cpu_machine_says_so():
    from attnviz.core.devices import available_devices

    at = app("device=cuda&heads=2")
    assert any("running on cpu" in w for w in warnings_shown(at))
    assert at.session_state["device"] == "cpu"
    devices = [w for w in at.sidebar.selectbox if w.key == "device"]
    if len(available_devices()) == 1:  # no choice to make: no widget, and the caption names the device
        assert not devices
        assert "device **cpu**" in at.markdown[0].value
    else:
        assert devices[0].value == "cpu"


@pytest.mark.parametrize("mask, page, drawn", [("causal", None, False), ("window", None, True),
                                               ("causal%2Bwindow", None, True), ("none", "long_sequences", True),
                                               ("causal", "mask_lab", True), ("causal", "step_by_step", False)])
def test_the_window_is_drawn_only_where_it_changes_something(mask, page, drawn):
    at = app(f"mask={mask}&window=3&text=a+b+c+d", page=None if page is None else f"app_pages/{page}.py",
             timeout=120)
    no_errors(at)
    assert bool([w for w in at.sidebar.number_input if w.key == "window"]) is drawn
    assert _qp(at, "window") == "3"  # drawn or not, the link keeps it (the page reads it: a mask may)
    if drawn:
        at.sidebar.number_input(key="window").set_value(1).run()
        assert _qp(at, "window") == "1"


def test_the_explorer_heads_its_page_with_one_element():
    at = app("heads=2")
    no_errors(at)
    head = at.markdown[0].value
    assert head.startswith("# Attention explorer") and "softmax" in head and "camera icon" in head
    assert not at.title and not at.main.caption and not at.get("divider")


@pytest.mark.parametrize(
    "text, message",
    [("   ", "empty"), (" ".join(["w"] * 2100), "limit is 2048")],
)
def test_bad_text_gives_a_message_not_a_traceback(text, message):
    at = app()
    at.text_area(key="text").set_value(text).run()
    assert not at.exception
    assert any(message in e.value for e in at.error)


@pytest.mark.parametrize(
    "text",
    ["I ❤️ 👩🏽‍💻 code", "我爱人工智能", "مرحبا بالعالم", "<script>alert(1)</script> <b>bold</b>",
     "Pneumonoultramicroscopicsilicovolcanoconiosis" * 5, "a\x00b\x07c\x1b[31m"],
)
def test_unusual_text_draws_a_correct_figure(text):
    at = app()
    at.text_area(key="text").set_value(text).run()
    no_errors(at)
    fig = figures(at)[0]
    for t in grid_heads(fig):
        assert np.isfinite(t["z"]).all()  # only the gaps between blocks are blank
        assert not any("<" in lab or ">" in lab for lab in t["x"] + t["y"])


def test_window_larger_than_text_is_explained():
    at = app("mask=window&window=50")
    no_errors(at)
    assert any("blocks nothing" in i.value for i in at.info)


def test_presenter_mode_shows_one_large_view():
    at = app("present=1&view=mean")
    no_errors(at)
    figs = figures(at)
    assert len(figs) == 1 and figs[0]["layout"]["font"]["size"] >= 20


def test_chart_toolbar_saves_png_with_a_meaningful_name_and_downloads_exist():
    import json

    at = app("heads=2&mask=window&seed=7&view=head&head=1")
    configs = [json.loads(el.proto.config) for el in at.get("plotly_chart")]
    names = [c["toImageButtonOptions"]["filename"] for c in configs]
    assert names == ["attnviz-head-head1-window-2h-64d-seed7"]
    assert all(c["toImageButtonOptions"]["format"] == "png" for c in configs)
    at = open_downloads(at)
    no_errors(at)
    labels = [b.proto.label for b in at.download_button]
    assert labels == ["Weights (CSV)", "Run (JSON)"]
    assert all(b.proto.deferred_file_id or b.proto.url for b in at.download_button)  # data is served lazily
    assert any("camera icon" in c.value for c in at.caption)  # and the dialog says where the PNG is
    assert len(figures(at)) == 1  # the view is still drawn under the dialog


def test_the_download_dialog_opens_only_when_asked_and_not_in_presenter_mode():
    at = app("heads=2")
    assert not at.download_button
    at = open_downloads(at)
    assert len(at.download_button) == 2
    at.selectbox(key="heads").set_value(4).run()  # any other change closes it
    assert not at.download_button and [b.label for b in at.button] == ["Download…"]
    assert not app("heads=2&present=1").button  # presenter mode shows the view alone


def test_downloaded_run_and_weights_match_the_computation():
    import csv
    import io
    import json

    from attnviz.views.exports import run_json, weights_csv

    r = compute(AttentionConfig(text="I love AI\nhi", num_heads=2, mask="padding"))
    data = json.loads(run_json(r))
    assert data["tokens"] == [["I", "love", "AI"], ["hi", "[PAD]", "[PAD]"]]
    np.testing.assert_array_equal(np.array(data["weights"], dtype=np.float32), r.weights.numpy())
    np.testing.assert_array_equal(np.array(data["output"], dtype=np.float32), r.output.numpy())
    rows = list(csv.DictReader(io.StringIO(weights_csv(r))))
    assert len(rows) == 2 * 2 * 3 * 3
    row = next(x for x in rows if x["sequence"] == "1" and x["head"] == "1" and x["query_pos"] == "0"
               and x["key_pos"] == "2")
    assert row["key"] == "[PAD]" and float(row["weight"]) == 0.0


def test_a_frozen_figures_json_is_plotlys_own_and_plotly_is_left_as_it_is():
    import plotly.io as pio

    from attnviz import AttentionConfig, compute
    from attnviz.views.catalogue import figure_of as view_figure
    from attnviz.views.state import DEFAULTS
    from ui import compute as C

    fig = view_figure(compute(AttentionConfig(text="the cat sat")), DEFAULTS.with_(text="the cat sat"))
    want = C._to_json(C.drawn_once(C.plain_dict(fig)), validate=False)  # as drawn once: tests/test_drawn_once.py
    frozen = C.freeze(fig)
    assert json.loads(frozen.to_dict().json) == json.loads(want)  # what Plotly would send, made without its encoder
    assert pio.to_json is C._to_json and pio.to_json.__module__ == "plotly.io._json"  # not replaced process-wide
    at = app("?text=the+cat+sat&view=grid")  # what the page sends is that JSON
    no_errors(at)
    assert json.loads(at.get("plotly_chart")[0].proto.spec) == json.loads(want)


@pytest.mark.parametrize("view", ["grid", "head", "query", "mean", "mask", "output", "model", "analysis"])
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_cheap_plain_dict_and_its_json_are_plotlys_own(view, theme):
    from attnviz import compute
    from attnviz.views.catalogue import figure_of as view_figure
    from attnviz.views.selection import style_for
    from attnviz.views.state import DEFAULTS
    from ui import compute as C

    state = DEFAULTS.with_(text="the cat sat on the mat", view=view)
    fig = view_figure(compute(state.config), state, style=style_for(state, theme=theme))
    plain = C.plain_dict(fig)
    assert plain == fig.to_dict()
    # The JSON reuses a template encoded once per theme: the two themes must not mix up.
    assert json.loads(C.spec_json(plain)) == json.loads(C._to_json(fig.to_dict(), validate=False))


@pytest.mark.parametrize("view", ["grid", "head", "query", "mean", "mask", "output", "model", "analysis"])
@pytest.mark.parametrize("words", [6, 700])  # 700 tokens: the long-text figures (an image, pooled grid)
def test_a_view_built_as_plain_dicts_sends_what_its_go_figure_would(view, words):
    from attnviz.plots.style import PlainFigure, plain_figures
    from attnviz.views.catalogue import figure_of as view_figure
    from attnviz.views.state import DEFAULTS
    from ui import compute as C

    state = DEFAULTS.with_(text=" ".join(f"w{i % 9}" for i in range(words)), view=view, heads=2)
    result = compute(state.config)
    with plain_figures():
        plain = view_figure(result, state)
    fig = view_figure(result, state)
    assert isinstance(plain, PlainFigure) and not isinstance(fig, PlainFigure)
    assert C.plain_dict(plain) == C.plain_dict(fig) == fig.to_dict()
    assert C.plain_dict(plain) == C.plain_dict(plain)  # reading it leaves the builder's dicts as they were
    assert json.loads(C.freeze(plain).to_dict().json) == json.loads(C.freeze(fig).to_dict().json)


def test_the_one_pass_encoding_leaves_what_plotlys_walk_would_on_every_kind_of_value():
    import copy

    import numpy as np
    import pandas as pd
    from _plotly_utils.utils import convert_to_base64

    from ui import compute as C

    z = np.arange(12, dtype=np.float32).reshape(3, 4)
    spec = {"data": [
        {"type": "heatmap", "z": z.T, "customdata": np.array([[1, -2], [3, 4]], dtype=np.int64),  # z.T: not contiguous
         "x": ["a", "b", 3, None], "y": np.array([1.5, 2.5], dtype=">f8"),  # big-endian: Plotly leaves it an array
         "text": [np.zeros(2, dtype=np.float32), "kept in a list"], "range": np.ones(2, dtype=np.float32),
         "empty": np.zeros(0, dtype=np.float32), "series": pd.Series([1.0, 2.0]), "zmin": np.float32(0.0),
         "meta": ({"inner": np.ones((2, 2), dtype=np.uint8)},)},
    ], "layout": {"xaxis": {"range": [0, 1], "tickvals": np.array([0, 1], dtype=np.int32)}}}
    want = copy.deepcopy(spec)
    convert_to_base64(want)
    got = C._encoded(spec)
    assert json.loads(C._to_json(got, validate=False)) == json.loads(C._to_json(want, validate=False))
    assert got["data"][0]["z"] == want["data"][0]["z"] and got["data"][0]["z"]["shape"] == "4, 3"
    assert isinstance(got["data"][0]["y"], np.ndarray) and isinstance(got["data"][0]["range"], np.ndarray)
    assert isinstance(spec["data"][0]["z"], np.ndarray)  # the builder's own dicts are left as they were
    assert got["data"][0]["x"] is spec["data"][0]["x"]  # a list of labels is shared, not copied
    # Its JSON writes the typed arrays it made without the encoder, and still parses as Plotly's.
    full = {"data": [*got["data"], {"type": "scatter", "y": C._typed(np.ones(3, dtype=np.float32))}],
            "layout": {"template": {"layout": {}}}}
    assert isinstance(full["data"][1]["y"], C.TypedArray)
    assert json.loads(C.spec_json(full)) == json.loads(C._to_json(full, validate=False))


def test_a_spec_with_nan_or_numpy_scalars_still_gets_plotlys_strict_json():
    import numpy as np

    from ui import compute as C

    spec = {"data": [{"type": "heatmap", "zmin": np.float32(0.5), "zmax": float("nan")}], "layout": {"height": 300}}
    text = C.spec_json(spec)
    assert "NaN" not in text  # strict JSON, as Plotly writes it: NaN becomes null
    assert json.loads(text) == json.loads(C._to_json(spec, validate=False))
    assert json.loads(text)["data"][0]["zmax"] is None


def test_more_settings_are_drawn_only_when_on_and_keep_their_values():
    from ui.session import MORE

    at = app("heads=2")
    assert at.toggle(key=MORE).value is False
    assert not [w for w in at.number_input if w.key in ("seed", "pad_to")]
    at.toggle(key=MORE).set_value(True).run()
    at.number_input(key="seed").set_value(7).run()
    at.toggle(key=MORE).set_value(False).run()  # closed again: seed 7 still runs and stays in the link
    no_errors(at)
    assert not [w for w in at.number_input if w.key == "seed"]
    assert _qp(at, "seed") == "7"
    r = compute(AttentionConfig(num_heads=2, mask="causal", seed=7))
    np.testing.assert_array_equal(z(grid_heads(figures(at)[0])[1]), r.weights[0, 1].numpy())


@pytest.mark.parametrize("query, named", [("seed=4", "Seed 4"), ("colors=Magma", "Colour scale Magma"),
                                          ("positional=0", "Positional encoding off"),
                                          ("pad_to=16", "Pad to 16"), ("heads=2&mask=none", None)])
def test_a_link_that_sets_a_setting_behind_more_names_it_there(query, named):
    from ui.session import MORE

    at = app(query)
    no_errors(at)
    switch = at.toggle(key=MORE)
    assert switch.value is False  # closed: its label names them, not seven widgets
    assert not [w for w in at.number_input if w.key in ("seed", "pad_to")]
    assert not at.sidebar.caption
    assert (named in switch.label) if named else switch.label == "More settings"
    if named:  # and the link's value is what runs
        more_settings(at)
        name = query.split("=")[0]
        assert any(w.key == name for w in [*at.number_input, *at.selectbox, *at.toggle, *at.slider])
        assert at.toggle(key=MORE).label == "More settings"  # open, the widgets say it
        at.toggle(key=MORE).set_value(False).run()  # the label changed twice: the switch kept its state
        assert at.toggle(key=MORE).value is False and named in at.toggle(key=MORE).label


@pytest.mark.parametrize("view, picks", [("grid", set()), ("mean", set()), ("output", set()), ("head", {"head"}),
                                         ("table", {"head"}), ("mask", {"head"}), ("query", {"query"})])
def test_each_view_draws_only_the_head_or_query_it_reads(view, picks):
    at = app(f"view={view}&heads=4")
    no_errors(at)
    assert {w.key for w in at.selectbox if w.key in ("head", "query")} == picks


def test_a_result_cached_for_one_language_gives_another_session_its_own_words():
    """Thirty students share a result; its notes are words, so a session in English must
    not get the notes that a session in Chinese computed a moment before."""
    zh = app("lang=zh&text=a+b+c&mask=window&window=9")  # the window covers the whole text: a note says so
    en = app("lang=en&text=a+b+c&mask=window&window=9")
    no_errors(zh)
    no_errors(en)
    assert any("窗口" in i.value for i in zh.info)
    assert any("The window (9) covers the whole text" in i.value for i in en.info)


def test_the_model_view_states_what_each_role_means_and_its_threshold():
    """The one-line legend (``views.roles.legend``, shared with Watch it learn)."""
    at = app("text=I+love+AI&heads=2&view=model")
    no_errors(at)
    caption = next(c.value for c in at.caption if "Roles, where" in c.value)
    for words in ("**prev** on the previous token ≥ 0.4", "**sink** on the first token (a sink) ≥ 0.5",
                  "**self** on itself ≥ 0.5", "**dup** on earlier copies of its token ≥ 0.3",
                  "**induction** on the token after an earlier copy ≥ 0.3"):
        assert words in caption, caption


def test_roles_view_holds_the_score_table_and_flow_draws_or_gives_its_bound():
    from attnviz.limits import MAX_FLOW_TOKENS

    at = app("text=I+love+AI&heads=2&view=roles")
    no_errors(at)
    table = at.dataframe[0].value
    assert {"layer", "head", "role", "previous_token", "entropy"} <= set(table.columns) and len(table) == 2
    at = app("text=I+love+AI&heads=2&view=flow")
    no_errors(at)
    assert len(figures(at)) == 1  # the flow, alone
    long = "+".join(["w"] * (MAX_FLOW_TOKENS + 1))
    at = app(f"text={long}&heads=2&view=flow")
    no_errors(at)
    assert any(str(MAX_FLOW_TOKENS) in i.value for i in at.info)
