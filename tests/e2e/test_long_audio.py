"""The gate for the split path: long audio through the server, concurrently, with 2 preprocessing workers
and batches of several windows, must be as accurate as plain sequential faster-whisper on the same model,
and its timestamps must run forward across window boundaries."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import Clip
from tests.wer import wer

WER_MARGIN = 0.01  # one point


@pytest.fixture(scope="module")
def long_clips(dev_set: list[Clip]) -> list[Clip]:
    clips = [c for c in dev_set if c.duration_s > 30]
    assert clips, "the dev set has no long file"
    return clips


@pytest.fixture(scope="module")
def faster_whisper_baseline(long_clips: list[Clip]) -> list[str]:
    """Plain sequential faster-whisper, same bundled model, same compute type and greedy decoding."""
    from faster_whisper import WhisperModel

    from voxlane.config import default_model_path

    model = WhisperModel(str(default_model_path()), device="cpu", compute_type="int8", cpu_threads=2)
    texts = []
    for clip in long_clips:
        segments, _ = model.transcribe(str(clip.path), beam_size=1, language="en")
        texts.append("".join(s.text for s in segments))
    return texts


def test_long_audio_matches_sequential_faster_whisper(server, client, long_clips, faster_whisper_baseline) -> None:
    # Each long file three times at once, plus short clips in between: windows of several requests share
    # batches (the server fixture runs --max-batch-size 8 --audio-preprocess-workers 2).
    jobs = [clip for clip in long_clips for _ in range(3)]

    def transcribe(clip: Clip):
        return client.audio.transcriptions.create(
            model="whisper-1", file=clip.path.open("rb"), response_format="verbose_json",
            timestamp_granularities=["segment", "word"],
        )

    with ThreadPoolExecutor(len(jobs)) as pool:
        results = list(pool.map(transcribe, jobs))

    ours = wer([c.text for c in jobs], [r.text for r in results])
    baseline = wer([c.text for c in long_clips], faster_whisper_baseline)
    print(f"long audio WER: voxlane {ours:.4f}, sequential faster-whisper {baseline:.4f}")
    assert ours <= baseline + WER_MARGIN

    for clip, result in zip(jobs, results):
        assert abs(result.duration - clip.duration_s) < 0.05
        seg_times = [(s.start, s.end) for s in result.segments]
        assert all(start <= end for start, end in seg_times)
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(seg_times, seg_times[1:])), "segments go backwards"
        assert seg_times[-1][1] <= clip.duration_s + 0.05
        assert seg_times[-1][1] > clip.duration_s - 10, "the end of the audio was not transcribed"
        word_starts = [w.start for w in result.words]
        assert word_starts == sorted(word_starts), "word timestamps go backwards"
