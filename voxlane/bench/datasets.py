"""Benchmark inputs, read into memory before the timed run.

Audio (transcription): ``FILE.jsonl`` (``audio``, ``text``, ``duration_s``; paths relative to the file),
a directory of audio files with optional same-name ``.txt`` references, or ``hf:NAME[:split]`` from the
local cache of the ``datasets`` library. Text (speech): ``FILE.txt`` (one input per line) or the built-in
paragraphs. Every problem is a :class:`DatasetError` whose message says what to pass instead.
"""

from __future__ import annotations

import io
import json
import random
from dataclasses import dataclass
from pathlib import Path

AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".mp4", ".webm", ".aac")

# Built-in speech inputs: short paragraphs of two to four sentences, so that a server that streams sentence
# by sentence has something to stream, and continuity is measured across sentence boundaries.
BUILTIN_TEXTS = (
    "The quick brown fox jumps over the lazy dog. It does this every morning, before the farmer wakes up.",
    "Please call Stella. Ask her to bring these things with her from the store: six spoons of fresh snow peas, "
    "five thick slabs of blue cheese, and maybe a snack for her brother Bob.",
    "A rainbow is a division of white light into many beautiful colors. These take the shape of a long round arch, "
    "with its path high above, and its two ends apparently beyond the horizon.",
    "We will meet at the station at half past nine. If the train is late again, wait for me in the cafe. "
    "I will bring the tickets.",
    "Speech synthesis turns written text into audio. A good system sounds natural, starts speaking quickly, "
    "and never leaves the listener waiting in the middle of a sentence.",
    "She sells sea shells by the sea shore. The shells she sells are surely sea shells. So if she sells shells on "
    "the sea shore, I am sure she sells sea shore shells.",
    "The benchmark measures how quickly the first audio arrives. Then it checks whether playback would ever stall, "
    "as if a real listener were on the other end.",
    "In the morning the city was quiet. Only the sound of a distant bell carried over the roofs. By noon, the "
    "streets were full of people again.",
    "Open the window and let in some fresh air. Then we can get back to work, and finish the report before lunch.",
    "It was the best of times, it was the worst of times. It was the age of wisdom, it was the age of foolishness.",
    "How much wood would a woodchuck chuck, if a woodchuck could chuck wood? Nobody knows for sure. Some say it "
    "would chuck as much as it could.",
    "Remember to save your work often. Computers tend to crash at the worst possible moment, usually right before "
    "a deadline.",
)


class DatasetError(ValueError):
    """The dataset could not be read; the message says why and what to pass instead."""


@dataclass(frozen=True)
class AudioSample:
    name: str
    data: bytes
    """The file's bytes, sent as the upload."""
    duration_s: float
    text: str | None
    """Reference transcript, if known."""


@dataclass(frozen=True)
class TextSample:
    text: str


def load_audio_dataset(
    spec: str, *, min_duration_s: float = 0.0, max_duration_s: float = float("inf")
) -> list[AudioSample]:
    if spec.startswith("hf:"):
        samples = _load_hf(spec[3:])
    else:
        path = Path(spec).expanduser()
        if path.is_dir():
            samples = _load_dir(path)
        elif path.is_file():
            samples = _load_jsonl(path)
        else:
            raise DatasetError(
                f"--dataset {spec!r}: no such file or directory; pass a manifest .jsonl, a directory "
                "of audio files or hf:NAME[:split]"
            )
    kept = [s for s in samples if min_duration_s <= s.duration_s <= max_duration_s]
    if not kept:
        raise DatasetError(
            f"--dataset {spec!r} holds no audio between {min_duration_s:g} s and {max_duration_s:g} s "
            f"({len(samples)} files in all): widen --min-duration-s / --max-duration-s"
        )
    return kept


def load_text_dataset(spec: str | None) -> list[TextSample]:
    if spec is None or spec == "builtin":
        return [TextSample(t) for t in BUILTIN_TEXTS]
    if spec == "paragraphs":
        from voxlane.bench.paragraphs import PARAGRAPHS

        return [TextSample(t) for t in PARAGRAPHS]
    path = Path(spec).expanduser()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(
            f"--dataset {spec!r}: cannot read it ({exc}); for speech pass a UTF-8 text file with "
            "one input per line, 'paragraphs' for the 16 long paragraphs, or leave --dataset out for the built-in "
            "short ones"
        ) from None
    texts = [TextSample(line.strip()) for line in lines if line.strip()]
    if not texts:
        raise DatasetError(f"--dataset {spec!r} has no non-empty lines")
    return texts


def request_order(n_items: int, num_prompts: int, seed: int) -> list[int]:
    """Indices of the ``num_prompts`` requests: the dataset shuffled by ``seed``, cycled as often as needed."""
    order = list(range(n_items))
    random.Random(seed).shuffle(order)
    return [order[i % n_items] for i in range(num_prompts)]


# --- sources ---------------------------------------------------------------------------------------


