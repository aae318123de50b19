"""The pages about language on the real model (SmolLM2-135M), each page's first reading against its floor, in one
process: the work the page cannot avoid, written plainly in torch and transformers on the same loaded weights
(attention through SDPA, no weights returned, nothing kept that the page does not draw).

- **Patching**: the page's whole sweep (``views.patching.run_of``: every head, every layer × position, the
  logit attribution and both prompts' attention) on the indirect-object pair, against the plain batched sweep:
  the clean and corrupted runs, then per layer one forward pass of 9 copies with one head's input to W_O
  replaced by the clean run's (a pre-hook), and one of P copies with one position's residual replaced.
- **Circuit**: the attribution graph (``views.attribution.attribution_run``: EAP-IG over 5 points, the
  faithfulness curve, the exact effects of the top edges) against the clean and corrupted runs, one batched
  forward and backward of the 5 interpolated inputs, and one batched forward of as many copies as the curve and
  the effects run.
- **Long context**: ``long_attention`` on the shipped text, against the body's SDPA pass plus each layer's
  weights computed once (q·kᵀ, exp against the row's log-sum-exp, in row chunks); a policy's cost
  (``kv_keep``) against the body's pass over the prompt and the two one-token steps.
- **Q/K map**: the corpus run at layer 5 (``corpus_run``) against the body's plain pass over each sentence, up to
  layer 5.
- **Explorer, generation**: 12 greedy tokens with the attention that chose each (``greedy``) against
  ``generate`` without attentions.

Medians of ``--runs`` (interleaved), the ratio to the floor, and the absolute seconds beside them.

    python bench/bench_real_pages.py [--runs 3] [--only patching,circuit,long,qk,generate]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

MODEL = "smollm2-135m"


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _sdpa(hf):
    from attnviz.models import capture

    return capture.twin(hf, hf.model)  # the same weights, attention through SDPA (no consumer: plain SDPA)


def patching_pair(hf):
    from attnviz.views import patching as P
    from attnviz.views.state import ViewState

    state = P.with_example(ViewState.of(model=MODEL))

    def page():
        P.run_of(state)

    twin = _sdpa(hf)
    tok = hf.tokenizer
    pair = state.pair
    clean, corrupted = (torch.tensor([tok(t)["input_ids"]]) for t in (pair.clean, pair.corrupted))
    a, w = tok.convert_tokens_to_ids([pair.answer, pair.wrong])
    layers = twin.model.layers
    H, D = hf.heads, hf.width // hf.heads

    def floor():
        with torch.no_grad():
            kept_o, kept_x = {}, {}
            hooks = [layer.self_attn.o_proj.register_forward_pre_hook(
                lambda m, args, i=i: kept_o.__setitem__(i, args[0].detach())) for i, layer in enumerate(layers)]
            hooks += [layer.register_forward_pre_hook(
                lambda m, args, kwargs, i=i: kept_x.__setitem__(i, (args[0] if args else kwargs["hidden_states"])
                                                               .detach()), with_kwargs=True)
                for i, layer in enumerate(layers)]
            twin(input_ids=clean, logits_to_keep=1)
            for h in hooks:
                h.remove()
            twin(input_ids=corrupted, logits_to_keep=1)
            P_ = corrupted.shape[1]
            for i, layer in enumerate(layers):
                def heads(m, args, i=i):
                    x = args[0].clone()  # (H copies, L, H·D): copy h takes head h's slice from the clean run
                    for h in range(H):
                        x[h, :, h * D:(h + 1) * D] = kept_o[i][0, :, h * D:(h + 1) * D]
                    return (x,)
                hook = layer.self_attn.o_proj.register_forward_pre_hook(heads)
                out = twin(input_ids=corrupted.repeat(H, 1), logits_to_keep=1).logits[:, -1]
                (out[:, a] - out[:, w]).tolist()
                hook.remove()

                def positions(m, args, kwargs, i=i):
                    x = (args[0] if args else kwargs["hidden_states"]).clone()  # copy p: position p from clean
                    for p in range(P_):
                        x[p, p] = kept_x[i][0, p]
                    if args:
                        return (x, *args[1:]), kwargs
                    return args, {**kwargs, "hidden_states": x}
                hook = layer.register_forward_pre_hook(positions, with_kwargs=True)
                out = twin(input_ids=corrupted.repeat(P_, 1), logits_to_keep=1).logits[:, -1]
                (out[:, a] - out[:, w]).tolist()
                hook.remove()

    return "Patching: the whole sweep", page, "the plain batched sweep (hooks, SDPA)", floor


def circuit_pair(hf):
    from attnviz.views import attribution as A
    from attnviz.views import patching as P
    from attnviz.views.state import ViewState

    pair = P.with_example(ViewState.of(model=MODEL)).pair
    from attnviz.analysis.eap import CURVE_COUNTS

    runs = len(CURVE_COUNTS) + A.EXACT_TOP  # the curve's points and the top edges' exact effects

    def page():
        A.attribution_run(MODEL, pair.clean, pair.corrupted, pair.answer, pair.wrong)

    twin = _sdpa(hf)
    tok = hf.tokenizer
    clean, corrupted = (torch.tensor([tok(t)["input_ids"]]) for t in (pair.clean, pair.corrupted))
    a, w = tok.convert_tokens_to_ids([pair.answer, pair.wrong])
    embed = twin.get_input_embeddings()

    def floor():
        with torch.no_grad():
            twin(input_ids=clean, logits_to_keep=1)
            twin(input_ids=corrupted, logits_to_keep=1)
            e0, e1 = embed(corrupted), embed(clean)
        alphas = torch.linspace(0, 1, 6)[1:, None, None]  # 5 points
        x = (e0 + alphas * (e1 - e0)).requires_grad_(True)  # (5, L, d)
        out = twin(inputs_embeds=x, logits_to_keep=1).logits[:, -1]
        (out[:, a] - out[:, w]).sum().backward()
        with torch.no_grad():
            out = twin(input_ids=corrupted.repeat(runs, 1), logits_to_keep=1).logits[:, -1]

    return "Circuit: the attribution graph (EAP-IG, curve, exact effects)", page, \
        f"clean + corrupted, 5 points forward and backward, {runs} forwards", floor


def long_pairs(hf):
    from attnviz.analysis.kvcache import kv_keep
    from attnviz.analysis.longcontext import long_attention, long_reader
    from attnviz.inputs.longtexts import LONG_TEXTS, long_text
    from attnviz.models import capture

    text = long_text(LONG_TEXTS[0])
    ids = long_reader(hf).ids(text)
    twin = _sdpa(hf)
    body = twin.base_model
    x = torch.tensor([ids])

    def weights_once(q, k, lse, scale, causal):  # each layer's weights computed once, in row chunks
        q, k = q.float() * scale, k.float().repeat_interleave(q.shape[0] // k.shape[0], 0)
        n = q.shape[1]
        for r in range(0, n, 256):
            s = q[:, r:r + 256] @ k.transpose(-1, -2)  # (H, rows, n)
            s = s.masked_fill(torch.arange(n)[None, :] > torch.arange(r, min(r + 256, n))[:, None], float("-inf"))
            torch.exp(s - torch.logsumexp(s, -1, keepdim=True)).amax(-1)

    def attention_floor():
        with capture.each_layer(weights_once), torch.no_grad():
            body(input_ids=x, use_cache=False)

    def cost_floor():
        with torch.no_grad():
            cache = body(input_ids=x, use_cache=True).past_key_values
            for layer in cache.layers:
                layer.keys, layer.values = layer.keys[:, :, :-1], layer.values[:, :, :-1]
            at = torch.tensor([[len(ids) - 1]])
            twin(input_ids=x[:, -1:], past_key_values=cache, position_ids=at, use_cache=True)

    return [("Long context: every layer's numbers", lambda: long_attention(hf, text),
             "the body's SDPA pass + each layer's weights once", attention_floor),
            ("Long context: the streaming policy's cost", lambda: kv_keep(hf, text, policy="streaming", ratio=0.5),
             "the body's pass + a one-token step", cost_floor)]


def qk_pair(hf):
    from attnviz import AttentionConfig
    from attnviz.analysis.qkcorpus import corpus_run
    from attnviz.inputs.corpus import default_corpus

    lines = default_corpus()
    config = AttentionConfig(model=MODEL, layer=5)
    twin = _sdpa(hf)
    ids = [hf.tokenizer(line)["input_ids"] for line in lines]

    class Stop(Exception):
        pass

    def stop(*_a):
        raise Stop

    def floor():
        hook = twin.base_model.layers[5].register_forward_hook(stop)  # the pass stops after layer 5, as the map's
        try:
            with torch.no_grad():
                for one in ids:
                    try:
                        twin.base_model(input_ids=torch.tensor([one]), use_cache=False)
                    except Stop:
                        pass
        finally:
            hook.remove()

    return f"Q/K map: {len(lines)} sentences at layer 5", lambda: corpus_run(config, lines), \
        "the body's pass over each sentence up to layer 5", floor


def generate_pair(hf):
    from attnviz.models.generate import chat_ids, greedy

    ids = chat_ids(hf, "What is the capital of France?")

    def floor():
        with torch.no_grad():
            hf.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                              max_new_tokens=12, do_sample=False, pad_token_id=hf.tokenizer.eos_token_id)

    return "Explorer: 12 greedy tokens, asked as a question", lambda: greedy(hf, ids, 12), \
        "generate without attentions", floor


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="patching,circuit,long,qk,generate")
    args = ap.parse_args()
    from attnviz.models.door import open as open_model

    hf = open_model(MODEL).load()
    makers = {"patching": lambda: [patching_pair(hf)], "circuit": lambda: [circuit_pair(hf)],
              "long": lambda: long_pairs(hf), "qk": lambda: [qk_pair(hf)], "generate": lambda: [generate_pair(hf)]}
    pairs = [p for name in args.only.split(",") for p in makers[name]()]
    threads = torch.get_num_threads()
    print(f"| page ({MODEL}, {threads} threads) | its first reading (s) | floor | floor (s) | × floor |")
    print("|---|---:|---|---:|---:|")
    for name, page, floor_name, floor in pairs:
        page()  # warm: the model's twin, the sweep's caches are cleared below
        floor()
        times = {"page": [], "floor": []}
        for _ in range(args.runs):
            _clear()
            times["page"].append(_timed(page))
            times["floor"].append(_timed(floor))
        p, f = statistics.median(times["page"]), statistics.median(times["floor"])
        print(f"| {name} | {p:.2f} | {floor_name} | {f:.2f} | {p / f:.2f} |", flush=True)


def _clear() -> None:
    """Every cache a first reading would find empty (the loaded model, and what its load looked up, stay)."""
    from attnviz import cache

    for name, c in cache.CACHES.items():
        if name not in ("models", "lookups"):
            c.clear()


if __name__ == "__main__":
    main()
