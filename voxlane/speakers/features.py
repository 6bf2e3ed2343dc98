"""The speaker encoders' input, 10 ms frames of 16 kHz audio, frame ``i`` centred on sample ``i * 160``:

- GE2E's (runners/speaker.py): a 40-band mel power spectrogram, 25 ms windows, as Resemblyzer computes it
  with librosa (``melspectrogram(n_fft=400, hop_length=160, n_mels=40)``: Slaney mel filters, a periodic
  Hann window, centred frames, power, no log), after its loudness normalisation (raised to -30 dBFS, never
  lowered);
- CAM++'s (runners/campplus.py): 80 log mel filterbanks as Kaldi's ``compute-fbank`` (and torchaudio's
  ``kaldi.fbank``) make them: 25 ms Povey windows, DC removed, pre-emphasis 0.97, a 512-point FFT, power,
  Kaldi's mel scale from 20 Hz; the encoder subtracts each region's mean (CMN).

A window's features are the mel, then the filterbanks when the engine's regions' encoder reads them
(``speaker_features``: 40 + 80 columns; ``Ready.speaker_fbank``): each encoder reads its own columns, and the
mel alone costs half (19 ms of one core a 30 s window against 52). The count check's stretches always have
both."""

from __future__ import annotations

import contextlib
import itertools
import mmap

import numpy as np

from voxlane.audio.features import hann_window, mel_filters
from voxlane.audio.pipeline import Speech, window_features_and_power
from voxlane.audio.shared import attach, publish_features, read_window

SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
N_MELS = 40
FRAMES_PER_S = SAMPLE_RATE // HOP
TARGET_DBFS = -30.0


