"""Attention from the text to the pictures of a vision-language model (``attnviz.models.vlm``):
where in each picture each text token looks, layer by layer and head by head.

``vl_attention(model, image, prompt, generate=8, answer=None)`` reads the prompt and pictures
with the model's own processor, extends the prompt with ``generate`` greedy tokens or with
``answer`` teacher-forced, runs the whole sequence once more and records, for the text tokens
only (``attnviz.models.vlrecord``: from the model's own rotated q and k, never N × N):

- ``maps[p]``: (layers, heads, text tokens, rows, cols), the weight from each text token to each
  image token of picture p, laid out on the grid the processor made (``attnviz.models.vlgrid``);
  equal to ``output_attentions`` (eager) at those rows and columns;
- ``image_share``: (layers, heads, text tokens), the share of each row's attention on every image
  token together;
- ``boxes[p]``: (rows, cols, 4), each cell's (left, top, right, bottom) in the picture's pixels.

Two readings of the maps follow vl-saliency 1.1.6 (its ``transforms/localization.py`` and
``lib/cam.py``), on the map of one text token (layers, heads, rows, cols):

- ``localization_heads``: Kang et al., "Your Large Vision-Language Model Only Needs A Few
  Attention Heads For Visual Grounding" (CVPR 2025): the heads whose attention mass on the
  picture is at least the elbow of the sorted masses (the point farthest from the chord from the
  smallest to the largest), in layers after the second, that do not put a weight over 0.05 on the
  grid's last row, ranked by spatial entropy (below): lowest first;
- spatial entropy: with m the map's mean, A⁺ = relu(A − 2m), the 8-connected components of
  A⁺ > 0.001, each component's share p of ΣA⁺, −Σ p log p (infinite when ΣA⁺ = 0);
- ``cam``: with G = ∂loss/∂A, the gradient of the model's language-modelling loss with the whole
  sequence as its labels (what vl-saliency's ``capture`` backpropagates), Grad-CAM relu(G) · A
  (Selvaraju et al., 2017) or AG-CAM relu(G) · sigmoid(A) (Leem and Seo, AAAI 2024).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from attnviz import limits
from attnviz.models import vlgrid, vlrecord
from attnviz.models.vlm import load_vlm, pictures_of, prepare, text_model

CAMS = ("gradcam", "agcam")
ANSWER_TYPE = {"paligemma": 1}  # the token type of an answer's tokens, where it is not text's 0


@dataclass
class VLAttention:
    """Text-to-picture attention of one run (see the module doc)."""

    model: str
    arch: str
    tokens: list[str]  # the text tokens, prompt then answer
    ids: list[int]  # every id the model ran, image tokens included
    prompt_length: int  # ids[:prompt_length] is the prompt
    positions: list[int]  # where each text token is in ids
    maps: list[torch.Tensor]  # per picture (layers, H, T, rows, cols) float32
    image_share: torch.Tensor  # (layers, H, T) float32
    boxes: list[np.ndarray]  # per picture (rows, cols, 4) float64
    sizes: list[tuple[int, int]]  # each picture's (width, height)
    pixel_inputs: dict = field(default_factory=dict, repr=False)  # the processor's other tensors: to run ids again
    _grads: list | None = field(default=None, repr=False)  # per picture ∂loss/∂A, as maps
    _rerun: object = field(default=None, repr=False)
    answer: str | None = None  # a model that answers without running its answer (the tiny one): its word
    # Each map's picture (an index into ``sizes``): LLaVA-NeXT gives each picture two views, its base and its tiles.
    picture_of: list[int] | None = None
    # The vision tower's own attention over the picture, where a page reads it (``analysis.vltower``): (its map
    # (rows, cols), "CLIP" or "SigLIP", its layer), or (None, why not, -1).
    vision: tuple | None = field(default=None, repr=False)

    @property
    def answer_text(self) -> str:
        """The model's answer: the tiny model's word, or a folder's tokens after the prompt."""
        if self.answer is not None:
            return self.answer
        return " ".join(tok for tok, at in zip(self.tokens, self.positions, strict=True) if at >= self.prompt_length)

    @property
    def layers(self) -> int:
        return int(self.image_share.shape[0])

    @property
    def heads(self) -> int:
        return int(self.image_share.shape[1])

    def token_index(self, token) -> int:
        """``token`` (negative counts from the end) as an index of ``tokens``; ``ValueError`` outside them."""
        T = len(self.tokens)
        if isinstance(token, bool) or not isinstance(token, (int, np.integer)) or not -T <= token < T:
            raise ValueError(f"token must be a whole number from {-T} to {T - 1} (there are {T} text tokens), "
                             f"got {token!r}.")
        return int(token) % T

    def map_index(self, image) -> int:
        """``image`` as an index of ``maps`` (LLaVA-NeXT: each picture's base view, then its tiles); ``ValueError``
        outside them."""
        if isinstance(image, bool) or not isinstance(image, (int, np.integer)) or not 0 <= image < len(self.maps):
            raise ValueError(f"image must be a whole number from 0 to {len(self.maps) - 1}, got {image!r}.")
        return int(image)

    def localization_heads(self, token: int = -1, max_keep: int | None = 5, *, image: int = 0,
                           min_keep: int = 1) -> list[tuple[int, int]]:
        """(layer, head) pairs, best first, for one text token's map of one picture (see the module doc)."""
        t, p = self.token_index(token), self.map_index(image)
        return localization_heads(self.maps[p][:, :, t], max_keep=max_keep, min_keep=min_keep)

    def cam(self, kind: str, token: int = -1, *, image: int = 0) -> torch.Tensor:
        """(layers, heads, rows, cols): "gradcam" relu(G) · A or "agcam" relu(G) · sigmoid(A)."""
        if kind not in CAMS:
            raise ValueError(f"kind must be one of {', '.join(CAMS)}, got {kind!r}.")
        t, p = self.token_index(token), self.map_index(image)
        if self._grads is None:
            self._grads = self._rerun()
        a, g = self.maps[p][:, :, t], self._grads[p][:, :, t]  # (layers, H, rows, cols) × 2
        return torch.relu(g) * (a if kind == "gradcam" else torch.sigmoid(a))


