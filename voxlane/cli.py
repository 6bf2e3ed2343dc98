"""The ``voxlane`` command: ``voxlane serve``, ``voxlane models pull`` and ``voxlane bench``."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from types import FrameType

from voxlane import __version__
from voxlane.config import add_serve_arguments, environ, serve_config_from_args

SHUTDOWN_GRACE_S = 1
"""After the drain (every request done, or --drain-timeout-s passed): how long uvicorn waits for responses
still being written before it cancels them."""
GIL_SWITCH_INTERVAL_S = 0.001
"""How long the event loop thread waits for the GIL before the holder must hand it over (CPython's
default is 5 ms). Each time the loop returns from a system call (a send, epoll) it needs the GIL back;
with encode and text threads busy beside it, every one of those waits could cost 5 ms, and a loop
iteration that sends to 16 streams could wait 50 ms in all (the "convoy effect"; the watchdog saw the
loop thread asleep for 40-60 ms while an encode thread ran)."""


log = logging.getLogger("voxlane.serve")


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from voxlane.server.app import build_app
    from voxlane.server.drain import Drain

    class DrainingServer(uvicorn.Server):
        """uvicorn's server, with a drain before its shutdown. The first SIGTERM or Ctrl-C begins the drain:
        the app answers new requests 503 while the listener stays open, and uvicorn's shutdown starts once
        the requests in flight have finished or --drain-timeout-s has passed. A second signal exits at once
        (uvicorn's force_exit: requests still running are cancelled, the engine told to stop)."""

        def __init__(self, config: uvicorn.Config, drain: Drain) -> None:
            super().__init__(config)
            self.drain = drain
            self._drain_announced = False

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            # A signal handler: set flags only (on_tick logs, on the loop).
            if self.drain.draining or self.should_exit:
                self.should_exit = self.force_exit = True
            else:
                self.drain.begin(time.monotonic())

        async def on_tick(self, counter: int) -> bool:
            if self.drain.draining and not self.should_exit:
                if not self._drain_announced:
                    self._drain_announced = True
                    log.warning(
                        "draining: %d request(s) in flight may take up to %g s (--drain-timeout-s); new ones get "
                        "503; SIGTERM or Ctrl-C again to exit now",
                        self.drain.in_flight,
                        self.drain.timeout_s,
                    )
                if self.drain.over(time.monotonic()):
                    if self.drain.in_flight:
                        log.warning(
                            "drain timeout: %d request(s) still in flight get 503 (shutting_down)", self.drain.in_flight
                        )
                        self.drain.expire()
                    else:
                        log.info("drained: every request in flight has finished; exiting")
                    self.should_exit = True
            return await super().on_tick(counter)

    try:
        config = serve_config_from_args(args, environ())
    except ValueError as exc:
        print(f"voxlane serve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if config.ray_address:
        from voxlane.serve_ray.deploy import serve_on_ray

        return serve_on_ray(config)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    app = build_app(config)
    server = DrainingServer(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            log_level=config.log_level,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            lifespan="on",
        ),
        app.state.drain,
    )
    logging.getLogger("uvicorn.error").addFilter(_drop_start_failure_traceback)
    server.run()
    return 0 if server.started else 1


def _drop_start_failure_traceback(record: logging.LogRecord) -> bool:
    """uvicorn logs the lifespan's traceback when the app fails to start; when the engine failed, the app has
    already logged the reason in one line ("voxlane cannot start: ..."), which the traceback would bury."""
    message = record.getMessage()
    return not (message.startswith("Traceback") and "EngineStartFailed" in message)


def _pull(args: argparse.Namespace) -> int:
    """``voxlane models pull ID``: download a model into the Hugging Face cache, with huggingface_hub's progress
    bars on stderr."""
    from voxlane.config import hub_cache
    from voxlane.models import ModelNotPresent, pull

    try:
        path = pull(args.id, hub_cache(environ()))
    except ModelNotPresent as exc:
        print(f"voxlane models pull: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # the hub's own errors: network, a repo that does not exist, no access
        print(f"voxlane models pull: pulling {args.id!r} failed: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


SERVE_DESCRIPTION = (
    "Start the OpenAI-compatible server. Every flag can also be set with the environment variable shown beside "
    "it; a flag wins over the variable."
)


class _HelpAll(argparse.Action):
    """``voxlane serve --help-all``: the help of every flag, the expert knobs included, then exit."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        full = argparse.ArgumentParser(prog=parser.prog, description=SERVE_DESCRIPTION)
        _add_serve_flags(full, show_expert=True)
        full.print_help()
        parser.exit()


def _add_serve_flags(parser: argparse.ArgumentParser, *, show_expert: bool) -> None:
    parser.add_argument(
        "--help-all",
        action=_HelpAll,
        help="show every flag, the expert knobs included (docs/engine-config.md), and exit",
    )
    add_serve_arguments(parser, show_expert=show_expert)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="voxlane", description="OpenAI-compatible speech server.")
    parser.add_argument("--version", action="version", version=f"voxlane {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve",
        help="start the HTTP server and its engine process (or deploy both on Ray Serve: --ray-address)",
        description=SERVE_DESCRIPTION + " --help lists the flags most deployments set; --help-all lists "
        "the expert knobs too.",
    )
    _add_serve_flags(serve, show_expert=False)
    serve.set_defaults(func=_serve)
    models = sub.add_parser("models", help="download models (docs/models.md)")
    models_sub = models.add_subparsers(dest="models_command", required=True)
    pull = models_sub.add_parser(
        "pull",
        help="download a model into the Hugging Face cache (HF_HOME, HF_HUB_CACHE); refused with HF_HUB_OFFLINE=1",
        description="Download a CTranslate2 Whisper model by its Hugging Face repo id (Systran/faster-whisper-small) "
        "or a Piper voice by name (en_US-lessac-medium, from rhasspy/piper-voices) into the Hugging Face cache, "
        "where voxlane serve finds it by the same name. Prints where it is.",
    )
    pull.add_argument("id", help="repo id or voice name")
    pull.set_defaults(func=_pull)
    from voxlane.bench.cli import add_bench_parser

    add_bench_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
