"""Does a head matter: weighted value norms, knock-out and the neuron view's numbers, checked
against definitions computed here from the module's own weights, on cases whose answer is
known, and on every tiny Hugging Face folder kind."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from attnviz import AttentionConfig, compute
from attnviz.analysis import contributions as C
from attnviz.models.base import HeadParts
from tests.support.hfmodels import TEXTS
from tests.support.hfmodels import save as _save


def _random(**kw):
    return compute(AttentionConfig(**{"text": "the cat sat on the mat\nit was tired", "num_heads": 4,
                                      "d_model": 16, "mask": "causal", "seed": 3, **kw}))


def test_weighted_norms_equal_their_definition_from_the_modules_weights():
    r = _random()
    m = r.model
    E, H = m.d_model, m.num_heads
    D = E // H
    x = r.embeddings  # (N, L, E)
    got = C.weighted_norms(r.parts, r.weights)  # (N, H, L, S)
    N, _, L, S = got.shape
    w_v, b_v, w_o = m.w_v.detach(), m._bias(2).detach(), m.out_proj.weight.detach()
    for n in range(N):
        for h in range(H):
            for j in range(S):
                v = x[n, j] @ w_v[h * D:(h + 1) * D].T + b_v[h * D:(h + 1) * D]  # (D,): head h's value of key j
                f = w_o[:, h * D:(h + 1) * D] @ v  # (E,): v_j W_O^h
                for i in range(L):
                    want = float(torch.linalg.vector_norm(r.weights[n, h, i, j] * f))
                    assert math.isclose(float(got[n, h, i, j]), want, rel_tol=1e-4, abs_tol=1e-6)
    share = C.row_share(got)
    real = share[0, :, : r.lengths[0]].sum(-1)  # every real row sums to 1
    assert torch.allclose(real, torch.ones_like(real), atol=1e-5)


def test_a_head_whose_output_slice_is_zero_moves_nothing_and_all_heads_out_leave_the_bias():
    r = _random()
    m = copy.deepcopy(r.model)
    D = m.head_dim
    with torch.no_grad():
        m.out_proj.weight[:, 1 * D:2 * D] = 0  # head 1 reaches nothing
    with torch.no_grad():
        steps = m.steps(r.embeddings, attn_mask=r.mask)
    parts = HeadParts.of_module(m, steps)
    ko = C.knock_out(parts, 0, r.lengths[0])
    assert ko.moved[1] == 0.0 and min(ko.moved[h] for h in (0, 2, 3)) > 1e-3
    every = C.output_without(r.parts, 0, list(range(r.heads)))  # (L, E)
    assert torch.allclose(every, r.model.out_proj.bias.detach().expand_as(every))
    # A head knocked out equals the module's own forward with that head masked (another path).
    for h in range(r.heads):
        mask = torch.ones(r.heads)
        mask[h] = 0
        with torch.no_grad():
            out, _w = r.model(r.embeddings, attn_mask=r.mask, head_mask=mask)
        assert torch.allclose(C.output_without(r.parts, 0, [h]), out[0], atol=1e-6)
        want = float((r.output[0, :r.lengths[0]] - out[0, :r.lengths[0]]).norm() / r.output[0, :r.lengths[0]].norm())
        assert math.isclose(C.knock_out(r.parts, 0, r.lengths[0]).moved[h], want, rel_tol=1e-5)
    with pytest.raises(ValueError, match="Head 9 does not exist"):
        C.output_without(r.parts, 0, [9])


def test_the_neuron_row_sums_q_times_k_to_the_score_and_softmax_gives_the_weight():
    r = _random()
    row = C.neuron_row(r, 0, 2, 3)
    assert np.allclose(row.product.sum(-1), row.dot, atol=1e-5)
    assert np.allclose(row.product, row.q[None, :] * row.k)
    s = np.where(row.visible, row.scaled, -np.inf)
    soft = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    assert np.allclose(soft, row.weight, atol=1e-6) and row.scale == pytest.approx(1 / math.sqrt(4))
    assert not row.visible[4:].any()  # causal: query 3 sees keys 0..3
    d = row.to_dict()
    assert d["sum_of_q_times_k"] == pytest.approx(d["q_dot_k"], abs=1e-5)


def test_weights_from_a_file_say_they_cannot_give_norms_or_neurons():
    from attnviz.models.given import GivenWeights, given_input
    from attnviz.run.run import run

    w = np.full((1, 2, 3, 3), 1 / 3, dtype=np.float32)
    r = run(given_input(["a", "b", "c"], 3), GivenWeights(w))
    assert r.parts is None
    with pytest.raises(ValueError, match="value vectors and output projection"):
        C.parts_of(r)
    with pytest.raises(ValueError, match="neuron view needs"):
        C.neuron_row(r, 0, 0, 0)


def _check_parts(r):
    """What the hooks saw is one consistent layer: out = joined W_Oᵀ + b, and each head's slice
    of joined is its weights times its values (so v, a grouped head's repeat and W_O are right)."""
    p = r.parts
    N, H, L, S = r.weights.shape
    D = p.head_dim
    out = p.joined @ p.w_o.T + (0 if p.b_o is None else p.b_o)  # (N, L, E)
    for n in range(N):
        k, s = r.lengths[n], r.source_lengths[n]
        assert torch.allclose(out[n, :k], p.output[n, :k], atol=1e-5)
        for h in range(H):
            head = r.weights[n, h, :k, :s] @ p.v[n, h, :s]  # (k, D)
            assert torch.allclose(head, p.joined[n, :k, h * D:(h + 1) * D], atol=1e-5)


@pytest.mark.parametrize("name,stack", [("gpt2", "encoder"), ("llama", "encoder"), ("bert", "encoder"),
                                        ("roberta", "encoder"),
                                        ("t5", "encoder"), ("t5", "decoder"), ("t5", "cross"),
                                        ("bart", "encoder"), ("bart", "decoder"), ("bart", "cross")])
def test_every_folder_kind_gives_norms_and_knock_out_through_its_hooks(tmp_path, name, stack):
    pytest.importorskip("transformers")
    from attnviz.models.registry import load

    folder, _model, _fast = _save(tmp_path, name)
    r = compute(AttentionConfig(text="\n".join(TEXTS), model=str(folder), layer=1, stack=stack))
    assert r.parts is not None
    _check_parts(r)
    norms = C.weighted_norms(r.parts, r.weights)
    assert norms.shape == r.weights.shape and bool(torch.isfinite(norms).all())
    model = load(str(folder))
    if not hasattr(model, "rerun_without"):  # a BERT folder runs on attnviz's own layer: its module's parts
        assert type(model).__name__ == "BertModel" and r.model is not None
        return
    inp = r.parts  # the run's record; the rerun reads the same input again
    cfg = AttentionConfig(text="\n".join(TEXTS), model=str(folder), layer=1, stack=stack)
    lines = cfg.text.split("\n")
    read = dict(pad_to=0, tokenize_mode="", positional=True, max_tokens=cfg.max_tokens)
    q_inp = model.read_pair(lines, None, stack, **read)[0] if model.seq2seq else model.read_text(lines, **read)
    # The pre-hook that zeroes a head gives what the analysis computes without a rerun.
    heads = [-1, 0, 2, *range(r.heads)]
    probs, outs = model.rerun_without(q_inp, stack, 1, 0, heads)
    k = r.lengths[0]
    assert torch.allclose(outs[0, :k], inp.output[0, :k], atol=1e-5)
    for row, h in enumerate(heads[1:3], 1):
        assert torch.allclose(outs[row, :k], C.output_without(inp, 0, [h])[:k], atol=1e-5)
    ko = C.knock_out(inp, 0, k)
    assert len(ko.moved) == r.heads and all(x > 0 for x in ko.moved)
    if model.causal:
        top, p = r.next_tokens[0][0]
        assert ko.top_token == top and ko.top_p == pytest.approx(p, abs=1e-5)  # nothing knocked out: the run's own
        assert len(ko.top_p_without) == len(ko.overlap) == r.heads and all(0 <= o <= 10 for o in ko.overlap)
        assert probs.shape[0] == len(heads)
    else:
        assert probs is None and ko.top_token is None


def test_the_hooks_keep_q_and_k_where_they_give_the_weights(tmp_path):
    pytest.importorskip("transformers")
    for name, stack in [("gpt2", "encoder"), ("bert", "encoder"), ("roberta", "encoder"), ("bart", "cross")]:
        folder, _m, _f = _save(tmp_path, name)
        r = compute(AttentionConfig(text=TEXTS[0], model=str(folder), layer=1, stack=stack))
        row = C.neuron_row(r, 0, 1, r.lengths[0] - 1)
        s = np.where(row.visible, row.scaled, -np.inf)
        soft = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
        assert np.allclose(soft, row.weight, atol=1e-4), name
        assert row.bias is None and not row.rotary, name


def _own_weights(folder, model, stack: str, layer: int):
    """The transformers model's own ``output_attentions`` weights of ``layer`` (N, H, L, S), from a
    forward pass of its own on the ids attnviz reads (not through attnviz's run or hooks)."""
    from attnviz.models.registry import load

    m = load(str(folder))
    model.set_attn_implementation("eager")  # the one that returns its weights
    read = dict(pad_to=0, tokenize_mode="", positional=True, max_tokens=512)
    key_mask = lambda inp: (torch.arange(inp.L)[None] < torch.tensor(inp.lengths)[:, None]).long()  # noqa: E731
    with torch.no_grad():
        if m.seq2seq:
            enc, dec = m.read_pair(TEXTS, None, stack, **read)[0].meta["pair"]
            out = model(input_ids=enc.ids, attention_mask=key_mask(enc), decoder_input_ids=dec.ids,
                        decoder_attention_mask=key_mask(dec), output_attentions=True)
            return getattr(out, f"{stack}_attentions")[layer]
        inp = m.read_text(TEXTS, **read)
        return model(input_ids=inp.ids, attention_mask=key_mask(inp), output_attentions=True).attentions[layer]


@pytest.mark.parametrize("name,stack", [("llama", "encoder"), ("t5", "encoder"), ("t5", "decoder"), ("t5", "cross")])
@pytest.mark.parametrize("layer", [0, 1])
def test_rotary_and_position_bias_models_give_the_q_k_and_bias_their_scores_use(tmp_path, name, stack, layer):
    """softmax(q·k · scale + bias), over the keys the mask lets through, is the model's own weights,
    for every sequence, head and real query: LLaMA's q and k are the rotated ones; T5 adds its
    relative position bias (scale 1) in its encoder and decoder, and no bias across (cross)."""
    pytest.importorskip("transformers")
    folder, model, _f = _save(tmp_path, name)
    r = compute(AttentionConfig(text="\n".join(TEXTS), model=str(folder), layer=layer, stack=stack))
    own = _own_weights(folder, model, stack, layer)  # (N, H, L, S)
    assert r.parts.rotary == (name == "llama") and (r.parts.bias is not None) == (name == "t5" and stack != "cross")
    for n in range(len(TEXTS)):
        S = r.source_lengths[n]
        for h in range(r.heads):
            for i in range(r.lengths[n]):
                row = C.neuron_row(r, n, h, i)
                assert np.allclose(row.product.sum(-1), row.dot, atol=1e-5)  # the row of q∘k sums to q·k
                want = row.scaled if row.bias is None else row.scaled + row.bias
                assert np.allclose(row.score, want)
                s = np.where(row.visible, row.score, -np.inf)
                soft = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
                assert np.abs(soft - own[n, h, i, :S].numpy()).max() < 1e-5, (name, stack, n, h, i)
    if name == "t5":
        assert r.parts.scale == 1.0  # T5 does not scale q·k
        if stack != "cross":  # the bias is the stack's own relative position bias, from its first layer's table
            first = (model.encoder if stack == "encoder" else model.decoder).block[0].layer[0].SelfAttention
            L = r.weights.shape[2]
            with torch.no_grad():
                want = first.compute_bias(L, L)[0]  # (H, L, L)
            assert torch.allclose(r.parts.bias[1], want, atol=1e-6)
        else:
            assert not model.decoder.block[layer].layer[1].EncDecAttention.has_relative_attention_bias
        d = C.neuron_row(r, 0, 0, 1).to_dict()
        assert ("position_bias" in d) == (stack != "cross") and d["score_means"].startswith("q·k × scale")


def test_a_model_whose_scores_are_not_its_q_k_even_rotated_keeps_the_refusal(tmp_path):
    """Qwen3 normalises q and k per head after their projections: neither rotation nor a bias
    accounts for its scores, so the neuron view says why it cannot show them."""
    pytest.importorskip("transformers")
    folder, model, _f = _save(tmp_path, "qwen3")
    r = compute(AttentionConfig(text="\n".join(TEXTS), model=str(folder), layer=1))
    assert r.parts.rotary  # rotated, yet the check fails: the view does not draw what the model does not compute
    with pytest.raises(ValueError, match="even with rotary positions or a position bias taken in"):
        C.neuron_row(r, 0, 0, 0)
    assert r.parts.q is None and r.parts.bias is None


def test_the_rotate_half_formula_is_the_models_own_rotation():
    """attnviz's fallback rotation equals LLaMA's apply_rotary_pos_emb and GPT-NeoX's partial one,
    and a module whose modelling file has none is rotated with it."""
    pytest.importorskip("transformers")
    from transformers.models.gpt_neox import modeling_gpt_neox as neox
    from transformers.models.llama import modeling_llama as llama

    from attnviz.models import positions as P

    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, 5, 8, generator=g), torch.randn(2, 4, 5, 8, generator=g)  # (N, H, T, D)
    for d, own in [(8, llama.apply_rotary_pos_emb), (4, neox.apply_rotary_pos_emb)]:
        angle = torch.randn(1, 5, d // 2, generator=g)  # (1, T, d/2)
        cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)  # (1, T, d)
        want_q, want_k = own(q, k, cos, sin)
        assert torch.allclose(P.rotate_half(q, cos, sin), want_q, atol=1e-6)
        assert torch.allclose(P.rotate_half(k, cos, sin), want_k, atol=1e-6)
        assert not torch.allclose(want_q, q)  # a rotation that moved something
    got_q, _k = P.rotate(torch.nn.Identity(), q, k, cos, sin)  # torch's module file has no apply_rotary_pos_emb
    assert torch.allclose(got_q, want_q, atol=1e-6) and torch.equal(got_q[..., 4:], q[..., 4:])