def _spatial_entropy(attn: torch.Tensor, threshold: float = 0.001) -> float:
    """vl-saliency's spatial entropy of one (rows, cols) map (see the module doc)."""
    high = torch.relu(attn - 2 * torch.mean(attn))  # (rows, cols)
    total = high.sum().item()
    labels = _components((high > threshold).numpy())
    if total <= 0:
        return float("inf")
    probs = [high[torch.from_numpy(labels == i)].sum().item() / total for i in range(1, int(labels.max()) + 1)]
    return -sum(p * np.log(p) for p in probs) if probs else 0.0


def _components(mask: np.ndarray) -> np.ndarray:
    """8-connected components of a boolean (rows, cols) mask, numbered 1… in row-major order of first cell."""
    labels = np.zeros(mask.shape, np.int64)
    n = 0
    R, C = mask.shape
    for r0, c0 in zip(*np.nonzero(mask), strict=True):
        if labels[r0, c0]:
            continue
        n += 1
        labels[r0, c0] = n
        stack = [(r0, c0)]
        while stack:
            r, c = stack.pop()
            for dr in (-1, 0, 1):
                for dc in (-1, 0, 1):
                    rr, cc = r + dr, c + dc
                    if 0 <= rr < R and 0 <= cc < C and mask[rr, cc] and not labels[rr, cc]:
                        labels[rr, cc] = n
                        stack.append((rr, cc))
    return labels


def _elbow_chord(values: list[float]) -> float:
    """The value at the sorted values' point farthest from the chord between the first and last."""
    if len(values) <= 2:
        return min(values) if values else 0.0
    y = np.array(sorted(values), dtype=np.float64)
    x = np.arange(len(y), dtype=np.float64)
    start, end = np.array([x[0], y[0]]), np.array([x[-1], y[-1]])
    unit = (end - start) / np.linalg.norm(end - start)
    vecs = np.stack([x, y], axis=1) - start  # (n, 2)
    d = np.linalg.norm(vecs - (vecs @ unit)[:, None] * unit, axis=1)
    return float(y[int(np.argmax(d))])


def localization_heads(tensor: torch.Tensor, *, max_keep: int | None = 5, min_keep: int = 1) -> list[tuple[int, int]]:
    """Kang et al.'s ranking, as vl-saliency 1.1.6 computes it, of a (layers, heads, rows, cols) map."""
    heads = tensor.shape[1]
    sums = tensor.sum(dim=(-1, -2)).flatten().cpu().numpy().tolist()  # layers × heads
    threshold = _elbow_chord(sums)
    candidates = []
    for idx, total in enumerate(sums):
        layer, head = divmod(idx, heads)
        se = float("inf")
        if total >= threshold:
            m = tensor[layer, head]  # (rows, cols)
            se = _spatial_entropy(m)
            if bool((m[-1] > 0.05).any()):  # it looks at the grid's last row: left out
                continue
        candidates.append((layer, head, total, se))
    kept = [c for c in candidates if np.isfinite(c[3]) and c[0] > 1]
    if len(kept) < min_keep:
        rest = sorted((c for c in candidates if not np.isfinite(c[3]) or c[0] <= 1), key=lambda c: c[2], reverse=True)
        kept.extend(rest[: min_keep - len(kept)])
    kept.sort(key=lambda c: c[3])
    if max_keep and max_keep > 0:
        kept = kept[:max_keep]
    if not kept:
        raise ValueError("No head passes the localization-head criteria for this token.")
    return [(c[0], c[1]) for c in kept]


