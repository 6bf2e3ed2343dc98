"""keep_freed_memory: a large block freed and allocated again is the same memory, not fresh pages."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import ctypes, resource, sys
from voxlane.heap import keep_freed_memory

if sys.argv[1] == "keep":
    assert keep_freed_memory()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size = 54 << 20  # as CTranslate2's attention scores of one 30 s window on tiny (malloc, as it allocates)
faults = []
for _ in range(6):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)  # touch every page
    libc.free(block)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(min(faults[1:]))
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_freed_block_is_reused_instead_of_faulted_in_again() -> None:
    pages = (54 << 20) // 4096
    system = _faults("system")  # glibc maps a block this large anew each time: its pages fault again
    kept = _faults("keep")  # kept: the next block is the first one's memory
    assert kept < pages // 100, (kept, system)
    assert kept * 10 <= system, (kept, system)  # (system: 13,824 faults of 4 KB pages on the dev machine)
