"""limit_blas_threads: numpy's BLAS runs on the threads asked for, in the API process and in its pool workers."""

from __future__ import annotations

import subprocess
import sys

from threadpoolctl import threadpool_info

from voxlane.server.executors import _process_pool


def _blas_threads(info: list[dict]) -> set[int]:
    return {lib["num_threads"] for lib in info if lib["user_api"] == "blas"}


def test_limit_blas_threads_sets_the_threads_of_numpys_blas() -> None:
    # In a process of its own: the limit holds for the whole process.
    code = (
        "from threadpoolctl import threadpool_info\n"
        "from voxlane.blas import limit_blas_threads\n"
        "found = limit_blas_threads(1)\n"
        "print(found, *sorted({l['num_threads'] for l in threadpool_info() if l['user_api'] == 'blas'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert int(out[0]) >= 1, "numpy's BLAS was not found"
    assert out[1:] == ["1"]


def test_pool_worker_processes_take_the_limit() -> None:
    pool = _process_pool(1, "voxlane-test", (1, 5))
    try:
        info = pool.submit(threadpool_info).result(timeout=120)
    finally:
        pool.shutdown()
    assert _blas_threads(info) == {1}
