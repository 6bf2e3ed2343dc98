"""The settings framework: a config field declared with :func:`setting` is a flag and a ``VOXLANE_*`` variable.

A field made with :func:`setting` carries its default, its help line (with its unit), the values it accepts,
its group in ``--help`` and whether it is a user flag (shown by ``voxlane serve --help``) or an expert knob
(shown by ``--help-all`` and in docs/engine-config.md). Everything else derives from the field: the flag
``--some-name``, the variable ``VOXLANE_SOME_NAME``, the validation and the tables of settings. This module
knows no particular setting.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

GROUPS = ("server", "limits", "models", "ASR", "TTS", "realtime", "scale-out", "GPU")
"""The groups of ``voxlane serve --help``, in order."""


@dataclass(frozen=True)
class Flag:
    """How a config field is set from outside: the text of its flag and the values it accepts."""

    help: str
    """One line for ``--help`` and the tables; it names the unit."""
    group: str = ""
    """The heading it is listed under: one of :data:`GROUPS`, which every setting must name."""
    user: bool = False
    """Shown by ``voxlane serve --help`` and in the README; otherwise an expert knob, shown by ``--help-all``."""
    choices: tuple[str, ...] = ()
    """The only values accepted, when the setting is one of a few words."""
    minimum: float | None = None
    """Smallest value accepted (inclusive)."""
    maximum: float | None = None
    """Largest value accepted (inclusive)."""
    positive: bool = False
    """Only values above 0 are accepted."""
    shown_default: str | None = None
    """The default as ``--help`` and the tables write it, where the value depends on the machine."""
    by_device: bool = False
    """The default depends on where Whisper runs (config/device.py ``defaults_for``); the field holds None until
    the device is known."""

    def __post_init__(self) -> None:
        if self.group not in GROUPS:
            raise ValueError(f"a setting's group is one of {', '.join(GROUPS)}, not {self.group!r}")


def setting(default: Any, help: str, *, secret: bool = False, **accepts: Any) -> Any:
    """A config field that is also a ``voxlane serve`` flag and a variable; ``accepts`` fills the rest of
    :class:`Flag` (group, user, choices, minimum, maximum, positive, shown_default, by_device). A ``secret``
    is left out of the config's repr, so that logging a config never writes it."""
    return field(default=default, repr=not secret, metadata={"flag": Flag(help, **accepts)})


@dataclass(frozen=True)
class Setting:
    """One ``voxlane serve`` setting as read from its field: the flag, the variable, the type, the default."""

    name: str
    """Attribute name in ``owner``, e.g. ``engine_workers``."""
    owner: type
    """The config dataclass that holds it."""
    kind: type
    """int, float, str, bool or tuple (of str)."""
    default: Any
    """The field's default; None for a setting by device."""
    flag: Flag

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return env_name(self.option[2:])

    @property
    def shown_default(self) -> str:
        if self.flag.shown_default is not None:
            return self.flag.shown_default
        if self.kind is tuple:
            return ", ".join(self.default)
        if self.kind is bool:
            return "on" if self.default else "off"
        return str(self.default)


_KINDS: Mapping[str, type] = {"int": int, "float": float, "str": str, "bool": bool, "tuple[str, ...]": tuple}
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def settings_of(*owners: type) -> tuple[Setting, ...]:
    """Every field made with :func:`setting` of ``owners`` (dataclasses), in declaration order."""
    return tuple(
        Setting(f.name, owner, _KINDS[str(f.type)], f.default, f.metadata["flag"])
        for owner in owners
        for f in fields(owner)
        if "flag" in f.metadata
    )


def by_group(settings: tuple[Setting, ...]) -> tuple[Setting, ...]:
    """``settings`` ordered by :data:`GROUPS`, each group in declaration order."""
    return tuple(sorted(settings, key=lambda s: GROUPS.index(s.flag.group)))


def env_name(flag: str) -> str:
    """``engine-workers`` -> ``VOXLANE_ENGINE_WORKERS``."""
    return "VOXLANE_" + flag.upper().replace("-", "_")


