"""The Logit lens page's figures from a notebook (attnviz.lens_view), offline: the grid draws every point's top
token and colour as logit_lens reads them; the answer's chart its probability and rank; a step's bars sum to
final-scale's own step; per-layer and tuned steps are refused in one sentence; the HTML needs no network."""

from __future__ import annotations

import numpy as np
import pytest

import attnviz
from tests.support import hfmodels

TEXT, ANSWER, WRONG = "the cat sat on the mat because it", "was", "tired"


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return str(hfmodels.perturbed(tmp_path_factory.mktemp("lensview"), "gpt2")[0])


def test_the_grid_draws_every_points_top_token_and_colour(gpt2):
    r = attnviz.logit_lens(gpt2, TEXT)
    for colour, values in (("probability", r.top_probs[:, :, 0]), ("entropy", r.entropy), ("kl", r.kl)):
        fig = attnviz.lens_view(gpt2, TEXT, colour=colour)
        heat = fig.data[0]
        np.testing.assert_allclose(np.asarray(heat.z, dtype=float), values, atol=1e-5)
        for shown, tops in zip(heat.text, r.top_tokens, strict=True):  # each cell its top token, in words (cut …)
            assert all(t[0].startswith(w.removesuffix("…")) for w, t in zip(shown, tops, strict=True))
        assert list(heat.y) == ["embed", "L0 mid", "L0 end", "L1 mid", "L1 end"]
        assert len(fig.data[1].customdata) == heat.z.shape[0] * heat.z.shape[1]  # a click marker per cell
    outlined = attnviz.lens_view(gpt2, TEXT, cell=("layer 0 end", 3)).layout.shapes[0]
    assert (outlined.x0, outlined.y0) == (2.5, 1.5)


def test_the_answers_chart_and_a_steps_bars(gpt2):
    r = attnviz.logit_lens(gpt2, TEXT, answer=ANSWER, wrong=WRONG)
    fig = attnviz.lens_view(gpt2, TEXT, show="answer", answer=ANSWER, wrong=WRONG, cell=("layer 1 end", 5))
    np.testing.assert_allclose(fig.data[0].y, r.answer_prob[:, 5], atol=1e-6)
    np.testing.assert_allclose(np.asarray(fig.data[1].y) - 1, r.answer_rank[:, 5])
    bars = attnviz.lens_view(gpt2, TEXT, show="step", answer=ANSWER, wrong=WRONG, cell=("layer 1 middle", 5))
    *parts, step = bars.data[0].x  # across: a part a row
    assert list(bars.data[0].y)[:4] == ["L1 H0", "L1 H1", "L1 H2", "L1 H3"]
    assert abs(sum(parts) - step) < 1e-9
    own = r.answer_logit[3, 5] - r.answer_logit[2, 5]
    assert abs(step - own) <= 1e-4 * max(1, abs(own))
    # by default: the last position, the point into which the answer rises most
    default = attnviz.lens_view(gpt2, TEXT, show="step", answer=ANSWER, wrong=WRONG)
    rises = int(np.argmax(np.diff(r.answer_logit[:, -1]))) + 1
    assert default.data[0].x[-1] == pytest.approx(r.answer_logit[rises, -1] - r.answer_logit[rises - 1, -1], abs=1e-4)


@pytest.mark.parametrize("kwargs, says", [
    ({"show": "step", "mode": "per-layer"}, "Only the final-scale logit lens's steps are the sum of the parts"),
    ({"show": "step", "cell": ("layer 9 end", 0)}, "No point is named 'layer 9 end'"),
    ({"cell": 40}, "Position 40 is out of range: the text has 8 tokens"),
    ({"show": "answer", "answer": "was tired"}, "is not one token"),
    ({"show": "nothing"}, "show must be one of grid, answer, step"),
])
def test_what_cannot_be_drawn_is_one_sentence(gpt2, kwargs, says):
    with pytest.raises(ValueError, match=says):
        attnviz.lens_view(gpt2, TEXT, **kwargs)


def test_an_encoder_says_what_it_is(tmp_path):
    bert = str(hfmodels.save(tmp_path, "bert")[0])
    with pytest.raises(ValueError, match="is an encoder: it has no unembedding"):
        attnviz.lens_view(bert, TEXT)


def test_offline(gpt2):
    html = attnviz.to_html([attnviz.lens_view(gpt2, TEXT)])
    assert '<script src="http' not in html and "top token at each point" in html
