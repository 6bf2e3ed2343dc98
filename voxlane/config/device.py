"""The machine: its usable cores, whether an NVIDIA GPU is present, and the defaults that depend on the device.

Each setting whose default depends on where Whisper runs is declared ``by_device`` (config/flags.py) and left
None in its config until the device is known; :func:`defaults_for` is the one table of those defaults, and
:func:`fill_by_device` the one step that applies it. The engine's settings are filled when the engine process
has placed Whisper (``EngineConfig.placed``: ``auto`` may still fall back to the CPU there); the API process's
own, when its config is built, from the device the engine will most likely get (:func:`host_device`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any


def nvidia_gpu_present() -> bool:
    """Whether an NVIDIA driver lists a GPU here (a cheap look at /proc and /dev: no CUDA library loads)."""
    gpus = Path("/proc/driver/nvidia/gpus")
    try:
        return (gpus.is_dir() and any(gpus.iterdir())) or Path("/dev/nvidia0").exists()
    except OSError:
        return False


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


CORES = usable_cores()


@dataclass(frozen=True)
class DeviceDefaults:
    """The defaults of the settings by device, for one device. Each field names the config field it fills."""

    engine_workers: int
    """Whisper batches in parallel: on a GPU one batch's host work overlaps another's kernels (docs/gpu.md)."""
    max_batch_size: int
    live_batch_size: int
    """On a CPU a batch costs about the sum of its windows, so live decodes gain nothing from sharing one; on a
    GPU a batch of 16 costs about what one window costs (docs/asr-engine.md, docs/gpu.md)."""
    short_window_pad_s: float
    """Short windows were measured on the CPU only; on a GPU the decoder, not the encoder, is the cost."""
    short_final_pad_s: float
    audio_preprocess_workers: int
    """On a GPU machine the front end must feed the GPU from every core but two (docs/gpu.md)."""
    audio_preprocess_pool: str
    """Threads beat processes on 2 cores; processes beat threads on a 16-core GPU machine (docs/gpu.md)."""


def defaults_for(device: str) -> DeviceDefaults:
    """The defaults by device for ``device`` (cpu or cuda)."""
    if device == "cuda":
        return DeviceDefaults(
            engine_workers=4,
            max_batch_size=16,
            live_batch_size=16,
            short_window_pad_s=0.0,
            short_final_pad_s=0.0,
            audio_preprocess_workers=max(1, CORES - 2),
            audio_preprocess_pool="process",
        )
    return DeviceDefaults(
        engine_workers=2,
        max_batch_size=8,
        live_batch_size=1,
        short_window_pad_s=5.0,
        short_final_pad_s=10.0,
        audio_preprocess_workers=min(os.cpu_count() or 1, 2),
        audio_preprocess_pool="thread",
    )


def host_device(device: str) -> str:
    """The device the engine will most likely place Whisper on for ``--device``, guessed without loading CUDA:
    cuda for cuda, and for auto when an NVIDIA driver lists a GPU; else cpu."""
    return "cuda" if device == "cuda" or (device == "auto" and nvidia_gpu_present()) else "cpu"


def shown_by_device(name: str) -> str:
    """How ``--help`` and the tables write the default of the setting by device ``name``."""
    cpu, cuda = getattr(defaults_for("cpu"), name), getattr(defaults_for("cuda"), name)
    return f"{cpu} on CPU, {cuda} on CUDA"


def fill_by_device(config: Any, device: str) -> None:
    """Give each setting by device of ``config`` (a frozen config dataclass) that is still None its default on
    ``device``; called from the config's ``__post_init__``."""
    defaults = defaults_for(device)
    for f in fields(config):
        if f.metadata.get("flag") is not None and f.metadata["flag"].by_device and getattr(config, f.name) is None:
            object.__setattr__(config, f.name, getattr(defaults, f.name))
