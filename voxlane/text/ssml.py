"""SSML for speech: ``<speak>`` markup in, units with their pauses, rates and phonemes out.

Pure: it knows neither HTTP nor Piper. ``parse_ssml`` reads the markup with expat (the parser under
``xml.etree``, used directly because it gives the line and column of every element for the error message),
refusing any DOCTYPE or entity declaration (so only XML's five predefined entities and character references
resolve: no entity expansion, no external files) and elements nested deeper than ``MAX_DEPTH``. The caller
bounds the size (the route's input limit).

What each element does is a row of ``ELEMENTS`` (its allowed attributes) and of the tables below it:
- ``break``: ends the unit; ``time`` (ms or s, at most ``MAX_BREAK_S``) or ``strength`` (``STRENGTH_S``) is
  the gap heard after it, from the unit's last sound to the next one's first (the voice's own quiet at both
  edges included, audio/gaps.py); strength none or 0 s: no boundary.
- ``p`` and ``s``: unit boundaries; a paragraph is followed by a gap of ``PARAGRAPH_PAUSE_S``.
- ``prosody``: ``rate`` (``RATES`` or a percentage: "150%" absolute, "+20%" / "-20%" relative, nested ones
  multiply) becomes the unit's rate; a rate change is a unit boundary. ``pitch`` and ``volume`` are accepted
  and not honoured.
- ``say-as``: its text through ``say_as.INTERPRETERS``; ``sub``: its ``alias`` instead of its text.
- ``phoneme``: a unit of its own, spoken from its IPA ``ph`` instead of its text.
- ``emphasis``: read as plain text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from xml.parsers import expat

from voxlane.text.say_as import INTERPRETERS

MAX_DEPTH = 16
MAX_BREAK_S = 10.0
PARAGRAPH_PAUSE_S = 0.5
MIN_RATE, MAX_RATE = 0.25, 4.0

STRENGTH_S = {"none": 0.0, "x-weak": 0.25, "weak": 0.5, "medium": 0.75, "strong": 1.0, "x-strong": 1.25}
"""The gap heard at a ``break`` of each strength; a break with neither time nor strength is medium."""
RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
"""Speaking rate of each ``prosody rate`` label, as a multiple of the voice's (and the request's speed)."""

_LANG = "xml:lang"
ELEMENTS: dict[str, frozenset[str]] = {
    "speak": frozenset({"version", "xmlns", _LANG, "xmlns:xsi", "xsi:schemaLocation"}),
    "p": frozenset({_LANG}),
    "s": frozenset({_LANG}),
    "break": frozenset({"time", "strength"}),
    "prosody": frozenset({"rate", "pitch", "volume"}),
    "say-as": frozenset({"interpret-as", "format", "detail"}),
    "sub": frozenset({"alias"}),
    "phoneme": frozenset({"alphabet", "ph"}),
    "emphasis": frozenset({"level"}),
}
"""The elements understood, and the attributes each may carry."""
_Error = Callable[[str], "SsmlError"]
_TEXT_ONLY = ("say-as", "sub", "phoneme")
_TIME = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)\s*")
_PERCENT = re.compile(r"\s*([+-]?)(\d+(?:\.\d*)?)\s*%\s*")


@dataclass(frozen=True)
class SsmlUnit:
    """A stretch of speech: said in one go, then ``pause_after_s`` of silence."""

    text: str
    """What to say (markup gone, say-as and sub resolved); for a phoneme unit, the element's text."""
    pause_after_s: float = 0.0
    """The gap heard after the unit, from its last sound to the next unit's first; 0: the voice's own pause."""
    rate: float = 1.0
    """Speaking rate, a multiple of the request's (1.0 = as asked)."""
    phonemes: str | None = None
    """IPA to speak instead of ``text``; None: speak ``text``."""
    written: str | None = field(default=None, compare=False)
    """The unit's text as the markup has it (``say-as`` and ``sub`` content, not what they say), for word
    timings; None: the same as ``text``. Not compared: two units that say the same are equal."""


class SsmlError(ValueError):
    """Markup that cannot be spoken; the message gives the position and what is allowed there."""


