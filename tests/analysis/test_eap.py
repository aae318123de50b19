"""Edge attribution (attnviz.analysis.eap, through attnviz.edge_attribution): EAP, EAP-IG on inputs and
EAP-IG on activations against a reference written out here from hannamw/EAP-IG's definitions
(circuitkit 0.2.0's ``get_scores_eap``, ``get_scores_eap_ig``, ``get_scores_ig_activations``) in plain
autograd on the transformers model itself: hooks that give each receiver's input a zero delta of its
own (each head's q, k, v through the model's own projection), one gradient per receiver, and each
edge's score summed edge by edge. On GPT-2, LLaMA (grouped-query: the reference runs the same model
with its KV heads repeated per query head, as TransformerLens's ``ungroup_grouped_query_attention``
does for EAP-IG) and GPT-NeoX folders with every norm and bias perturbed. Then completeness of
EAP-IG's input edges, faithfulness with every edge and none, the names and the refusals."""

from __future__ import annotations

import pytest
import torch

import attnviz
from attnviz.models.base import ModelError
from attnviz.models.stacks import FINAL_NORMS, NORMS_IN, HFStack, first_found
from attnviz.models.tiny import AttentionOnly
from tests.support import circuits, hfmodels

CLEAN, CORRUPTED = "the cat sat on the mat", "the mat sat on the cat"
ANSWER, WRONG = "it", "was"
NORMS_MLP = ("ln_2", "post_attention_layernorm")


