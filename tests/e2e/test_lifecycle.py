"""The engine process's life: with restarts off, its death turns /health to 503 ("failed") and fails
requests cleanly (restarts: test_engine_restart.py); SIGTERM drains (requests in flight finish, new ones get
503, then the server exits) and a second SIGTERM exits at once, with no orphan either way; limits on duration
and size."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import Clip, ServerProcess


def children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        kids += [int(k) for k in text]
    return kids


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
    return state != "Z"


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except FileNotFoundError:
        return ""


def engine_pid(server: ServerProcess) -> int:
    """The engine child names itself (``voxlane.child.become_child``); so do the text and encode workers."""
    kids = children(server.proc.pid)
    engines = [p for p in kids if comm(p) == "voxlane-engine"]
    assert len(engines) == 1, [(comm(p), cmdline(p)) for p in kids]
    assert {"voxlane-text", "voxlane-encode"} <= {comm(p) for p in kids}
    return engines[0]


def long_clip(dev_set: list[Clip]) -> Clip:
    return next(c for c in dev_set if c.duration_s > 60)


def fire(server: ServerProcess, clip: Clip, n: int, results: list) -> list[threading.Thread]:
    def one() -> None:
        try:
            r = httpx.post(
                server.base_url + "/v1/audio/transcriptions",
                files={"file": clip.path.open("rb")},
                data={"model": "whisper-1"},
                timeout=120,
            )
            results.append(r)
        except httpx.HTTPError as exc:
            results.append(exc)

    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return threads


@pytest.fixture()
def own_server():
    srv = ServerProcess("--max-audio-duration-s", "60", "--max-upload-mb", "5", "--engine-crash-loop-deaths", "1")
    srv.wait_ready()
    yield srv
    srv.stop(signal.SIGKILL)


def test_engine_death_with_restarts_off_turns_health_503_and_fails_requests_clearly(
    own_server: ServerProcess, dev_set
) -> None:
    clip = next(c for c in dev_set if c.path.name == "mfa_um.wav")
    results: list = []
    threads = fire(own_server, clip, 6, results)
    time.sleep(0.3)
    os.kill(engine_pid(own_server), signal.SIGKILL)
    for t in threads:
        t.join(60)
    # Requests finished before the kill succeed; every other one gets a clear 503, none hangs.
    assert len(results) == 6
    for r in results:
        assert isinstance(r, httpx.Response)
        assert r.status_code in (200, 503), r.text
        if r.status_code == 503:
            assert r.json()["error"]["code"] == "engine_unavailable"
    deadline = time.monotonic() + 2
    # (For up to 0.2 s, before the supervisor notices the death, /health may say "restarting".)
    while (health := httpx.get(own_server.base_url + "/health")).json()["status"] != "failed":
        assert time.monotonic() < deadline, f"/health did not say failed: {health.json()}"
        time.sleep(0.05)
    assert health.status_code == 503 and health.json()["engine_restarts"] == 0
    r = httpx.post(
        own_server.base_url + "/v1/audio/transcriptions",
        files={"file": clip.path.open("rb")},
        data={"model": "whisper-1"},
        timeout=30,
    )
    assert r.status_code == 503
    assert "engine" in r.json()["error"]["message"]


def test_audio_longer_than_the_limit_gets_413(own_server: ServerProcess, dev_set) -> None:
    r = httpx.post(
        own_server.base_url + "/v1/audio/transcriptions",
        files={"file": long_clip(dev_set).path.open("rb")},
        data={"model": "whisper-1"},
        timeout=60,
    )
    # 154 s of audio, 4.9 MB: under the 5 MiB upload limit, over the 60 s duration limit
    assert r.status_code == 413
    assert "--max-audio-duration-s" in r.json()["error"]["message"]


def assert_no_orphans(kids: list[int], engine: int) -> None:
    deadline = time.monotonic() + 1
    while any(alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(engine), "the engine process outlived the server"
    assert not [k for k in kids if alive(k)], "orphan processes remain"


def test_sigterm_drains_requests_in_flight_then_exits_without_orphans(dev_set) -> None:
    srv = ServerProcess("--drain-timeout-s", "120")
    try:
        srv.wait_ready()
        kids = children(srv.proc.pid)
        engine = engine_pid(srv)
        results: list = []
        threads = fire(srv, long_clip(dev_set), 2, results)
        time.sleep(2.0)  # uploads decoded, windows in the engine
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        # Draining: the listener still answers, new work gets 503 with Retry-After, /health says why.
        refused = httpx.post(
            srv.base_url + "/v1/audio/transcriptions",
            files={"file": dev_set[1].path.open("rb")},
            data={"model": "whisper-1"},
            timeout=10,
        )
        health = httpx.get(srv.base_url + "/health", timeout=5)
        for t in threads:
            t.join(120)
        srv.proc.wait(15)  # exits once the requests in flight are done
    except BaseException:
        srv.stop(signal.SIGKILL)
        raise
    srv.stop()
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "shutting_down", refused.text
    assert int(refused.headers["Retry-After"]) >= 1
    assert health.status_code == 503 and health.json()["status"] == "draining"
    assert len(results) == 2
    assert all(isinstance(r, httpx.Response) and r.status_code == 200 for r in results), results
    assert all(r.json()["text"].strip() for r in results)
    assert_no_orphans(kids, engine)


def test_a_second_sigterm_under_load_exits_within_2_s_without_orphans(dev_set) -> None:
    srv = ServerProcess()
    try:
        srv.wait_ready()
        kids = children(srv.proc.pid)
        engine = engine_pid(srv)
        results: list = []
        fire(srv, long_clip(dev_set), 16, results)
        time.sleep(2.0)  # uploads decoded, windows queued in the engine, batches running
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert srv.proc.poll() is None, "the server did not drain its 16 requests"
    except BaseException:
        srv.stop()  # a failure before the SIGTERM under test must not leave the server running
        raise
    took = srv.stop(signal.SIGTERM)
    assert srv.proc.returncode is not None
    assert took < 2.0, f"server took {took:.2f} s to exit after the second SIGTERM"
    assert_no_orphans(kids, engine)
