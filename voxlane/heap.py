"""Keeping garbage collection pauses short in the two long-lived processes (API and engine), and the
engine's freed memory for its next window."""

from __future__ import annotations

import ctypes
import gc

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8


def freeze_startup_heap() -> int:
    """Collect once, then move every object alive now to the permanent generation; returns their count.

    What a process holds once started (imported modules, the app, the models' Python side) lives until
    exit, yet each full collection walked all of it again: about 100,000 objects here, 30-40 ms on an
    idle core and up to 90 ms on a busy one, all of it with the GIL held. Frozen, a full collection walks
    only what requests created since (``voxlane_gc_pause_seconds`` shows both). Call it once, when
    startup is done and before serving.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep what this process frees for its next allocation, instead of handing it
    back to the system; returns False where an option could not be set (no glibc, or mallopt refused it).

    CTranslate2 allocates each layer's buffers anew: a 30 s window's attention scores alone are 54 MB
    (6 heads x 1500 x 1500 floats on tiny). glibc serves a block that large with its own ``mmap`` and
    unmaps it when freed, so every window wrote into fresh pages, each a page fault: 76,000 per encoder
    pass on one thread, 110 of its 360 ms in the kernel, and more with two threads, which fault in turn.
    With one arena (a thread's own arena cannot hold blocks over 64 MB), no ``mmap`` for blocks and no
    trimming of the heap's top, the same memory is reused: no faults after the first window, and 363 ->
    286 ms for one 30 s window on 1 thread, 208 -> 135 ms on 2 (docs/engine-config.md). The price is that
    the process keeps its peak: its resident memory no longer falls after a large batch. Call it first
    thing in the process, before other threads start.
    """
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    options = ((_M_ARENA_MAX, 1), (_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, 2**31 - 1))
    return all(mallopt(option, value) == 1 for option, value in options)


def release_freed_memory() -> bool:
    """Hand the memory this process has freed back to the system now (glibc ``malloc_trim``): after a model
    is unloaded, since ``keep_freed_memory`` turned off glibc's own trimming. Returns False without glibc."""
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def resident_bytes() -> int:
    """This process's resident memory (VmRSS), in bytes; 0 where /proc cannot tell."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