@pytest.fixture(scope="module", params=["gpt2", "llama", "neox"])
def pair(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("eap")
    folder, _model, tok = circuits.perturbed(root, request.param)
    reference = circuits.without_shared_kv_heads(root, folder) if request.param == "llama" else folder
    return request.param, folder, reference, tok


def _project(module, x):
    """``module``'s projection of ``x`` (..., E), written out (calling the module would run its hooks)."""
    if isinstance(module, torch.nn.Linear):
        return torch.nn.functional.linear(x, module.weight, module.bias)
    return x @ module.weight + module.bias  # a Conv1D holds (in, out)


class Reference:
    """The model with every node's output read and every receiver's input given a zero delta, by hooks."""

    def __init__(self, folder):
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(str(folder), attn_implementation="eager").eval()
        cfg = self.model.config
        self.H = cfg.num_attention_heads if hasattr(cfg, "num_attention_heads") else cfg.n_head
        self.stack = HFStack("reference", self.model, self.H)
        self.n = self.stack.layers
        self.parallel = bool(getattr(cfg, "use_parallel_residual", False))
        self.senders = ["input"] + [x for layer in range(self.n)
                                    for x in [f"a{layer}.h{h}" for h in range(self.H)] + [f"m{layer}"]]
        self.receivers = [x for layer in range(self.n) for x in
                          [f"a{layer}.h{h}<{c}>" for c in "qkv" for h in range(self.H)] + [f"m{layer}"]] + ["logits"]

    def edges(self) -> list[tuple[str, str]]:
        """Every (sender, receiver) pair with a path of its own, written out by layer."""
        def layer_of(s):
            return -1 if s == "input" else int(s[1:].split(".")[0])
        out = []
        for r in self.receivers:
            for s in self.senders:
                if r == "logits":
                    ok = True
                elif r.startswith("a"):
                    ok = layer_of(s) < layer_of(r)
                else:
                    ok = layer_of(s) < layer_of(r) or (layer_of(s) == layer_of(r) and s.startswith("a")
                                                       and not self.parallel)
                if ok:
                    out.append((s, r))
        return out

    def run(self, ids, *, deltas=None, replace=None):
        """(logits at the last position (V,), every sender's output {name: (L, E)}); ``deltas``: {receiver:
        (L, E)} added to its input; ``replace``: {"input" | ("a", layer) | ("m", layer): (L, E)} what that node (a
        layer's heads together, b_O added back) writes instead, constant."""
        deltas, replace = deltas or {}, replace or {}
        acts, handles, streams = {}, [], {}
        blocks = self.stack.blocks

        def pre_block(layer):
            def hook(_m, args, kwargs):
                x = args[0]
                if layer == 0 and "input" in replace:
                    x = replace["input"][None] + 0 * x
                if layer == 0:
                    acts["input"] = x[0]
                streams[layer] = x
                return (x, *args[1:]), kwargs
            return hook

        def qkv(layer, c):
            norm, module, columns = self.stack.projection(layer, c)

            def hook(_m, _args, out):
                out = out.clone()
                for h in range(self.H):
                    d = deltas.get(f"a{layer}.h{h}<{c}>")
                    if d is not None:
                        out[..., columns[h]] = _project(module, norm(streams[layer] + d))[..., columns[h]]
                return out
            return hook

        def pre_o(layer):
            o = self.stack.o[layer]
            w = o.weight if isinstance(o, torch.nn.Linear) else o.weight.T  # (E, H·D)
            D = w.shape[1] // self.H

            def hook(_m, args):
                for h in range(self.H):
                    acts[f"a{layer}.h{h}"] = args[0][0, :, h * D:(h + 1) * D] @ w[:, h * D:(h + 1) * D].T  # (L, E)
            return hook

        def post_o(layer):
            def hook(_m, _args, out):
                return replace[("a", layer)][None] + 0 * out if ("a", layer) in replace else out
            return hook

        def pre_norm(name):
            def hook(_m, args):
                return (args[0] + deltas[name],) if name in deltas else None
            return hook

        def post_mlp(layer):
            def hook(_m, _args, out):
                out = replace[("m", layer)][None] + 0 * out if ("m", layer) in replace else out
                acts[f"m{layer}"] = out[0]
                return out
            return hook

        for layer, b in enumerate(blocks):
            handles.append(b.register_forward_pre_hook(pre_block(layer), with_kwargs=True))
            for c in "qkv":
                _norm, module, _cols = self.stack.projection(layer, c)
                handles.append(module.register_forward_hook(qkv(layer, c)))
            handles.append(self.stack.o[layer].register_forward_pre_hook(pre_o(layer)))
            handles.append(self.stack.o[layer].register_forward_hook(post_o(layer)))
            handles.append(first_found(b, NORMS_MLP).register_forward_pre_hook(pre_norm(f"m{layer}")))
            handles.append(self.stack.mlp[layer].register_forward_hook(post_mlp(layer)))
        base = getattr(self.model, "base_model", self.model)
        handles.append(first_found(base, FINAL_NORMS).register_forward_pre_hook(pre_norm("logits")))
        assert first_found(blocks[0], NORMS_IN) is not None
        try:
            logits = self.model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1]
        finally:
            for h in handles:
                h.remove()
        return logits, acts

    def scores(self, clean, corrupted, a, w, method, steps):
        """{edge name: score}, each edge's gradient its own receiver's, each score summed edge by edge."""
        def m(logits):
            return logits[a] - logits[w]
        with torch.no_grad():
            _l, clean_acts = self.run(clean)
            _l, corrupted_acts = self.run(corrupted)
        L, E = clean_acts["input"].shape
        if method == "eap":
            runs = [{}]
        elif method == "eap-ig-inputs":
            runs = [{"input": corrupted_acts["input"] + k / steps * (clean_acts["input"] - corrupted_acts["input"])}
                    for k in range(1, steps + 1)]
        else:
            def layer(acts, layer):  # the attention layer's whole output, b_O included
                b = self.stack.o[layer].bias
                return sum(acts[f"a{layer}.h{h}"] for h in range(self.H)) + (0 if b is None else b.detach())
            nodes = ["input"] + [x for layer in range(self.n) for x in (("a", layer), ("m", layer))]
            runs = []
            for node in nodes:
                for k in range(1, steps + 1):
                    if node == "input":
                        c, x = clean_acts["input"], corrupted_acts["input"]
                    elif node[0] == "a":
                        c, x = layer(clean_acts, node[1]), layer(corrupted_acts, node[1])
                    else:
                        c, x = clean_acts[f"m{node[1]}"], corrupted_acts[f"m{node[1]}"]
                    runs.append({node: (k / steps * c + (1 - k / steps) * x).detach()})
        grads = {r: torch.zeros(L, E) for r in self.receivers}
        for replace in runs:
            deltas = {r: torch.zeros(L, E, requires_grad=True) for r in self.receivers}
            logits, _acts = self.run(clean, deltas=deltas, replace=replace)
            got = torch.autograd.grad(m(logits), list(deltas.values()), allow_unused=True)
            for r, g in zip(deltas, got, strict=True):
                if g is not None:
                    grads[r] += g / len(runs)
        return {f"{s}->{r}": float(((corrupted_acts[s] - clean_acts[s]) * grads[r]).sum()) for s, r in self.edges()}


