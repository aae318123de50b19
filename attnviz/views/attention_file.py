"""The Your attention page: attention files (``attnviz.save_attention``'s .safetensors or .npz) as
runs, which every view of the explorer draws, through the same seam as text (``attnviz.run.run``).

A page module: no settings of its own (the layer, head, query and view are shared), its run
(``file_run``) and its figure for the CLI (``figure``)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from attnviz.inputs.attention_file import load_attention, save_attention
from attnviz.models.given import GivenWeights, given_input
from attnviz.run.config import AttentionConfig
from attnviz.run.result import AttentionResult
from attnviz.run.run import run, shared_result
from attnviz.views.catalogue import VIEWS, check_view
from attnviz.views.selection import check_selection

PAGE = "attention-file"


def file_run(data: bytes, name: str | None = None, layer: int = 0) -> AttentionResult:
    """An uploaded file's run at ``layer``; ``ValueError`` names what is wrong with the file
    (``name``: the upload's file name; None: the format is told from the bytes)."""
    att = load_attention(data, name)
    name = name or "attention file"
    if att.L != att.S:
        raise ValueError(f"{name}: the explorer draws self-attention (L = S); this file has L = {att.L}, "
                         f"S = {att.S}.")
    model = GivenWeights(att.weights, name)
    result = run(given_input(att.tokens, att.L), model, layer=layer,
                 settings={"kind": "attention file", "file": name})  # its heads, layers and mask: the run's
    result.model_name = name
    return result


def sample_file() -> tuple[bytes, str]:
    """A built-in attention file, made in code: the random model's weights on the default text (the explorer's
    own run, shared: the first screen has computed it already)."""
    r = shared_result(AttentionConfig())
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "sample.safetensors"
        save_attention(path, r.layer_weights[:, 0].numpy(), r.tokens[0])  # (layers, H, L, S)
        return path.read_bytes(), "sample.safetensors"


def page_result(name: str, state, data: bytes | None = None) -> tuple[AttentionResult, object]:
    """The run the page's downloads hold: the file's (or the sample's) weights at the state's layer."""
    data, file_name = (data, None) if data is not None else sample_file()
    return file_run(data, file_name, state.layer), state


def main_figure(state, style, data: bytes | None = None):
    """The chosen view of the file (``data``; None: the shipped sample)."""
    check_view(PAGE, state)
    data, name = (data, None) if data is not None else sample_file()
    result = file_run(data, name, state.layer)
    state = check_selection(result, state.with_(seq=0))
    return VIEWS[state.view].figure(result, state, style)