def speaker_mel(
    samples: np.ndarray, loudness_of: np.ndarray | None = None, power: np.ndarray | None = None
) -> np.ndarray:
    """(frames, 40) float32: frame ``i`` is centred on sample ``i * 160``. The loudness gain is measured on
    ``loudness_of`` (the speech in ``samples``) when given, so that pauses do not raise it. ``power``: the
    power spectrum of the same samples that Whisper's log-mel was made from (audio.features.log_mel_and_power);
    its frames that lie wholly inside the audio are the same as this mel's before the gain, so only the few at
    the edges (padded by reflection there, by zeros here) are transformed again."""
    x = samples.astype(np.float32) / 32768.0 if samples.dtype == np.int16 else samples.astype(np.float32)
    ref = x if loudness_of is None or not len(loudness_of) else loudness_of
    rms_db = 10 * np.log10(max(float(np.mean(ref.astype(np.float64) ** 2)), 1e-20))
    gain_db = TARGET_DBFS - rms_db
    gain = np.float32(10 ** (gain_db / 20)) if gain_db > 0 else None
    n_frames = 1 + len(x) // HOP
    half = N_FFT // 2
    # Frames [inner_from, inner_to) read no padding: each starts at or after sample 0 and ends by the last one.
    inner_from, inner_to = -(-half // HOP), (len(x) - half) // HOP + 1
    filters = mel_filters(N_MELS, SAMPLE_RATE, N_FFT)
    if power is None or inner_to <= inner_from or len(power) < inner_to:
        return np.ascontiguousarray(_power(x if gain is None else x * gain, range(n_frames)) @ filters.T)
    mel = np.empty((n_frames, N_MELS), dtype=np.float32)
    mel[inner_from:inner_to] = power[inner_from:inner_to] @ filters.T
    if gain is not None:
        mel[inner_from:inner_to] *= gain * gain
    edges = [*range(inner_from), *range(inner_to, n_frames)]
    if edges:
        mel[edges] = _power(x if gain is None else x * gain, edges) @ filters.T
    return mel


def _power(x: np.ndarray, frames: range | list[int]) -> np.ndarray:
    """The power spectrum of ``x``'s frames ``frames``, the signal padded with zeros on both sides."""
    half = N_FFT // 2
    padded = np.zeros(len(x) + N_FFT, dtype=np.float32)
    padded[half : half + len(x)] = x
    windows = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[np.asarray(frames, dtype=np.intp) * HOP]
    spectrum = np.fft.rfft(windows * hann_window(N_FFT), axis=-1)
    return (spectrum.real**2 + spectrum.imag**2).astype(np.float32)


FBANK_BINS = 80
FBANK_FFT = 512
FEATURE_COLUMNS = N_MELS + FBANK_BINS
"""A window's feature row: GE2E's 40 mel bands, then CAM++'s 80 filterbanks."""


def _kaldi_mel_filters(n_bins: int = FBANK_BINS, low_hz: float = 20.0) -> np.ndarray:
    """(n_bins, FBANK_FFT // 2 + 1) triangles on Kaldi's mel scale (1127 ln(1 + f / 700)); the Nyquist bin
    gets no weight, as in Kaldi."""

    def mel(f: np.ndarray | float) -> np.ndarray:
        return 1127.0 * np.log1p(np.asarray(f, dtype=np.float64) / 700.0)

    lo, hi = mel(low_hz), mel(SAMPLE_RATE / 2)
    delta = (hi - lo) / (n_bins + 1)
    fft_mel = mel(np.arange(FBANK_FFT // 2) * SAMPLE_RATE / FBANK_FFT)
    left = lo + delta * np.arange(n_bins)[:, None]
    right = left + 2 * delta
    up = (fft_mel - left) / delta
    down = (right - fft_mel) / delta
    weights = np.where((fft_mel > left) & (fft_mel < right), np.minimum(up, down), 0.0)
    return np.concatenate([weights, np.zeros((n_bins, 1))], axis=1).astype(np.float32)


_FBANK_FILTERS = _kaldi_mel_filters()
_POVEY = ((0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / (N_FFT - 1))) ** 0.85).astype(np.float32)


def kaldi_fbank(samples: np.ndarray) -> np.ndarray:
    """(frames, 80) float32 log filterbank energies, frame ``i`` centred on sample ``i * 160`` (the edges padded
    by reflection, as Kaldi without ``snip_edges``), of audio in [-1, 1] (int16 is scaled)."""
    x = samples.astype(np.float32) / np.float32(32768.0) if samples.dtype == np.int16 else samples.astype(np.float32)
    half = N_FFT // 2
    n_frames = 1 + len(x) // HOP
    need = (n_frames - 1) * HOP + N_FFT
    if len(x) > half:
        padded = np.pad(x, (half, max(0, need - half - len(x))), mode="reflect")
    else:
        padded = np.pad(x, (half, max(0, need - half - len(x))))
    frames = np.lib.stride_tricks.sliding_window_view(padded[:need], N_FFT)[::HOP][:n_frames]
    frames = frames - frames.mean(axis=1, keepdims=True)
    emphasised = np.empty_like(frames)
    emphasised[:, 1:] = frames[:, 1:] - np.float32(0.97) * frames[:, :-1]
    emphasised[:, 0] = frames[:, 0] * np.float32(1 - 0.97)
    spectrum = np.fft.rfft(emphasised * _POVEY, n=FBANK_FFT, axis=-1)
    power = (spectrum.real**2 + spectrum.imag**2).astype(np.float32)
    return np.log(np.maximum(power @ _FBANK_FILTERS.T, np.finfo(np.float32).eps))


def speaker_features(
    samples: np.ndarray,
    loudness_of: np.ndarray | None = None,
    fbank: bool = True,
    power: np.ndarray | None = None,
    with_mel: bool = True,
) -> np.ndarray:
    """(frames, FEATURE_COLUMNS) float32: ``speaker_mel`` then ``kaldi_fbank``, row by row; without ``fbank``
    the mel alone (N_MELS columns); without ``with_mel`` its columns zero (for an encoder that reads only the
    filterbanks). ``power``: as :func:`speaker_mel` takes it."""
    if not with_mel:
        banks = kaldi_fbank(samples)
        return np.concatenate([np.zeros((len(banks), N_MELS), dtype=np.float32), banks], axis=1)
    mel = speaker_mel(samples, loudness_of, power)
    if not fbank:
        return mel
    banks = kaldi_fbank(samples)
    return np.ascontiguousarray(np.concatenate([mel, banks[: len(mel)]], axis=1), dtype=np.float32)


SPEECH_RISE_DB = 10.0
"""A frame is speech when its level is this far above the window's quietest tenth (its floor)."""
PAUSE_FRAMES = 15
"""Quieter stretches shorter than this (150 ms) do not end a region: a pause between words, not turns."""
DIGITAL_SILENCE_DB = -90.0
"""Frames below this level hold no signal at all (zeros: padding, or the silence an editor or a mixer puts
between turns)."""
MIN_REGION_FRAMES = 20
MAX_REGION_FRAMES = 300
"""Regions longer than 3 s are cut into equal parts of at most 3 s, so that a change of speaker without a
pause still falls between two regions' embeddings."""


def speech_regions(mel: np.ndarray) -> list[tuple[int, int]]:
    """(first, end) frames of the speech in a window's speaker mel (or features: its first 40 columns): loud
    stretches, bridged over pauses shorter than PAUSE_FRAMES, cut to at most MAX_REGION_FRAMES; each region
    gets one embedding, so the pauses between turns are where speakers can change."""
    if not len(mel):
        return []
    level = _level(mel)
    loud = level > np.percentile(level, 10) + SPEECH_RISE_DB
    edges = np.flatnonzero(np.diff(np.concatenate(([0], loud.astype(np.int8), [0]))))
    merged: list[list[int]] = []
    for a, b in zip(edges[::2], edges[1::2]):
        if merged and a - merged[-1][1] < PAUSE_FRAMES:
            merged[-1][1] = int(b)
        else:
            merged.append([int(a), int(b)])
    out = []
    for a, b in merged:
        if b - a < MIN_REGION_FRAMES:
            continue
        parts = -(-(b - a) // MAX_REGION_FRAMES)
        bounds = np.linspace(a, b, parts + 1).round().astype(int)
        out += [(int(x), int(y)) for x, y in itertools.pairwise(bounds)]
    return out


def speech_edges(mel: np.ndarray, regions: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Each region cut to its first and last frame over the floor of the frames that hold any signal (not
    digital silence), where a segment of it should start and end: beside zeros, the window's floor is the
    zeros' and a region takes in the room noise before and after the speech, which the embedding does not
    mind (the noise is the speaker's own), but a segment's edges should not. A region without such a frame
    keeps its edges."""
    if not regions:
        return []
    level = _level(mel)
    live = level[level > DIGITAL_SILENCE_DB]
    loud = level > np.percentile(live if len(live) else level, 10) + SPEECH_RISE_DB
    out = []
    for a, b in regions:
        frames = np.flatnonzero(loud[a:b])
        out.append((a + int(frames[0]), a + int(frames[-1]) + 1) if len(frames) else (a, b))
    return out


def _level(mel: np.ndarray) -> np.ndarray:
    """Each frame's level in dB, from the GE2E mel's 40 columns of the features."""
    return 10 * np.log10(mel[:, :N_MELS].sum(axis=1) + 1e-10)


SpeakerWindowFeatures = tuple[np.ndarray, list[tuple[int, int]], list[tuple[int, int]]]
"""A window's speaker features, its speech regions and their ``speech_edges``."""


def window_speaker_features(
    pcm: np.ndarray | tuple[str, int, int], fbank: bool = True, power: np.ndarray | None = None
) -> SpeakerWindowFeatures:
    """(speaker features, speech regions, their ``speech_edges``) of one window: its int16 samples, or (block,
    first sample, count) in a block of shared memory (audio/shared.py), read without removing it; the
    filterbanks only with ``fbank``; ``power`` as :func:`speaker_mel` takes it. On the audio pool."""
    features = speaker_features(_samples(pcm), fbank=fbank, power=power)
    regions = speech_regions(features)
    return features, regions, speech_edges(features, regions)


def window_all_features(
    pcm: np.ndarray | tuple[str, int, int],
    n_mels: int,
    offset_s: float,
    speech: Speech | None,
    fbank: bool,
    features_name: str | None = None,
    last: bool = False,
) -> tuple[np.ndarray | tuple[int, int], int, Speech, SpeakerWindowFeatures]:
    """A diarized window's two sets of features in one job, from one short-time transform: Whisper's (as
    audio.pipeline.window_features gives them; to a new block ``features_name`` as
    audio.shared.window_features_shared writes them, when named) and the speakers' (as
    :func:`window_speaker_features` gives them). ``pcm`` and ``last`` as window_features_shared takes them.
    On the audio pool."""
    samples = read_window(pcm, last)
    features, n_frames, speech, power = window_features_and_power(samples, n_mels, offset_s, speech)
    speakers = window_speaker_features(samples, fbank, power)
    return (
        (features if features_name is None else publish_features(features, features_name)),
        n_frames,
        speech,
        speakers,
    )


def stretch_features(
    stretches: list[list[np.ndarray | tuple[str, int, int]]], with_mel: bool = True
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """(speaker features, each stretch's (first, end) frames in them) of stretches of speech, each the
    pieces given (int16 samples, or (block, first sample, count) as :func:`window_speaker_features` takes)
    joined: the speaker count check's utterances (server/diarized.py); the mel's columns zero without
    ``with_mel`` (the check's encoder reads only the filterbanks: ``Ready.check_fbank``). On the audio pool."""
    with contextlib.ExitStack() as stack:
        blocks: dict[str, mmap.mmap] = {}  # each block mapped once, however many pieces it holds

        def samples(piece: np.ndarray | tuple[str, int, int]) -> np.ndarray:
            if not isinstance(piece, tuple):
                return piece
            name, start, count = piece
            if name not in blocks:
                blocks[name] = stack.enter_context(attach(name))
            return np.frombuffer(blocks[name], dtype=np.int16, count=count, offset=2 * start).copy()

        parts = [
            speaker_features(np.concatenate([samples(p) for p in pieces]), with_mel=with_mel) for pieces in stretches
        ]
    ends = np.cumsum([len(p) for p in parts]).tolist()
    return np.concatenate(parts), [(end - len(p), end) for p, end in zip(parts, ends)]


def _samples(pcm: np.ndarray | tuple[str, int, int]) -> np.ndarray:
    if isinstance(pcm, tuple):
        name, start, count = pcm
        with attach(name) as block:
            return np.frombuffer(block, dtype=np.int16, count=count, offset=2 * start).copy()
    return pcm
