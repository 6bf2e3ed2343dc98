"""What every child process of the API process does first (engine, text, encode and audio workers)."""

from __future__ import annotations

import ctypes
import signal

_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15


def become_child(name: str) -> None:
    """Ask Linux to SIGKILL this process when the API process dies, so no orphan keeps a model or a port's
    work alive, and take ``name`` as the name ps, top and /proc/PID/comm show (15 bytes at most)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except OSError:  # not Linux: the parent's shutdown still stops its children
        pass
