"""Piper voices on onnxruntime: phoneme ids in, int16 PCM out.

Voices load lazily, by path, and a bounded number stay loaded (LRU). The path is the voice's identity:
an uploaded voice that is replaced or deleted gets a new path, so a loaded session is never stale.
A ``PiperRunner`` is used by one of the engine's speech threads at a time (each slot has its own, and so
its own sessions): no locks. ``probe_voice`` (the engine's
probe thread, checking uploads) loads its own session and shares nothing with it.

Word timings: at load the voice's graph is patched in memory (``onnx``; no file changes) so that its ``Ceil``
tensor, the number of audio frames each phoneme id lasts, is an output too: the same run gives it, so it is
fetched for every unit. Frames times the hop length (256 for Piper's VITS voices) are samples, and they sum to
the audio's length exactly. A voice whose graph has no single ``Ceil`` speaks without timings.

Batching: several units through one ``session.run`` (padded to the longest, trimmed by length) was
measured slower or no faster than one unit at a time on this CPU (docs/tts.md), so the runner
synthesises one unit per call.

Device: the CPU, or an NVIDIA GPU through onnxruntime's CUDA provider (``--tts-device``, :func:`place_voices`).
Uploaded voices are probed on the CPU whatever the device: the probe only checks that the files speak.
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
    hop_length: int | None = None
    """Samples per alignment frame; None: the voice gives no alignment (no single Ceil tensor)."""
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


def cpu_session(model: str | bytes, threads: int) -> onnxruntime.InferenceSession:
    """An onnxruntime session on the CPU with ``threads`` that do not spin: a voice's, or a speaker encoder's."""
    return onnxruntime.InferenceSession(
        model, sess_options=session_options(threads), providers=["CPUExecutionProvider"]
    )


CUDA_PROVIDER = "CUDAExecutionProvider"
TTS_CUDA_HINT = (
    "replace onnxruntime with onnxruntime-gpu (pip uninstall -y onnxruntime && "
    "pip install 'onnxruntime-gpu[cuda,cudnn]', or `make install-cuda`)"
)
# A voice's input length changes with every unit, and each new length is a new convolution shape: cuDNN's
# exhaustive search (onnxruntime's default) would time every algorithm for each, the heuristic picks at once.
_CUDA_OPTIONS = {"cudnn_conv_algo_search": "HEURISTIC"}


def voice_session(model: str | bytes, threads: int, device: str) -> onnxruntime.InferenceSession:
    """A voice's session on ``device`` (cpu or cuda). On cuda, raises ValueError when onnxruntime fell back to
    the CPU (it does so with only a logged error when the CUDA provider's libraries do not load)."""
    if device != "cuda":
        return cpu_session(model, threads)
    session = onnxruntime.InferenceSession(
        model,
        sess_options=session_options(threads),
        providers=[(CUDA_PROVIDER, _CUDA_OPTIONS), "CPUExecutionProvider"],
    )
    if session.get_providers()[0] != CUDA_PROVIDER:
        raise ValueError(
            f"onnxruntime's CUDA provider did not load (its libraries, cuDNN 9 and the CUDA runtime, were not "
            f"found: see the onnxruntime error above); {TTS_CUDA_HINT}, or run with --tts-device cpu"
        )
    return session


def place_voices(requested: str, whisper_device: str) -> tuple[str, str]:
    """Resolve ``--tts-device`` (cpu, cuda, auto): the device the voices run on, and why (for the engine's
    start-up log). ``cuda`` raises CudaUnavailable when onnxruntime cannot run a graph on the GPU; ``auto``
    runs the voices on the GPU when Whisper runs there and onnxruntime can, and otherwise on the CPU."""
    from voxlane.runners.cuda import CudaUnavailable

    if requested == "cpu":
        return "cpu", "--tts-device cpu"
    if requested == "auto" and whisper_device != "cuda":
        return "cpu", "--tts-device auto: Whisper runs on the CPU"
    problem = cuda_voice_problem()
    if problem is None:
        return "cuda", f"--tts-device {requested}: onnxruntime {onnxruntime.__version__} with the CUDA provider"
    if requested == "cuda":
        raise CudaUnavailable(f"--tts-device cuda: {problem}; {TTS_CUDA_HINT}, or run with --tts-device cpu")
    return "cpu", f"--tts-device auto: {problem}"


def cuda_voice_problem() -> str | None:
    """Why onnxruntime cannot run a graph on the GPU here, or None when it can: a one-node graph is run on
    the CUDA provider (its libraries load only when a session asks for it)."""
    providers = onnxruntime.get_available_providers()
    if CUDA_PROVIDER not in providers:
        return f"onnxruntime {onnxruntime.__version__} has no CUDA provider (it has {', '.join(providers)})"
    preload = getattr(onnxruntime, "preload_dlls", None)
    if preload is not None:  # the CUDA and cuDNN libraries of NVIDIA's wheels, where pip put them
        try:
            preload()
        except Exception as exc:  # the loader's own path may still hold them
            log.info("onnxruntime.preload_dlls: %s", exc)
    try:
        session = voice_session(_identity_graph(), 1, "cuda")
        session.run(None, {"x": np.zeros(4, dtype=np.float32)})
    except Exception as exc:
        return str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return None


def _identity_graph() -> bytes:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "probe", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # opset 13's, which every onnxruntime of the last years reads
    return model.SerializeToString()


def load_voice(model_path: str, config_path: str, threads: int, device: str = "cpu") -> LoadedVoice:
    """Load one Piper voice on ``device`` (cpu or cuda). Raises ValueError saying what is wrong with a voice
    that cannot serve."""
    config = load_voice_config(config_path)
    model, aligned = _with_alignment(model_path)
    session = voice_session(model, threads, device)
    inputs = {i.name for i in session.get_inputs()}
    if not {"input", "input_lengths", "scales"} <= inputs:
        raise ValueError(f"the model's inputs are {sorted(inputs)}, not a Piper voice's (input, input_lengths, scales)")
    voice = LoadedVoice(session, config.sample_rate, config.num_speakers, config.hop_length if aligned else None)
    voice.reference_peak = _peak(_raw_audio(voice, _calibration_unit(config))[0])
    return voice


def _with_alignment(model_path: str) -> tuple[str | bytes, bool]:
    """The model with its phoneme-duration tensor (the single ``Ceil`` output) marked as a graph output, as
    bytes for onnxruntime, and True; the path unchanged and False where the graph has no single Ceil."""
    import onnx

    try:
        model = onnx.load(model_path)
    except Exception as exc:  # onnxruntime gives the clearer message for a file that is no model
        log.info("voice %s: no alignment (%s)", model_path, exc)
        return model_path, False
    ceils = {name for node in model.graph.node if node.op_type == "Ceil" for name in node.output}
    if len(ceils) != 1:
        log.info("voice %s has %d Ceil tensors, not one: it speaks without word timings", model_path, len(ceils))
        return model_path, False
    name = ceils.pop()
    if not any(output.name == name for output in model.graph.output):
        model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    return model.SerializeToString(), True


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


def run_voice(voice: LoadedVoice, unit: SpeechUnit) -> tuple[np.ndarray, list[int] | None]:
    """The unit's audio as int16: scaled so that the voice's reference peak is full scale (Piper scales
    each sentence to its own peak), or to the unit's own peak where that is higher; and the sample offset
    of each of ``unit.marks`` (phoneme id indices), None when the voice gives no alignment."""
    audio, samples_per_id = _raw_audio(voice, unit)
    marks = None if samples_per_id is None else mark_samples(samples_per_id, unit.marks)
    peak = max(_peak(audio), voice.reference_peak)
    if peak < 1e-8:
        return np.zeros(audio.size, dtype=np.int16), marks
    return np.clip(audio / peak * _MAX_WAV_VALUE, -_MAX_WAV_VALUE, _MAX_WAV_VALUE).astype(np.int16), marks


def mark_samples(samples_per_id: np.ndarray, marks: list[int]) -> list[int]:
    """The sample offset where each phoneme id index in ``marks`` starts (an index past the last id: the end)."""
    starts = np.concatenate([[0], np.cumsum(samples_per_id)])
    top = len(starts) - 1
    return [int(starts[min(max(m, 0), top)]) for m in marks]


def _raw_audio(voice: LoadedVoice, unit: SpeechUnit) -> tuple[np.ndarray, np.ndarray | None]:
    ids = np.asarray(unit.phoneme_ids, dtype=np.int64).reshape(1, -1)
    args = {
        "input": ids,
        "input_lengths": np.array([ids.shape[1]], dtype=np.int64),
        "scales": np.array([unit.noise_scale, unit.length_scale, unit.noise_w_scale], dtype=np.float32),
    }
    if voice.num_speakers > 1:
        args["sid"] = np.array([unit.speaker_id or 0], dtype=np.int64)
    outputs = voice.session.run(None, args)
    audio = np.asarray(outputs[0]).reshape(-1)
    if voice.hop_length is None or len(outputs) < 2:
        return audio, None
    samples_per_id = np.asarray(outputs[1]).reshape(-1).astype(np.int64) * voice.hop_length
    if int(samples_per_id.sum()) != audio.size:  # a graph whose Ceil is not the durations: no timings
        return audio, None
    return audio, samples_per_id


class PiperRunner:
    def __init__(self, threads: int, max_loaded: int, device: str = "cpu") -> None:
        self.threads = threads
        self.max_loaded = max_loaded
        self.device = device
        self._voices: OrderedDict[tuple[str, str], LoadedVoice] = OrderedDict()

    def voice(self, model_path: str, config_path: str) -> LoadedVoice:
        key = (model_path, config_path)
        voice = self._voices.get(key)
        if voice is None:
            log.info("loading voice %s", model_path)
            voice = self._voices[key] = load_voice(model_path, config_path, self.threads, self.device)
            while len(self._voices) > self.max_loaded:
                evicted, _ = self._voices.popitem(last=False)
                log.info("unloading voice %s (--tts-max-loaded-voices %d)", evicted[0], self.max_loaded)
        self._voices.move_to_end(key)
        return voice

    def synthesize(self, unit: SpeechUnit) -> tuple[np.ndarray, int, list[int] | None]:
        voice = self.voice(unit.model_path, unit.config_path)
        pcm, marks = run_voice(voice, unit)
        return pcm, voice.sample_rate, marks