def _load_jsonl(path: Path) -> list[AudioSample]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"--dataset {str(path)!r}: cannot read it ({exc})") from None
    samples = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            audio_path = path.parent / row["audio"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise DatasetError(
                f"{path}:{n}: not a manifest line ({exc!r}); each line must be a JSON object with "
                "'audio' (path relative to the manifest), 'text' and 'duration_s'"
            ) from None
        data = _read_bytes(audio_path, f"{path}:{n}")
        duration = row.get("duration_s")
        samples.append(
            AudioSample(
                audio_path.name,
                data,
                float(duration) if duration is not None else _duration_s(data, audio_path),
                row.get("text"),
            )
        )
    if not samples:
        raise DatasetError(f"--dataset {str(path)!r} has no manifest lines")
    return samples


def _load_dir(path: Path) -> list[AudioSample]:
    files = sorted(p for p in path.iterdir() if p.suffix.lower() in AUDIO_SUFFIXES and p.is_file())
    if not files:
        raise DatasetError(f"--dataset {str(path)!r}: no audio files ({', '.join(AUDIO_SUFFIXES)}) in the directory")
    samples = []
    for f in files:
        data = _read_bytes(f, str(path))
        ref = f.with_suffix(".txt")
        text = ref.read_text(encoding="utf-8").strip() if ref.is_file() else None
        samples.append(AudioSample(f.name, data, _duration_s(data, f), text))
    return samples


def _load_hf(spec: str) -> list[AudioSample]:
    name, _, split = spec.partition(":")
    split = split or "test"
    try:
        import datasets
    except ImportError:
        raise DatasetError(
            f"--dataset hf:{spec} needs the 'datasets' library: pip install datasets "
            "(and the data set in its local cache, since the benchmark does not download)"
        ) from None
    try:
        ds = datasets.load_dataset(name, split=split, download_mode="reuse_cache_if_exists")
    except Exception as exc:
        raise DatasetError(
            f"--dataset hf:{spec}: could not load {name!r} split {split!r} from the local cache "
            f"({type(exc).__name__}: {exc}); download it first with datasets.load_dataset while "
            "online, or pass a manifest .jsonl or a directory"
        ) from None
    import soundfile

    text_column = next(
        (c for c in ("text", "sentence", "transcription", "normalized_text") if c in ds.column_names), None
    )
    samples = []
    for i, row in enumerate(ds):
        audio = row["audio"]
        buf = io.BytesIO()
        soundfile.write(buf, audio["array"], audio["sampling_rate"], format="WAV", subtype="PCM_16")
        samples.append(
            AudioSample(
                f"{name}-{i}",
                buf.getvalue(),
                len(audio["array"]) / audio["sampling_rate"],
                row[text_column] if text_column else None,
            )
        )
    return samples


def _read_bytes(path: Path, where: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{where}: cannot read the audio file {str(path)!r} ({exc.strerror})") from None


def _duration_s(data: bytes, path: Path) -> float:
    from voxlane.audio.decode import decode_audio

    try:
        return decode_audio(data, 24 * 3600.0).duration_s
    except Exception as exc:
        raise DatasetError(f"{path}: not audio that can be decoded ({exc})") from None


REQUIRED_FIELDS = ("audio", "text", "duration_s", "source", "license", "sha256")
"""What each row of a dev set's manifest holds (``check_manifest``): where the audio is, its reference, its
length, where it came from, under which licence, and the SHA-256 of the stored file."""
DURATION_TOLERANCE_S = 0.05


def check_manifest(path: Path) -> list[str]:
    """What is wrong with a dev set (empty: nothing): rows without the required fields, audio files that
    are missing, whose SHA-256 differs from the manifest's, or whose decoded length differs from its
    ``duration_s`` by more than DURATION_TOLERANCE_S, and audio paths listed twice."""
    import hashlib

    problems: list[str] = []
    seen: set[str] = set()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name}:{n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{where}: not JSON ({exc.msg})")
            continue
        missing = [f for f in REQUIRED_FIELDS if f not in row]
        if missing:
            problems.append(f"{where}: no {', '.join(missing)}")
            continue
        if row["audio"] in seen:
            problems.append(f"{where}: {row['audio']} is listed twice")
        seen.add(row["audio"])
        audio = path.parent / row["audio"]
        if not audio.is_file():
            problems.append(f"{where}: {row['audio']} is missing")
            continue
        data = audio.read_bytes()
        if hashlib.sha256(data).hexdigest() != row["sha256"]:
            problems.append(f"{where}: {row['audio']} has another SHA-256 than the manifest's")
            continue
        try:
            duration = _duration_s(data, audio)
        except DatasetError as exc:
            problems.append(f"{where}: {exc}")
            continue
        if abs(duration - float(row["duration_s"])) > DURATION_TOLERANCE_S:
            problems.append(f"{where}: {row['audio']} lasts {duration:.3f} s, the manifest says {row['duration_s']}")
    if not seen and not problems:
        problems.append(f"{path}: no rows")
    return problems