def is_ssml(text: str) -> bool:
    """True when the input is SSML: it starts (after leading whitespace) with ``<speak``, or with an XML
    declaration or DOCTYPE (so that a document with one is refused, not read aloud)."""
    return text.lstrip().startswith(("<speak", "<?xml", "<!DOCTYPE"))


def parse_ssml(text: str) -> list[SsmlUnit]:
    """``<speak>...</speak>`` -> its units, in order. Raises SsmlError for malformed or unknown markup."""
    return _Reader().read(text)


@dataclass
class _Frame:
    tag: str
    attrs: dict[str, str]
    rate: float
    where: str
    captured: list[str]


class _Reader:
    def __init__(self) -> None:
        self.units: list[SsmlUnit] = []
        self.text: list[str] = []
        self.written: list[str] = []
        self.stack: list[_Frame] = []
        self.parser = expat.ParserCreate()
        self.parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        self.parser.StartDoctypeDeclHandler = self._doctype
        self.parser.EntityDeclHandler = self._entity
        self.parser.StartElementHandler = self._start
        self.parser.EndElementHandler = self._end
        self.parser.CharacterDataHandler = self._data

    def read(self, text: str) -> list[SsmlUnit]:
        try:
            self.parser.Parse(text, True)
        except expat.ExpatError as exc:
            reason = expat.ErrorString(exc.code)
            raise SsmlError(
                f"SSML is not well-formed XML at line {exc.lineno}, column {exc.offset + 1}: {reason}; "
                "send one <speak> element with matched tags, and &amp; &lt; &gt; &quot; &apos; for those characters"
            ) from None
        self._flush(0.0)
        return self.units

    def _where(self) -> str:
        return f"line {self.parser.CurrentLineNumber}, column {self.parser.CurrentColumnNumber + 1}"

    def _error(self, what: str, where: str | None = None) -> SsmlError:
        return SsmlError(f"SSML error at {where or self._where()}: {what}")

    def _doctype(self, *_: object) -> None:
        raise self._error("a DOCTYPE is not allowed; send <speak> markup without one")

    def _entity(self, *_: object) -> None:
        raise self._error("entity declarations are not allowed; only &amp; &lt; &gt; &quot; &apos; and &#...;")

    @property
    def rate(self) -> float:
        return self.stack[-1].rate if self.stack else 1.0

    def _flush(self, pause_s: float) -> None:
        """End the current unit here, with ``pause_s`` of silence after it."""
        text = " ".join("".join(self.text).split())
        written = " ".join("".join(self.written).split())
        self.text, self.written = [], []
        if text:
            self.units.append(SsmlUnit(text, pause_s, self.rate, written=written if written != text else None))
        elif pause_s and self.units:
            last = self.units[-1]
            self.units[-1] = replace(last, pause_after_s=last.pause_after_s + pause_s)
        elif pause_s:
            self.units.append(SsmlUnit("", pause_s, self.rate))

    def _start(self, tag: str, attrs: dict[str, str]) -> None:
        where = self._where()
        allowed = ELEMENTS.get(tag)
        if allowed is None:
            raise self._error(f"<{tag}> is not supported; the elements allowed are {_names(ELEMENTS)}")
        if not self.stack and tag != "speak":
            raise self._error(f"the document is <{tag}>; send one <speak> element around everything")
        if self.stack and tag == "speak":
            raise self._error("<speak> inside <speak>; send one <speak> element around everything")
        if self.stack and self.stack[-1].tag in _TEXT_ONLY:
            raise self._error(f"<{tag}> inside <{self.stack[-1].tag}>, which holds text only")
        if len(self.stack) >= MAX_DEPTH:
            raise self._error(f"elements nest deeper than {MAX_DEPTH}; flatten the markup")
        unknown = sorted(set(attrs) - allowed)
        if unknown:
            raise self._error(f"<{tag}> has no attribute {unknown[0]}; its attributes are {_names(allowed) or 'none'}")
        rate = self.rate
        if tag == "prosody" and "rate" in attrs:
            rate = _rate(attrs["rate"], rate, self._error)
            if rate != self.rate:
                self._flush(0.0)
        elif tag in ("p", "s", "phoneme"):
            self._flush(0.0)
        elif tag == "say-as" and attrs.get("interpret-as") not in INTERPRETERS:
            raise self._error(
                f"say-as interpret-as='{attrs.get('interpret-as', '')}' is not supported; "
                f"send one of {_names(INTERPRETERS)}"
            )
        elif tag == "sub" and "alias" not in attrs:
            raise self._error("<sub> needs an alias attribute: the text to say")
        if tag == "phoneme":
            _check_phoneme(attrs, self._error)
        self.stack.append(_Frame(tag, attrs, rate, where, []))
        if tag == "break":
            pause_s = _break_s(attrs, self._error)
            if pause_s > 0:
                self._flush(pause_s)

    def _end(self, tag: str) -> None:
        frame = self.stack[-1]
        content = "".join(frame.captured)
        if tag == "say-as":
            try:
                words = INTERPRETERS[frame.attrs["interpret-as"]](content, frame.attrs.get("format", ""))
            except ValueError as exc:
                raise self._error(f"say-as interpret-as='{frame.attrs['interpret-as']}': {exc}", frame.where) from None
            self.text.append(words)
            self.written.append(content)
        elif tag == "sub":
            self.text.append(frame.attrs["alias"])
            self.written.append(content)
        elif tag == "phoneme":
            self.units.append(SsmlUnit(" ".join(content.split()), 0.0, frame.rate, frame.attrs["ph"]))
        if tag in ("p", "s") or (tag == "prosody" and len(self.stack) > 1 and frame.rate != self.stack[-2].rate):
            self._flush(PARAGRAPH_PAUSE_S if tag == "p" else 0.0)
        self.stack.pop()

    def _data(self, data: str) -> None:
        if self.stack and self.stack[-1].tag in _TEXT_ONLY:
            self.stack[-1].captured.append(data)
        else:
            self.text.append(data)
            self.written.append(data)


