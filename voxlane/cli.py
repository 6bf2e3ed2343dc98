"""The ``voxlane`` command: ``voxlane serve`` and ``voxlane bench``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from voxlane import __version__
from voxlane.config import add_serve_arguments, environ, serve_config_from_args

SHUTDOWN_GRACE_S = 1  # SIGTERM/Ctrl-C under load: in-flight requests get this long, then we exit
GIL_SWITCH_INTERVAL_S = 0.001
"""How long the event loop thread waits for the GIL before the holder must hand it over (CPython's
default is 5 ms). Each time the loop returns from a system call (a send, epoll) it needs the GIL back;
with encode and text threads busy beside it, every one of those waits could cost 5 ms, and a loop
iteration that sends to 16 streams could wait 50 ms in all (the "convoy effect"; the watchdog saw the
loop thread asleep for 40-60 ms while an encode thread ran)."""


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from voxlane.server.app import build_app

    try:
        config = serve_config_from_args(args, environ())
    except ValueError as exc:
        print(f"voxlane serve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(config),
            host=config.host,
            port=config.port,
            log_level=config.log_level,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            lifespan="on",
        )
    )
    server.run()
    return 0 if server.started else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="voxlane", description="OpenAI-compatible speech server.")
    parser.add_argument("--version", action="version", version=f"voxlane {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve",
        help="start the HTTP server and its engine process",
        description="Start the OpenAI-compatible server. Every flag can also be set with the environment "
        "variable shown beside it; a flag wins over the variable.",
    )
    add_serve_arguments(serve)
    serve.set_defaults(func=_serve)
    from voxlane.bench.cli import add_bench_parser

    add_bench_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
