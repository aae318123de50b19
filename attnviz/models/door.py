"""One door for every model: ``open(name)`` gives a ``Handle`` whatever kind of model the name is.

    handle = open("smollm2-135m")
    handle.can(Cap.UNEMBEDDING)      # what it can do, as a typed set (``handle.caps``)
    handle.why_not({Cap.PATCHABLE})  # the sentence that says why it cannot serve a page, or None
    handle.key                       # its identity for caches and links
    handle.load()                    # the loaded model (once per process, within ATTNVIZ_MAX_LOADED_MB)
    handle.load_in_background()      # None once loaded; else the shared background job with its progress

Each kind of model is one ``Kind`` subclass that owns how its names are resolved, how it loads, its
capabilities and its refusals; ``KINDS`` holds them in the order a name is tried, and ``register`` adds one
(a kind another package brings, or a test's throwaway kind). The kinds' own names ("causal", "encoder", …)
are compared only here and in ``attnviz.models.registry``: the rest of attnviz asks for capabilities.

May import: attnviz.i18n, attnviz.jobs (and the models package's own modules).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from attnviz.i18n import N_
from attnviz.jobs import Job
from attnviz.models import registry
from attnviz.models.base import ModelError
from attnviz.models.random import RANDOM


class Cap(enum.Enum):
    """What a model can do, as the pages ask for it."""

    RUNS = "runs a page's own input (a text, a picture) and shows every layer's weights"
    TEXT = "reads text with its own tokens"
    UNEMBEDDING = "has an unembedding (a language-model head): a next token"
    CAUSAL = "is causal: each token sees only those before it"
    KV_CACHE = "keeps a KV cache a long context can compress"
    PATCHABLE = "can be patched: a clean and a corrupted run toward a next token"
    SEES_PICTURES = "sees pictures: a vision tower feeding a language model"
    PATCHES = "reads a picture as patches (a vision transformer)"
    STACKS = "has an encoder and a decoder, with cross-attention between them"
    EVERY_STEP = "keeps every step of its attention (Q, K, V, scores, masks)"
    TRAINED_HERE = "is trained on its page, not loaded"
    LOADS = "loads in the background, once per process"


# The sentence a page shows where a model lacks what it needs, by capability (marked for translation): the
# generic one, where a kind has no words of its own.
GENERIC = {
    Cap.RUNS: N_("is not available here"),
    Cap.TEXT: N_("has no tokenizer of its own to read a text with"),
    Cap.UNEMBEDDING: N_("has no next token to patch toward"),
    Cap.CAUSAL: N_("is not causal: its tokens see those after them"),
    Cap.KV_CACHE: N_("is not a causal language model: it keeps no KV cache to evict"),
    Cap.PATCHABLE: N_("has no next token to patch toward"),
    Cap.SEES_PICTURES: N_("is not a vision-language model: it sees no picture"),
    Cap.PATCHES: N_("does not read a picture as patches"),
    Cap.STACKS: N_("has no encoder and decoder with cross-attention between them"),
    Cap.EVERY_STEP: N_("does not keep every step of its attention"),
    Cap.TRAINED_HERE: N_("is not trained here"),
    Cap.LOADS: N_("is not loaded from files"),
}


class Kind:
    """A kind of model: override ``claims``, ``caps`` and, for a kind that loads, ``load``."""

    name = "?"
    words: dict = {}  # Cap -> why a model of this kind lacks it (marked for translation)
    what = "a model"  # what it is, as a sentence names it ("an encoder")

    def described(self, model: str) -> str:
        return self.what

    def claims(self, model: str) -> bool:
        raise NotImplementedError

    def caps(self, model: str) -> frozenset[Cap]:
        raise NotImplementedError

    def key(self, model: str) -> tuple:
        """Its identity for caches and links: another file under the same name is another key."""
        return (model,)

    def offered(self) -> list[str]:
        """The names of this kind the server offers beside the registry's (a link may name them, the sidebar lists
        them): none for the built-in kinds, whose names the registry lists."""
        return []

    def load(self, model: str, phase=lambda what, share=0.0: None):
        raise ModelError(f"{model} is not loaded: it is {self.name}.")

    def load_in_background(self, model: str) -> Job | None:
        return None  # nothing to load

    def why(self, model: str, cap: Cap) -> str:
        return self.words.get(cap) or GENERIC[cap]

    def problem(self, model: str) -> str | None:
        """Why ``model`` names no model that can be opened (None: it does)."""
        return None


class RandomKind(Kind):
    """The random layer: built from the sidebar's width, heads and seed, every step kept."""

    name = "random"
    what = "the random layer"
    words = {Cap.UNEMBEDDING: N_("is the random layer: it has no unembedding (no language-model head) to read its "
                                 "residual stream through")}

    def claims(self, model: str) -> bool:
        return model == RANDOM

    def caps(self, model: str) -> frozenset[Cap]:
        # Long context runs the random layer's defaults as a stand-in with a cache of its own.
        return frozenset({Cap.RUNS, Cap.EVERY_STEP, Cap.KV_CACHE})


