"""``voxlane serve``'s settings read from its flags and the ``VOXLANE_*`` variables into the frozen config."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from voxlane.config.device import defaults_for
from voxlane.config.engine import EngineConfig
from voxlane.config.flags import Setting, add_arguments, render_table, resolve, settings_of, source
from voxlane.config.resolve import (
    default_voice_paths,
    hub_cache,
    read_api_keys,
    resolve_aliases,
    resolve_models,
    resolve_voices,
)
from voxlane.config.server import ServerConfig

SETTINGS: tuple[Setting, ...] = settings_of(ServerConfig, EngineConfig)
"""Every setting, in declaration order."""
USER_SETTINGS = tuple(s for s in SETTINGS if s.flag.user)
"""The settings of ``voxlane serve --help`` and the README's table."""
EXPERT_SETTINGS = tuple(s for s in SETTINGS if not s.flag.user)
"""The expert knobs: ``voxlane serve --help-all`` and the table of docs/engine-config.md."""


def add_serve_arguments(parser: argparse.ArgumentParser, *, show_expert: bool = False) -> None:
    """Every setting's flag on ``parser``; the expert knobs are listed only with ``show_expert``."""
    add_arguments(parser, SETTINGS, show_expert=show_expert)


def settings_table() -> str:
    """The README's table of the user settings (markdown)."""
    return render_table(USER_SETTINGS)


def expert_table() -> str:
    """docs/engine-config.md's table of the expert knobs (markdown)."""
    return render_table(EXPERT_SETTINGS)


def _example(s: Setting) -> Any:
    """A value of ``s`` that an error message may offer: its default, or its default on the CPU."""
    return getattr(defaults_for("cpu"), s.name) if s.flag.by_device else s.default


def _setting(name: str) -> Setting:
    return next(s for s in SETTINGS if s.name == name)


def serve_config_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> ServerConfig:
    """Read every setting from the parsed flags, then ``environ``, then its default; check it and build the
    frozen config. Raises ValueError naming the flag and what to send instead."""
    values = {s.name: resolve(s, args, environ, _example(s)) for s in SETTINGS}
    values["api_keys"] = read_api_keys(
        values["api_key"], values["api_keys_file"], source(_setting("api_keys_file"), args, environ)
    )
    values["data_dir"] = os.path.expanduser(values["data_dir"])
    hub = hub_cache(environ)
    work_dir = Path(values["data_dir"]) / "models"
    whisper = resolve_models(values["model"], source(_setting("model"), args, environ), hub, work_dir)
    voices = resolve_voices(values["voice"], hub, work_dir)
    aliases = resolve_aliases(values["model_alias"], whisper[0].name)
    engine = EngineConfig(
        model_path=whisper[0].path,
        tts_preload=default_voice_paths(),
        warm_up_beam_sizes=(values["realtime_beam_size"],) if values["realtime_beam_size"] else (),
        **{s.name: values.pop(s.name) for s in SETTINGS if s.owner is EngineConfig},
    )
    if values["max_replicas"] and values["min_replicas"] > values["max_replicas"]:
        raise ValueError(
            f"--min-replicas {values['min_replicas']} is above --max-replicas {values['max_replicas']}; "
            "send a --max-replicas of at least --min-replicas (or 0 for a fixed --replicas)"
        )
    return ServerConfig(engine=engine, whisper=whisper, voices=voices, aliases=aliases, hub=hub, **values)


def environ() -> Mapping[str, str]:
    """The process's environment; the one place voxlane reads it."""
    return os.environ
