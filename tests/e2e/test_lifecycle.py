"""The engine process's life: with restarts off, its death turns /health to 503 ("failed") and fails
requests cleanly (restarts: test_engine_restart.py); SIGTERM drains (requests in flight finish, new ones get
503, then the server exits), a drain that times out answers what is left 503, and a second SIGTERM exits at
once, with no orphan either way; a kill -9 of the API process takes its children with it; limits on duration
and size."""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import Clip, ServerProcess, comm, metric, pid_alive


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


def engine_pid(server: ServerProcess) -> int:
    """The engine child names itself (``voxlane.child.become_child``); so do the text and encode workers."""
    kids = children(server.proc.pid)
    engines = [p for p in kids if comm(p) == "voxlane-engine"]
    assert len(engines) == 1, [(comm(p), cmdline(p)) for p in kids]
    assert {"voxlane-text", "voxlane-encode"} <= {comm(p) for p in kids}
    return engines[0]


def long_clip(dev_set: list[Clip]) -> Clip:
    return next(c for c in dev_set if c.duration_s > 60)


def exited(pid: int) -> bool:
    """Whether every thread of the process has ended: its parent can reap it now. (A killed process's main
    thread is a zombie while its other threads still exit and its memory is freed: tens of ms for the engine.)"""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z" and not [
            t for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid
        ]
    except (FileNotFoundError, ProcessLookupError):
        return True