def test_a_vision_transformer_gives_its_parts(tmp_path):
    pytest.importorskip("transformers")
    from attnviz import inputs as I
    from attnviz.models.registry import load
    from attnviz.models.vision import image_tokens
    from attnviz.run.run import run

    folder, _m, _p = _save(tmp_path, "vit")
    vit = load(str(folder))
    inp = image_tokens(vit, I.sample_image("shapes"))
    r = run(inp, vit, layer=1)
    _check_parts(r)
    _probs, outs = vit.rerun_without(inp, "", 1, 0, [3])
    assert torch.allclose(outs[0], C.output_without(r.parts, 0, [3]), atol=1e-5)
    assert C.neuron_row(r, 0, 0, 0).k.shape == (17, 8)


def test_the_norms_figure_draws_each_heads_weights_beside_its_norms_row_shares():
    from attnviz.views.contributions import norms_figure
    from attnviz.views.selection import style_for
    from attnviz.views.state import ViewState

    r = _random()
    c = AttentionConfig(text="the cat sat on the mat\nit was tired", num_heads=4, d_model=16, mask="causal", seed=3)
    fig = norms_figure(r, ViewState(config=c), style_for(ViewState(config=c)))
    grid = np.asarray(fig.data[0].z, dtype=np.float64)
    L = r.weights.shape[2]
    top = grid[:L]  # the first row of blocks: head 0 weights, head 0 norms, head 1 weights, head 1 norms
    filled = ~np.isnan(top).all(0)
    edges = np.flatnonzero(np.diff(np.r_[0, filled.astype(int), 0]))
    blocks = [top[:, a:b] for a, b in zip(edges[::2], edges[1::2], strict=True)]
    share = C.row_share(C.weighted_norms(r.parts, r.weights))[0]  # (H, L, S)
    assert np.allclose(blocks[0], r.weights[0, 0].numpy(), atol=1e-6)
    assert np.allclose(blocks[1], share[0].numpy(), atol=1e-6)
    assert np.allclose(blocks[3], share[1].numpy(), atol=1e-6)
    assert not np.allclose(blocks[1], blocks[0], atol=1e-3)  # the norms are not the weights again


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_norms_and_knock_out_on_cuda_match_the_cpu():
    cpu, gpu = _random(), _random(device="cuda")
    assert gpu.parts.v.device.type == "cpu"  # the record's tensors come back to the CPU
    assert torch.allclose(C.weighted_norms(cpu.parts, cpu.weights), C.weighted_norms(gpu.parts, gpu.weights),
                          atol=1e-5)
    assert np.allclose(C.knock_out(cpu.parts, 0, 6).moved, C.knock_out(gpu.parts, 0, 6).moved, atol=1e-5)


