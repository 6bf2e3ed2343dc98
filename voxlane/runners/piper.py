"""Piper voices on onnxruntime: phoneme ids in, int16 PCM out.

Voices load lazily, by path, and a bounded number stay loaded (LRU). The path is the voice's identity:
an uploaded voice that is replaced or deleted gets a new path, so a loaded session is never stale.
A ``PiperRunner`` is used by one of the engine's speech threads at a time (each slot has its own, and so
its own sessions): no locks. ``probe_voice`` (the engine's
probe thread, checking uploads) loads its own session and shares nothing with it.

Batching: several units through one ``session.run`` (padded to the longest, trimmed by length) was
measured slower or no faster than one unit at a time on this CPU (docs/tts.md), so the runner
synthesises one unit per call.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import onnxruntime

from voxlane.messages import SpeechUnit
from voxlane.voice_config import VoiceConfig, load_voice_config

log = logging.getLogger(__name__)

_MAX_WAV_VALUE = 32767.0
# "The quick brown fox jumps over the lazy dog, and then it runs away." as espeak-ng (en-us) writes it: a
# sentence spoken once at load to learn the voice's usual peak (see ``LoadedVoice.reference_peak``). Symbols
# a voice does not know are skipped, so any IPA voice gets a sentence of some kind.
_CALIBRATION_IPA = "ðə kwˈɪk bɹˈaʊn fˈɑːks dʒˈʌmps ˌoʊvɚ ðə lˈeɪzi dˈɑːɡ, ænd ðˈɛn ɪt ɹˈʌnz ɐwˈeɪ."


@dataclass
class LoadedVoice:
    session: onnxruntime.InferenceSession
    sample_rate: int
    num_speakers: int
    reference_peak: float = 0.0
    """Peak of a whole sentence in this voice (learnt at load). Each unit is scaled so that this peak is
    full scale, or less where the unit's own peak is higher: Piper's per-sentence peak normalisation, but
    the same gain for every unit that fits, so the short units cut from one sentence keep its loudness (a
    3-word first unit normalised to its own peak came out up to 2x louder than the rest of its sentence)."""


def session_options(threads: int) -> onnxruntime.SessionOptions:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Spinning threads would burn the CPU that Whisper and the event loop need between units.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def load_voice(model_path: str, config_path: str, threads: int) -> LoadedVoice:
    """Load one Piper voice. Raises ValueError saying what is wrong with a voice that cannot serve."""
    config = load_voice_config(config_path)
    session = onnxruntime.InferenceSession(
        model_path, sess_options=session_options(threads), providers=["CPUExecutionProvider"]
    )
    inputs = {i.name for i in session.get_inputs()}
    if not {"input", "input_lengths", "scales"} <= inputs:
        raise ValueError(f"the model's inputs are {sorted(inputs)}, not a Piper voice's (input, input_lengths, scales)")
    voice = LoadedVoice(session, config.sample_rate, config.num_speakers)
    voice.reference_peak = _peak(_raw_audio(voice, _calibration_unit(config)))
    return voice


class BadVoice(ValueError):
    """An uploaded voice that cannot serve: ``part`` names the file at fault ('config' or 'model')."""

    def __init__(self, part: str, reason: str) -> None:
        super().__init__(reason)
        self.part = part
        self.reason = reason


def probe_voice(model_path: str, config_path: str, threads: int = 1) -> None:
    """Load a voice (apart from any runner's loaded voices) and make it speak a few phonemes. Raises
    BadVoice saying which file is at fault and why."""
    try:
        config = load_voice_config(config_path)
    except (ValueError, OSError) as exc:
        raise BadVoice("config", str(exc)) from None
    try:
        run_voice(load_voice(model_path, config_path, threads), _probe_unit(config))
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise BadVoice("model", reason) from None


def _probe_unit(config: VoiceConfig) -> SpeechUnit:
    id_map = config.phoneme_id_map
    ids: list[int] = []
    for symbol in ("^", "_", "a", "_", "$"):
        ids.extend(id_map.get(symbol, []))
    if not ids:
        ids = [int(np.asarray(next(iter(id_map.values())))[0])]
    return SpeechUnit(
        "probe",
        0,
        True,
        "",
        "",
        ids,
        config.length_scale,
        config.noise_scale,
        config.noise_w_scale,
        0 if config.num_speakers > 1 else None,
    )


def _calibration_unit(config: VoiceConfig) -> SpeechUnit:
    unit = _probe_unit(config)
    id_map = config.phoneme_id_map
    ids = list(id_map.get("^", [])) + list(id_map.get("_", []))
    for symbol in _CALIBRATION_IPA:
        if symbol in id_map:
            ids.extend(id_map[symbol])
            ids.extend(id_map.get("_", []))
    ids.extend(id_map.get("$", []))
    # No noise: the same reference peak every time the voice loads (each speech slot loads its own copy).
    fields = {f: getattr(unit, f) for f in unit.__struct_fields__}
    return SpeechUnit(**{**fields, "phoneme_ids": ids or unit.phoneme_ids, "noise_scale": 0.0, "noise_w_scale": 0.0})


def _peak(audio: np.ndarray) -> float:
    return float(np.max(np.abs(audio))) if audio.size else 0.0


def run_voice(voice: LoadedVoice, unit: SpeechUnit) -> np.ndarray:
    """The unit's audio as int16: scaled so that the voice's reference peak is full scale (Piper scales
    each sentence to its own peak), or to the unit's own peak where that is higher."""
    audio = _raw_audio(voice, unit)
    peak = max(_peak(audio), voice.reference_peak)
    if peak < 1e-8:
        return np.zeros(audio.size, dtype=np.int16)
    return np.clip(audio / peak * _MAX_WAV_VALUE, -_MAX_WAV_VALUE, _MAX_WAV_VALUE).astype(np.int16)


def _raw_audio(voice: LoadedVoice, unit: SpeechUnit) -> np.ndarray:
    ids = np.asarray(unit.phoneme_ids, dtype=np.int64).reshape(1, -1)
    args = {
        "input": ids,
        "input_lengths": np.array([ids.shape[1]], dtype=np.int64),
        "scales": np.array([unit.noise_scale, unit.length_scale, unit.noise_w_scale], dtype=np.float32),
    }
    if voice.num_speakers > 1:
        args["sid"] = np.array([unit.speaker_id or 0], dtype=np.int64)
    return np.asarray(voice.session.run(None, args)[0]).squeeze()


class PiperRunner:
    def __init__(self, threads: int, max_loaded: int) -> None:
        self.threads = threads
        self.max_loaded = max_loaded
        self._voices: OrderedDict[tuple[str, str], LoadedVoice] = OrderedDict()

    def voice(self, model_path: str, config_path: str) -> LoadedVoice:
        key = (model_path, config_path)
        voice = self._voices.get(key)
        if voice is None:
            log.info("loading voice %s", model_path)
            voice = self._voices[key] = load_voice(model_path, config_path, self.threads)
            while len(self._voices) > self.max_loaded:
                evicted, _ = self._voices.popitem(last=False)
                log.info("unloading voice %s (--tts-max-loaded-voices %d)", evicted[0], self.max_loaded)
        self._voices.move_to_end(key)
        return voice

    def synthesize(self, unit: SpeechUnit) -> tuple[np.ndarray, int]:
        voice = self.voice(unit.model_path, unit.config_path)
        return run_voice(voice, unit), voice.sample_rate
