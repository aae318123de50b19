"""The split run of attnviz.analysis.edgegraph beyond what test_eap checks through the scores: a run begun at a
later layer from the clean run's own streams gives the logits of a run from the input with the same edits, the
receivers' layers as their names say, and the running sums the curve keeps equal to the sums written out."""

from __future__ import annotations

import pytest
import torch

from attnviz.analysis.eap import both_runs
from attnviz.analysis.edgegraph import Split, graph_of
from attnviz.analysis.faithful import Totals, carried
from attnviz.learn.trained import subject_of
from tests.support import circuits

CLEAN, CORRUPTED = "the cat sat on the mat", "the mat sat on the cat"


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def made(request, tmp_path_factory):
    folder, _model, _tok = circuits.perturbed(tmp_path_factory.mktemp("edgegraph"), request.param)
    subject = subject_of(str(folder))
    ran = both_runs(subject, CLEAN, CORRUPTED, "it", "was", None)
    graph = graph_of(subject.stack)
    return subject, ran, graph, Split(subject.stack, graph, ran.corrupted)


def test_each_receiver_reads_in_the_layer_its_name_says(made):
    _subject, _ran, graph, _split = made
    layers = graph.receiver_layers()
    for name, layer in zip(graph.receivers, layers, strict=True):
        want = graph.layers if name == "logits" else int(name[1:].split(".")[0].split("<")[0])
        assert layer == want, name


@pytest.mark.parametrize("start", [1, "logits"])
def test_a_run_begun_late_is_the_run_from_the_input(made, start):
    """Edits only at or past ``start`` (one receiver group there takes the corrupted run's senders): begun at
    ``start`` from the clean run's stream and senders, the logits are those of the run from layer 0."""
    _subject, ran, graph, split = made
    start = graph.layers if start == "logits" else start
    key = ("a", start) if start < graph.layers else ("logits", 0)
    corrupted = split.senders(ran.corrupted)  # (L, F, E)

    def into(k, streams, acts):
        if k != key:
            return streams
        prev, _cols = graph.reads(k)
        dropped = torch.ones(1, prev, streams.shape[0])  # every edge into this group carries the corrupted
        return streams + carried(dropped, corrupted[:, :prev], acts)

    x = ran.clean.resid_pre[0][0][None]  # (1, L, E)
    with torch.no_grad():
        full, _acts = split.run(x, into)
        plain, _acts = split.run(x)
        first = graph.reads(key)[0]
        stream = ran.clean.resid_pre[start] if start < graph.layers else ran.clean.resid_final
        late, _acts = split.run(stream[0][None], into, start=start, before=split.senders(ran.clean)[None, :, :first])
    assert float((full - plain).abs().max()) > 1e-3  # the edit changes the logits: a late run that ignored it shows
    assert torch.allclose(late, full, atol=1e-4 * max(1.0, float(full.abs().max())))


def test_the_running_sums_are_the_sums_written_out(made):
    """One run's receivers in turn, every edge dropped: ``Totals`` keeps the senders' sums as the run goes, and
    each receiver's gain equals Σ_f (corrupted − now) summed afresh."""
    _subject, ran, graph, split = made
    corrupted = split.senders(ran.corrupted)
    totals, seen = Totals(corrupted), []

    def into(k, streams, acts):
        prev, _cols = graph.reads(k)
        dropped = torch.ones(2, prev, streams.shape[0])
        kept = carried(dropped, corrupted[:, :prev], acts, totals)
        now = torch.cat(acts, 2)[:, :, :prev]  # (B, L, prev, E)
        want = (corrupted[None, :, :prev] - now).sum(2)  # (B, L, E)
        seen.append(float((kept - want[None]).abs().max()) / max(1.0, float(want.abs().max())))
        return streams + kept

    with torch.no_grad():
        split.run(ran.clean.resid_pre[0][0].expand(2, -1, -1), into)
    assert len(seen) == len(graph.keys()) and max(seen) < 1e-5
