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

from .apphelp import app, figures


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
    assert [w.name for w in warnings] == [name] and getattr(state, name) == getattr(ViewState(), name)


def test_the_page_draws_every_part():
    at = app("length=256&heads=2&d_model=16&tile=3&rank=600", page="app_pages/long_sequences.py", timeout=180)
    assert not at.exception and not at.error
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert len(titles) == 9 and titles[2].startswith("key block 3")
    assert any("Rank 600 is over the 256 tokens" in i.value for i in at.info)
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