def _answer_ids(vlm, prompt_ids: list[int], inputs: dict, generate, answer) -> list[int]:
    if answer is not None:
        if not isinstance(answer, str) or not answer:
            raise ValueError("answer must be a non-empty string (teacher-forced after the prompt).")
        if vlm.placeholder in answer:
            raise ValueError(f"The answer contains the image placeholder {vlm.placeholder!r}.")
        return vlm.processor.tokenizer(answer, add_special_tokens=False)["input_ids"]
    if isinstance(generate, bool) or not isinstance(generate, int) or not 0 <= generate <= limits.MAX_VL_GENERATE:
        raise ValueError(f"generate must be a whole number from 0 to {limits.MAX_VL_GENERATE} (MAX_VL_GENERATE), "
                         f"got {generate!r}.")
    if generate == 0:
        return []
    with torch.no_grad():
        # The image token is never chosen: it would ask for a picture that is not there.
        out = vlm.model.generate(**inputs, max_new_tokens=generate, do_sample=False,
                                 suppress_tokens=[vlm.image_token_id])
    return out[0, len(prompt_ids):].tolist()


def _run(vlm, ids: list[int], pixel_inputs: dict, text: torch.Tensor, image: torch.Tensor, grads: bool):
    """One pass of the twin over ``ids``: the recording (and the loss's gradients with ``grads``)."""
    twin = vlrecord.vl_twin(vlm, vlm.model)
    rec = vlrecord.Recording(text, image, vlrecord.attention_layers(text_model(twin)), grads=grads)
    x = torch.tensor([ids])
    with vlrecord.recording(rec), torch.set_grad_enabled(grads):
        out = twin(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False,
                   labels=x if grads else None, **pixel_inputs)
    if grads:
        return rec, vlrecord.gradients(rec, out.loss)
    return rec, None


def _per_view(stacked: torch.Tensor, slots: list) -> list[torch.Tensor]:
    """(layers, H, T, I) -> per view (layers, H, T, rows, cols): each cell's image token (``vlgrid.Views.slots``);
    tokens that are no cell (LLaVA-NeXT's newline ending each row) are left out."""
    return [stacked[..., torch.from_numpy(s.ravel())].reshape(*stacked.shape[:-1], *s.shape).contiguous()
            for s in slots]


def vl_attention(model, image, prompt, *, generate: int = 8, answer: str | None = None) -> VLAttention:
    """Text-to-picture attention of ``model`` (a folder or local-cache id, see ``attnviz.models.vlm``) over
    ``image`` (a picture or a list) and ``prompt``, then ``generate`` greedy tokens or ``answer`` teacher-forced."""
    vlm = load_vlm(model)
    pictures = pictures_of(image)
    inputs = prepare(vlm, pictures, prompt)
    prompt_ids = inputs["input_ids"][0].tolist()
    pixel_inputs = {k: v for k, v in inputs.items()
                    if k not in ("input_ids", "attention_mask", "mm_token_type_ids", "labels")}
    ids = prompt_ids + list(_answer_ids(vlm, prompt_ids, inputs, generate, answer))
    if "token_type_ids" in inputs:  # (1, prompt), extended over the answer as the model's own generate does:
        kinds = inputs["token_type_ids"]  # PaliGemma's answer is its suffix (1; its prefix, 0, attends both ways),
        more = ANSWER_TYPE.get(vlm.arch, 0)  # Gemma 3's is text (0; its pictures, 1, attend both ways within)
        pixel_inputs["token_type_ids"] = torch.cat([kinds, kinds.new_full((1, len(ids) - kinds.shape[1]), more)], 1)
    if "mm_token_type_ids" in inputs:  # which tokens are a picture's (Qwen2-VL's M-RoPE): the answer's are text
        kinds = inputs["mm_token_type_ids"]  # (1, prompt)
        pixel_inputs["mm_token_type_ids"] = torch.cat([kinds, kinds.new_zeros(1, len(ids) - kinds.shape[1])], 1)
    sizes = [p.size for p in pictures]
    views = vlgrid.geometry(vlm.arch, vlm.processor, inputs, sizes)
    x = torch.tensor(ids)
    is_image = x == vlm.image_token_id  # (N,)
    if int(is_image.sum()) != views.tokens:
        raise ValueError(f"The sequence has {int(is_image.sum())} image tokens where the pictures' grids make "
                         f"{views.tokens}: the prompt's or answer's image placeholders do not match the pictures.")
    text, img = torch.nonzero(~is_image)[:, 0], torch.nonzero(is_image)[:, 0]  # (T,), (I,)
    rec, _ = _run(vlm, ids, pixel_inputs, text, img, grads=False)
    maps = torch.stack(rec.maps)  # (layers, H, T, I)
    result = VLAttention(
        vlm.name, vlm.arch, [str(t) for t in vlm.processor.tokenizer.convert_ids_to_tokens(x[text].tolist())], ids,
        len(prompt_ids), text.tolist(), _per_view(maps, views.slots), torch.stack(rec.share), views.boxes, sizes,
        pixel_inputs, picture_of=views.picture_of)

    def rerun():
        _rec, grads = _run(vlm, ids, pixel_inputs, text, img, grads=True)
        return _per_view(torch.stack(grads), views.slots)

    result._rerun = rerun
    return result
