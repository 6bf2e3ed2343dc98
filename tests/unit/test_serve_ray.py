"""The Ray Serve application as built from the settings (no cluster needed), and errors on their way back
from a replica."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import numpy as np
import pytest

from tests.conftest import ROOT
from voxlane.config import ServerConfig, add_serve_arguments, serve_config_from_args
from voxlane.engine.client import EngineHandle
from voxlane.errors import EngineUnavailable, InvalidRequest, QueueFull, VoxlaneError
from voxlane.messages import Ready, SpeakerResult, SpeakerWindow, TranscribeOptions, WindowRequest, WindowResult
from voxlane.serve_ray.client import RayEngineClient
from voxlane.serve_ray.deploy import (
    ENGINE_DEPLOYMENT,
    INGRESS_DEPLOYMENT,
    _is_loopback,
    application,
    build_application,
)
from voxlane.serve_ray.replica import ReplicaError


def _config(*flags: str):
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    return serve_config_from_args(parser.parse_args(list(flags)), {})


def _deployments(*flags: str):
    ingress = build_application(_config(*flags))._bound_deployment
    engine = ingress.init_args[0]._bound_deployment
    return ingress, engine


def test_fixed_replicas_with_their_resources_and_drain() -> None:
    ingress, engine = _deployments("--replicas", "3", "--cpus-per-replica", "1.5", "--drain-timeout-s", "12")
    assert (ingress.name, engine.name) == (INGRESS_DEPLOYMENT, ENGINE_DEPLOYMENT)
    assert engine._deployment_config.num_replicas == 3
    assert engine._deployment_config.autoscaling_config is None
    assert engine.ray_actor_options == {"num_cpus": 1.5, "num_gpus": 0.0}
    assert engine._deployment_config.graceful_shutdown_timeout_s == 12
    assert ingress._deployment_config.graceful_shutdown_timeout_s == 12
    assert engine._deployment_config.max_ongoing_requests == 64


def test_the_application_builder_takes_settings_by_field_name_and_variables(monkeypatch) -> None:
    # KubeRay's RayService (deploy/kubernetes/rayservice.yaml) imports this builder with serveConfigV2's args.
    monkeypatch.setenv("VOXLANE_INGRESS_REPLICAS", "3")
    app = application({"replicas": 4, "cpus_per_replica": 2, "drain_timeout_s": 7})
    ingress = app._bound_deployment
    engine = ingress.init_args[0]._bound_deployment
    assert engine._deployment_config.num_replicas == 4
    assert engine.ray_actor_options == {"num_cpus": 2.0, "num_gpus": 0.0}
    assert engine._deployment_config.graceful_shutdown_timeout_s == 7
    assert ingress._deployment_config.num_replicas == 3


def test_the_rayservice_manifest_builds_the_application_through_ray_serve() -> None:
    """deploy/kubernetes/rayservice.yaml's serveConfigV2, read by Ray Serve's own schema and builder call, as
    KubeRay's RayService hands it to the cluster."""
    import yaml
    from ray._common.utils import import_attr
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
    from ray.serve.schema import ServeDeploySchema

    manifest = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "rayservice.yaml").read_text())
    (app,) = ServeDeploySchema.model_validate(yaml.safe_load(manifest["spec"]["serveConfigV2"])).applications
    built = call_user_app_builder_with_args_if_necessary(import_attr(app.import_path), app.args)
    engine = built._bound_deployment.init_args[0]._bound_deployment
    scaling = engine._deployment_config.autoscaling_config
    assert (scaling.min_replicas, scaling.max_replicas) == (app.args["min_replicas"], app.args["max_replicas"])
    assert engine.ray_actor_options["num_cpus"] == app.args["cpus_per_replica"]


def test_max_replicas_turns_autoscaling_on() -> None:
    _, engine = _deployments(
        "--min-replicas", "2", "--max-replicas", "5", "--target-ongoing-requests", "6", "--downscale-delay-s", "20"
    )
    scaling = engine._deployment_config.autoscaling_config
    assert (scaling.min_replicas, scaling.initial_replicas, scaling.max_replicas) == (2, 2, 5)
    assert scaling.target_ongoing_requests == 6
    assert scaling.downscale_delay_s == 20


def test_min_above_max_replicas_is_refused_with_what_to_send() -> None:
    with pytest.raises(ValueError, match="--min-replicas 4 is above --max-replicas 2"):
        _config("--min-replicas", "4", "--max-replicas", "2")


@pytest.mark.parametrize(
    ("error", "kind", "status"),
    [
        (QueueFull("full", retry_after_s=3.2), QueueFull, 429),
        (EngineUnavailable("restarting", retry_after_s=2), EngineUnavailable, 503),
        (VoxlaneError("the window failed"), VoxlaneError, 500),
    ],
)
def test_a_replica_error_comes_back_as_the_same_http_error(error: VoxlaneError, kind: type, status: int) -> None:
    back = ReplicaError.of(error).error()
    assert type(back) is kind
    assert (back.status_code, back.message, back.retry_after_s, back.code) == (
        status,
        error.message,
        error.retry_after_s,
        error.code,
    )


