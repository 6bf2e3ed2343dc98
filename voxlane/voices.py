"""The voices a server speaks with: the bundled one, and uploaded ones kept in ``<data-dir>/voices``.

Atomicity: every upload is stored in a fresh directory ``voices/<name>.<random>/`` and never rewritten,
so a path names one voice's bytes forever. A request resolves its voice once, at admission, and holds a
lease on that version until it ends. Deleting or replacing a voice only changes the name -> version
index (new requests see the new state at once); the old version's files are removed when its last lease
ends. In-flight streams therefore finish with the voice they resolved, and the engine (which loads by
path) never sees a half-written or vanished file.

An upload is checked before it is accepted: ``add`` stages it, then has the engine process load it and
make it speak (``EngineClient.probe_voice``: the API process never loads a model); a voice that fails is
rejected with the reason and its directory removed.

The index and the refcounts are touched on the event loop only; file work (copy, remove, write the
index) is done by the blocking helpers here, run through the ``files`` executor.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import secrets
import shutil
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from voxlane.errors import InvalidRequest
from voxlane.messages import VoiceProbed
from voxlane.protocol import VOICE_NAME_PATTERN

log = logging.getLogger(__name__)

DEFAULT_VOICE = "joe"
OPENAI_VOICES = (
    "alloy",
    "ash",
    "ballad",
    "cedar",
    "coral",
    "echo",
    "fable",
    "marin",
    "nova",
    "onyx",
    "sage",
    "shimmer",
    "verse",
)
"""OpenAI's voice names: stock clients send these, and they map to the default voice."""
_NAME = re.compile(VOICE_NAME_PATTERN)
_INDEX = "voices.json"


@dataclass(frozen=True)
class Voice:
    name: str
    model_path: str
    config_path: str
    builtin: bool = False

    @property
    def key(self) -> str:
        return self.model_path


@dataclass
class _Version:
    voice: Voice
    leases: int = 0
    retired: bool = False


