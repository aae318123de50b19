"""Which compute devices exist here, and resolving the one a user asked for."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DeviceInfo:
    name: str  # what torch.device() takes: "cpu", "cuda:0", "mps"
    label: str  # what a person reads: "CPU", "cuda:0 — NVIDIA H200"


def available_devices() -> list[DeviceInfo]:
    """Every device torch can use on this machine, the CPU first."""
    found = [DeviceInfo("cpu", "CPU")]
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            found.append(DeviceInfo(f"cuda:{i}", f"cuda:{i} — {torch.cuda.get_device_name(i)}"))
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append(DeviceInfo("mps", "mps — Apple GPU"))
    return found


def device_names() -> list[str]:
    return [d.name for d in available_devices()]


def resolve_device(requested: str) -> torch.device:
    """``requested`` as a ``torch.device``; ``cuda`` means ``cuda:0``.

    Raises ``ValueError`` naming the devices that do exist when it is not here.
    """
    name = (requested or "cpu").strip().lower()
    if name == "cuda":
        name = "cuda:0"
    names = device_names()
    if name not in names:
        raise ValueError(
            f"Device {requested!r} is not available on this machine; available: {', '.join(names)}."
        )
    return torch.device(name)
