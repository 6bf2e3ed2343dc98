"""The engine process's spawn target: it asks for PR_SET_PDEATHSIG before it imports the engine.

A spawned child imports its target's module before it runs it; ``voxlane.engine.proc`` pulls in ZMQ, numpy
and the engine core (a few hundred ms), and an API process killed meanwhile would leave an orphan that never
learns it (``become_child`` would find no parent to watch). So the target lives here, in a module that
imports nothing heavy, and imports the engine only once the signal is asked for and the parent checked.
"""

from __future__ import annotations

from voxlane.child import become_child
from voxlane.config import EngineConfig


def run(parent_pid: int, config: EngineConfig, input_addr: str, output_addr: str, log_level: str) -> None:
    become_child("voxlane-engine", parent_pid)
    from voxlane.engine.proc import run_engine

    run_engine(config, input_addr, output_addr, log_level)
