"""Reference implementations the tests compare against."""

import math

import torch
import torch.nn.functional as F


def seed_attention(Q, K, V, mask=None, dropout=None):
    """The seed tutorial's ``attention`` function, verbatim (comments translated)."""
    d_k = Q.size(-1)
    scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)  # blocked where mask == 0
    attn_weights = F.softmax(scores, dim=-1)
    if dropout is not None:
        attn_weights = dropout(attn_weights)
    output = torch.matmul(attn_weights, V)
    return output, attn_weights


# --- activation patching, one full forward pass per patched component ----------------------
# The plain loop that attnviz.analysis.patching batches: each head (each position of the stream
# into a layer) patched in a whole hooked forward pass of the model, as TransformerLens does it.

def _logit_metric(logits, answer, wrong):
    """logit[answer] − logit[wrong] at the last position, or the answer's log-probability."""
    last = logits[0, -1].double()
    return float(torch.log_softmax(last, -1)[answer]) if wrong is None else float(last[answer] - last[wrong])


def hf_patched_heads(model, out_projections, clean_ids, corrupted_ids, answer, wrong):
    """(layers, H): per head, one forward pass of the corrupted ids with that head's slice of its
    layer's W_O input (every position) taken from the clean run's, by forward pre-hooks."""
    H = model.config.num_attention_heads
    z = {}

    def keep(i):
        def hook(_m, args):
            z[i] = args[0].detach().clone()
        return hook

    handles = [o.register_forward_pre_hook(keep(i)) for i, o in enumerate(out_projections)]
    with torch.no_grad():
        model(clean_ids)
    for h in handles:
        h.remove()
    out = torch.zeros(len(out_projections), H, dtype=torch.float64)
    for layer, o in enumerate(out_projections):
        D = z[layer].shape[-1] // H
        for head in range(H):
            def patch(_m, args, layer=layer, head=head, D=D):
                x = args[0].clone()
                x[..., head * D:(head + 1) * D] = z[layer][..., head * D:(head + 1) * D]
                return (x, *args[1:])
            handle = o.register_forward_pre_hook(patch)
            with torch.no_grad():
                out[layer, head] = _logit_metric(model(corrupted_ids).logits, answer, wrong)
            handle.remove()
    return out.numpy()


def hf_patched_residual(model, blocks, clean_ids, corrupted_ids, answer, wrong):
    """(layers, L): per layer and position, one forward pass of the corrupted ids with the stream
    into that layer, at that position, taken from the clean run's."""
    resid = {}

    def keep(i):
        def hook(_m, args, kwargs):
            resid[i] = (args[0] if args else kwargs["hidden_states"]).detach().clone()
        return hook

    handles = [b.register_forward_pre_hook(keep(i), with_kwargs=True) for i, b in enumerate(blocks)]
    with torch.no_grad():
        model(clean_ids)
    for h in handles:
        h.remove()
    L = clean_ids.shape[1]
    out = torch.zeros(len(blocks), L, dtype=torch.float64)
    for layer, block in enumerate(blocks):
        for p in range(L):
            def patch(_m, args, kwargs, layer=layer, p=p):
                x = (args[0] if args else kwargs["hidden_states"]).clone()
                x[:, p] = resid[layer][:, p]
                return ((x, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": x})
            handle = block.register_forward_pre_hook(patch, with_kwargs=True)
            with torch.no_grad():
                out[layer, p] = _logit_metric(model(corrupted_ids).logits, answer, wrong)
            handle.remove()
    return out.numpy()


def tiny_forward(model, ids, patch=None):
    """Watch it learn's attention-only model written out from its weights (attnviz.models.tiny's
    formula): x = E[ids] + P; per layer x += W_O · concat_h softmax(q_h k_hᵀ / √D, causal) v_h;
    logits = x W_Uᵀ. ``patch(layer, heads)`` may replace the heads' outputs (N, H, L, D)."""
    x = model.embed[ids] + model.pos[: ids.shape[1]]  # (N, L, E)
    N, L, E = x.shape
    H = model.heads
    D = E // H
    future = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
    for layer, mha in enumerate(model.layers):
        q, k, v = (x @ w.T for w in mha.in_proj_weight.chunk(3))  # (N, L, E) each
        q, k, v = (t.view(N, L, H, D).transpose(1, 2) for t in (q, k, v))  # (N, H, L, D)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(D)).masked_fill(future, float("-inf"))
        heads = torch.softmax(scores, -1) @ v  # (N, H, L, D)
        if patch is not None:
            heads = patch(layer, heads)
        x = x + heads.transpose(1, 2).reshape(N, L, E) @ mha.out_proj.weight.T
    return x @ model.unembed.T  # (N, L, V)


def tiny_patched_heads(model, clean_ids, corrupted_ids, answer, wrong):
    kept = {}
    with torch.no_grad():
        tiny_forward(model, clean_ids, lambda layer, heads: kept.setdefault(layer, heads))
        out = torch.zeros(len(model.layers), model.heads, dtype=torch.float64)
        for layer in range(len(model.layers)):
            for head in range(model.heads):
                def patch(i, heads, layer=layer, head=head):
                    if i != layer:
                        return heads
                    heads = heads.clone()
                    heads[:, head] = kept[layer][:, head]
                    return heads
                out[layer, head] = _logit_metric(tiny_forward(model, corrupted_ids, patch), answer, wrong)
    return out.numpy()


def assert_within(got, want, rel=1e-4):
    """|got − want| ≤ rel × max(1, |want|) everywhere (the shapes equal): a relative bound that turns absolute
    below 1, as the lens's and the attribution's comparisons against TransformerLens state it."""
    import numpy as np

    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    worst = float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))))
    assert worst <= rel, f"off by {worst:.3g} × max(1, |x|)"
