"""numpy's BLAS threads in the API process and its worker processes."""

from __future__ import annotations

import numpy  # noqa: F401 - loads numpy's BLAS, for threadpoolctl to find
from threadpoolctl import threadpool_info, threadpool_limits


def limit_blas_threads(threads: int) -> int:
    """Let numpy's BLAS (OpenBLAS in numpy's wheels, MKL or BLIS elsewhere) use at most ``threads`` threads
    in this process from now on; returns how many BLAS libraries it found.

    The API process computes log-mel features (one matrix product per window, audio/features.py) many times
    a second, from several pool threads at once. OpenBLAS splits each product over threads of its own, one
    per core, and those then spin waiting for the next product instead of sleeping: with 8 live
    transcription streams on 2 cores, 72% of the API process's CPU samples were OpenBLAS's idle threads
    spinning (perf), 94 CPU-seconds of a 171 s run against 31-32 with one thread, taken from the engine. The
    products are small (at most 3000 x 201 by 201 x 80) and the pools run several at once, so one thread
    each loses nothing (docs/engine-config.md).
    """
    threadpool_limits(limits=threads, user_api="blas")
    return sum(1 for lib in threadpool_info() if lib.get("user_api") == "blas")
