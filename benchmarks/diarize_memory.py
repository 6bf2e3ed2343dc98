"""Peak memory (VmHWM) of the API process and the engine for one transcription of a ~1 h file (the dataset's
long_*.flac/.wav at 16 kHz mono, concatenated and repeated to 3,600 s), per response_format named, each on a
fresh server (docs/diarization.md):

    .venv/bin/python benchmarks/diarize_memory.py --audio-dir DIR/audio json diarized_json
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from voxlane.bench.server import running_server

HOUR = Path("/tmp/voxlane-hour.flac")


def hour_file(audio_dir: Path) -> Path:
    if not HOUR.exists():
        parts = []
        for name in sorted(audio_dir.iterdir()):
            if name.name.startswith("long_") and name.suffix in (".flac", ".wav"):
                pcm, rate = sf.read(name, dtype="int16")
                if rate == 16000 and pcm.ndim == 1:
                    parts.append(pcm)
        if not parts:
            raise SystemExit(f"no long_*.flac or long_*.wav at 16 kHz mono in {audio_dir}")
        pcm = np.concatenate(parts)
        sf.write(HOUR, np.tile(pcm, int(np.ceil(3600 * 16000 / len(pcm))))[: 3600 * 16000], 16000)
    return HOUR


def memory_mib(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/status") as f:
        return {ln.split()[0][:-1]: int(ln.split()[1]) // 1024 for ln in f if ln.startswith(("VmHWM", "VmRSS"))}


def measure(fmt: str, path: Path) -> None:
    with running_server("--max-upload-mb", "100", log_level=None, ready_timeout_s=150.0) as server:
        client = httpx.Client(base_url=server.base_url, timeout=3600)
        with open(f"/proc/{server.pid}/task/{server.pid}/children") as f:
            children = [int(p) for p in f.read().split()]
        engine = max(children, key=lambda p: len(os.listdir(f"/proc/{p}/task")))  # the one with most threads
        ready = {"api": memory_mib(server.pid), "engine": memory_mib(engine)}
        start = time.monotonic()
        response = client.post(
            "/v1/audio/transcriptions",
            files={"file": (path.name, path.read_bytes())},
            data={"model": "whisper-1", "response_format": fmt},
        )
        response.raise_for_status()
        peak = {"api": memory_mib(server.pid), "engine": memory_mib(engine)}
        segments = response.json().get("segments") or []
        speakers = sorted({s["speaker"] for s in segments if "speaker" in s})
        print(f"{fmt}: {time.monotonic() - start:.0f} s, {len(segments)} segments, speakers {speakers}")
        for k in ready:
            print(f"   {k}: RSS at ready {ready[k]['VmRSS']} MiB, peak (VmHWM) {peak[k]['VmHWM']} MiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--audio-dir", required=True, help="the directory of the dataset's audio (long_*.flac/.wav)")
    parser.add_argument("formats", nargs="+", metavar="FORMAT", help="response_format of each run: json, diarized_json")
    args = parser.parse_args()
    path = hour_file(Path(args.audio_dir))
    for fmt in args.formats:
        measure(fmt, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
