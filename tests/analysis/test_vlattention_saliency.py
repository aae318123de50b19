"""vl_attention against vl-saliency 1.1.6 on a tiny random LLaVA-1.5: its ``SaliencyExtractor.capture``
trace (attention and the gradient of the LM loss), ``identify_localization_heads``, ``gradcam`` and
``agcam``. (Its capture does not pass Qwen2-VL's ``mm_token_type_ids``, which transformers 5 requires.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from attnviz.analysis.vlattention import localization_heads, vl_attention
from attnviz.models.vlm import load_vlm
from tests.support import vlmodels

vls = pytest.importorskip("vl_saliency")
from vl_saliency.core.map import SaliencyMap  # noqa: E402
from vl_saliency.lib.cam import agcam, gradcam  # noqa: E402
from vl_saliency.transforms.localization import identify_localization_heads  # noqa: E402

PICTURE = Image.fromarray((np.random.RandomState(1).rand(50, 80, 3) * 255).astype("uint8"))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = vlmodels.save(tmp_path_factory.mktemp("vls"), "llava")[0]
    r = vl_attention(str(folder), PICTURE, "the cat sat", answer="on the mat because it was")
    vlm = load_vlm(str(folder))
    x = torch.tensor([r.ids])
    trace = vls.SaliencyExtractor(vlm.model, vlm.processor).capture(
        x, input_ids=x[:, :r.prompt_length], pixel_values=r.pixel_inputs["pixel_values"])
    return r, trace


def _answer_tokens(r):
    first = len(r.tokens) - (len(r.ids) - r.prompt_length)  # the answer's first text token
    return [(first + g, g) for g in range(len(r.ids) - r.prompt_length)]


def test_maps_equal_the_capture_trace_at_every_answer_token(run):
    r, trace = run
    for t, g in _answer_tokens(r):
        theirs = trace.map(g).tensor()  # (layers, H, rows, cols)
        assert torch.allclose(r.maps[0][:, :, t], theirs, rtol=1e-5, atol=1e-6)


def test_localization_heads_rank_as_vl_saliency_ranks_them(run):
    r, trace = run
    for t, g in _answer_tokens(r):
        for keep in (5, None):
            ours = r.localization_heads(t, max_keep=keep)
            assert ours == identify_localization_heads(trace.map(g), max_keep=keep)
            assert ours == identify_localization_heads(SaliencyMap(r.maps[0][:, :, t]), max_keep=keep)


def test_localization_heads_of_a_made_map_with_a_clear_blob():
    m = torch.full((4, 3, 6, 6), 0.001)
    m[3, 1, 1:3, 1:3] = 0.5  # one compact blob, the largest mass, away from the last row
    m[2, 2, 0, :] = 0.3  # a line: more entropy
    m[2, 2, 3, :] = 0.3
    m[3, 0, 5, :] = 0.9  # the last row: left out
    assert localization_heads(m, max_keep=None) == identify_localization_heads(SaliencyMap(m), max_keep=None)
    assert localization_heads(m)[0] == (3, 1)


@pytest.mark.parametrize("kind,theirs", [("gradcam", gradcam), ("agcam", agcam)])
def test_cams_equal_vl_saliency_with_the_gradient_of_its_loss(run, kind, theirs):
    r, trace = run
    nonzero = 0
    for t, g in _answer_tokens(r):
        ours = r.cam(kind, t)
        ref = trace.map(g, mode=theirs).tensor()
        assert torch.allclose(ours, ref, rtol=1e-4, atol=1e-8), float((ours - ref).abs().max())
        nonzero += int(bool(ref.abs().max() > 0))
    assert nonzero >= 2  # the gradients are not all zero (the last token's is: it predicts nothing in the loss)


def test_on_paligemma_its_capture_runs_the_prefix_causally_where_the_model_attends_it_both_ways(tmp_path):
    """vl-saliency 1.1.6's ``capture`` calls the model with input_ids, attention_mask, labels, pixel_values and
    image_grid_thw only (``core/extractor.py``): PaliGemma's ``token_type_ids``, which make the picture and the
    prompt attend both ways as the model's own ``generate`` does, are not passed, so its trace is the model's
    attention with a causal prefix. Its trace equals the eager weights of that run; attnviz's maps equal the eager
    weights of the model's own run, with them; both agree in layer 0, where the keys are the embeddings either way."""
    folder = vlmodels.save(tmp_path, "paligemma")[0]
    r = vl_attention(str(folder), PICTURE, "the cat sat", answer="on the mat")
    vlm = load_vlm(str(folder))
    x = torch.tensor([r.ids])
    trace = vls.SaliencyExtractor(vlm.model, vlm.processor, store_grads=False).capture(
        x, input_ids=x[:, :r.prompt_length], pixel_values=r.pixel_inputs["pixel_values"])
    image = torch.nonzero(x[0] == vlm.image_token_id)[:, 0]

    def eager(**extra):
        with torch.no_grad():
            out = vlm.model(input_ids=x, pixel_values=r.pixel_inputs["pixel_values"], output_attentions=True, **extra)
        return torch.stack([a[0] for a in out.attentions])[..., image]  # (layers, H, N, I)

    causal, own = eager(), eager(token_type_ids=r.pixel_inputs["token_type_ids"])
    for t, g in _answer_tokens(r):
        theirs = trace.map(g).tensor()  # (layers, H, rows, cols)
        at = r.positions[t]
        assert torch.allclose(theirs, causal[:, :, at].reshape(theirs.shape), rtol=1e-5, atol=1e-7)
        assert torch.allclose(r.maps[0][:, :, t], own[:, :, at].reshape(theirs.shape), rtol=1e-5, atol=1e-7)
        assert torch.allclose(r.maps[0][0, :, t], theirs[0], rtol=1e-5, atol=1e-7)