class TrainedKind(Kind):
    """The tiny attention-only model Watch it learn trains (``attnviz.learn``): patched and lensed, not run."""

    name = "tiny"
    what = "the tiny model Watch it learn trains"
    words = {Cap.RUNS: N_("is drawn on Watch it learn, patched on Patching"),
             Cap.TEXT: N_("reads its own numbered tokens, not a text: it is drawn on Watch it learn, patched on "
                          "Patching")}

    def claims(self, model: str) -> bool:
        return model == registry.TRAINED

    def caps(self, model: str) -> frozenset[Cap]:
        return frozenset({Cap.UNEMBEDDING, Cap.CAUSAL, Cap.PATCHABLE, Cap.TRAINED_HERE})


class LookingKind(Kind):
    """The tiny vision-language model the vision-language page trains (``attnviz.learn.look``)."""

    name = "looking"
    what = "the tiny vision-language model that learns to look"
    words = {Cap.RUNS: N_("is a vision-language model, read on the vision-language page")}

    def claims(self, model: str) -> bool:
        return model == registry.LOOKING

    def caps(self, model: str) -> frozenset[Cap]:
        return frozenset({Cap.SEES_PICTURES, Cap.TRAINED_HERE})


# A folder's (or GGUF file's) kind, from its config or header alone, as the registry reads it: what it can do.
FOLDER_CAPS = {
    "causal": frozenset({Cap.RUNS, Cap.TEXT, Cap.UNEMBEDDING, Cap.CAUSAL, Cap.KV_CACHE, Cap.PATCHABLE, Cap.LOADS}),
    "encoder": frozenset({Cap.RUNS, Cap.TEXT, Cap.LOADS}),
    "seq2seq": frozenset({Cap.RUNS, Cap.TEXT, Cap.STACKS, Cap.LOADS}),
    "vision": frozenset({Cap.RUNS, Cap.PATCHES, Cap.LOADS}),
    "vlm": frozenset({Cap.SEES_PICTURES}),  # loaded by its page's own job, with its answer
    "missing": frozenset({Cap.RUNS}),  # a name that opens nothing: a page's run says why (``Handle.problem``)
}
FOLDER_WHAT = {"causal": "a causal language model", "encoder": "an encoder", "seq2seq": "an encoder–decoder",
               "vision": "a vision transformer", "vlm": "a vision-language model"}
FOLDER_WORDS = {
    "encoder": {Cap.UNEMBEDDING: N_("is an encoder: it has no unembedding (no language-model head) to read its "
                                    "residual stream through")},
    "seq2seq": {Cap.UNEMBEDDING: N_("is an encoder–decoder: the logit lens reads a causal language model's one "
                                    "residual stream")},
    "vision": {Cap.UNEMBEDDING: N_("is a vision transformer: it has no unembedding (no language-model head) to read "
                                   "its residual stream through")},
    "vlm": {Cap.RUNS: N_("is a vision-language model, read on the vision-language page")},
}


