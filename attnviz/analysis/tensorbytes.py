"""The most bytes of tensors a call holds alive at once, measured: on CUDA the allocator's peak; elsewhere every
tensor storage an operator creates, counted until its last tensor dies (a ``TorchDispatchMode``).

A path whose operators choose nothing by device (attnviz's naive and tiled attention) can be counted on meta copies
of its inputs: the same operators make outputs of the same sizes without the arithmetic, so the count is the CPU
run's byte for byte (tests/analysis/test_tensorbytes.py). ``counts_on_shapes`` says where that is the cheaper count.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class _LiveBytes(TorchDispatchMode):
    """Every tensor storage an operator creates, counted until its last tensor dies."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Never compiled: without this, the first use imports torch._dynamo (~800 modules, a second of CPU)
        # only to mark __torch_dispatch__ as not to be traced.
        return False

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        # storage, by its C++ address (a meta storage has no data pointer) -> [bytes, tensors alive]
        self._refs: dict[int, list[int]] = {}

    def _gone(self, ptr: int) -> None:
        entry = self._refs.get(ptr)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.live -= entry[0]
            del self._refs[ptr]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {a.untyped_storage()._cdata for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            ptr = t.untyped_storage()._cdata
            if ptr in inputs and ptr not in self._refs:  # in place, or a view of something older
                continue
            entry = self._refs.setdefault(ptr, [t.untyped_storage().nbytes(), 0])
            if entry[1] == 0:
                self.live += entry[0]
                self.peak = max(self.peak, self.live)
            entry[1] += 1
            weakref.finalize(t, self._gone, ptr)
        return out


def peak_tensor_bytes(path: Callable[..., object], *inputs: torch.Tensor, shapes_only: bool = False) -> int:
    """The most bytes of tensors ``path(*inputs)`` held alive at once (its result included),
    on the inputs' device.

    ``shapes_only``: off CUDA, run ``path`` on meta copies of the inputs, where each operator
    makes its outputs' shapes and computes nothing. Right only for a path whose operators
    choose nothing by device, as attnviz's naive and tiled paths (tested equal to the run on
    the CPU); not for SDPA, which on meta falls back to a kernel that holds the L × L weights."""
    device = inputs[0].device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        path(*inputs)
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - before)
    if shapes_only:
        inputs = tuple(t.to("meta") for t in inputs)
    mode = _LiveBytes()
    with mode:
        path(*inputs)
    return mode.peak


# The numbers an operator makes from which counting on meta copies costs less than counting a CPU run: meta's
# kernels are Python (torch's references), about 0.2 ms an operator whatever its size. Measured on the tiled path,
# 4 heads, 2,048 tokens: key blocks of 1, 9.1 s on meta against 4.8 s on the CPU; of 32, 0.28 against 0.22 s; of
# 64 (2^19 numbers an operator), 0.21 against 0.28 s; at 8,192 tokens and blocks of 64, 0.56 against 3.04 s.
SHAPES_FROM = 2**19


def counts_on_shapes(numbers_per_operator: int) -> bool:
    """Whether a path of attnviz's own whose operators each make this many numbers is counted on meta copies
    (``peak_tensor_bytes(shapes_only=True)``): the same count, cheaper only for large operators."""
    return numbers_per_operator >= SHAPES_FROM