@pytest.mark.parametrize("method", ["eap", "eap-ig-inputs", "eap-ig-activations"])
def test_every_edge_as_written_out(pair, method):
    kind, folder, reference, tok = pair
    ref = Reference(reference)
    ids = [tok(t)["input_ids"] for t in (CLEAN, CORRUPTED)]
    a, w = tok.convert_tokens_to_ids(ANSWER), tok.convert_tokens_to_ids(WRONG)
    want = ref.scores(*ids, a, w, method, 3)
    got = attnviz.edge_attribution(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG, method=method, steps=3)
    assert list(got) == list(want)  # the same edges, named alike, in the same order
    g, r = torch.tensor([got[e] for e in want]), torch.tensor(list(want.values()))
    big = float(r.abs().max())
    assert big > 5e-3  # edges that move the metric: a wrong gradient or difference would show
    # 1e-4 × max(1, |scores|), and no looser than 1e-4 of a tenth where the scores are small (GPT-2's here)
    assert float((g - r).abs().max()) <= 1e-4 * min(max(1.0, big), max(0.1, big)), float((g - r).abs().max())


def test_ig_on_inputs_tends_to_completeness(pair):
    """EAP-IG's input edges: Δinput · mean gradient along the corrupted → clean inputs, the right Riemann sum of
    the integral of the gradient, tends to m(corrupted) − m(clean) as the points grow (integrated gradients'
    completeness, with EAP-IG's sign: corrupted minus clean)."""
    kind, folder, _reference, _tok = pair
    def input_sum(steps):
        e = attnviz.edge_attribution(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG,
                                     method="eap-ig-inputs", steps=steps)
        return sum(s for name, s in e.items() if name.startswith("input->")), e.corrupted - e.clean
    few, gap = input_sum(1)
    many, _gap = input_sum(256)
    assert abs(gap) > 1e-2
    assert abs(many - gap) <= 0.02 * abs(gap), (many, gap)
    assert abs(many - gap) < abs(few - gap)


