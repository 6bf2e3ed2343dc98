"""Audio between the API process and its audio worker processes through shared memory, not pipes.

With ``--audio-preprocess-pool process`` (the default on a GPU machine) every job's arguments and result
cross a pipe, pickled: the upload to the decode, each 30 s window's samples back, the samples out again for
log-mel and the features back, about 4 MB per window. In the API process the pool's own threads pickle and
read those pipes, and every read of a pipe's 64 KiB takes the GIL back from the event loop. At 64 clients
of long audio (a paced engine) they held the GIL for 44% of the time that any
thread held it, and /health's p99 was 15-18 ms. Here the bytes go through files in /dev/shm (tmpfs, so
memory), and only their names cross the pipes:

- the upload: the API process copies it from the file it was spooled to into a block (:func:`copy_to_block`,
  on a thread: read and write syscalls, which release the GIL), the decode worker reads it;
- the windows' samples: the decode worker writes all of them to one block per request; each log-mel job
  reads its window from there;
- the features: the log-mel worker writes them to a block per window, and the API process maps it and
  hands the mapping to ZMQ as it is (no copy in the API process).

Lifetimes are simple because the API process names every block before the job that writes it starts, and
the name is removed (:func:`unlink`) by whoever reads the block last, once it has it open: the decode worker
(the upload), the last window's log-mel worker (the samples), the API process (the features). A mapping
outlives its name, and the memory is freed with the last mapping. A job whose caller went away has its blocks
removed when it ends (``Executors.run(..., on_abandon=...)``). Names carry the API process's pid, so a
server that was killed leaves blocks the next one removes at start (:func:`sweep`).

Where /dev/shm cannot hold a block (absent, or full: Docker gives containers 64 MB by default), the job
falls back to the pipe for that transfer: space is reserved with ``posix_fallocate`` before a byte is
written, so a full tmpfs is an ``OSError`` here, never a SIGBUS in a worker.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
import mmap
import os
import re
import secrets
from pathlib import Path
from typing import BinaryIO

import numpy as np

from voxlane.audio.pipeline import AudioWindow, Speech, SplitAudio, decode_and_split, window_features
from voxlane.audio.vad import VadOptions

log = logging.getLogger(__name__)

SHM_DIR = Path("/dev/shm")
_DIR = f"{SHM_DIR}/"  # paths built as strings: pathlib costs the event loop microseconds a call
_PREFIX = "voxlane-"
_NAME = re.compile(r"voxlane-(\d+)-\d+-[0-9a-f]+$")
_counter = itertools.count()
_EMPTY = np.zeros(0, dtype=np.int16)
_COPY_BYTES = 1 << 20


def usable() -> bool:
    """Whether this machine has a writable /dev/shm (Linux)."""
    return SHM_DIR.is_dir() and os.access(SHM_DIR, os.W_OK)


def new_name() -> str:
    """A fresh block name of this process: pid, a counter and a random part (the pid may be reused)."""
    return f"{_PREFIX}{os.getpid()}-{next(_counter)}-{secrets.token_hex(4)}"


def create(name: str, nbytes: int) -> mmap.mmap:
    """A new writable block of ``nbytes`` bytes (more than 0). Raises OSError when the name exists or
    /dev/shm cannot hold it (the block is then removed again)."""
    path = _DIR + name
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.posix_fallocate(fd, 0, nbytes)  # ENOSPC now rather than SIGBUS on a page written later
        return mmap.mmap(fd, nbytes)
    except BaseException:
        unlink(name)
        raise
    finally:
        os.close(fd)


def attach(name: str, remove: bool = False) -> mmap.mmap:
    """The block ``name``, read-only; with ``remove``, its name is removed once it is open."""
    fd = os.open(_DIR + name, os.O_RDONLY)
    try:
        if remove:
            unlink(name)
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


def unlink(*names: str | None) -> None:
    """Remove the names of blocks (their memory lives on in mappings); no error for one that is gone or
    was never made."""
    for name in names:
        if name:
            with contextlib.suppress(OSError):
                os.unlink(_DIR + name)


def write_block(name: str, data: bytes) -> bool:
    """Write ``data`` to a new block ``name``; False (and no block) when /dev/shm cannot take it."""
    return copy_to_block(name, io.BytesIO(data), len(data))


def copy_to_block(name: str, source: BinaryIO, size: int) -> bool:
    """Copy the ``size`` bytes of file ``source`` (from its start) to a new block ``name``, a piece at a time,
    with read(2) and write(2), which copy without the GIL (a copy into a mapping would hold it, page faults
    and all: 20% of the GIL's time at 64 clients). False (and no block) when /dev/shm cannot take it or
    ``size`` is 0."""
    if size <= 0:
        return False
    try:
        fd = os.open(_DIR + name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        log.debug("shared memory: cannot create %s (%s); using the pipe", name, exc)
        return False
    try:
        os.posix_fallocate(fd, 0, size)
        source.seek(0)
        while piece := source.read(_COPY_BYTES):
            view = memoryview(piece)
            while view:
                view = view[os.write(fd, view) :]
    except OSError as exc:
        log.debug("shared memory: no room for %d bytes (%s); using the pipe", size, exc)
        unlink(name)
        return False
    finally:
        os.close(fd)
    return True


def sweep(own: bool = False) -> int:
    """Remove blocks left by voxlane processes that are gone (a server killed mid-request), and with ``own``
    this process's too (at shutdown); how many."""
    removed = 0
    with contextlib.suppress(OSError):
        for path in SHM_DIR.glob(f"{_PREFIX}*"):
            match = _NAME.match(path.name)
            pid = int(match.group(1)) if match else None
            if pid is not None and ((own and pid == os.getpid()) or not _alive(pid)):
                unlink(path.name)
                removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- the jobs, on an audio worker process ------------------------------------------------------------


def decode_and_split_shared(
    upload: str | bytes,
    pcm_name: str,
    max_duration_s: float,
    search_s: float,
    vad: VadOptions | None,
    budget_s: float,
) -> SplitAudio:
    """:func:`pipeline.decode_and_split` of the upload in block ``upload`` (or the bytes themselves), with
    the windows' samples written to a new block ``pcm_name``, one after the other: each window's ``pcm`` is
    then empty and its ``block_offset`` says where its samples start. When the block cannot be made, the
    windows keep their samples (they go back through the pipe). The upload's block is removed once read
    (here, so that the API process's event loop makes no syscall for it)."""
    if isinstance(upload, str):
        with attach(upload, remove=True) as block:
            data = block[:]
    else:
        data = upload
    audio = decode_and_split(data, max_duration_s, search_s, vad, budget_s)
    total = sum(len(w.pcm) for w in audio.windows)
    if not total:
        return audio
    try:
        block = create(pcm_name, 2 * total)
    except OSError as exc:
        log.debug("shared memory: no room for %d samples (%s); using the pipe", total, exc)
        return audio
    with block:
        samples = np.frombuffer(block, dtype=np.int16)
        at = 0
        windows = []
        for w in audio.windows:
            samples[at : at + len(w.pcm)] = w.pcm
            windows.append(AudioWindow(w.start, w.end, _EMPTY, w.speech, block_offset=at))
            at += len(w.pcm)
        del samples  # the mapping cannot close while a view of it lives
    return SplitAudio(audio.n_samples, windows, audio.silent_s, block=pcm_name)


def window_features_shared(
    pcm: np.ndarray | tuple[str, int, int],
    features_name: str,
    n_mels: int,
    offset_s: float,
    speech: Speech | None,
    last: bool = False,
) -> tuple[np.ndarray | tuple[int, int], int, Speech]:
    """:func:`pipeline.window_features` of a window whose samples are ``pcm``, or (block, first sample,
    count) in a block, which is removed once read when ``last`` (the request's last window); the features
    go to a new block ``features_name`` and their shape is returned in their place (the features themselves
    when the block cannot be made)."""
    features, n_frames, speech = window_features(read_window(pcm, last), n_mels, offset_s, speech)
    return publish_features(features, features_name), n_frames, speech


def read_window(pcm: np.ndarray | tuple[str, int, int], last: bool = False) -> np.ndarray:
    """A window's int16 samples: ``pcm`` itself, or (block, first sample, count) copied out of a block, which
    is removed once read when ``last``."""
    if not isinstance(pcm, tuple):
        return pcm
    name, start, count = pcm
    with attach(name, remove=last) as block:
        return np.frombuffer(block, dtype=np.int16, count=count, offset=2 * start).copy()


def publish_features(features: np.ndarray, features_name: str) -> np.ndarray | tuple[int, int]:
    """``features`` written to a new block ``features_name``, and their shape in their place; the features
    themselves when the block cannot be made."""
    features = np.ascontiguousarray(features, dtype=np.float32)
    try:
        block = create(features_name, features.nbytes)
    except OSError as exc:
        log.debug("shared memory: no room for %d bytes of features (%s); using the pipe", features.nbytes, exc)
        return features
    with block:
        block[:] = features.data.cast("B")
    return features.shape


def features_view(name: str, shape: tuple[int, int]) -> np.ndarray:
    """The features a log-mel job wrote to block ``name``, read-only, without a copy (the mapping lives as
    long as the array and whatever holds it: ZMQ, until it has sent them); the name is removed."""
    return np.frombuffer(attach(name, remove=True), dtype=np.float32).reshape(shape)
