"""The teaching pages: AppTest runs, numbers against the core and PyTorch, URL state."""

import numpy as np
import pytest
import torch

from attnviz import AttentionConfig, compute
from attnviz.analysis.gradients import token_gradients
from attnviz.analysis.scaling import sweep
from attnviz.analysis.verify import verify
from attnviz.analysis.walkthrough import STEP_KEYS, blocked_row_demo, walkthrough
from attnviz.core.masks import MASK_KINDS
from tests.support.apphelp import app, figures, grid_heads, no_errors, shown

PAGES = ["step_by_step", "mask_lab", "cross_attention", "verify", "gradients", "why_scale"]
EDITED = ("text=I+love+AI%0A%E6%88%91%E7%88%B1%E4%BA%BA%E5%B7%A5%E6%99%BA%E8%83%BD"
          "&heads=2&d_model=32&mask=padding&seed=3")


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("query", ["", EDITED, "mask=window&window=0&pad_to=12&dropout=0.2"])
def test_every_page_runs(page, query):
    at = app(query, page=f"app_pages/{page}.py")
    no_errors(at)
    assert figures(at) or at.success


def test_step_by_step_numbers_are_the_core_intermediates():
    r = compute(AttentionConfig(text="I love AI", num_heads=2, mask="causal", dropout=0.1, seed=2))
    steps = walkthrough(r, 0, 1, 2)
    a = r.steps.attention
    expect = [r.embeddings[0], r.steps.q[0, 1], r.steps.k[0, 1], r.steps.v[0, 1], a.scores[0, 1], a.scaled[0, 1],
              a.masked[0, 1], a.weights[0, 1], a.dropped[0, 1], a.output[0, 1], r.steps.joined[0], r.output[0]]
    assert len(steps) == len(expect)
    assert tuple(step.key for step in steps) == STEP_KEYS  # presenter mode's step chooser names these
    for step, t in zip(steps, expect, strict=True):
        np.testing.assert_array_equal(step.matrix, t.numpy(), err_msg=step.title)
        np.testing.assert_array_equal(step.row, t[2].numpy(), err_msg=step.title)
    # the page draws those same numbers (first figure: the embeddings of "I love AI")
    at = app("text=I+love+AI&heads=2&mask=causal&dropout=0.1&seed=2&head=1&query=2", page="app_pages/step_by_step.py")
    z = np.array(figures(at)[0]["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(z, r.embeddings[0].numpy(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("kind", MASK_KINDS)
def test_verification_passes_for_every_mask(kind):
    cfg = AttentionConfig(text="I love AI\nThe cat sat on the mat", mask=kind, window=1, pad_to=8, num_heads=4)
    v = verify(cfg)
    assert v.passed, [(c.name, c.max_abs_diff) for c in v.checks]
    assert verify(cfg.with_(source="我爱人工智能"), float64=True).passed


def test_verification_badge_goes_red_when_the_implementation_is_perturbed(monkeypatch):
    from attnviz.core.multihead import MultiHeadAttention

    real = MultiHeadAttention.steps

    def perturbed(self, *a, **k):
        s = real(self, *a, **k)
        s.attention.weights = s.attention.weights + 1e-3
        return s

    at = app("mask=causal", page="app_pages/verify.py")
    assert at.success and not at.error
    monkeypatch.setattr(MultiHeadAttention, "steps", perturbed)
    import ui.compute

    ui.compute.RESULTS.clear()  # the server caches verifications per config
    at = app("mask=causal", page="app_pages/verify.py")
    assert any("FAIL" in e.value for e in at.error)
    assert not at.success


def test_gradients_match_finite_differences_and_a_closed_form():
    """Not autograd against itself: X's gradient by central differences in float64, and
    V's by its closed form, d sum(o_q) / d v_h[j] = a_h[q, j] · Σ_e W_O[e, h-slice]."""
    import copy

    cfg = AttentionConfig(text="the cat sat on", num_heads=2, d_model=8, mask="causal", seed=1)
    q = 2
    g = token_gradients(cfg, 0, q, "sum")
    r = compute(cfg)
    model = copy.deepcopy(r.model).double()
    x0 = r.embeddings.double()  # (1, L, E)
    mask = r.mask

    def f(x):
        with torch.no_grad():
            return float(model.steps(x, attn_mask=mask).output[0, q].sum())

    eps = 1e-6
    grad = torch.zeros_like(x0)
    for i in range(x0.shape[1]):
        for e in range(x0.shape[2]):
            up, down = x0.clone(), x0.clone()
            up[0, i, e] += eps
            down[0, i, e] -= eps
            grad[0, i, e] = (f(up) - f(down)) / (2 * eps)
    np.testing.assert_allclose(g.norms["X"], grad[0].norm(dim=-1).numpy(), rtol=1e-4, atol=1e-6)

    H, D = cfg.num_heads, cfg.d_model // cfg.num_heads
    colsum = r.model.out_proj.weight.detach().double().sum(0).view(H, D)  # (H, D): Σ_e W_O[e, h·D + d]
    a = r.weights[0, :, q, :].double()  # (H, S)
    closed = (a.unsqueeze(-1) * colsum.unsqueeze(1)).permute(1, 0, 2).flatten(1).norm(dim=-1)  # (S,)
    np.testing.assert_allclose(g.norms["V"], closed.numpy(), rtol=1e-5, atol=1e-7)
    assert (g.norms["V"][q + 1:] == 0).all()  # causal: later tokens cannot reach query 2
    assert set(g.hooked) == {"Q", "K", "V"}


def test_gradient_page_restores_its_scalar_from_the_url():
    at = app("grad_of=dim0&query=1", page="app_pages/gradients.py")
    no_errors(at)
    assert at.selectbox(key="grad_of").value == "dim0"
    assert "first component" in at.markdown[0].value or any("first component" in m.value for m in at.markdown)


def test_why_scale_numbers():
    s = sweep(seed=0, additive=True)
    assert s.std_raw[-1] > 10 * s.std_scaled[-1]  # raw spread grows like sqrt(d_k)
    assert abs(s.std_scaled[0] - 1) < 0.3 and abs(s.std_scaled[-1] - 1) < 0.2
    assert s.max_raw[-1] > 0.8 and s.max_scaled[-1] < 0.5  # saturation only without scaling
    assert len(s.entropy_additive) == len(s.d_k)
    at = app("additive=1", page="app_pages/why_scale.py")
    names = [t["name"] for t in figures(at)[1]["data"]]
    assert "additive" in names


def test_mask_lab_shows_fully_masked_rows_and_restores_its_choice():
    at = app("masks=window,padding&window=0&text=a+b%0Ac&pad_to=3&seq=1", page="app_pages/mask_lab.py")
    no_errors(at)
    assert at.multiselect(key="masks").value == ["window", "padding"]
    assert any("Fully masked rows" in w.value for w in at.warning)
    assert len(figures(at)) == 8
    demo = blocked_row_demo()
    assert all(np.isnan(demo["-inf"])) and np.allclose(demo["-1e9"], 1 / 4)
    assert demo["attnviz"] == [0.0] * 4  # computed by attnviz's attention: a fully masked row is zeros


def test_blocked_row_demo_column_comes_from_the_attention_code(monkeypatch):
    from attnviz.core import attention

    real = attention._masked_softmax
    monkeypatch.setattr(attention, "_masked_softmax", lambda m, f, inplace: real(m, f, inplace) + 0.5)
    assert blocked_row_demo()["attnviz"] == [0.5] * 4  # the column follows the implementation


def test_cross_attention_page_shapes_and_source_padding():
    at = app("text=I+love+AI&heads=2&mask=padding&source=%E6%88%91%E7%88%B1%E4%BA%BA%E5%B7%A5%E6%99%BA%E8%83%BD",
             page="app_pages/cross_attention.py")
    no_errors(at)
    blocks = grid_heads(figures(at)[0])
    assert len(blocks) == 2 and len(blocks[0]["x"]) == 6 and len(blocks[0]["y"]) == 3
    r = compute(AttentionConfig(text="I love AI\nhello", source="我爱人工智能\n你好", mask="padding"))
    assert (r.weights[1, :, :, 2:] == 0).all()  # padded source keys never attended


def test_shared_settings_follow_across_pages():
    at = app("heads=2&mask=none")
    at.switch_page("app_pages/step_by_step.py").run()
    no_errors(at)
    assert at.selectbox(key="heads").value == 2
    assert figures(at)[1]["layout"]["title"]["text"].startswith("Queries of this head")


def test_step_by_step_outlines_the_followed_row():
    at = app("text=I+love+AI&heads=2&query=2", page="app_pages/step_by_step.py")
    figs = figures(at)
    scores = next(f for f in figs if f["layout"]["title"]["text"].startswith("Scores"))
    (rect,) = scores["layout"]["shapes"]
    assert (rect["y0"], rect["y1"]) == (1.5, 2.5)
    keys = next(f for f in figs if f["layout"]["title"]["text"].startswith("Keys"))
    assert not keys["layout"].get("shapes")  # key rows are not the followed query
    x = next(f for f in figs if f["layout"]["title"]["text"].startswith("Embeddings X"))  # not per head
    assert x["layout"]["shapes"][0]["y0"] == 1.5


def test_verify_page_float64_from_the_url():
    at = app("float64=1&mask=causal", page="app_pages/verify.py")
    no_errors(at)
    assert at.toggle(key="float64").value is True
    badges = [s.value for s in at.success]
    assert len(badges) == 2 and "float32" in badges[0] and "float64" in badges[1]


def test_cross_attention_by_default_blocks_no_real_source_key():
    at = app("", page="app_pages/cross_attention.py")  # default mask: causal
    no_errors(at)
    for block in grid_heads(figures(at)[0]):
        w = block["z"]
        assert (w > 0).all()  # every target token sees every source token
        np.testing.assert_allclose(w.sum(-1), 1, rtol=1e-5)
    assert any("padded source keys are blocked" in shown(i.value) for i in at.info)


def test_cross_attention_with_a_padded_source_blocks_only_the_pads():
    r = compute(AttentionConfig(text="I love AI\nhello", source="我爱人工智能\n你好", mask="padding"))
    at = app("text=I+love+AI%0Ahello&source=%E6%88%91%E7%88%B1%E4%BA%BA%E5%B7%A5%E6%99%BA%E8%83%BD%0A%E4%BD%A0%E5%A5%BD"
             "&mask=causal&seq=1", page="app_pages/cross_attention.py")
    no_errors(at)
    w = grid_heads(figures(at)[0])[0]["z"]  # sequence 2 ("hello" × "你好" + 4 pads), head 0
    assert w.shape == (3, 6) and (w[:1, :2] > 0).all() and (w[:, 2:] == 0).all()
    np.testing.assert_array_equal(w, r.weights[1, 0].numpy())


def test_gradients_default_to_a_token_that_sees_several_keys():
    at = app("", page="app_pages/gradients.py")
    no_errors(at)
    tokens = compute(AttentionConfig(mask="causal")).tokens[0]
    # the last token, whichever sentence is typed (-1 follows it): it sees every key under the causal mask
    assert at.selectbox(key="query").value == -1 and "query" not in at.query_params
    from tests.support.apphelp import z as zof

    v_norms = zof({"z": figures(at)[0]["data"][0]["y"]})  # ‖∂/∂V‖ per key
    assert (v_norms > 0).sum() == len(tokens)  # every key gets gradient, not just the token itself
    body = " ".join(shown(m.value) for m in at.markdown)
    assert "”'s" not in body  # no “The”'s quoting glitch
    at = app("query=2&grad_of=norm", page="app_pages/gradients.py")
    assert at.selectbox(key="query").value == 2  # the choice stays in the URL


def test_every_mask_lab_figure_labels_every_token_of_the_default_text():
    at = app("", page="app_pages/mask_lab.py")
    no_errors(at)
    n = len(compute(AttentionConfig()).tokens[0])
    figs = figures(at)
    assert len(figs) == 4 * 3  # four figures for each of the three default masks
    for fig in figs:
        for axis in ("xaxis", "yaxis"):
            assert len(fig["layout"][axis]["tickvals"]) == n, (fig["layout"]["title"]["text"], axis)
        assert fig["layout"]["xaxis"].get("side", "bottom") == "bottom"  # titles on top, key axis below
    heights = {fig["layout"]["height"] for fig in figs}
    assert len(heights) == 1  # the mask is drawn at the size of the matrices beside it


def test_verify_page_draws_where_differences_sit():
    at = app("mask=causal", page="app_pages/verify.py")
    no_errors(at)
    (fig,) = figures(at)
    assert [t["name"] for t in fig["data"]] == ["per head", "per query"]
    assert at.dataframe  # the table stays


def test_url_warnings_are_escaped_and_go_away_once_fixed():
    at = app("heads=%60%5BSign+in%5D(https%3A%2F%2Fevil.example)%60")
    no_errors(at)
    (w,) = at.warning
    assert "\\[Sign in\\]\\(https\\:\\/\\/evil\\.example\\)" in w.value.replace("\u200b", "")  # escaped
    assert 'heads="`[Sign in](https://evil.example)`"' in shown(w.value)
    at.selectbox(key="heads").set_value(2).run()
    assert not at.warning  # fixed: the warning is gone


def test_teaching_pages_show_url_warnings_too():
    at = app("window=sideways", page="app_pages/mask_lab.py")
    assert any('window="sideways"' in shown(w.value) for w in at.warning)


def test_a_pages_own_settings_wait_outside_the_session_state_while_another_page_runs():
    from attnviz.views.state import NAMES
    from ui.session import live_names

    at = app("patch=4&heads=2", page="app_pages/image_patches.py")
    no_errors(at)
    assert at.number_input(key="patch").value == 4
    at.switch_page("app_pages/explorer.py").run()
    no_errors(at)
    held = set(at.session_state._state._state.filtered_state) & set(NAMES)
    # Only the explorer's settings are there: every widget call walks the whole session state.
    assert "patch" not in held and held <= live_names("explorer") and "heads" in held
    assert "patch" not in at.query_params  # the explorer's link holds what the explorer reads
    at.switch_page("app_pages/image_patches.py").run()
    no_errors(at)
    assert at.number_input(key="patch").value == 4 and at.selectbox(key="heads").value == 2


def test_every_widget_a_page_draws_is_a_setting_declared_for_that_page():
    """``ui.controls.control`` refuses a setting the page's declarations leave out (it would
    start from its own default, not the link's): every page, opened first, draws."""
    from attnviz.views.catalogue import PAGES as ALL
    from attnviz.views.state import NAMES
    from ui.session import live_names

    for page in ALL:
        at = app("", page=f"app_pages/{page.script}")
        no_errors(at)
        held = set(at.session_state._state._state.filtered_state) & set(NAMES)
        assert held <= live_names(page.name), page.name


def test_a_widget_for_a_setting_its_page_does_not_declare_is_refused():
    from streamlit.testing.v1 import AppTest

    def script():
        from ui import session
        from ui.controls import control

        session.restore()
        session.keep("explorer")
        control("heads")  # a sidebar setting: kept everywhere
        control("patch")  # the image page's: not kept on the explorer

    at = AppTest.from_function(script, default_timeout=30).run()
    assert [w.key for w in at.number_input] == ["heads"]  # drawn, from its kept value
    assert at.exception and "is drawn on a page that does not read it" in "".join(at.exception[0].stack_trace)


def test_an_old_links_parameters_that_the_page_does_not_read_are_ignored_quietly():
    at = app("heads=2&patch=999&clean=&additive=maybe")  # other pages' settings, invalid ones included
    no_errors(at)
    assert not at.warning and at.selectbox(key="heads").value == 2
    assert dict(at.query_params) == {"heads": "2"}  # the short link: what the explorer reads and changed
