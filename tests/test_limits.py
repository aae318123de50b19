"""One set of bounds for every door, and a memory budget checked before allocating."""

import tracemalloc

import pytest
import torch

from attnviz import AttentionConfig, compute, limits
from attnviz.views.state import parse


def test_a_run_over_the_budget_is_refused_before_anything_is_allocated(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MEMORY_BUDGET_MB", "64")
    cfg = AttentionConfig(text="\n".join(["w " * 600] * 8), num_heads=64, d_model=512, mask="padding", pad_to=600)
    tracemalloc.start()
    allocs = []
    for name in ("empty", "zeros"):  # the model's parameters and the embeddings' buffer
        real = getattr(torch, name)
        monkeypatch.setattr(torch, name, lambda *a, _real=real, **k: allocs.append(a) or _real(*a, **k))
    try:
        with pytest.raises(ValueError) as e:
            compute(cfg)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    msg = str(e.value)
    assert "over this server's budget of 64 MB" in msg and "texts up to" in msg and "fewer heads" in msg
    assert not allocs  # no model, no tensors: refused from the sizes alone
    assert peak < 16 * 2**20


def test_a_long_text_keeps_only_the_weights_and_the_teaching_pages_say_what_fits(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MEMORY_BUDGET_MB", "8")
    cfg = AttentionConfig(text=" ".join(f"w{i}" for i in range(400)), num_heads=4, d_model=32, mask="causal")
    r = compute(cfg)
    assert not r.complete and r.steps.attention.scores is None and any("only the weights" in n for n in r.notes)
    monkeypatch.setenv("ATTNVIZ_MEMORY_BUDGET_MB", "1024")
    full = compute(cfg)
    assert full.complete
    torch.testing.assert_close(r.weights, full.weights, rtol=0, atol=1e-6)  # same numbers, less kept
    torch.testing.assert_close(r.output, full.output, rtol=0, atol=1e-5)
    monkeypatch.setenv("ATTNVIZ_MEMORY_BUDGET_MB", "8")
    with pytest.raises(ValueError, match="keeps every intermediate step.*Up to \\d+ tokens fit here"):
        r.require_complete()


def test_the_budget_names_sizes_that_fit():
    size = limits.RunSize(N=4, H=16, L=2048, S=2048, E=512)
    with pytest.raises(ValueError) as e:
        limits.plan(size, budget=256 * 2**20)
    fits = int(str(e.value).split("texts up to ")[1].split(" ")[0])
    assert limits.RunSize(4, 16, fits, fits, 512).lean_bytes <= 256 * 2**20
    assert limits.RunSize(4, 16, fits + 1, fits + 1, 512).lean_bytes > 256 * 2**20
    assert limits.plan(limits.RunSize(1, 16, 2048, 2048, 64)) == "lean"  # the default budget holds 2048 × 16
    assert limits.plan(limits.RunSize(1, 8, 64, 64, 64)) == "full"


def test_lines_are_bounded_the_same_everywhere():
    text = "\n".join(["hello"] * (limits.MAX_LINES + 1))
    with pytest.raises(ValueError, match=f"the limit is {limits.MAX_LINES}"):
        compute(AttentionConfig(text=text))
    state, warnings = parse({"text": text})
    assert warnings and warnings[0].name == "text" and f"the limit is {limits.MAX_LINES}" in warnings[0].text


@pytest.mark.parametrize("field, value, url_key", [("num_heads", limits.MAX_HEADS * 2, "heads"),
                                                   ("d_model", 4096, "d_model"),
                                                   ("pad_to", limits.MAX_TOKENS + 1, "pad_to"),
                                                   ("seed", limits.MAX_SEED + 1, "seed")])
def test_api_and_url_refuse_the_same_values(field, value, url_key):
    with pytest.raises(ValueError):
        AttentionConfig(**{field: value, "d_model": 512 if field == "num_heads" else 64}
                        if field != "d_model" else {field: value}).validate()
    _, warnings = parse({url_key: str(value), "d_model": "512"} if url_key == "heads" else {url_key: str(value)})
    assert [w.name for w in warnings] == [url_key]


def test_one_re_fit_rule_for_heads():
    from attnviz.limits import fit_heads, head_choices

    assert fit_heads(64, 8) == 8 and fit_heads(48, 5) == 4 and fit_heads(30, 4) == 3 and fit_heads(7, 4) == 1
    for d_model in range(1, 80):
        for wanted in range(1, 20):
            got = fit_heads(d_model, wanted)
            assert d_model % got == 0 and got <= wanted and got in head_choices(d_model)
            assert not any(d_model % h == 0 for h in range(got + 1, min(wanted, d_model) + 1))  # the most that fit


@pytest.mark.parametrize("raw, seconds", [(None, limits.MAX_LEARN_SECONDS), ("30", 30.0), ("inf", float("inf")),
                                          ("soon", limits.MAX_LEARN_SECONDS), ("-5", limits.MAX_LEARN_SECONDS),
                                          ("0", limits.MAX_LEARN_SECONDS)])
def test_a_trainings_clock_is_read_from_the_environment_at_each_training(monkeypatch, raw, seconds):
    if raw is None:
        monkeypatch.delenv("ATTNVIZ_MAX_LEARN_SECONDS", raising=False)
    else:
        monkeypatch.setenv("ATTNVIZ_MAX_LEARN_SECONDS", raw)
    assert limits.max_learn_seconds() == seconds


def test_both_trainings_stop_on_the_clock_the_environment_sets(monkeypatch):
    from attnviz.learn.look import LookSettings, train_settings
    from attnviz.learn.train import LearnSettings, train

    monkeypatch.setenv("ATTNVIZ_MAX_LEARN_SECONDS", "1e-9")  # past at the first checkpoint after step 0
    learn = train(LearnSettings(steps=200))
    look = train_settings(LookSettings(steps=300))
    assert learn["status"] == "stopped at step 50: the 0 s limit", learn["status"]
    assert look["status"] == "stopped at step 100: the 0 s limit", look["status"]
