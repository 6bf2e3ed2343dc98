"""The CPU container image, built by ``container/image.sh cpu`` (``make image``) and run with podman or docker.

Each test runs the real image on 127.0.0.1 with a published port and checks what a user relies on: health,
a transcription and a speech request with the openai client, a non-root user, an uploaded voice kept on the
/data volume across a restart, and a drain to exit code 0 on ``stop``. The image is built once, from this
checkout, under its own name (``voxlane-test``), so the user's ``voxlane:latest`` is never touched.

Without a working podman or docker the tests skip and say so; CI sets ``VOXLANE_REQUIRE_CONTAINER=1``,
which makes that a failure instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, Clip, free_port
from voxlane.bench.wer import wer
from voxlane.config import default_voice_paths

SCRIPT = ROOT / "container" / "image.sh"
IMAGE = "voxlane-test"
READY_S = 120.0
"""How long a container may take to answer /health before a test fails; the image's own figure is printed."""
DRAIN_S = 30


def _engine() -> str | None:
    engine = subprocess.run([str(SCRIPT), "engine"], capture_output=True, text=True).stdout.strip()
    if not shutil.which(engine):
        return None
    usable = subprocess.run([engine, "info"], capture_output=True)
    return engine if usable.returncode == 0 else None


ENGINE = _engine()
if ENGINE is None:
    why = "no working podman or docker (apt-get install podman runc mmdebstrap; docs/containers.md)"
    if os.environ.get("VOXLANE_REQUIRE_CONTAINER") == "1":
        pytest.fail(why, pytrace=False)
    pytest.skip(why, allow_module_level=True)


def engine(*args: str, check: bool = True, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    assert ENGINE is not None
    return subprocess.run([ENGINE, *args], capture_output=True, text=True, check=check, timeout=timeout)


@pytest.fixture(scope="module")
def image() -> str:
    start = time.monotonic()
    built = subprocess.run(
        [str(SCRIPT), "cpu"], env={**os.environ, "IMAGE": IMAGE}, capture_output=True, text=True, timeout=1800
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    size_mb = int(engine("image", "inspect", f"{IMAGE}:latest", "--format", "{{.Size}}").stdout) / 1e6
    print(f"\nimage {IMAGE}:latest built in {time.monotonic() - start:.0f} s, {size_mb:.0f} MB")
    return f"{IMAGE}:latest"


class Container:
    """One ``run -d`` of the image with a published loopback port and a named volume on /data."""

    def __init__(self, image: str, volume: str) -> None:
        self.name = f"voxlane-test-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        flags = ["-d", "--name", self.name, "-p", f"127.0.0.1:{self.port}:8000", "-v", f"{volume}:/data"]
        flags += ["-e", f"VOXLANE_DRAIN_TIMEOUT_S={DRAIN_S}"]
        started = subprocess.run([str(SCRIPT), "run", *flags, image], capture_output=True, text=True)
        assert started.returncode == 0, started.stderr
        self.started = time.monotonic()

    def wait_ready(self) -> float:
        """Seconds from ``run`` to the first 200 from /health."""
        deadline = self.started + READY_S
        while time.monotonic() < deadline:
            if self.state()["Status"] == "exited":
                raise AssertionError(f"the container exited:\n{self.logs()}")
            try:
                if httpx.get(self.base_url + "/health", timeout=1.0).status_code == 200:
                    ready = time.monotonic() - self.started
                    print(f"\n{self.name} ready {ready:.1f} s after run")
                    return ready
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"no /health within {READY_S} s:\n{self.logs()}")

    def state(self) -> dict:
        return json.loads(engine("inspect", self.name, "--format", "{{json .State}}").stdout)

    def logs(self) -> str:
        out = engine("logs", self.name, check=False)
        return (out.stdout + out.stderr)[-4000:]

    def stop(self, timeout_s: int = DRAIN_S + 10) -> tuple[int, float]:
        """``stop`` (SIGTERM, SIGKILL after ``timeout_s``); returns the exit code and the seconds it took."""
        start = time.monotonic()
        engine("stop", "-t", str(timeout_s), self.name, timeout=timeout_s + 60)
        return int(self.state()["ExitCode"]), time.monotonic() - start

    def remove(self) -> None:
        engine("rm", "-f", self.name, check=False)


@pytest.fixture
def volume() -> Iterator[str]:
    name = f"voxlane-test-{uuid.uuid4().hex[:8]}"
    engine("volume", "create", name)
    yield name
    engine("volume", "rm", "-f", name, check=False)


@pytest.fixture
def container(image: str, volume: str) -> Iterator[Container]:
    box = Container(image, volume)
    try:
        box.wait_ready()
        yield box
    finally:
        box.remove()


def test_health_and_a_user_that_is_not_root(container: Container) -> None:
    assert httpx.get(container.base_url + "/health").json()["status"] == "ok"
    uid = engine("exec", container.name, "id", "-u").stdout.strip()
    assert uid != "0", "the server runs as root"
    # The image declares a HEALTHCHECK, and (on podman, which runs one on demand) it passes.
    declared = engine("image", "inspect", IMAGE + ":latest", "--format", "{{json .Config.Healthcheck}}").stdout
    assert "/health" in declared, declared
    if ENGINE == "podman":
        assert engine("healthcheck", "run", container.name, check=False).returncode == 0


def test_transcription_with_the_openai_client(container: Container, dev_set: list[Clip]) -> None:
    from openai import OpenAI

    clip = min((c for c in dev_set if c.duration_s >= 5), key=lambda c: c.duration_s)
    client = OpenAI(base_url=container.base_url + "/v1", api_key="unused")
    with clip.path.open("rb") as f:
        text = client.audio.transcriptions.create(model="whisper-1", file=f).text
    assert wer([clip.text], [text]) < 0.25, text


def test_speech_with_the_openai_client(container: Container) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=container.base_url + "/v1", api_key="unused")
    audio = client.audio.speech.create(
        model="tts-1", voice="alloy", input="The container speaks.", response_format="wav"
    )
    body = audio.content
    assert body[:4] == b"RIFF" and len(body) > 24000  # over half a second of 22.05 kHz 16-bit audio


