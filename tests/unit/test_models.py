"""Model references (voxlane/models.py): installed packages and entry points, directories, the Hugging Face
cache's layout, Piper voice names, and pulls refused offline. No network: the caches are laid out here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from voxlane.config import default_model_path, default_voice_paths, hub_cache
from voxlane.models import (
    HubCache,
    ModelNotPresent,
    cached_whisper_models,
    installed_names,
    pull,
    resolve_voice,
    resolve_whisper,
    voice_repo_path,
)


def hf_repo(cache: Path, repo_id: str, files: dict[str, Path], revision: str = "0123abcd") -> Path:
    """A repo laid out as huggingface_hub writes it: blobs, a snapshot of symlinks, refs/main."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    for name, src in files.items():
        blob = repo / "blobs" / f"{revision}-{name.replace('/', '_')}"
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.symlink_to(src)
        (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / name).symlink_to(blob)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


def tiny_en_repo(cache: Path, repo_id: str = "Systran/faster-whisper-tiny.en") -> Path:
    src = default_model_path()
    return hf_repo(cache, repo_id, {p.name: p for p in src.iterdir() if p.is_file()})


def test_a_repo_id_resolves_to_the_snapshot_refs_main_names(tmp_path: Path) -> None:
    hub = HubCache(tmp_path)
    tiny_en_repo(tmp_path)
    (tmp_path / "models--Systran--faster-whisper-tiny.en" / "snapshots" / "older").mkdir()  # not main
    model = resolve_whisper("Systran/faster-whisper-tiny.en", hub, tmp_path / "work")
    assert Path(model.path) == tmp_path / "models--Systran--faster-whisper-tiny.en" / "snapshots" / "0123abcd"
    assert (model.name, model.source, model.multilingual, model.n_mels) == (
        "Systran/faster-whisper-tiny.en", "huggingface", False, 80,
    )  # fmt: skip
    assert cached_whisper_models(hub) == ["Systran/faster-whisper-tiny.en"]


def test_a_repo_id_not_in_the_cache_says_how_to_pull_it(tmp_path: Path) -> None:
    with pytest.raises(ModelNotPresent, match=r"voxlane models pull Systran/faster-whisper-small"):
        resolve_whisper("Systran/faster-whisper-small", HubCache(tmp_path), tmp_path)


def test_a_home_of_no_user_is_a_model_not_present(tmp_path: Path) -> None:
    """``~user`` for a user who does not exist is not expanded (pathlib raises RuntimeError: a 500)."""
    with pytest.raises(ModelNotPresent):
        resolve_whisper("~no-such-user-\x06", HubCache(tmp_path), tmp_path)
    with pytest.raises(ModelNotPresent):
        resolve_voice("~no-such-user-\x06", HubCache(tmp_path), tmp_path)


def test_the_cache_is_where_huggingface_hub_looks() -> None:
    assert hub_cache({"HF_HOME": "/h"}).dir == Path("/h/hub")
    assert hub_cache({"HF_HOME": "/h", "HF_HUB_CACHE": "/c"}).dir == Path("/c")
    assert hub_cache({}).dir == Path("~/.cache/huggingface/hub").expanduser()
    assert hub_cache({"HF_HUB_OFFLINE": "1"}).offline and not hub_cache({"HF_HUB_OFFLINE": "0"}).offline


def test_installed_models_and_directories(tmp_path: Path) -> None:
    assert {"whisper-tiny.en", "whisper-base"} <= set(installed_names())  # the dev extra installs the base
    base = resolve_whisper("whisper-base", HubCache(tmp_path), tmp_path / "work")
    assert base.multilingual and Path(base.path).parent == tmp_path / "work"  # its halves joined once, there
    assert (Path(base.path) / "model.bin").stat().st_size > 140e6
    again = resolve_whisper(base.path, HubCache(tmp_path), tmp_path / "work")  # a directory, by its path
    assert (again.name, again.source, again.multilingual) == (Path(base.path).name, "path", True)
    with pytest.raises(ModelNotPresent, match="not a CTranslate2 Whisper model directory"):
        resolve_whisper(str(tmp_path), HubCache(tmp_path), tmp_path)


def test_a_package_adds_a_model_through_the_entry_point_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "acme_models.py").write_text(f"def tiny():\n    return {str(default_model_path())!r}\n")
    dist = tmp_path / "acme_models-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-models\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[voxlane.models]\nacme-tiny = acme_models:tiny\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "acme-tiny" in installed_names()
    model = resolve_whisper("acme-tiny", HubCache(tmp_path), tmp_path)
    assert (model.name, model.path, model.source) == ("acme-tiny", str(default_model_path()), "package")
    sys.modules.pop("acme_models", None)


def test_a_piper_voice_by_name_in_the_layout_of_rhasspy_piper_voices(tmp_path: Path) -> None:
    assert voice_repo_path("en_US-lessac-medium") == "en/en_US/lessac/medium/en_US-lessac-medium"
    assert voice_repo_path("joe") is None
    onnx, config = (Path(p) for p in default_voice_paths())
    hf_repo(
        tmp_path,
        "rhasspy/piper-voices",
        {"en/en_US/joe/medium/en_US-joe-medium.onnx": onnx, "en/en_US/joe/medium/en_US-joe-medium.onnx.json": config},
    )
    voice = resolve_voice("en_US-joe-medium", HubCache(tmp_path), tmp_path)
    assert voice.model_path.endswith("snapshots/0123abcd/en/en_US/joe/medium/en_US-joe-medium.onnx")
    assert voice.config_path == voice.model_path + ".json"
    with pytest.raises(ModelNotPresent, match="voxlane models pull en_US-lessac-medium"):
        resolve_voice("en_US-lessac-medium", HubCache(tmp_path), tmp_path)
    by_dir = resolve_voice(str(onnx.parent), HubCache(tmp_path), tmp_path)  # a voice directory
    assert (by_dir.model_path, by_dir.source) == (str(onnx), "path")


def test_a_pull_is_refused_offline_before_any_download(tmp_path: Path) -> None:
    with pytest.raises(ModelNotPresent, match="HF_HUB_OFFLINE is set, so no download is allowed"):
        pull("Systran/faster-whisper-small", HubCache(tmp_path, offline=True))
    with pytest.raises(ModelNotPresent, match="cannot be pulled"):
        pull("not a repo", HubCache(tmp_path))
    assert list(tmp_path.iterdir()) == []
