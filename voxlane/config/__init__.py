"""Configuration: frozen dataclasses built once from CLI flags and ``VOXLANE_*`` variables.

This package is the only reader of ``os.environ``, and it declares every flag of ``voxlane serve``. Each
setting is declared once, as a field of :class:`ServerConfig` (server.py) or :class:`EngineConfig`
(engine.py) made with :func:`~voxlane.config.flags.setting`: default, help (with its unit), group, whether a
user needs it, and the values it accepts. Everything else derives from that field: the flag ``--some-name``
and its ``--help`` line, the variable ``VOXLANE_SOME_NAME``, the validation, the README's table of the user
settings and docs/engine-config.md's table of the expert knobs (unit tests keep both equal to the code). The
flag wins over the variable, the variable over the default. A bad value from either is a ``ValueError`` that
names the flag and what to send. The defaults that depend on the device are one table, device.py
``defaults_for``.

- flags.py: the framework (``setting``, ``Flag``, ``Setting``, parsing, argparse groups, tables);
- engine.py, server.py: the fields;
- resolve.py: models, voices, aliases and API keys;
- device.py: cores, GPU detection and the defaults by device;
- serve.py: ``serve_config_from_args``, the one place they come together.

Regenerate the tables with ``python -m voxlane.config`` (README) and ``python -m voxlane.config --expert``.
"""

from __future__ import annotations

from voxlane.config.device import CORES, DeviceDefaults, defaults_for, host_device, nvidia_gpu_present, usable_cores
from voxlane.config.engine import CUDA_CACHE_DIR_DEFAULT, EngineConfig
from voxlane.config.flags import Flag, Setting, env_name, setting
from voxlane.config.resolve import (
    MODEL_ALIASES,
    SPEECH_MODEL,
    SPEECH_MODEL_ALIASES,
    default_model_path,
    default_voice_paths,
    hub_cache,
)
from voxlane.config.serve import (
    EXPERT_SETTINGS,
    SETTINGS,
    USER_SETTINGS,
    add_serve_arguments,
    environ,
    expert_table,
    serve_config_from_args,
    settings_table,
)
from voxlane.config.server import DATA_DIR_DEFAULT, DEFAULT_MODEL_NAME, ServerConfig

__all__ = [
    "CORES",
    "CUDA_CACHE_DIR_DEFAULT",
    "DATA_DIR_DEFAULT",
    "DEFAULT_MODEL_NAME",
    "EXPERT_SETTINGS",
    "MODEL_ALIASES",
    "SETTINGS",
    "SPEECH_MODEL",
    "SPEECH_MODEL_ALIASES",
    "USER_SETTINGS",
    "DeviceDefaults",
    "EngineConfig",
    "Flag",
    "ServerConfig",
    "Setting",
    "add_serve_arguments",
    "default_model_path",
    "default_voice_paths",
    "defaults_for",
    "env_name",
    "environ",
    "expert_table",
    "host_device",
    "hub_cache",
    "nvidia_gpu_present",
    "serve_config_from_args",
    "setting",
    "settings_table",
    "usable_cores",
]
