"""Audio through shared memory (audio/shared.py): the same samples and features as through the pipe, no
block left behind, and the pipe when /dev/shm has no room."""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from voxlane.audio import shared
from voxlane.audio.pipeline import decode_and_split, window_features
from voxlane.config import EngineConfig, ServerConfig
from voxlane.server.executors import Executors

pytestmark = pytest.mark.skipif(not shared.usable(), reason="no writable /dev/shm")


def blocks_of(pid: int) -> list[str]:
    return sorted(p.name for p in shared.SHM_DIR.glob(f"voxlane-{pid}-*"))


def test_a_block_holds_the_bytes_and_its_name_goes(tmp_path) -> None:
    name = shared.new_name()
    assert shared.write_block(name, b"\x01\x02" * 1000)
    with shared.attach(name) as block:
        assert block[:] == b"\x01\x02" * 1000
    shared.unlink(name)
    assert blocks_of(os.getpid()) == []
    with pytest.raises(FileNotFoundError):
        shared.attach(name)
    shared.unlink(name)  # a second removal is no error


def test_windows_and_features_through_shared_memory_equal_the_pipe(dev_set) -> None:
    clip = next(c for c in dev_set if c.duration_s > 60 and c.path.suffix == ".flac")
    data = clip.path.read_bytes()
    plain = decode_and_split(data, 7200.0, 8.0)
    upload, pcm = shared.new_name(), shared.new_name()
    assert shared.write_block(upload, data)
    split = shared.decode_and_split_shared(upload, pcm, 7200.0, 8.0, None, float("inf"))
    assert blocks_of(os.getpid()) == [pcm]  # the decode removed the upload's block once it had read it
    assert split.block == pcm and len(split.windows) == len(plain.windows) > 2
    for i, (w, p) in enumerate(zip(split.windows, plain.windows)):
        assert (w.start, w.end, len(w.pcm)) == (p.start, p.end, 0)
        features_name = shared.new_name()
        last = i == len(split.windows) - 1
        shape, n_frames, speech = shared.window_features_shared(
            (pcm, w.block_offset, w.end - w.start), features_name, 80, w.offset_s, None, last
        )
        features = shared.features_view(features_name, shape)  # maps the block and removes its name
        expected, expected_frames, expected_speech = window_features(p.pcm, 80, p.offset_s, None)
        assert (n_frames, speech) == (expected_frames, expected_speech)
        assert np.array_equal(features, expected)
        assert blocks_of(os.getpid()) == ([] if last else [pcm])  # the last window's job removed the samples


def test_no_room_in_dev_shm_falls_back_to_the_pipe(dev_set, monkeypatch) -> None:
    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    clip = next(c for c in dev_set if c.path.name == "cmu_goforward.wav")
    data = clip.path.read_bytes()
    name = shared.new_name()
    assert not shared.write_block(name, data)
    split = shared.decode_and_split_shared(data, shared.new_name(), 7200.0, 8.0, None, float("inf"))
    assert split.block is None and split.windows[0].pcm.size == split.windows[0].end - split.windows[0].start
    features, _, _ = shared.window_features_shared(split.windows[0].pcm, shared.new_name(), 80, 0.0, None)
    assert isinstance(features, np.ndarray) and features.shape == (80, 3000)
    assert blocks_of(os.getpid()) == []


def test_sweep_removes_blocks_of_processes_that_are_gone() -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    stale = f"voxlane-{dead_pid}-0-0badcafe"
    mine = shared.new_name()
    for name in (stale, mine):
        assert shared.write_block(name, b"x")
    try:
        assert shared.sweep() >= 1
        assert blocks_of(dead_pid) == [] and blocks_of(os.getpid()) == [mine]
        shared.sweep(own=True)
        assert blocks_of(os.getpid()) == []
    finally:
        shared.unlink(stale)
        shared.unlink(mine)


def test_a_job_whose_caller_went_away_is_cleaned_up_when_it_ends() -> None:
    executors = Executors(ServerConfig(audio_preprocess_workers=1, engine=EngineConfig(model_path="")))
    running, release, abandoned = threading.Event(), threading.Event(), threading.Event()

    def job() -> None:
        running.set()
        release.wait(10)

    async def scenario() -> None:
        task = asyncio.ensure_future(executors.run("audio", job, on_abandon=abandoned.set))
        assert await asyncio.to_thread(running.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not abandoned.is_set()  # the job still runs: what it makes is not made yet
        release.set()
        assert await asyncio.to_thread(abandoned.wait, 10)

    try:
        asyncio.run(scenario())
    finally:
        release.set()
        executors.shutdown()
