"""The CAM++ encoder's numpy pieces (voxlane/runners/campplus.py) against plain versions written from torch's
documented semantics, on random weights; the ONNX graph that serves against that numpy network, on the
installed weights; and its Kaldi filterbanks (voxlane/speakers/features.py) on tones."""

from __future__ import annotations

import numpy as np

from voxlane.runners.campplus import SEGMENT, CampPlusEncoder, conv1d, conv2d
from voxlane.speakers.features import FEATURE_COLUMNS, N_MELS, kaldi_fbank, speaker_features

RNG = np.random.default_rng(5)


def _plain_conv2d(x: np.ndarray, w: np.ndarray, stride_h: int) -> np.ndarray:
    _, h, t = x.shape
    k = w.shape[-1]
    p = k // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p)))
    rows = (h + 2 * p - k) // stride_h + 1
    out = np.zeros((w.shape[0], rows, t))
    for o in range(w.shape[0]):
        for i in range(rows):
            for j in range(t):
                out[o, i, j] = (w[o] * xp[:, i * stride_h : i * stride_h + k, j : j + k]).sum()
    return out


def _plain_conv1d(x: np.ndarray, w: np.ndarray, stride: int, dilation: int) -> np.ndarray:
    k = w.shape[-1]
    p = (k - 1) // 2 * dilation
    xp = np.pad(x, ((0, 0), (p, p)))
    t_out = (x.shape[1] + 2 * p - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((w.shape[0], t_out))
    for i in range(t_out):
        taps = xp[:, [i * stride + j * dilation for j in range(k)]]  # (C, k)
        out[:, i] = np.einsum("ock,ck->o", w, taps)
    return out


def test_convolutions_match_plain_ones() -> None:
    x = RNG.normal(size=(3, 10, 7)).astype(np.float32)
    for k, stride in ((3, 1), (3, 2), (1, 2)):
        w = RNG.normal(size=(4, 3, k, k)).astype(np.float32)
        np.testing.assert_allclose(conv2d(x, w, stride), _plain_conv2d(x, w, stride), rtol=1e-4, atol=1e-4)
    x1 = RNG.normal(size=(6, 23)).astype(np.float32)
    for k, stride, dilation in ((5, 2, 1), (3, 1, 2), (3, 1, 1), (1, 1, 1)):
        w = RNG.normal(size=(4, 6, k)).astype(np.float32)
        np.testing.assert_allclose(
            conv1d(x1, w, stride, dilation), _plain_conv1d(x1, w, stride, dilation), rtol=1e-4, atol=1e-4
        )


def test_context_mask_pools_each_segment_over_its_own_frames() -> None:
    # torch: avg_pool1d(kernel=stride=100, ceil_mode=True) averages the last, shorter segment over its frames
    rng = np.random.default_rng(7)
    channels, t = 8, 2 * SEGMENT + 37
    p = "x"
    w = {
        f"{p}.cam_layer.linear_local.weight": rng.normal(size=(3, channels, 3)).astype(np.float32),
        f"{p}.cam_layer.linear1.weight": rng.normal(0, 0.2, size=(4, channels, 1)).astype(np.float32),
        f"{p}.cam_layer.linear1.bias": rng.normal(size=4).astype(np.float32),
        f"{p}.cam_layer.linear2.weight": rng.normal(0, 0.5, size=(3, 4, 1)).astype(np.float32),
        f"{p}.cam_layer.linear2.bias": rng.normal(size=3).astype(np.float32),
    }
    encoder = CampPlusEncoder.__new__(CampPlusEncoder)
    encoder.w = w
    h = rng.normal(size=(channels, t)).astype(np.float32) + np.linspace(0, 3, t, dtype=np.float32)
    got = encoder._cam(h, p, dilation=2)  # small weights: the mask is not saturated, so the context shows
    seg = np.stack([h[:, (i // SEGMENT) * SEGMENT : (i // SEGMENT + 1) * SEGMENT].mean(axis=1) for i in range(t)], 1)
    context = h.mean(axis=1, keepdims=True) + seg
    z = np.maximum(w[f"{p}.cam_layer.linear1.weight"][:, :, 0] @ context + w[f"{p}.cam_layer.linear1.bias"][:, None], 0)
    z = w[f"{p}.cam_layer.linear2.weight"][:, :, 0] @ z + w[f"{p}.cam_layer.linear2.bias"][:, None]
    local = _plain_conv1d(h, w[f"{p}.cam_layer.linear_local.weight"], 1, 2)
    np.testing.assert_allclose(got, local / (1 + np.exp(-z)), rtol=1e-4, atol=1e-4)


def _tone(hz: float, seconds: float = 1.0, amplitude: float = 0.3) -> np.ndarray:
    return (amplitude * np.sin(2 * np.pi * hz * np.arange(int(16000 * seconds)) / 16000)).astype(np.float32)


def test_filterbanks_place_a_tone_and_tilt_by_the_pre_emphasis() -> None:
    low, high = kaldi_fbank(_tone(300.0)), kaldi_fbank(_tone(3000.0))
    assert low.shape == (101, 80) and high.shape == (101, 80)  # frame i centred on sample 160 i
    mel = 1127 * np.log1p(np.array([20.0, 300.0, 3000.0, 8000.0]) / 700)
    delta = (mel[3] - mel[0]) / 81
    for fbank, m in ((low, mel[1]), (high, mel[2])):
        peak = int(np.argmax(fbank[50]))
        assert abs((mel[0] + (peak + 1) * delta) - m) <= delta  # the band centred nearest the tone
    # Pre-emphasis (1 - 0.97 z^-1) lowers 300 Hz by far more than 3 kHz: about 16 dB apart in power.
    gain = [np.abs(1 - 0.97 * np.exp(-2j * np.pi * f / 16000)) ** 2 for f in (300.0, 3000.0)]
    expected = np.log(gain[1] / gain[0])
    got = high[50].max() - low[50].max()
    assert abs(got - expected) < 0.35 * expected, (got, expected)


def test_window_features_are_both_encoders_columns() -> None:
    pcm = (_tone(440.0, 2.0) * 32767).astype(np.int16)
    features = speaker_features(pcm)
    assert features.shape == (201, FEATURE_COLUMNS) and features.dtype == np.float32
    np.testing.assert_allclose(features[:, N_MELS:], kaldi_fbank(pcm)[:201], rtol=1e-5, atol=1e-5)


def test_the_setting_names_an_encoder_and_its_weights_choose_the_network(tmp_path) -> None:
    from voxlane.runners.speaker import SpeakerEncoder, load_encoder
    from voxlane.speakers.weights import DATA_DIR, MODELS, weights_path

    assert weights_path("") == weights_path("ge2e") == DATA_DIR / MODELS["ge2e"].weights_name
    assert weights_path("campplus") == DATA_DIR / MODELS["campplus"].weights_name
    assert weights_path(str(tmp_path / "mine.npz")) == tmp_path / "mine.npz"
    cam = load_encoder(weights_path("campplus"))  # the installed weights: the graph is built from all of them
    assert isinstance(cam, CampPlusEncoder) and cam.dim == 192
    ge2e = tmp_path / "ge2e.npz"
    lstm = {}
    for k in range(3):
        lstm |= {
            f"lstm.weight_ih_l{k}": np.zeros((16, 40 if k == 0 else 4), np.float32),
            f"lstm.weight_hh_l{k}": np.zeros((16, 4), np.float32),
            f"lstm.bias_ih_l{k}": np.zeros(16, np.float32),
            f"lstm.bias_hh_l{k}": np.zeros(16, np.float32),
        }
    np.savez(ge2e, **lstm, **{"linear.weight": np.zeros((8, 4), np.float32), "linear.bias": np.zeros(8, np.float32)})
    assert isinstance(load_encoder(ge2e), SpeakerEncoder)


def test_the_served_graph_gives_the_numpy_networks_embeddings() -> None:
    from voxlane.runners.speaker import load_encoder
    from voxlane.speakers.weights import weights_path

    encoder = load_encoder(weights_path("campplus"))
    rng = np.random.default_rng(11)
    # 50 frames (the shortest region), 237 (a last context segment of 19 frames after the TDNN's stride), 420
    for frames in (50, 237, 420):
        fbank = rng.normal(0, 3, size=(frames, 80)).astype(np.float32)
        fbank -= fbank.mean(axis=0)
        served, reference = encoder.embed_one(fbank), encoder.embed_one_numpy(fbank)
        assert served.shape == (192,)
        np.testing.assert_allclose(served, reference, atol=1e-4 * float(np.abs(reference).max()))
