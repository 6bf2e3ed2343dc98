"""``voxlane bench check-dataset``: a dev set's manifest against its files. On a small set made here, each
kind of damage is found; on the wide dev set itself (``VOXLANE_DEV_WIDE``, else ../shared/data/dev-wide),
nothing is wrong."""

from __future__ import annotations

import hashlib
import json
import os
import wave
from pathlib import Path

import numpy as np
import pytest

from voxlane.bench.datasets import check_manifest
from voxlane.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEV_WIDE = Path(os.environ.get("VOXLANE_DEV_WIDE", ROOT.parent / "shared" / "data" / "dev-wide"))


def tone(path: Path, seconds: float) -> Path:
    samples = (3000 * np.sin(np.arange(int(16000 * seconds)) / 5)).astype(np.int16)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(samples.tobytes())
    return path


def dev_set(tmp_path: Path) -> Path:
    (tmp_path / "audio").mkdir()
    rows = []
    for name, seconds in (("a.wav", 1.5), ("b.wav", 2.0)):
        data = tone(tmp_path / "audio" / name, seconds).read_bytes()
        rows.append({"audio": f"audio/{name}", "text": "a tone", "duration_s": seconds, "source": "here",
                     "license": "CC0", "sha256": hashlib.sha256(data).hexdigest(), "subset": "read"})  # fmt: skip
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return manifest


def rewrite(manifest: Path, index: int, **fields: object) -> None:
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[index].update(fields)
    rows[index] = {k: v for k, v in rows[index].items() if v is not None}
    manifest.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_a_whole_set_passes_and_its_totals_are_printed(tmp_path: Path, capsys) -> None:
    manifest = dev_set(tmp_path)
    assert check_manifest(manifest) == []
    assert main(["bench", "check-dataset", str(manifest)]) == 0
    assert "2 files, 0.1 min, 4 words, 1 sources; subsets: read 2" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("damage", "found"),
    [
        (lambda m, d: (d / "audio" / "b.wav").unlink(), "audio/b.wav is missing"),
        (lambda m, d: tone(d / "audio" / "b.wav", 2.5), "another SHA-256"),
        (lambda m, d: rewrite(m, 1, duration_s=2.2), "lasts 2.000 s, the manifest says 2.2"),
        (lambda m, d: rewrite(m, 0, license=None), "no license"),
        (lambda m, d: m.write_text(m.read_text() + m.read_text().splitlines()[0] + "\n"), "listed twice"),
    ],
)
def test_each_kind_of_damage_is_found(tmp_path: Path, damage, found, capsys) -> None:
    manifest = dev_set(tmp_path)
    damage(manifest, tmp_path)
    problems = check_manifest(manifest)
    assert len(problems) == 1 and found in problems[0], problems
    assert main(["bench", "check-dataset", str(manifest)]) == 1
    assert found in capsys.readouterr().out


@pytest.mark.skipif(not (DEV_WIDE / "manifest.jsonl").is_file(), reason=f"the wide dev set is not at {DEV_WIDE}")
def test_the_wide_dev_set_is_whole() -> None:
    manifest = DEV_WIDE / "manifest.jsonl"
    assert check_manifest(manifest) == []
    rows = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    assert sum(r["duration_s"] for r in rows) >= 3600
    assert sum(len(r["text"].split()) for r in rows) >= 8000
    assert len({s.split(":")[0] for r in rows for s in r["source"].split(" + ")}) >= 8
