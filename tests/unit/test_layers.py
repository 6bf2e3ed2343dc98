"""Layers point down: the API process loads no model runtime, and the import contracts hold."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNTIMES = ("onnxruntime", "ctranslate2", "faster_whisper", "piper")


def loaded_runtimes(*modules: str) -> list[str]:
    """The model runtimes a fresh interpreter holds after importing ``modules`` (run from the repo root,
    so the checkout's voxlane is the one imported)."""
    code = "; ".join(
        [f"import {m}" for m in ("sys", *modules)] + [f"print(' '.join(m for m in {RUNTIMES!r} if m in sys.modules))"]
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_the_api_process_imports_no_model_runtime() -> None:
    assert loaded_runtimes("voxlane.server.app", "voxlane.cli") == []


def test_starting_the_engine_imports_no_model_runtime_in_the_api_process() -> None:
    # EngineClient.start imports the engine process's entry point to spawn it; the runners load there.
    assert loaded_runtimes("voxlane.engine.proc") == []


def test_the_language_table_is_whispers() -> None:
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    from voxlane.languages import LANGUAGES, language_name

    assert set(LANGUAGES) == set(_LANGUAGE_CODES)
    assert language_name("de") == "german" and language_name("yue") == "cantonese"


def test_a_bad_language_says_what_to_send() -> None:
    from pydantic import ValidationError

    from voxlane.protocol import TranscriptionRequest

    assert TranscriptionRequest(model="whisper-1", language=" DE ").language == "de"
    with pytest.raises(ValidationError, match="send an ISO-639-1 code such as 'en'"):
        TranscriptionRequest(model="whisper-1", language="klingon")


@pytest.mark.skipif(
    shutil.which("lint-imports", path=str(Path(sys.executable).parent)) is None,
    reason="import-linter is not installed (pip install -e '.[dev]')",
)
def test_import_contracts_hold() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    out = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