def test_faithfulness_with_every_edge_is_the_clean_run_and_with_none_the_corrupted(pair):
    kind, folder, _reference, _tok = pair
    e = attnviz.edge_attribution(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG)
    every = attnviz.circuit_faithfulness(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG, edges=list(e))
    none = attnviz.circuit_faithfulness(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG, edges=[])
    tol = 1e-5 * max(1.0, abs(every.clean), abs(every.corrupted))
    assert every.edges == len(e) and none.edges == 0
    assert abs(every.metric - every.clean) <= tol and abs(none.metric - none.corrupted) <= tol
    assert abs(every.clean - every.corrupted) > 1e-2
    assert every.fraction == pytest.approx(1, abs=1e-3) and none.fraction == pytest.approx(0, abs=1e-3)
    some = attnviz.circuit_faithfulness(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG,
                                        edges=[n for n, _s in e.top(len(e) // 2)])
    assert abs(some.metric - every.metric) > 1e-4 and abs(some.metric - none.metric) > 1e-4  # in between: it patches
    curve = attnviz.faithfulness_curve(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG, attribution=e)
    assert [c.edges for c in curve] == [c for c in (1, 2, 5, 10, 20, 50, 100, 200) if c < len(e)] + [len(e)]
    assert curve[-1].metric == pytest.approx(every.metric, abs=tol)
    ten = attnviz.circuit_faithfulness(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG,
                                       edges=[n for n, _s in e.top(10)])
    assert curve[3].edges == 10 and curve[3].metric == pytest.approx(ten.metric, abs=tol)  # one row = one run


def test_faithfulness_against_the_reference_patched_by_hand(pair):
    """One edge dropped: the clean run with that receiver's input given the sender's corrupted-minus-clean
    output; everything else as in the clean run (the sender's own output is the clean one there)."""
    kind, folder, reference, tok = pair
    ref = Reference(reference)
    ids = [tok(t)["input_ids"] for t in (CLEAN, CORRUPTED)]
    a, w = tok.convert_tokens_to_ids(ANSWER), tok.convert_tokens_to_ids(WRONG)
    e = attnviz.edge_attribution(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG)
    for name, _score in e.top(3):
        sender, receiver = name.split("->")
        with torch.no_grad():
            _l, clean_acts = ref.run(ids[0])
            _l, corrupted_acts = ref.run(ids[1])
            logits, _acts = ref.run(ids[0], deltas={receiver: corrupted_acts[sender] - clean_acts[sender]})
        got = attnviz.circuit_faithfulness(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG,
                                           edges=[n for n in e if n != name])
        want = float(logits[a] - logits[w])
        assert got.metric == pytest.approx(want, abs=1e-4 * max(1.0, abs(want)))
        assert abs(want - got.clean) > 1e-5  # the edge matters: a patch in the wrong place would show


@pytest.mark.parametrize("pair", ["llama"], indirect=True)  # the grouped-query folder: 4 query heads, 2 KV heads
def test_grouped_query_heads_are_named_as_query_heads(pair):
    _kind, folder, _reference, _tok = pair
    e = attnviz.edge_attribution(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG)
    for h in range(4):  # a key and a value input for each query head, not each KV head
        for c in "kv":
            assert f"input->a0.h{h}<{c}>" in e and f"a0.h{h}->a1.h{h}<{c}>" in e
    assert "input->a0.h4<k>" not in e
    # Query heads 0 and 1 share KV head 0: each reads its own copy of the key, so their edges differ.
    assert abs(e["m0->a1.h0<k>"] - e["m0->a1.h1<k>"]) > 1e-6
    rows = e.table()
    assert {"edge": "input->a0.h1<k>", "sender": "input", "receiver": "a0.h1", "input": "k",
            "score": e["input->a0.h1<k>"]} in rows
    assert len(rows) == len(e) == 110


def test_the_mapping_ranks_and_keeps_signs(pair):
    kind, folder, _reference, _tok = pair
    e = attnviz.edge_attribution(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG)
    top = e.top(5)
    assert [abs(s) for _n, s in top] == sorted((abs(s) for s in e.values()), reverse=True)[:5]
    assert any(s < 0 for s in e.values()) and any(s > 0 for s in e.values())
    assert e.to_dict()["scores"] == dict(e.items())
    assert {"a0.h1->logits", "input->m0", "m1->logits"} <= set(e)
    assert ("a0.h1->m0" in e) == (kind != "neox")  # GPT-NeoX's MLP reads the stream its attention reads


def test_the_tiny_model_and_the_refusals(tmp_path):
    torch.manual_seed(0)
    model = AttentionOnly(vocab=20, length=16, layers=2, heads=2, d_model=16, seed=0).eval()
    clean, corrupted = [1, 5, 9, 12, 5], [1, 6, 9, 12, 5]
    e = attnviz.edge_attribution(model, clean, corrupted, answer=9, method="eap-ig-activations", steps=2)
    assert len(e) == 2 * 3 * 1 + 2 * 3 * 3 + 5 and not any(n.startswith("m") or "->m" in n for n in e)
    every = attnviz.circuit_faithfulness(model, clean, corrupted, answer=9, edges=list(e))
    assert every.metric == pytest.approx(every.clean, abs=1e-5)
    with pytest.raises(ValueError, match="method must be 'eap', 'eap-ig-inputs' or 'eap-ig-activations'"):
        attnviz.edge_attribution(model, clean, corrupted, answer=9, method="ig")
    for steps in (0, 257, 2.5, True):
        with pytest.raises(ValueError, match="steps must be a whole number from 1 to 256"):
            attnviz.edge_attribution(model, clean, corrupted, answer=9, method="eap-ig-inputs", steps=steps)
    for bad in ("a1.h0->a0.h1<q>", "a0.h9->logits", "a0.h0->a1.h1", "a0.h0->m0"):
        with pytest.raises(ValueError, match="is not an edge of"):
            attnviz.circuit_faithfulness(model, clean, corrupted, answer=9, edges=[bad])
    with pytest.raises(ValueError, match="The clean prompt has 5 tokens and the corrupted one 4"):
        attnviz.edge_attribution(model, clean, corrupted[:4], answer=9)
    root = tmp_path
    hfmodels.save(root, "bert")
    with pytest.raises(ValueError, match="is an encoder: it has no next token"):
        attnviz.edge_attribution(str(root / "bert"), CLEAN, CORRUPTED, answer=ANSWER)
    folder, _m, _tok = hfmodels.save(root, "gpt2")
    with pytest.raises(ValueError, match="is not one token"):
        attnviz.edge_attribution(str(folder), CLEAN, CORRUPTED, answer="cat sat")
    folder, _m, _tok = hfmodels.save(root, "qwen3")  # q and k normed per head: not the attention the split runs
    with pytest.raises(ModelError, match="its edges cannot be scored"):
        attnviz.edge_attribution(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG)