def test_the_cli_renders_a_vision_transformers_norms_on_the_image_page(tmp_path):
    pytest.importorskip("transformers")
    import json

    from attnviz import cli

    folder, _m, _p = _save(tmp_path, "vit")
    out = tmp_path / "vit.json"
    assert cli.main(["render", "--model", str(folder), "--page", "image-patches", "--layer", "1", "--view", "norms",
                     "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    norms, weights = np.array(data["view"]["norms"]), np.array(data["weights"])[0]
    assert norms.shape == weights.shape == (4, 17, 17) and len(data["view"]["knock_out"]["moved"]) == 4
    assert ((norms > 0) == (weights > 0)).all()  # a norm is a weight times a positive value norm
    assert cli.main(["render", "--model", str(folder), "--page", "image-patches", "--view", "neurons",
                     "--out", str(tmp_path / "n.html")]) == 0


def test_the_cli_gives_the_image_pages_neuron_view_of_the_followed_token(tmp_path):
    """--page image-patches --view neurons: the JSON holds the query the page follows ([CLS]
    for a ViT, or --patch-at's patch), as the app's image page draws it."""
    pytest.importorskip("transformers")
    import json

    from attnviz import cli
    from attnviz import inputs as I
    from attnviz.views.modality import image_run
    from attnviz.views.state import ViewState

    folder, _m, _p = _save(tmp_path, "vit")
    _inp, r = image_run(ViewState.of(model=str(folder), layer=1), I.sample_image("shapes"))
    for extra, query in (([], 0), (["--patch-at", "5"], 6)):
        out = tmp_path / f"n{query}.json"
        assert cli.main(["render", "--model", str(folder), "--page", "image-patches", "--layer", "1", "--view",
                         "neurons", "--head", "2", *extra, "--out", str(out)]) == 0
        view = json.loads(out.read_text())["view"]
        row = C.neuron_row(r, 0, 2, query)
        assert (view["query"], view["head"], view["layer"]) == (query, 2, 1)
        assert np.allclose(view["q_times_k"], row.product, atol=1e-6) and np.allclose(view["q_dot_k"], row.dot,
                                                                                      atol=1e-5)


def test_a_causal_lms_knock_out_reruns_in_batches_within_the_memory_budget(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from attnviz import limits
    from attnviz.models.registry import load

    folder, _m, _f = _save(tmp_path, "gpt2")
    r = compute(AttentionConfig(text=TEXTS[0], model=str(folder), layer=1))
    whole = C.knock_out(r.parts, 0, r.lengths[0])
    model, calls = load(str(folder)), []
    rerun = model.rerun_without
    monkeypatch.setattr(model, "rerun_without", lambda *a: calls.append(len(a[-1])) or rerun(*a))
    L = r.weights.shape[-1]
    monkeypatch.setattr(limits, "memory_budget_bytes", lambda: 2 * model.heads * L * L * 4 * 3)  # two rows a batch
    split = C.knock_out(r.parts, 0, r.lengths[0])
    assert calls == [2, 2, 1]  # 1 + 4 heads
    assert split.top_p_without == pytest.approx(whole.top_p_without, abs=1e-6) and split.overlap == whole.overlap