class FolderKind(Kind):
    """A model with files: the packaged MiniLM and SmolLM2, a folder the operator lists, a folder or GGUF file
    given by path (the API, the CLI), a Hugging Face id in the local cache. The registry resolves the name
    (``registry.locate``), loads it once per process within the loaded-models bound, and reads its kind from
    ``config.json`` or the GGUF header alone."""

    name = "folder"

    def claims(self, model: str) -> bool:
        return True  # the last kind tried: the registry says what is wrong with a name that names nothing

    def problem(self, model: str) -> str | None:
        if registry.needs_download(model):  # an id the operator lists: its load fetches it first
            return None
        try:
            _name, where, _stamp = registry.model_key(model)  # the name resolves (registry.locate), once
            if Path(where).is_file():
                registry.gguf_facts(model)  # and a GGUF file's header is one attnviz reads (read once per file)
        except ModelError as e:
            return str(e)
        return None

    def sort(self, model: str) -> str:
        return "missing" if self.problem(model) else registry.model_kind(model)

    def caps(self, model: str) -> frozenset[Cap]:
        return FOLDER_CAPS.get(self.sort(model), FOLDER_CAPS["encoder"])

    def key(self, model: str) -> tuple:
        return registry.model_key(model)

    def load(self, model: str, phase=lambda what, share=0.0: None):
        return registry.load(model, phase)

    def load_in_background(self, model: str) -> Job | None:
        return registry.load_in_background(model)

    def described(self, model: str) -> str:
        return FOLDER_WHAT.get(self.sort(model), "a model")

    def why(self, model: str, cap: Cap) -> str:
        return FOLDER_WORDS.get(self.sort(model), {}).get(cap) or GENERIC[cap]


KINDS: list[Kind] = [RandomKind(), TrainedKind(), LookingKind(), FolderKind()]


def register(kind: Kind) -> None:
    """Add a kind, tried before those that claim any name (a kind another package brings, a test's)."""
    KINDS.insert(len(KINDS) - 1, kind)


def unregister(kind: Kind) -> None:
    KINDS.remove(kind)


@dataclass(frozen=True)
class Handle:
    """A model by name, through its kind: what it can do and how it loads (see the module's doc)."""

    name: str
    kind: Kind

    @property
    def caps(self) -> frozenset[Cap]:
        return self.kind.caps(self.name)

    def can(self, *caps: Cap) -> bool:
        return set(caps) <= self.caps

    @property
    def key(self) -> tuple:
        return self.kind.key(self.name)

    def load(self, phase=lambda what, share=0.0: None):
        return self.kind.load(self.name, phase)

    def load_in_background(self) -> Job | None:
        return self.kind.load_in_background(self.name)

    @property
    def problem(self) -> str | None:
        """Why the name opens no model (a folder that is not there, a GGUF file cut short), in one sentence."""
        return self.kind.problem(self.name)

    @property
    def what(self) -> str:
        """What it is, as a sentence names it ("an encoder", "the random layer")."""
        return self.kind.described(self.name)

    def why_not(self, needs) -> str | None:
        """Why it cannot serve a page that needs ``needs`` (the first it lacks, in ``Cap``'s order), or None."""
        missing = [c for c in Cap if c in set(needs) - self.caps]
        return self.kind.why(self.name, missing[0]) if missing else None


def open(model) -> Handle:  # noqa: A001 - the door's one verb, as attnviz.models.open
    """The handle of ``model`` (a name, a folder or GGUF path): the first kind that claims it."""
    name = str(model)
    return Handle(name, next(k for k in KINDS if k.claims(name)))


def available() -> list[str]:
    """The model names this server offers, in the order offered: the registry's, then those of the kinds
    registered beside it."""
    names = registry.available_models()
    return names + [n for kind in KINDS for n in kind.offered() if n not in names]
