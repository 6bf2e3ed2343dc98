"""build_app: the FastAPI app, its lifespan (executors + engine), its drain gate and the one error handler."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.formparsers import MultiPartParser
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect

from voxlane import __version__
from voxlane.config import ServerConfig, default_voice_paths
from voxlane.engine.client import EngineClient, EngineHandle, EngineStartFailed
from voxlane.errors import ClientGone, VoxlaneError, error_json
from voxlane.heap import freeze_startup_heap
from voxlane.server.auth import RequireApiKey
from voxlane.server.catalog import ModelCatalog
from voxlane.server.drain import Drain, DrainGate
from voxlane.server.executors import Executors
from voxlane.server.forms import MiB
from voxlane.server.loopmon import LoopWatchdog
from voxlane.server.metrics import Metrics, RequestMetrics
from voxlane.server.routes import playground, realtime, speech, system, transcriptions, voices
from voxlane.server.state import AppState
from voxlane.voices import VoiceRegistry

log = logging.getLogger(__name__)


EngineFactory = Callable[..., EngineHandle]
"""Builds the routes' engine client from the config (and ``on_restart=``, a callable counting engine
restarts): ``EngineClient`` itself, or another ``EngineHandle`` (``voxlane.serve_ray``: the engine
replicas of a Ray Serve deployment)."""


def build_app(config: ServerConfig, make_engine: EngineFactory = EngineClient) -> FastAPI:
    # Starlette reads this class attribute for every upload it parses; one server runs in a process.
    MultiPartParser.spool_max_size = int(config.upload_spool_mb * MiB)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        executors = Executors(config)
        metrics = Metrics()

        engine = make_engine(config, on_restart=metrics.engine_restarts.inc)
        registry = VoiceRegistry(
            Path(config.data_dir),
            config.engine.tts_preload or default_voice_paths(),
            [(v.name, v.model_path, v.config_path) for v in config.voices],
        )
        try:
            await executors.run("files", registry.load)
            await executors.warm_up((config.engine.tts_preload or default_voice_paths())[1])
            try:
                await engine.start()
            except EngineStartFailed as exc:
                log.error("voxlane cannot start: %s", exc)  # uvicorn's copy of the traceback is filtered out (cli.py)
                raise
            catalog = ModelCatalog(config)
            metrics.watch(engine, executors, catalog.name_of)
            app.state.drain.on_expiry = engine.stop_serving
            app.state.voxlane = AppState(
                config, executors, engine, metrics, int(time.time()), voices=registry, catalog=catalog
            )
            frozen = freeze_startup_heap()  # before serving: this one full collection is the last of its size
            metrics.gc.install()
            monitor = asyncio.create_task(metrics.loop.run(), name="voxlane-loop-monitor")
            watchdog = None
            if config.loop_stall_report_ms > 0:
                watchdog = LoopWatchdog(metrics.loop, config.loop_stall_report_ms / 1000, threading.current_thread())
                watchdog.start()
            log.info(
                "voxlane serving %s on http://%s:%d (%d startup objects frozen out of garbage collection)",
                config.model_name,
                config.host,
                config.port,
                frozen,
            )
            yield
            metrics.gc.uninstall()
            if watchdog is not None:
                watchdog.stop()
            monitor.cancel()
        finally:
            executors.shutdown()
            await engine.close()

    app = FastAPI(title="voxlane", version=__version__, lifespan=lifespan)
    app.state.drain = drain = Drain(config.drain_timeout_s)
    app.include_router(system.router)
    app.include_router(transcriptions.router)
    app.include_router(speech.router)
    app.include_router(voices.router)
    app.include_router(realtime.router)
    app.include_router(playground.router)
    _install_error_handlers(app)

    if config.api_keys:  # inside the metrics, so that refused requests are counted (as 401s) too
        app.add_middleware(RequireApiKey, keys=config.api_keys, protect_metrics=config.metrics_need_key)
        log.info("API keys: %d; every /v1 route needs one", len(config.api_keys))  # how many, never which
    app.add_middleware(DrainGate, drain=drain)
    if config.cors_allow_origins:  # outside the key check: a preflight carries no key, and a 401 needs the headers
        app.add_middleware(
            CORSMiddleware,
            allow_origins=[o.strip() for o in config.cors_allow_origins.split(",") if o.strip()],
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["*"],
            expose_headers=["Retry-After", "WWW-Authenticate"],
            max_age=600,
        )
    app.add_middleware(RequestMetrics)  # outermost: it counts the drain's 503s and the key check's 401s too
    return app


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(VoxlaneError)
    async def voxlane_error(request: Request, exc: VoxlaneError) -> JSONResponse:
        if exc.status_code >= 500 and exc.retry_after_s is None:  # a 503 that says when to retry is expected
            log.warning("%s %s -> %d: %s", request.method, request.url.path, exc.status_code, exc.message)
        return JSONResponse(exc.to_json(), status_code=exc.status_code, headers=exc.headers())

    @app.exception_handler(ClientDisconnect)
    async def client_gone(request: Request, exc: ClientDisconnect) -> JSONResponse:
        # The client left mid-upload: answer nobody, quietly (no traceback formatting on the loop).
        return JSONResponse(ClientGone().to_json(), status_code=ClientGone.status_code)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        err: dict[str, Any] = dict(exc.errors()[0]) if exc.errors() else {"loc": (), "msg": "invalid request"}
        if err.get("type") == "json_invalid":
            return JSONResponse(
                error_json(
                    f"the body is not valid JSON ({err.get('ctx', {}).get('error', 'syntax')}); send a JSON object",
                    "invalid_request_error",
                ),
                status_code=400,
            )
        param = ".".join(str(p) for p in err["loc"] if p not in ("body", "query", "path")) or None
        message = f"invalid '{param}': {err['msg']}" if param else str(err["msg"])
        return JSONResponse(error_json(message, "invalid_request_error", param), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 404:
            message = f"no route {request.method} {request.url.path}; see /docs for the API"
        error_type = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return JSONResponse(error_json(message, error_type), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse(error_json("internal server error", "server_error"), status_code=500)