def test_an_uploaded_voice_survives_a_restart_on_the_same_volume(image: str, volume: str) -> None:
    model_path, config_path = default_voice_paths()
    first = Container(image, volume)
    try:
        first.wait_ready()
        files = {
            "model": ("v.onnx", Path(model_path).read_bytes()),
            "config": ("v.onnx.json", Path(config_path).read_bytes()),
        }
        response = httpx.post(first.base_url + "/v1/audio/voices", data={"name": "kept"}, files=files, timeout=120)
        assert response.status_code == 201, response.text
        first.stop()
    finally:
        first.remove()
    second = Container(image, volume)
    try:
        second.wait_ready()
        voices = [v["id"] for v in httpx.get(second.base_url + "/v1/audio/voices").json()["data"]]
        assert "kept" in voices
        spoken = httpx.post(
            second.base_url + "/v1/audio/speech",
            json={"model": "piper", "voice": "kept", "input": "Still here.", "response_format": "pcm"},
            timeout=120,
        )
        assert spoken.status_code == 200 and len(spoken.content) > 12000
    finally:
        second.remove()


def test_stop_drains_a_request_and_exits_zero(container: Container) -> None:
    text = " ".join(["This long sentence keeps the speech stream busy while the container is told to stop."] * 20)
    result: dict[str, object] = {}
    streaming = threading.Event()

    def speak() -> None:
        body = {"model": "tts-1", "voice": "alloy", "input": text, "response_format": "pcm"}
        with httpx.stream("POST", container.base_url + "/v1/audio/speech", json=body, timeout=120) as r:
            size = 0
            for chunk in r.iter_bytes():
                size += len(chunk)
                streaming.set()
            result["status"], result["bytes"] = r.status_code, size

    worker = threading.Thread(target=speak)
    worker.start()
    assert streaming.wait(60), "no speech arrived"
    code, took = container.stop()
    worker.join(60)
    print(f"\nstop took {took:.1f} s with one speech stream in flight")
    assert code == 0, container.logs()
    assert took < DRAIN_S, "stop waited for SIGKILL: SIGTERM did not reach the server"
    # The stream in flight finished whole: over a minute of audio at 22.05 kHz, 16-bit.
    assert result.get("status") == 200 and int(result.get("bytes", 0)) > 22050 * 2 * 60, result