def test_loopback_addresses() -> None:
    assert _is_loopback("127.0.0.1:6379") and _is_loopback("localhost:6379")
    assert not _is_loopback("auto") and not _is_loopback("10.0.0.1:6379")


class _Method:
    """A deployment handle's method: ``remote`` returns an awaitable of the replica's answer."""

    def __init__(self, answer: Callable[..., Awaitable[Any]]) -> None:
        self.answer = answer

    def remote(self, *args: Any) -> Awaitable[Any]:
        return self.answer(*args)


class _Replicas:
    """Stands in for the ``VoxlaneEngine`` deployment's handle: one replica that answers every window."""

    def __init__(self, speakers: str | None = None) -> None:
        async def ready() -> Ready:
            return Ready("fake", False, 80, speakers=speakers)

        async def speaker(msg: SpeakerWindow, mel: np.ndarray) -> SpeakerResult:
            vectors = np.full((len(msg.spans), 4), len(mel), np.float32)
            return SpeakerResult(msg.request_id, msg.index, vectors.tobytes(), 4, [1] * len(msg.spans))

        async def window(msg: WindowRequest, features: np.ndarray) -> WindowResult | ReplicaError:
            if msg.request_id == "refused":
                return ReplicaError.of(EngineUnavailable("the replica's engine is restarting", retry_after_s=2))
            return WindowResult(msg.request_id, msg.index, "en", [])

        self.ready = _Method(ready)
        self.window = _Method(window)
        self.speaker = _Method(speaker)


def test_the_ray_client_sends_speaker_windows_to_the_replicas() -> None:
    # Diarization on Ray: each speaker window is one call, answered by a replica's engine; the ingress
    # diarizes when the replica that answered at start has the speaker encoder, and says why not otherwise.
    async def main() -> None:
        client = RayEngineClient(ServerConfig(), _Replicas())  # type: ignore[arg-type]
        await client.start(timeout_s=5)
        assert client.diarize_problem is None
        async with client.speakers("req-spk", 2) as stream:
            for index, frames in ((1, 300), (0, 200)):
                await client.send(SpeakerWindow("req-spk", index, 2, frames, [(0, 100)]), np.zeros((frames, 40)))
            results = [result async for result in stream.results(5)]
        assert [(r.index, float(r.array()[0, 0])) for r in results] == [(0, 200.0), (1, 300.0)]
        await client.close()
        missing = RayEngineClient(ServerConfig(), _Replicas(speakers="no speaker encoder"))  # type: ignore[arg-type]
        assert missing.diarize_problem == "no engine replica is ready"
        await missing.start(timeout_s=5)
        assert missing.diarize_problem == "no speaker encoder"
        await missing.close()

    asyncio.run(main())


def test_the_ray_client_is_an_engine_handle_that_admits_sends_and_reads_results() -> None:
    async def main() -> None:
        client = RayEngineClient(ServerConfig(), _Replicas())  # type: ignore[arg-type]
        assert isinstance(client, EngineHandle)
        with pytest.raises(EngineUnavailable, match="starting"):
            client.check_alive()
        await client.start(timeout_s=5)
        assert client.healthy and client.restarts == 0 and client.stats is None and client.models == {}
        msg = WindowRequest("req", 0, 2, 0.0, 30.0, 3000, 80, TranscribeOptions())
        async with client.request("req", [30.0, 30.0]) as stream:
            assert client.queued_windows == 2
            for index in (1, 0):
                await client.send(msgspec.structs.replace(msg, index=index), np.zeros((80, 3000), np.float32))
            results = [(result.request_id, result.index) async for result in stream.results(5)]
        assert results == [("req", 0), ("req", 1)]
        assert client.queued_windows == 0
        async with client.request("refused", [30.0]) as stream:
            await client.send(msgspec.structs.replace(msg, request_id="refused", count=1), None)
            with pytest.raises(EngineUnavailable, match="restarting"):
                await stream.results(5).__anext__()
        await client.close()
        assert client.state == "stopped"

    asyncio.run(main())


def test_the_ray_client_refuses_an_unload_and_says_why() -> None:
    async def main() -> None:
        client = RayEngineClient(ServerConfig(), _Replicas())  # type: ignore[arg-type]
        await client.start(timeout_s=5)
        with pytest.raises(InvalidRequest, match="--model-ttl-s") as refused:
            await client.unload_model("/models/base", 5.0)
        assert (refused.value.status_code, refused.value.code) == (400, "unload_not_served")
        await client.close()

    asyncio.run(main())