def _names(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))


def _break_s(attrs: dict[str, str], error: _Error) -> float:
    if "time" in attrs:
        match = _TIME.fullmatch(attrs["time"])
        if match is None:
            raise error(f"break time='{attrs['time']}' is not a duration; send milliseconds or seconds: 500ms, 1.5s")
        seconds = float(match[1]) / (1000.0 if match[2] == "ms" else 1.0)
        if seconds > MAX_BREAK_S:
            raise error(f"break time='{attrs['time']}' is over {MAX_BREAK_S:g} s; send a shorter one")
        return seconds
    strength = attrs.get("strength", "medium")
    if strength not in STRENGTH_S:
        raise error(f"break strength='{strength}' is not supported; send one of {', '.join(STRENGTH_S)}")
    return STRENGTH_S[strength]


def _rate(value: str, outer: float, error: _Error) -> float:
    """A ``prosody rate`` inside one of rate ``outer`` -> the rate it asks for."""
    match = _PERCENT.fullmatch(value)
    if value.strip() in RATES:
        rate = outer * RATES[value.strip()]
    elif match is not None:
        percent = float(match[2]) / 100.0
        rate = outer * {"+": 1.0 + percent, "-": 1.0 - percent, "": percent}[match[1]]
    else:
        raise error(
            f"prosody rate='{value}' is not supported; send one of {', '.join(RATES)} or a percentage: 80%, +20%"
        )
    if not MIN_RATE <= rate <= MAX_RATE:
        raise error(
            f"prosody rate='{value}' makes a rate of {rate:g}; send one from {MIN_RATE:g} to {MAX_RATE:g} times"
        )
    return rate


def _check_phoneme(attrs: dict[str, str], error: _Error) -> None:
    if attrs.get("alphabet", "ipa") != "ipa":
        raise error(f"phoneme alphabet='{attrs['alphabet']}' is not supported; send alphabet='ipa'")
    if not attrs.get("ph", "").strip():
        raise error("<phoneme> needs a ph attribute: the IPA to say")
