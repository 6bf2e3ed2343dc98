"""become_child: the parent-death signal and the name, and a child whose parent died before it asked for the
signal (it would wait for a death that has already happened) exits at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHOW = (
    "import ctypes, os, sys; from voxlane.child import become_child; become_child('vx-test-child', int(sys.argv[1])); "
    "sig = ctypes.c_int(); ctypes.CDLL('libc.so.6').prctl(2, ctypes.byref(sig)); "  # PR_GET_PDEATHSIG
    "print(open('/proc/self/comm').read().strip(), sig.value)"
)


def run_child(parent_pid: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SHOW, parent_pid], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_a_child_of_a_live_parent_asks_for_sigkill_when_it_dies_and_takes_its_name() -> None:
    done = run_child(str(os.getpid()))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["vx-test-child", "9"]


def test_a_child_whose_parent_is_already_gone_exits_at_once() -> None:
    done = run_child("1")  # the parent it was spawned by is not init: that parent has died
    assert done.returncode == 1 and done.stdout == "", (done.returncode, done.stdout, done.stderr)