def add_arguments(parser: argparse.ArgumentParser, settings: tuple[Setting, ...], *, show_expert: bool) -> None:
    """One flag per setting, in an argument group per :data:`GROUPS` heading; an expert knob's flag is
    parsed always and listed only with ``show_expert``. Values stay strings here (None when not given):
    :func:`resolve` reads them, with the variables, so a bad one is a ValueError rather than argparse's own
    exit. A switch (a bool setting) alone means on; it also takes a value, so that ``--metrics-need-key off``
    beats the variable."""
    groups = {name: parser.add_argument_group(name) for name in GROUPS}
    for s in by_group(settings):
        shown = s.flag.user or show_expert
        text = f"{s.flag.help} (default: {s.shown_default}; env {s.env})".replace("%", "%%")
        kwargs: dict[str, Any] = {"default": None, "help": text if shown else argparse.SUPPRESS}
        if s.kind is bool:
            kwargs |= {"nargs": "?", "const": "on", "metavar": "on|off"}
        elif s.kind is tuple:
            kwargs["action"] = "append"
        elif s.flag.choices:
            kwargs["metavar"] = "{" + ",".join(s.flag.choices) + "}"
        groups[s.flag.group].add_argument(s.option, **kwargs)


def render_table(settings: tuple[Setting, ...]) -> str:
    """A markdown table of ``settings``, by group."""
    rows = ["| flag | environment | default | group | meaning |", "|---|---|---|---|---|"]
    rows += [
        f"| `{s.option}` | `{s.env}` | {s.shown_default} | {s.flag.group} | {s.flag.help} |" for s in by_group(settings)
    ]
    return "\n".join(rows) + "\n"


def _or(words: tuple[str, ...]) -> str:
    quoted = [repr(w) for w in words]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


def parse(s: Setting, raw: Any, source: str, example: Any) -> Any:
    """``raw`` as the setting's type, within its limits; ``source`` is the flag or variable it came from,
    ``example`` a value the error message offers."""
    where = f"{s.option} {raw!r}" if source == s.option else f"{source}={raw!r}"
    suffix = "" if source == s.option else f" (from {source})"
    value: Any = raw
    if s.kind is tuple:
        items = raw if isinstance(raw, list) else raw.split(",")
        return tuple(item.strip() for item in items if item.strip())
    if s.kind is int:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{where} is not an integer; {s.option} takes a whole number such as {example}") from None
    elif s.kind is bool:
        if raw.strip().lower() not in _TRUE + _FALSE:
            raise ValueError(f"{where} is not a switch value; {s.option} takes on or off (or true, false, 1, 0)")
        value = raw.strip().lower() in _TRUE
    elif s.kind is float:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ValueError(f"{where} is not a number; {s.option} takes a number such as {example}")
    if s.flag.choices and value not in s.flag.choices:
        raise ValueError(f"{s.option} must be {_or(s.flag.choices)}, not {raw!r}{suffix}")
    if s.flag.minimum is not None and value < s.flag.minimum:
        least = "0 or more" if s.flag.minimum == 0 else f"at least {s.flag.minimum:g}"
        raise ValueError(f"{s.option} must be {least}, not {raw}{suffix}")
    if s.flag.maximum is not None and value > s.flag.maximum:
        raise ValueError(f"{s.option} must be at most {s.flag.maximum:g}, not {raw}{suffix}")
    if s.flag.positive and value <= 0:
        raise ValueError(f"{s.option} must be above 0, not {raw}{suffix}")
    return value


def source(s: Setting, args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """Where the setting's value comes from: its flag, else its variable, else None (the default)."""
    if getattr(args, s.name, None) is not None:
        return s.option
    return s.env if s.env in environ else None


def resolve(s: Setting, args: argparse.Namespace, environ: Mapping[str, str], example: Any) -> Any:
    """The setting's value: its flag, else its variable, else its default (None: by device)."""
    where = source(s, args, environ)
    if where is None:
        return s.default
    return parse(s, getattr(args, s.name) if where == s.option else environ[where], where, example)
