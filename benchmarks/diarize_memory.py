"""Peak memory (VmHWM) of the API process and the engine for one transcription of a ~1 h file (the dev set's
long_*.flac/.wav at 16 kHz mono, concatenated and repeated to 3,600 s), per response_format named, each on a
fresh server: ``python benchmarks/diarize_memory.py json diarized_json`` (docs/diarization.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import soundfile as sf

DEV = Path("../shared/data/dev/audio")
HOUR = Path("/tmp/voxlane-hour.flac")
PORT = 8151


def hour_file() -> Path:
    if not HOUR.exists():
        parts = []
        for name in sorted(DEV.iterdir()):
            if name.name.startswith("long_") and name.suffix in (".flac", ".wav"):
                pcm, rate = sf.read(name, dtype="int16")
                if rate == 16000 and pcm.ndim == 1:
                    parts.append(pcm)
        pcm = np.concatenate(parts)
        sf.write(HOUR, np.tile(pcm, int(np.ceil(3600 * 16000 / len(pcm))))[: 3600 * 16000], 16000)
    return HOUR


def memory_mib(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/status") as f:
        return {ln.split()[0][:-1]: int(ln.split()[1]) // 1024 for ln in f if ln.startswith(("VmHWM", "VmRSS"))}


def measure(fmt: str, path: Path) -> None:
    args = ["serve", "--port", str(PORT), "--max-upload-mb", "100"]
    server = subprocess.Popen([sys.executable, "-m", "voxlane.cli", *args], stdout=subprocess.DEVNULL)
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{PORT}", timeout=3600)
        for _ in range(300):
            try:
                if client.get("/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
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
    finally:
        server.terminate()
        server.wait(60)


if __name__ == "__main__":
    for fmt in sys.argv[1:]:
        measure(fmt, hour_file())
