"""The engine's restart policy and the drain's end, on a fake clock."""

from __future__ import annotations

from typing import Any

from voxlane.config import ServerConfig
from voxlane.engine.client.supervisor import RestartPolicy
from voxlane.server.drain import Drain


def policy(**overrides: Any) -> RestartPolicy:
    return RestartPolicy.from_config(ServerConfig(**overrides))


def test_the_backoff_doubles_with_each_recent_death_up_to_its_cap() -> None:
    p = policy(engine_restart_backoff_s=0.5, engine_restart_backoff_max_s=3.0, engine_crash_loop_deaths=10)
    assert [p.on_death(t) for t in (0.0, 1.0, 2.0, 3.0, 4.0)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_deaths_older_than_the_window_are_forgotten() -> None:
    p = policy(engine_restart_backoff_s=0.5, engine_crash_loop_window_s=60.0)
    assert p.on_death(0.0) == 0.5
    assert p.on_death(10.0) == 1.0
    # A minute of health later the engine dies again: a first death again, not a third.
    assert p.on_death(70.5) == 0.5
    assert p.recent_deaths == 1


def test_the_fifth_death_within_a_minute_is_a_crash_loop() -> None:
    p = policy()  # the defaults: 5 deaths within 60 s
    delays = [p.on_death(t) for t in (0.0, 5.0, 10.0, 20.0)]
    assert delays == [0.5, 1.0, 2.0, 4.0]
    assert p.on_death(59.0) is None
    assert p.recent_deaths == 5


def test_five_deaths_spread_over_more_than_the_window_are_not() -> None:
    p = policy()
    assert all(p.on_death(t) is not None for t in (0.0, 20.0, 40.0, 55.0, 61.0))


def test_one_death_allowed_means_never_restart() -> None:
    assert policy(engine_crash_loop_deaths=1).on_death(0.0) is None


def test_a_drain_is_over_when_nothing_is_in_flight_or_its_time_is_up() -> None:
    drain = Drain(timeout_s=30.0)
    assert not drain.draining
    drain.in_flight = 2
    drain.begin(100.0)
    drain.begin(105.0)  # a second begin does not extend it
    assert drain.draining and not drain.over(110.0)
    drain.in_flight = 0
    assert drain.over(110.0)
    drain.in_flight = 1
    assert drain.over(130.0)


def test_a_drain_that_expires_hands_its_503_to_what_is_in_flight() -> None:
    drain = Drain(timeout_s=30.0)
    drain.expire()  # nothing to tell yet (the engine not started): no error
    told = []
    drain.on_expiry = told.append
    drain.begin(100.0)
    drain.expire()
    assert [(e.status_code, e.code, e.retry_after_s) for e in told] == [(503, "shutting_down", 5)]
