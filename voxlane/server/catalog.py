"""Which models the server offers, by the names clients send: the API process's side of models by name.

It resolves names through ``voxlane.models`` (on the ``files`` pool: resolution reads the disk) and keeps what
it found; it never loads a model (the engine does, on first use) and never downloads one (``pull`` does, when
asked). An unknown or absent model is a 404 that says how to get it.
"""

from __future__ import annotations

from voxlane.config import MODEL_ALIASES, SPEECH_MODEL, SPEECH_MODEL_ALIASES, ServerConfig
from voxlane.errors import ModelNotFound
from voxlane.models import (
    DEFAULT_WHISPER,
    ModelNotPresent,
    WhisperModel,
    cached_whisper_models,
    installed_names,
    resolve_whisper,
    whisper_info,
)
from voxlane.protocol import ModelKind
from voxlane.server.executors import Executors

Listing = list[tuple[str, ModelKind, str]]
"""(id, kind, root) of every id a client may send, in the order GET /v1/models lists them."""


class ModelCatalog:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        if config.whisper:
            self.default = config.whisper[0]
        else:  # a config built by hand (tests, benchmarks): its engine's model
            from pathlib import Path

            multilingual, n_mels = whisper_info(Path(config.engine.model_path))
            self.default = WhisperModel(DEFAULT_WHISPER, config.engine.model_path, multilingual, n_mels, "package")
        self.served = config.whisper or (self.default,)
        self.aliases = dict(config.aliases) or {
            **dict.fromkeys(MODEL_ALIASES, self.default.name),
            **dict.fromkeys(SPEECH_MODEL_ALIASES, SPEECH_MODEL),
        }
        self._known: dict[str, WhisperModel] = {}
        for model in self.served:
            self._known.setdefault(model.name, model)
            self._known.setdefault(model.path, model)
        for ref in config.model:  # as written on the command line (a path as given)
            match = [m for m in self.served if m.name == ref or m.path == ref]
            if match:
                self._known.setdefault(ref, match[0])

    def target(self, requested: str) -> str:
        """The reference behind ``requested``: what an alias names, else ``requested`` itself."""
        return self.aliases.get(requested, requested)

    def is_speech(self, requested: str) -> bool:
        return self.target(requested) == SPEECH_MODEL

    def known(self, requested: str) -> WhisperModel | None:
        """The Whisper model for ``requested`` when it was resolved before (no disk read)."""
        return self._known.get(self.target(requested))

    async def whisper(self, requested: str, executors: Executors) -> WhisperModel:
        """The Whisper model ``requested`` names (an alias, an id, a path, a repo id in the cache); ModelNotFound
        (404) when there is none on this machine, saying how to pull it."""
        ref = self.target(requested)
        if ref == SPEECH_MODEL:
            raise ModelNotFound(
                f"'{requested}' is a speech model (send it to /v1/audio/speech); send model='{self.default.name}' "
                "or another transcription model (GET /v1/models lists them with their kind)"
            )
        model = self._known.get(ref)
        if model is not None:
            return model
        try:
            model = await executors.run("files", resolve_whisper, ref, self.config.hub, self.config.models_dir)
        except ModelNotPresent as exc:
            raise ModelNotFound(f"{exc} (GET /v1/models lists the models this server has)") from None
        self._known[ref] = model
        return model

    def listing(self) -> Listing:
        """Blocking (it scans the Hugging Face cache): run it on the ``files`` pool."""
        whisper = [m.name for m in self.served]
        others = [*installed_names(), *cached_whisper_models(self.config.hub)]
        whisper += [name for name in others if name not in whisper and self._known.get(name) not in self.served]
        listing: Listing = [(name, "transcription", name) for name in whisper]
        for alias, ref in self.aliases.items():
            kind: ModelKind = "speech" if ref == SPEECH_MODEL else "transcription"
            root = ref if kind == "speech" else getattr(self._known.get(ref), "name", ref)
            if kind == "transcription":
                listing.append((alias, kind, root))
        listing.append((SPEECH_MODEL, "speech", SPEECH_MODEL))
        listing += [(alias, "speech", SPEECH_MODEL) for alias, ref in self.aliases.items() if ref == SPEECH_MODEL]
        return listing

    def name_of(self, path: str) -> str:
        """The name clients send for the Whisper model in directory ``path`` (the path when none is known)."""
        for ref, model in self._known.items():
            if model.path == path:
                return model.name if model in self.served else ref
        return path

    def path_of(self, name: str) -> str | None:
        """The directory of a Whisper model already resolved under ``name``; None when not yet resolved."""
        model = self._known.get(name)
        return None if model is None else model.path