def kill_engine(server: ServerProcess, timeout_s: float = 5.0) -> float:
    """kill -9 the engine; return when it has exited (its parent can see it, whether or not it has yet)."""
    engine = engine_pid(server)
    os.kill(engine, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while not exited(engine):
        assert time.monotonic() < deadline, f"the engine lived {timeout_s} s past its kill -9"
        time.sleep(0.005)  # paces the polling
    return time.monotonic()


def wait_metric(server: ServerProcess, name: str, at_least: float, timeout_s: float = 60.0) -> float:
    """The value of the gauge ``name`` on /metrics once it reaches ``at_least`` (an absent gauge counts 0: the
    engine's own gauges appear with its first stats, sent once a second)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = metric(httpx.get(server.base_url + "/metrics", timeout=5).text, name)
        except KeyError:
            value = 0.0
        if value >= at_least:
            return value
        assert time.monotonic() < deadline, f"{name} stayed at {value} < {at_least} for {timeout_s} s\n{server.log()}"
        time.sleep(0.05)  # paces the polling


def wait_for_batches(server: ServerProcess, timeout_s: float = 60.0) -> None:
    """Until a Whisper batch runs in the engine: the requests sent are in flight, past their decode."""
    wait_metric(server, "voxlane_engine_running_batches", 1, timeout_s)


def wait_admitted(server: ServerProcess, clip: Clip, n: int, timeout_s: float = 60.0) -> None:
    """Until at least ``n`` requests of ``clip`` hold windows in the engine's queue: one request holds at most
    ceil(duration / 30 s) of them, so more than (n - 1) times that means n were admitted."""
    wait_metric(server, "voxlane_engine_queued_windows", (n - 1) * math.ceil(clip.duration_s / 30) + 1, timeout_s)
    wait_for_batches(server, timeout_s)


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


MAX_AUDIO_S = 100


@pytest.fixture()
def own_server():
    srv = ServerProcess(
        "--max-audio-duration-s", str(MAX_AUDIO_S), "--max-upload-mb", "5", "--engine-crash-loop-deaths", "1"
    )
    srv.wait_ready()
    yield srv
    srv.stop(signal.SIGKILL)


def test_engine_death_with_restarts_off_turns_health_503_and_fails_requests_clearly(
    own_server: ServerProcess, dev_set
) -> None:
    short = next(c for c in dev_set if c.path.name == "mfa_um.wav")
    mid = next(c for c in dev_set if 60 < c.duration_s <= MAX_AUDIO_S)  # 78.6 s: 3 windows
    results: list = []
    # Short clips that may finish before the kill, and 12 windows of longer ones that cannot all (4 s or more
    # of work on 2 cores; the engine's running-batch gauge is at most 1 s old when the kill comes).
    threads = fire(own_server, short, 2, results) + fire(own_server, mid, 4, results)
    wait_for_batches(own_server)
    dead_at = kill_engine(own_server)
    # /health answers 503 as soon as the process is gone (it asks the process, not the supervisor), and
    # says "failed" once the supervisor (every 0.2 s) has seen the death (1.5 s: room for a busy machine).
    health = httpx.get(own_server.base_url + "/health", timeout=5)
    assert health.status_code == 503, f"/health said {health.json()} after the engine died"
    while health.json()["status"] != "failed":
        assert health.status_code == 503 and health.json()["status"] == "restarting", health.json()
        assert time.monotonic() - dead_at < 1.5, f"/health did not say failed: {health.json()}"
        time.sleep(0.02)  # paces the polling
        health = httpx.get(own_server.base_url + "/health", timeout=5)
    assert health.status_code == 503 and health.json()["engine_restarts"] == 0
    assert "Retry-After" not in health.headers  # it will not come back by itself
    for t in threads:  # 10 s: at once, where a hang would take the client's 120 s
        t.join(max(0.0, dead_at + 10 - time.monotonic()))
    # Requests finished before the kill succeed; every other one gets a clear 503 at once, none hangs.
    assert len(results) == 6, "a request was not answered within 10 s of the engine's death"
    assert all(isinstance(r, httpx.Response) for r in results), results
    assert {r.status_code for r in results} <= {200, 503}, [r.text for r in results]
    failed = [r for r in results if r.status_code == 503]
    assert failed, "the request whose batches were running when the engine died did not get a 503"
    assert all(r.json()["error"]["code"] == "engine_unavailable" for r in failed)
    r = httpx.post(
        own_server.base_url + "/v1/audio/transcriptions",
        files={"file": short.path.open("rb")},
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
    # 154 s of audio, 4.9 MB: under the 5 MiB upload limit, over the 100 s duration limit
    assert r.status_code == 413
    assert "--max-audio-duration-s" in r.json()["error"]["message"]


def assert_no_orphans(kids: list[int], engine: int) -> None:
    deadline = time.monotonic() + 1
    while any(pid_alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(engine), "the engine process outlived the server"
    assert not [k for k in kids if pid_alive(k)], "orphan processes remain"


def wait_draining(srv: ServerProcess, timeout_s: float = 5.0) -> httpx.Response:
    """/health once it says draining (the signal handler has begun the drain), the server still up."""
    deadline = time.monotonic() + timeout_s
    while (health := httpx.get(srv.base_url + "/health", timeout=5)).json()["status"] != "draining":
        assert time.monotonic() < deadline, f"/health did not say draining: {health.json()}"
        time.sleep(0.02)  # paces the polling
    assert srv.proc.poll() is None, "the server exited instead of draining"
    return health


def test_sigterm_drains_requests_in_flight_then_exits_without_orphans(dev_set) -> None:
    clip = long_clip(dev_set)
    srv = ServerProcess("--drain-timeout-s", "120")
    try:
        srv.wait_ready()
        kids = children(srv.proc.pid)
        engine = engine_pid(srv)
        results: list = []
        threads = fire(srv, clip, 2, results)
        wait_admitted(srv, clip, 2)  # both in flight, their windows in the engine
        srv.proc.send_signal(signal.SIGTERM)
        health = wait_draining(srv)
        # Draining: the listener still answers, new work gets 503 with Retry-After, /health says why.
        refused = httpx.post(
            srv.base_url + "/v1/audio/transcriptions",
            files={"file": dev_set[1].path.open("rb")},
            data={"model": "whisper-1"},
            timeout=10,
        )
        for t in threads:
            t.join(120)
        srv.proc.wait(15)  # exits once the requests in flight are done
    except BaseException:
        srv.stop(signal.SIGKILL)
        raise
    srv.stop()
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "shutting_down", refused.text
    assert int(refused.headers["Retry-After"]) >= 1
    assert health.status_code == 503
    assert len(results) == 2
    assert all(isinstance(r, httpx.Response) and r.status_code == 200 for r in results), results
    assert all(r.json()["text"].strip() for r in results)
    assert srv.proc.returncode == 0
    assert_no_orphans(kids, engine)


def test_a_drain_that_times_out_answers_what_is_left_503_then_exits(dev_set) -> None:
    clips = [c for c in dev_set if c.duration_s > 150][:3]  # 3 x 5-6 windows: seconds of work on 2 cores
    srv = ServerProcess("--drain-timeout-s", "1")
    try:
        srv.wait_ready()
        results: list = []
        threads = [t for clip in clips for t in fire(srv, clip, 1, results)]
        wait_for_batches(srv)
        srv.proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        for t in threads:
            t.join(30)
        answered_s = time.monotonic() - signalled
        srv.proc.wait(10)
        exited_s = time.monotonic() - signalled
    except BaseException:
        srv.stop(signal.SIGKILL)
        raise
    srv.stop()
    print(f"\nanswered {answered_s:.2f} s and exited {exited_s:.2f} s after SIGTERM ({srv.proc.returncode})")
    # What was still transcribing when the 1 s drain ran out gets the drain's 503 (OpenAI's error body, a
    # Retry-After), not a cut connection or uvicorn's bare 500; then the server exits, cleanly. (17 windows
    # take seconds on 2 cores: one request may finish in time on a fast machine, not all three.)
    assert len(results) == 3 and all(isinstance(r, httpx.Response) for r in results), results
    assert {r.status_code for r in results} <= {200, 503}, [r.text for r in results]
    refused = [r for r in results if r.status_code == 503]
    assert refused, "every request finished within the 1 s drain: nothing was left to answer"
    for r in refused:
        assert r.json()["error"]["code"] == "shutting_down", r.text
        assert int(r.headers["Retry-After"]) >= 1
    # The drain timeout, plus the engine's stats (1 s old at most) and a batch's end: well under 1 + 3 s.
    assert answered_s < 4.0
    assert srv.proc.returncode == 0
    assert "Traceback" not in srv.log()


def test_a_second_sigterm_under_load_exits_within_2_s_without_orphans(dev_set) -> None:
    srv = ServerProcess()
    try:
        srv.wait_ready()
        kids = children(srv.proc.pid)
        engine = engine_pid(srv)
        results: list = []
        fire(srv, long_clip(dev_set), 16, results)
        wait_for_batches(srv)  # uploads decoded, windows queued in the engine, batches running
        srv.proc.send_signal(signal.SIGTERM)
        wait_draining(srv)  # the 16 requests keep it draining
        signalled = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        srv.proc.wait(2.0)  # README: a second SIGTERM exits at once, within 2 s under full load
        took = time.monotonic() - signalled
    except BaseException:
        srv.stop(signal.SIGKILL)  # a failure (a hang included) must not leave the server running
        raise
    srv.stop()
    print(f"\nexited {took:.2f} s after the second SIGTERM")
    assert_no_orphans(kids, engine)


def test_kill_9_of_the_api_process_takes_its_children_with_it() -> None:
    srv = ServerProcess()
    try:
        srv.wait_ready()
        kids = children(srv.proc.pid)
        engine = engine_pid(srv)
    except BaseException:
        srv.stop(signal.SIGKILL)
        raise
    srv.stop(signal.SIGKILL)  # the API process alone (not its process group): no shutdown code runs
    killed_at = time.monotonic()
    # PR_SET_PDEATHSIG: the kernel kills every child at once. (The engine's own check of its parent, once a
    # second, is a fallback that logs "the API process is gone"; a text or encode worker has none.)
    deadline = killed_at + 5
    while [k for k in kids if pid_alive(k)] and time.monotonic() < deadline:
        time.sleep(0.02)  # paces the polling
    left = {k: comm(k) for k in kids if pid_alive(k)}
    for k in left:  # no orphan outlives the test either
        os.kill(k, signal.SIGKILL)
    assert not left, f"children outlived the API process: {left}"
    assert not pid_alive(engine)
    assert "the API process is gone" not in srv.log(), "the engine outlived the API process until it checked"
