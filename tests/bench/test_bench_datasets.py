"""Dataset sources of ``voxlane bench``: what they read, and the messages when they cannot."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

import pytest

from voxlane.bench.datasets import BUILTIN_TEXTS, DatasetError, load_audio_dataset, load_text_dataset, request_order


def test_manifest_reads_audio_relative_to_the_file(dev_set: Any, dev_manifest: Path) -> None:
    samples = load_audio_dataset(str(dev_manifest))
    assert len(samples) == len(dev_set)
    assert all(s.data and s.text is not None for s in samples)  # a noise-only file's reference is ""
    assert [s.text for s in samples] == [c.text for c in dev_set]
    short = load_audio_dataset(str(dev_manifest), max_duration_s=30)
    assert len(short) == sum(c.duration_s <= 30 for c in dev_set) and max(s.duration_s for s in short) < 30


def test_directory_with_optional_references(tmp_path: Path, dev_set: Any) -> None:
    a, b = dev_set[1], dev_set[2]
    shutil.copy(a.path, tmp_path / "a.wav")
    shutil.copy(b.path, tmp_path / "b.wav")
    (tmp_path / "a.txt").write_text(a.text + "\n")
    samples = {s.name: s for s in load_audio_dataset(str(tmp_path))}
    assert samples["a.wav"].text == a.text and samples["b.wav"].text is None
    assert samples["a.wav"].duration_s == pytest.approx(a.duration_s, abs=0.05)


@pytest.mark.parametrize(
    "content,needle",
    [
        ("not json\n", "not a manifest line"),
        ('{"audio": "missing.wav", "text": "x", "duration_s": 1}\n', "cannot read the audio file"),
    ],
)
def test_broken_manifests_say_what_is_wrong(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(content)
    with pytest.raises(DatasetError, match=needle):
        load_audio_dataset(str(path))


def test_missing_path_and_empty_filter(tmp_path: Path, dev_manifest: Path) -> None:
    with pytest.raises(DatasetError, match="no such file or directory"):
        load_audio_dataset(str(tmp_path / "nope.jsonl"))
    with pytest.raises(DatasetError, match="no audio between"):
        load_audio_dataset(str(dev_manifest), min_duration_s=1000)
    with pytest.raises(DatasetError, match="no audio files"):
        load_audio_dataset(str(tmp_path))


@pytest.mark.skipif(importlib.util.find_spec("datasets") is not None, reason="datasets is installed here")
def test_hf_dataset_without_the_library_says_how_to_get_it() -> None:
    with pytest.raises(DatasetError, match="pip install datasets"):
        load_audio_dataset("hf:some/dataset:test")


def test_text_inputs(tmp_path: Path) -> None:
    assert [t.text for t in load_text_dataset(None)] == list(BUILTIN_TEXTS)
    path = tmp_path / "t.txt"
    path.write_text("first line\n\n  second line  \n")
    assert [t.text for t in load_text_dataset(str(path))] == ["first line", "second line"]
    with pytest.raises(DatasetError, match="cannot read"):
        load_text_dataset(str(tmp_path / "missing.txt"))


def test_request_order_is_seeded_and_cycles() -> None:
    order = request_order(3, 7, seed=1)
    assert order == request_order(3, 7, seed=1)
    assert sorted(order[:3]) == [0, 1, 2] and order[3:6] == order[:3] and order[6] == order[0]
