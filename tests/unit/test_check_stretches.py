"""The count check's stretches (voxlane/server/diarized.py ``_hear``): their features computed on the audio
pool and sent to the engine, the mel's columns left zero when the check's encoder reads only the filterbanks
(``Ready.check_fbank``: CAM++, which reads columns N_MELS and on)."""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace
from typing import Any

import numpy as np

from voxlane.server.diarized import Diarization, _hear
from voxlane.speakers.diarize import Region
from voxlane.speakers.features import N_MELS, SAMPLE_RATE, stretch_features


class _Engine:
    def __init__(self, check_fbank: bool) -> None:
        self.check_fbank = check_fbank
        self.sent: list[tuple[np.ndarray, list]] = []

    @contextlib.asynccontextmanager
    async def speakers(self, request_id: str, count: int) -> Any:
        engine = self

        class Stream:
            async def results(self, timeout_s: float) -> Any:
                n = len(engine.sent[-1][1])
                yield SimpleNamespace(error=None, array=lambda: np.eye(n, 4))

        stream = Stream()
        stream.request_id = request_id  # type: ignore[attr-defined]
        yield stream

    async def send(self, msg: Any, features: np.ndarray) -> None:
        self.sent.append((features, msg.spans))


class _Executors:
    async def run(self, pool: str, fn: Any, *args: Any) -> Any:
        return fn(*args)


def _sent(check_fbank: bool) -> tuple[np.ndarray, dict]:
    rng = np.random.default_rng(3)
    diarization = Diarization(references=[], window_offsets_s=[0.0])
    diarization.sources = [(rng.standard_normal(8 * SAMPLE_RATE) * 3000).astype(np.int16)]
    stretches = [[Region(0.5, 2.5), Region(3.0, 4.0)], [Region(5.0, 7.5)]]
    engine = _Engine(check_fbank)
    state = SimpleNamespace(engine=engine, executors=_Executors(), config=SimpleNamespace(request_timeout_s=10.0))
    heard = asyncio.run(_hear(state, diarization, {}, stretches))  # type: ignore[arg-type]
    return engine.sent[0][0], heard


def test_the_check_s_stretches_carry_the_mel_only_for_an_encoder_that_reads_it() -> None:
    with_mel, heard = _sent(check_fbank=False)
    without, heard_too = _sent(check_fbank=True)
    assert len(heard) == len(heard_too) == 2
    assert with_mel[:, :N_MELS].any() and not without[:, :N_MELS].any()
    np.testing.assert_array_equal(without[:, N_MELS:], with_mel[:, N_MELS:])  # what CAM++ reads: the same


def test_stretch_features_without_the_mel_have_the_same_filterbanks_and_spans() -> None:
    pcm = (np.random.default_rng(4).standard_normal(3 * SAMPLE_RATE) * 3000).astype(np.int16)
    pieces = [[pcm[:SAMPLE_RATE], pcm[SAMPLE_RATE:]], [pcm[: SAMPLE_RATE // 2]]]
    full, spans = stretch_features(pieces)
    banks, same_spans = stretch_features(pieces, with_mel=False)
    assert spans == same_spans and full.shape == banks.shape and full.dtype == banks.dtype
    np.testing.assert_array_equal(banks[:, N_MELS:], full[:, N_MELS:])
    assert not banks[:, :N_MELS].any()


def test_the_engine_says_which_encoders_read_only_the_filterbanks() -> None:
    from voxlane.config import EngineConfig
    from voxlane.engine.proc import ready_message

    ge2e, campplus = SimpleNamespace(), SimpleNamespace(feature_columns=slice(N_MELS, None))
    runner = SimpleNamespace(is_multilingual=False, n_mels=80)
    config = EngineConfig(model_path="m")
    ready = ready_message(config, runner, None, ge2e, campplus)  # the defaults: GE2E regions, CAM++ check
    assert (ready.count_check, ready.speaker_fbank, ready.check_fbank) == (True, False, True)
    ready = ready_message(config, runner, None, campplus, ge2e)
    assert (ready.count_check, ready.speaker_fbank, ready.check_fbank) == (True, True, False)
    ready = ready_message(config, runner, None, ge2e, None)
    assert (ready.count_check, ready.speaker_fbank, ready.check_fbank) == (False, False, False)
