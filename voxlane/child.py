"""What every child process of the API process does first (engine, text, encode and audio workers)."""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15


def become_child(name: str, parent_pid: int | None = None) -> None:
    """Ask Linux to SIGKILL this process when the API process dies, so no orphan keeps a model or a port's
    work alive, and take ``name`` as the name ps, top and /proc/PID/comm show (15 bytes at most).

    ``parent_pid`` is the API process's pid, taken there before the spawn. A parent that died before the
    prctl leaves nothing for it to watch (this process has already been handed to init), so once the signal
    is asked for, a child whose parent is no longer ``parent_pid`` exits at once. Call it before any heavy
    import, so that the window without the signal stays short."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except OSError:  # not Linux: the parent's shutdown still stops its children
        pass
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)  # what the signal would have done, had the parent died a moment later