class VoiceRegistry:
    def __init__(self, data_dir: Path, default: tuple[str, str], named: Sequence[tuple[str, str, str]] = ()) -> None:
        """``named``: (name, model, config) of the voices served by name (--voice, the Hugging Face cache)."""
        self.dir = data_dir / "voices"
        self.default = Voice(DEFAULT_VOICE, default[0], default[1], builtin=True)
        self._named: dict[str, Voice] = {}
        for name, model, config in named:
            self.remember(name, model, config)
        self._index: dict[str, Voice] = {}
        self._versions: dict[str, _Version] = {}
        self._generation = 0
        self._write_lock = threading.Lock()
        self._written_generation = -1

    # --- startup (blocking) --------------------------------------------------------------------

    def load(self) -> None:
        """Read the index, drop entries whose files are gone, remove directories nothing refers to."""
        self.dir.mkdir(parents=True, exist_ok=True)
        index_path = self.dir / _INDEX
        entries: dict[str, dict[str, str]] = {}
        if index_path.is_file():
            try:
                entries = json.loads(index_path.read_text())
            except ValueError:
                log.error("%s is not valid JSON; starting with no uploaded voices", index_path)
        for name, entry in entries.items():
            voice = Voice(name, entry["model"], entry["config"])
            if Path(voice.model_path).is_file() and Path(voice.config_path).is_file():
                self._index[name] = voice
            else:
                log.warning("voice %s: its files are gone; dropping it", name)
        kept = {Path(v.model_path).parent.name for v in self._index.values()}
        for child in self.dir.iterdir():
            if child.is_dir() and child.name not in kept:
                shutil.rmtree(child, ignore_errors=True)

    # --- on the event loop ---------------------------------------------------------------------

    async def add(
        self,
        name: str,
        model: BinaryIO,
        config: BinaryIO,
        *,
        probe: Callable[[Voice], Awaitable[VoiceProbed]],
        files: Callable[..., Awaitable[Any]],
    ) -> Voice:
        """Stage an upload, have ``probe`` check that it loads and speaks, then make it the voice ``name``
        resolves to and persist the index. ``files(fn, *args)`` runs blocking file work off the loop.
        Raises InvalidRequest with the reason when the voice fails its probe, and whatever ``probe``
        raises (EngineUnavailable); either way no directory is left behind."""
        voice = await files(self.stage, name, model, config)
        try:
            _check(await probe(voice))
        except BaseException:
            # Shielded: a cancelled upload still cleans up (and load() removes strays at the next start).
            await asyncio.shield(files(remove_dir, Path(voice.model_path).parent))
            raise
        stale, snapshot, generation = self.install(voice)
        await files(self.write_index, snapshot, generation)
        await files(remove_dir, stale)
        return voice

    def names(self) -> list[Voice]:
        uploaded = sorted(self._index.values(), key=lambda v: v.name)
        return [self.default, *(v for v in self._named.values() if v.name not in self._index), *uploaded]

    def remember(self, name: str, model_path: str, config_path: str) -> Voice:
        """Serve the voice in these files as ``name`` (a voice by name: read-only, never removed)."""
        voice = self._named[name] = Voice(name, model_path, config_path, builtin=True)
        return voice

    def resolve(self, name: str) -> Voice:
        if name == DEFAULT_VOICE or name in OPENAI_VOICES:
            return self.default
        voice = self._index.get(name) or self._named.get(name)
        if voice is None:
            known = ", ".join(v.name for v in self.names())
            raise InvalidRequest(
                f"unknown voice '{name}'; send one of: {known} (or an OpenAI voice name such as "
                "'alloy', which speaks with the default voice). GET /v1/audio/voices lists them.",
                param="voice",
                code="voice_not_found",
            )
        return voice

    def acquire(self, voice: Voice) -> None:
        if voice.builtin:
            return
        self._versions.setdefault(voice.key, _Version(voice)).leases += 1

    def release(self, voice: Voice) -> Path | None:
        """End a lease. Returns a directory the caller must remove (blocking) when it was the last one
        of a deleted or replaced version."""
        version = self._versions.get(voice.key)
        if version is None:
            return None
        version.leases -= 1
        if version.leases <= 0:
            del self._versions[voice.key]
            if version.retired:
                return Path(voice.model_path).parent
        return None

    def check_name(self, name: str) -> None:
        if not _NAME.fullmatch(name):  # match() lets a trailing newline through '$'
            raise InvalidRequest(
                "a voice name is 1 to 64 letters, digits, '-' or '_', starting with a letter or digit",
                param="name",
                code="invalid_voice_name",
            )
        if name == DEFAULT_VOICE or name in OPENAI_VOICES:
            raise InvalidRequest(
                f"'{name}' is a built-in voice name; choose another", param="name", code="invalid_voice_name"
            )

    def install(self, voice: Voice) -> tuple[Path | None, dict[str, dict[str, str]], int]:
        """Make ``voice`` the one its name resolves to. Returns (a replaced version's directory to remove
        now, or None), and the index snapshot with its generation, for ``write_index``."""
        old = self._index.get(voice.name)
        self._index[voice.name] = voice
        return self._retire(old), *self._snapshot()

    def remove(self, name: str) -> tuple[Path | None, dict[str, dict[str, str]], int]:
        old = self._index.pop(name, None)
        if old is None:
            raise InvalidRequest(f"there is no uploaded voice '{name}' to delete", param="name", code="voice_not_found")
        return self._retire(old), *self._snapshot()

    def is_uploaded(self, name: str) -> bool:
        return name in self._index

    def _retire(self, old: Voice | None) -> Path | None:
        if old is None:
            return None
        version = self._versions.get(old.key)
        if version is not None and version.leases > 0:
            version.retired = True  # removed when its last stream ends
            return None
        return Path(old.model_path).parent

    def _snapshot(self) -> tuple[dict[str, dict[str, str]], int]:
        self._generation += 1
        return (
            {v.name: {"model": v.model_path, "config": v.config_path} for v in self._index.values()},
            self._generation,
        )

    # --- blocking helpers (run in an executor) ---------------------------------------------------

    def write_index(self, snapshot: dict[str, dict[str, str]], generation: int) -> None:
        """Atomically replace the index file; an older snapshot never overwrites a newer one."""
        with self._write_lock:
            if generation <= self._written_generation:
                return
            tmp = self.dir / f".{_INDEX}.{secrets.token_hex(4)}"
            tmp.write_text(json.dumps(snapshot, indent=1))
            os.replace(tmp, self.dir / _INDEX)
            self._written_generation = generation

    def stage(self, name: str, model: BinaryIO, config: BinaryIO) -> Voice:
        """Copy an upload into a fresh version directory (removed again if the copy fails)."""
        version_dir = self.dir / f"{name}.{secrets.token_hex(6)}"
        version_dir.mkdir(parents=True)
        voice = Voice(name, str(version_dir / "model.onnx"), str(version_dir / "model.onnx.json"))
        try:
            with open(voice.model_path, "wb") as f:
                shutil.copyfileobj(model, f, 1 << 20)
            with open(voice.config_path, "wb") as f:
                shutil.copyfileobj(config, f, 1 << 20)
        except BaseException:
            shutil.rmtree(version_dir, ignore_errors=True)
            raise
        return voice


def remove_dir(path: Path | None) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def _check(verdict: VoiceProbed) -> None:
    if verdict.problem == "config":
        raise InvalidRequest(
            f"the voice config is not a Piper .onnx.json: {verdict.reason}", param="config", code="invalid_voice"
        )
    if verdict.problem is not None:
        raise InvalidRequest(
            f"the voice model does not load as a Piper ONNX voice: {verdict.reason}",
            param="model",
            code="invalid_voice",
        )
