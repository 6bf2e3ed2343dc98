from __future__ import annotations

import threading

import numpy as np

from voxlane.audio.resample import MAX_CACHED_RESAMPLERS, ResamplerCache


def tone(freq_hz: float, rate: int, seconds: float = 1.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * freq_hz * t)).astype(np.float32)


def dominant_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples))
    return float(np.argmax(spectrum) * rate / len(samples))


def test_resampling_keeps_pitch_and_duration() -> None:
    cache = ResamplerCache()
    out = cache.resample(tone(440.0, 44100), 44100, 16000)
    assert abs(len(out) - 16000) <= 2
    assert abs(dominant_hz(out, 16000) - 440.0) < 2.0


def test_cached_resampler_gives_the_same_result_twice() -> None:
    cache = ResamplerCache()
    x = tone(1000.0, 48000, 0.5)
    first = cache.resample(x, 48000, 16000)
    second = cache.resample(x, 48000, 16000)
    assert np.array_equal(first, second)  # state is cleared between uses


def test_cache_is_bounded_whatever_rates_users_send() -> None:
    cache = ResamplerCache()
    for rate in range(8000, 8000 + 50 * 997, 997):  # 50 distinct user-chosen rates
        cache.resample(tone(300.0, rate, 0.05), rate, 16000)
    assert len(cache) == MAX_CACHED_RESAMPLERS
    # least recently used went first: the newest rates are the ones kept
    assert cache.keys()[-1] == (8000 + 49 * 997, 16000)


def test_concurrent_use_of_one_rate_pair_is_safe() -> None:
    cache = ResamplerCache()
    x = tone(700.0, 22050, 2.0)
    expected = cache.resample(x, 22050, 16000)
    results: list[np.ndarray] = []

    def work() -> None:
        for _ in range(10):
            results.append(cache.resample(x, 22050, 16000))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 40
    for r in results:
        assert len(r) == len(expected)
        assert np.allclose(r, expected, atol=1e-4)
