"""The voice registry: atomic uploads, leases that outlive a delete or a replace, the index across a
restart, and voice names. The engine's probe is a stub here (no model is loaded)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from voxlane.errors import EngineUnavailable, InvalidRequest
from voxlane.messages import VoiceProbed
from voxlane.voices import DEFAULT_VOICE, Voice, VoiceRegistry, remove_dir

DEFAULT = ("/bundled/joe.onnx", "/bundled/joe.onnx.json")


def registry(data_dir: Path) -> VoiceRegistry:
    reg = VoiceRegistry(data_dir, DEFAULT)
    reg.load()
    return reg


async def files(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


def probe_says(problem: str | None = None, reason: str = "") -> Callable[[Voice], Any]:
    async def probe(voice: Voice) -> VoiceProbed:
        assert Path(voice.model_path).is_file() and Path(voice.config_path).is_file()  # staged before the probe
        return VoiceProbed("probe", problem, reason)

    return probe


def add(
    reg: VoiceRegistry, name: str, probe: Callable[[Voice], Any] | None = None, model: bytes = b"onnx bytes"
) -> Voice:
    return asyncio.run(reg.add(name, io.BytesIO(model), io.BytesIO(b"{}"), probe=probe or probe_says(), files=files))


def version_dirs(reg: VoiceRegistry) -> list[Path]:
    return sorted(p for p in reg.dir.iterdir() if p.is_dir())


def test_an_accepted_upload_is_stored_and_resolves(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    voice = add(reg, "anna", model=b"the model")
    assert reg.resolve("anna") == voice
    assert Path(voice.model_path).read_bytes() == b"the model"
    assert [p.name for p in version_dirs(reg)] == [Path(voice.model_path).parent.name]
    assert [v.name for v in reg.names()] == [DEFAULT_VOICE, "anna"]


@pytest.mark.parametrize(
    "probe, error, needle",
    [
        (
            probe_says("model", "not ONNX"),
            InvalidRequest,
            "the voice model does not load as a Piper ONNX voice: not ONNX",
        ),
        (probe_says("config", "no espeak"), InvalidRequest, "the voice config is not a Piper .onnx.json: no espeak"),
    ],
)
def test_a_failed_probe_leaves_no_directory(tmp_path: Path, probe: Any, error: type, needle: str) -> None:
    reg = registry(tmp_path)
    with pytest.raises(error) as raised:
        add(reg, "bad", probe)
    assert raised.value.message == needle and raised.value.code == "invalid_voice"
    assert raised.value.param == ("model" if "model" in needle else "config")
    assert version_dirs(reg) == []
    assert not reg.is_uploaded("bad")
    assert not (reg.dir / "voices.json").exists()


def test_an_engine_that_cannot_probe_leaves_no_directory(tmp_path: Path) -> None:
    async def engine_died(voice: Voice) -> VoiceProbed:
        raise EngineUnavailable("the engine stopped")

    reg = registry(tmp_path)
    with pytest.raises(EngineUnavailable):
        add(reg, "orphan", engine_died)
    assert version_dirs(reg) == [] and not reg.is_uploaded("orphan")


def test_delete_while_a_lease_is_held_keeps_the_files_until_release(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    voice = add(reg, "busy")
    leased = reg.resolve("busy")
    reg.acquire(leased)
    stale, _, _ = reg.remove("busy")
    assert stale is None  # nothing to remove yet
    with pytest.raises(InvalidRequest):
        reg.resolve("busy")  # new requests see the deletion at once
    assert Path(voice.model_path).is_file()  # the stream still speaks with it
    to_remove = reg.release(leased)
    assert to_remove == Path(voice.model_path).parent
    remove_dir(to_remove)
    assert version_dirs(reg) == []


def test_delete_without_a_lease_removes_at_once(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    voice = add(reg, "idle")
    stale, _, _ = reg.remove("idle")
    assert stale == Path(voice.model_path).parent
    with pytest.raises(InvalidRequest) as raised:
        reg.remove("idle")
    assert raised.value.code == "voice_not_found"


def test_replace_gives_a_new_version_and_retires_the_old_after_its_lease(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    old = add(reg, "anna", model=b"v1")
    reg.acquire(old)
    new = add(reg, "anna", model=b"v2")
    assert new.model_path != old.model_path and reg.resolve("anna") == new
    assert Path(old.model_path).read_bytes() == b"v1"  # leased: kept
    remove_dir(reg.release(old))
    assert [p.name for p in version_dirs(reg)] == [Path(new.model_path).parent.name]
    newer = add(reg, "anna", model=b"v3")  # no lease on v2: replaced and removed at once
    assert [p.name for p in version_dirs(reg)] == [Path(newer.model_path).parent.name]


def test_the_index_survives_a_reload(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    kept = add(reg, "kept")
    gone = add(reg, "gone")
    (reg.dir / "stray.0123").mkdir()  # an upload cut off by a crash
    remove_dir(Path(gone.model_path).parent)  # files lost behind the index's back
    again = registry(tmp_path)
    assert [v.name for v in again.names()] == [DEFAULT_VOICE, "kept"]
    assert again.resolve("kept") == kept
    assert [p.name for p in version_dirs(again)] == [Path(kept.model_path).parent.name]
    # load() only forgets the lost voice; the file drops it at the next change of the index.
    assert set(json.loads((again.dir / "voices.json").read_text())) == {"kept", "gone"}


def test_a_corrupt_index_starts_empty(tmp_path: Path) -> None:
    (tmp_path / "voices").mkdir()
    (tmp_path / "voices" / "voices.json").write_text("{not json")
    assert [v.name for v in registry(tmp_path).names()] == [DEFAULT_VOICE]


@pytest.mark.parametrize("name", ["", "../escape", "a/b", "-dash-first", "x" * 65, "space name", "joe", "alloy"])
def test_bad_names_are_rejected(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        registry(tmp_path).check_name(name)
    assert raised.value.code == "invalid_voice_name" and raised.value.param == "name"


@pytest.mark.parametrize("name", ["anna", "A1", "voice_2-b", "x" * 64])
def test_good_names_pass(tmp_path: Path, name: str) -> None:
    registry(tmp_path).check_name(name)


def test_builtin_and_openai_names_resolve_to_the_default(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    assert reg.resolve("joe") == reg.resolve("alloy") == reg.default
    with pytest.raises(InvalidRequest) as raised:
        reg.resolve("nobody")
    assert raised.value.code == "voice_not_found"
