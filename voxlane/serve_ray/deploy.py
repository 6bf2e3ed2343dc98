"""The Ray Serve application (two deployments) and ``voxlane serve --ray-address``, which deploys it.

- ``VoxlaneEngine``: the engine replicas (``replica.py``), each with its declared CPUs (and GPUs), a fixed
  count (``--replicas``) or autoscaling on the calls in flight per replica (``--min-replicas``,
  ``--max-replicas``, ``--target-ongoing-requests``, ``--downscale-delay-s``). A replica being removed
  (scale-down, redeploy, shutdown) is drained first: Ray sends it nothing new and waits up to
  ``--drain-timeout-s`` for its calls in flight.
- ``VoxlaneIngress``: the same FastAPI app as ``voxlane serve`` (``server/app.py``), built on each ingress
  replica with a ``RayEngineClient`` in place of the ZMQ one; behind Ray Serve's HTTP proxy on
  ``--host``/``--port``. Its replicas (``--ingress-replicas``) decode uploads, compute log-mel features and
  encode speech on their own executors, on whichever nodes Ray places them.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import threading
from typing import Any

from voxlane.config import ServerConfig

log = logging.getLogger(__name__)

APP_NAME = "voxlane"
ENGINE_DEPLOYMENT = "VoxlaneEngine"
INGRESS_DEPLOYMENT = "VoxlaneIngress"
INGRESS_CPUS = 1.0
"""CPUs an ingress replica reserves: its event loop; its pools (audio threads, encode and text processes)
mostly wait on the engines."""
RAY_LOOPBACK_VARIABLE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Set to 0, Ray keeps a node on 127.0.0.1 (and binds its servers there) instead of the machine's address."""
UPSCALE_DELAY_S = 5.0
"""Seconds of higher load before Ray adds an engine replica (Ray's default is 30)."""


def build_application(config: ServerConfig) -> Any:
    """The bound Ray Serve application: the ingress, holding a handle on the engine deployment."""
    from ray import serve

    from voxlane.serve_ray.replica import EngineReplica

    scaling: dict[str, Any] = {"num_replicas": config.replicas}
    if config.max_replicas:
        scaling = {
            "num_replicas": "auto",
            "autoscaling_config": {
                "min_replicas": config.min_replicas,
                "initial_replicas": min(max(config.replicas, config.min_replicas), config.max_replicas),
                "max_replicas": config.max_replicas,
                "target_ongoing_requests": config.target_ongoing_requests,
                "upscale_delay_s": UPSCALE_DELAY_S,
                "downscale_delay_s": config.downscale_delay_s,
            },
        }
    engine: Any = serve.deployment(
        EngineReplica,
        name=ENGINE_DEPLOYMENT,
        ray_actor_options={"num_cpus": config.cpus_per_replica, "num_gpus": config.gpus_per_replica},
        max_ongoing_requests=config.max_ongoing_per_replica,
        graceful_shutdown_timeout_s=config.drain_timeout_s,
        **scaling,
    )
    ingress: Any = serve.deployment(
        serve.ingress()(VoxlaneIngress),
        name=INGRESS_DEPLOYMENT,
        num_replicas=config.ingress_replicas,
        ray_actor_options={"num_cpus": INGRESS_CPUS},
        # The app's own admission bounds what it takes (429 with Retry-After past its queues).
        max_ongoing_requests=config.max_transcription_requests + config.max_speech_streams,
        graceful_shutdown_timeout_s=config.drain_timeout_s,
    )
    return ingress.bind(engine.bind(config), config)


class VoxlaneIngress:
    """An ingress replica: the FastAPI app of ``voxlane serve``, built on the replica (Ray Serve calls
    ``__serve_build_asgi_app__`` after the constructor) around a ``RayEngineClient`` on ``engine``."""

    def __init__(self, engine: Any, config: ServerConfig) -> None:
        self.engine = engine
        self.config = config

    def __serve_build_asgi_app__(self) -> Any:
        from voxlane.serve_ray.client import RayEngineClient
        from voxlane.server.app import build_app

        def make_engine(config: ServerConfig, on_restart: Any = None) -> RayEngineClient:
            return RayEngineClient(config, self.engine, on_restart=on_restart)

        return build_app(self.config, make_engine=make_engine)


def application(args: dict[str, Any]) -> Any:
    """Ray Serve's application builder, for ``serve run`` and KubeRay's RayService (``import_path:
    voxlane.serve_ray.deploy:application``, docs/containers.md): ``args`` are ``voxlane serve`` settings by
    field name (``replicas: 2``); anything else comes from ``VOXLANE_*`` variables and the defaults."""
    import argparse

    from voxlane.config import add_serve_arguments, environ, serve_config_from_args

    parser = argparse.ArgumentParser(prog="voxlane.serve_ray.deploy:application")
    add_serve_arguments(parser)
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in args.items()]
    config = serve_config_from_args(parser.parse_args(flags), environ())
    return build_application(config)


def serve_on_ray(config: ServerConfig) -> int:
    """Deploy on the cluster at ``--ray-address``, serve until SIGTERM or Ctrl-C, then remove the app (its
    replicas drained first) and Ray Serve's proxy, leaving the cluster itself running."""
    init: dict[str, Any] = {}
    if _is_loopback(config.ray_address):
        # A cluster on loopback (one machine, started with the same variable: docs/scale-out.md). Without
        # it Ray swaps 127.0.0.1 for the machine's address, where such a cluster does not listen.
        os.environ[RAY_LOOPBACK_VARIABLE] = "0"
        init["_node_ip_address"] = "127.0.0.1"
    try:
        import ray
        from ray import serve
    except ImportError:
        log.error("--ray-address needs Ray Serve: pip install 'voxlane[ray]'")
        return 2
    ray.init(address=config.ray_address, namespace=APP_NAME, log_to_driver=False, **init)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        serve.start(http_options={"host": config.host, "port": config.port})
        serve.run(build_application(config), name=APP_NAME, route_prefix="/")
        scale = (
            f"{config.min_replicas}..{config.max_replicas} (autoscaling)" if config.max_replicas else config.replicas
        )
        log.info(
            "voxlane serving %s on http://%s:%d through Ray Serve: %s engine replica(s)",
            config.model_name,
            config.host,
            config.port,
            scale,
        )
        while not stop.wait(1.0):
            pass
        log.warning("removing the voxlane app: each replica drains first (up to %g s)", config.drain_timeout_s)
        serve.delete(APP_NAME)
    finally:
        serve.shutdown()
        ray.shutdown()
    return 0


def _is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].removeprefix("ray://")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
