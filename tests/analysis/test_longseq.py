"""The long-sequence page: its analysis on hand-checkable cases, its page, its links and its CLI."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from attnviz import limits
from attnviz.analysis import longseq as LS
from attnviz.core.masks import dilated_window_mask, global_tokens_mask
from attnviz.run.config import AttentionConfig
from attnviz.views.state import ViewState, parse
from tests.support.apphelp import app, figures


def test_repeat_to_cycles_the_tokens():
    assert LS.repeat_to(["a", "b", "c"], 7) == ["a", "b", "c", "a", "b", "c", "a"]


def test_long_input_repeats_the_first_line_and_projects_per_head():
    inp = LS.long_input(AttentionConfig(text="one two three\nignored", num_heads=4, d_model=32), 10)
    assert inp.tokens[:4] == ["one", "two", "three", "one"] and inp.L == 10
    assert inp.q.shape == inp.k.shape == inp.v.shape == (1, 4, 10, 8)
    with pytest.raises(ValueError, match=f"between 1 and {limits.MAX_LONG_TOKENS:,}"):
        LS.long_input(AttentionConfig(), limits.MAX_LONG_TOKENS + 1)


def test_dilated_and_global_masks():
    m = dilated_window_mask(7, 1, 2)
    assert m[3].tolist() == [False, True, False, True, False, True, False]  # |i−j| ≤ 2 and even
    g = global_tokens_mask(4, 1)
    assert g[0].all() and g[:, 0].all() and not g[1:, 1:].any()
    p = LS.pattern_mask("global+window", 8, 1)
    assert p[0].all() and p[5, 4:7].all() and not p[5, 2]


def test_the_walk_ends_where_attention_does_and_never_holds_the_matrix():
    inp = LS.long_input(AttentionConfig(num_heads=2, d_model=16), 300)
    walk = LS.flash_walk(inp, 64, 50, causal=True)
    assert len(walk.steps) == 6 and walk.first_row == 256  # the last query block sees all 6 key blocks
    assert walk.max_diff <= 1e-5 and walk.block_diff <= 1e-5
    assert walk.peak_bytes < walk.naive_bytes / 2


def test_the_sweep_counts_on_shapes_only_where_an_operator_is_large(monkeypatch):
    """Meta's kernels cost about the same an operator whatever its size, so the sweep counts a path on shapes only
    from SHAPES_FROM numbers an operator: the naive path's (H, L, L), the tiled path's (H, L, block_k); SDPA never."""
    from attnviz.analysis import tensorbytes as TB

    calls, count = [], TB.peak_tensor_bytes

    def spy(path, *inputs, shapes_only=False):
        calls.append((inputs[0].shape[2], shapes_only))
        return count(path, *inputs, shapes_only=shapes_only)

    monkeypatch.setattr(LS, "peak_tensor_bytes", spy)
    monkeypatch.setattr(TB, "SHAPES_FROM", 2 * 64 * 64)  # the naive path at L = 64, 2 heads; the tiled at L = 128
    LS.cost_sweep(2, 4, "cpu", 32, 16, causal=False, lengths=(32, 64, 128))
    # per length: naive, tiled, SDPA
    assert calls == [(32, False), (32, False), (32, False), (64, True), (64, False), (64, False),
                     (128, True), (128, False), (128, False)]
    LS.cost_sweep(2, 4, "cpu", 32, 64, causal=False, lengths=(64,))
    assert calls[-3:] == [(64, True), (64, True), (64, False)]


def test_the_cost_sweep_skips_the_naive_path_over_the_budget(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MEMORY_BUDGET_MB", "1")
    sweep = LS.cost_sweep(2, 8, "cpu", 32, 32, causal=False, lengths=(64, 512))
    assert sweep.ms["naive"][0] is not None and sweep.ms["naive"][1] is None and sweep.bytes["naive"][1] is None
    assert all(v is not None for v in sweep.ms["tiled"] + sweep.ms["sdpa"])
    assert sweep.skipped and "L=512" in sweep.skipped[0]
    # measured, not computed: the naive path's peak holds at least its scores and weights
    assert sweep.bytes["naive"][0] >= 2 * 2 * 64 * 64 * 4
    assert sweep.bytes["tiled"][1] < 2 * 2 * 512 * 512 * 4


def test_sparse_patterns_compute_a_fraction_and_a_distance_per_query():
    inp = LS.long_input(AttentionConfig(num_heads=2, d_model=16), 64)
    out = {s.pattern: s for s in LS.sparse_patterns(inp, 2)}
    assert out["window"].fraction == pytest.approx(float(LS.pattern_mask("window", 64, 2).float().mean()))
    assert len(out["dilated"].distance) == 64 and all(d >= 0 for d in out["dilated"].distance)
    full = LS.sparse_patterns(inp, 64)  # a window over everything: the same as full attention
    assert max(full[0].distance) <= 1e-5


def test_low_rank_errors_fall_to_zero_at_full_rank():
    inp = LS.long_input(AttentionConfig(num_heads=2, d_model=16), 32)
    lr = LS.low_rank(inp)
    assert lr.ranks[-1] == 32 and lr.truncated[-1] <= 1e-6
    assert all(a >= b - 1e-9 for a, b in zip(lr.truncated, lr.truncated[1:], strict=False))
    assert len(lr.spectrum) == 2 and lr.spectrum[0][0] >= lr.spectrum[0][-1]
    with pytest.raises(ValueError, match="SVD"):
        LS.low_rank(LS.long_input(AttentionConfig(), limits.MAX_LOW_RANK_TOKENS + 1))


def test_kernel_paths_agree_and_are_timed():
    inp = LS.long_input(AttentionConfig(num_heads=2, d_model=16), 128)
    ref = F.scaled_dot_product_attention(inp.q, inp.k, inp.v)
    torch.testing.assert_close(LS.naive(inp.q, inp.k, inp.v), ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(LS.baddbmm_path(inp.q, inp.k, inp.v), ref, atol=1e-5, rtol=0)
    times = LS.kernel_times(inp)
    assert set(times) >= {"matmul", "baddbmm", "SDPA"} and all(t > 0 for t in times.values())


@pytest.mark.parametrize("query, name", [("block_q=0", "block_q"), ("length=100000", "length"),
                                         ("rank=0", "rank"), ("pattern=diag", "pattern"), ("part=x", "part")])
def test_bad_long_settings_from_a_link_fall_back_with_a_warning(query, name):
    state, warnings = parse(dict([query.split("=")]))
    assert [w.name for w in warnings] == [name] and state.value(name) == ViewState().value(name)


def test_the_page_draws_every_part():
    """The cost sweep (seconds of measuring) runs in the background: the page draws the other
    parts meanwhile, with its progress, and the two cost charts once it is done."""
    from attnviz.views.longseq import COSTS

    at = app("length=256&heads=2&d_model=16&tile=3&rank=600", page="app_pages/long_sequences.py", timeout=180)
    assert not at.exception and not at.error
    first = [f["layout"]["title"]["text"] for f in figures(at)]
    assert at.session_state["rank"] == 256  # rank 600 is over the 256 tokens: bounded by the run (and said)
    assert all(job.done.wait(300) for job in COSTS.jobs())
    at.run(timeout=180)
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert len(first) in (7, 9) and len(titles) == 9 and titles[2].startswith("key block 3")
    assert [h.value[:2] for h in at.header] == ["1.", "2.", "3.", "4.", "5."]


@pytest.mark.parametrize("part", LS.PARTS)
def test_every_part_renders_from_the_cli(tmp_path, part):
    from attnviz import cli

    out = tmp_path / f"{part}.html"
    assert cli.main(["render", "--page", "long-sequences", "--part", part, "--length", "256", "--heads", "2",
                     "--d-model", "16", "--out", str(out)]) == 0
    assert b"plotly" in out.read_bytes()[:200_000].lower()


def test_a_block_of_zero_is_one_line_in_the_cli(capsys):
    from attnviz import cli

    assert cli.main(["render", "--page", "long-sequences", "--block-q", "0", "--out", "x.html"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "block_q" in err and "between 1 and" in err
    json.dumps(err)


def test_segment_means_converge_to_exact_at_full_rank_and_a_random_projection_does_not():
    """The default projection's error falls to ≤ 1e-5 at k = S; the untrained random one's
    scale grows with S/k (a row sums S/k keys), so it is off by more than the output itself."""
    inp = LS.long_input(AttentionConfig(num_heads=2, d_model=16), 64)
    lr = LS.low_rank(inp)
    assert lr.linformer[-1] <= 1e-5 and lr.linformer[0] > 1e-2  # exact only at k = S
    assert lr.random[0] > 1.0 and lr.random[-1] > 1e-2
    from attnviz.core.efficient import low_rank_projection as projection

    E, bias = projection(3, 8)  # segments of 3, 3, 2 keys: each row a mean, each bias log(its size)
    assert torch.allclose(E.sum(-1), torch.ones(3)) and torch.allclose(bias.exp(), torch.tensor([3.0, 3.0, 2.0]))
    assert torch.equal(E[2], torch.tensor([0, 0, 0, 0, 0, 0, 0.5, 0.5]))


def test_segment_means_equal_attention_over_keys_repeated_within_a_segment():
    """A segment of identical keys and values is one key that counts as many times: the
    log-size bias makes the projected attention exact there."""
    from attnviz.core.efficient import low_rank_attention

    g = torch.Generator().manual_seed(0)
    q = torch.randn(5, 4, generator=g)  # (L, D)
    k4, v4 = torch.randn(4, 4, generator=g), torch.randn(4, 4, generator=g)  # four distinct keys and values
    k, v = k4.repeat_interleave(torch.tensor([3, 1, 2, 2]), 0), v4.repeat_interleave(torch.tensor([3, 1, 2, 2]), 0)
    full = torch.softmax(q @ k.T / 2.0, -1) @ v  # (5, 4): 8 keys
    # rank 4 over 8 keys cuts 2, 2, 2, 2: not the repeats' blocks, so not exact...
    assert not torch.allclose(low_rank_attention(q, k, v, 4), full, atol=1e-4)
    # ...but keys reordered so each segment holds one repeated key are
    k2, v2 = torch.cat([k4[[0, 0]], k4[[1, 1]], k4[[2, 2]], k4[[3, 3]]]), torch.cat([v4[[0, 0]], v4[[1, 1]],
                                                                                      v4[[2, 2]], v4[[3, 3]]])
    full2 = torch.softmax(q @ k2.T / 2.0, -1) @ v2
    assert torch.allclose(low_rank_attention(q, k2, v2, 4), full2, atol=1e-6)


def test_log_axes_label_powers_of_ten_only():
    from attnviz.plots import FigureStyle
    from attnviz.views.longseq import low_rank_figures

    inp = LS.long_input(AttentionConfig(num_heads=2, d_model=16), 32)
    for fig in low_rank_figures(LS.low_rank(inp), FigureStyle()):
        axes = [fig.layout[a] for a in ("xaxis", "yaxis")]
        assert any(a.type == "log" for a in axes)
        assert all(a.dtick == 1 for a in axes if a.type == "log")
        assert all(min(t.y) > 0 for t in fig.data)  # a log axis: no 0 left undrawn
