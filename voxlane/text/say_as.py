"""SSML ``say-as``: numbers, dates, times, phone numbers and spelt-out letters as plain English words.

Table-driven and deliberately small: one function per ``interpret-as`` value in ``INTERPRETERS``, each taking
the element's text and its ``format`` attribute. A text an interpreter cannot read raises ValueError saying
what it expects; the SSML parser adds the element's position.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from voxlane.text import numbers
from voxlane.text.numbers import MONTHS

_LETTERS = dict(
    zip(
        "abcdefghijklmnopqrstuvwxyz",
        [
            "ay",
            "bee",
            "see",
            "dee",
            "ee",
            "eff",
            "gee",
            "aitch",
            "eye",
            "jay",
            "kay",
            "el",
            "em",
            "en",
            "oh",
            "pee",
            "cue",
            "ar",
            "ess",
            "tee",
            "you",
            "vee",
            "double-you",
            "ex",
            "why",
            "zee",
        ],
    )
)
_SYMBOLS = {"@": "at", ".": "dot", "-": "dash", "_": "underscore", "/": "slash", "&": "and", "+": "plus", "#": "hash"}
_DATE_FORMATS = ("mdy", "dmy", "ymd", "ydm", "md", "dm", "ym", "my", "d", "m", "y")


def _spaced(words: str) -> str:
    """numbers.py's words with spaces for its hyphens: how this module has always written them."""
    return words.replace("-", " ")


def cardinal(n: int) -> str:
    """0 -> 'zero', 1234 -> 'one thousand two hundred thirty four'; negatives with 'minus'."""
    return _spaced(numbers.cardinal(n))


def ordinal(n: int) -> str:
    """1 -> 'first', 22 -> 'twenty second', 40 -> 'fortieth'."""
    return _spaced(numbers.ordinal(n))


def year(n: int) -> str:
    """1999 -> 'nineteen ninety nine', 1905 -> 'nineteen oh five', 2000-2009 and others -> cardinal."""
    return _spaced(numbers.year(n))


def read_cardinal(text: str, _: str = "") -> str:
    match = re.fullmatch(r"([+-]?)(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?", text.strip())
    if match is None or int(match[2].replace(",", "")) > numbers.LARGEST:
        raise ValueError(f"'{text}' is not a number; send digits such as 1234, -5 or 3.14 (under 10^15)")
    words = cardinal(int(match[2].replace(",", "")))
    if match[1] == "-":
        words = f"minus {words}"
    return f"{words} point {numbers.digits(match[3])}" if match[3] else words


def read_ordinal(text: str, _: str = "") -> str:
    match = re.fullmatch(r"(\d{1,15})(?:st|nd|rd|th)?", text.strip().lower())
    if match is None:
        raise ValueError(f"'{text}' is not an ordinal; send digits such as 3 or 3rd")
    return ordinal(int(match[1]))


def read_digits(text: str, _: str = "") -> str:
    if not re.fullmatch(r"[\d\s-]*\d[\d\s-]*", text):
        raise ValueError(f"'{text}' is not a run of digits; send digits only, such as 0042")
    return numbers.digits(re.sub(r"\D", "", text))


def spell(text: str, _: str = "") -> str:
    """Letters by name, digits as words, a few symbols by name; anything else is skipped."""
    words = [_LETTERS.get(c) or _SYMBOLS.get(c) or numbers.digits(c) for c in text.lower()]
    spelt = " ".join(w for w in words if w)
    if not spelt:
        raise ValueError(f"'{text}' has nothing to spell out; send letters or digits")
    return spelt


def read_date(text: str, fmt: str = "") -> str:
    """'2024-03-05' -> 'March fifth, twenty twenty four'. ``fmt`` orders the input's fields (SSML's date
    formats: mdy, dmy, ymd, ydm, md, dm, ym, my, d, m, y); by default ymd when it starts with a 4-digit
    year, else mdy. The words are always month, day, year."""
    parts = [p for p in re.split(r"[-/.,\s]+", text.strip()) if p]
    if not fmt:
        fmt = "ymd" if parts and len(parts[0]) == 4 else "mdy"
    if fmt not in _DATE_FORMATS or len(fmt) != len(parts):
        raise ValueError(
            f"'{text}' does not match the date format '{fmt}'; send format= one of {', '.join(_DATE_FORMATS)} "
            "with that many fields, such as 2024-03-05 for ymd"
        )
    fields = dict(zip(fmt, parts))
    month = _month(fields["m"]) if "m" in fields else None
    day = int(fields["d"]) if "d" in fields and fields["d"].isdigit() else None
    if "d" in fields and (day is None or not 1 <= day <= 31):
        raise ValueError(f"'{fields['d']}' is not a day of the month; send 1 to 31")
    if "y" in fields and not fields["y"].isdigit():
        raise ValueError(f"'{fields['y']}' is not a year; send digits such as 2024")
    head = " ".join(w for w in (month, ordinal(day) if day else None) if w)
    if "y" not in fields:
        return head
    return f"{head}, {year(int(fields['y']))}" if head else year(int(fields["y"]))


def _month(field: str) -> str:
    if field.isdigit() and 1 <= int(field) <= 12:
        return MONTHS[int(field) - 1]
    for name in MONTHS:
        if len(field) >= 3 and name.lower().startswith(field.lower()):
            return name
    raise ValueError(f"'{field}' is not a month; send 1 to 12 or a month's name")


def read_time(text: str, _: str = "") -> str:
    """'9:05' -> 'nine oh five', '14:00' -> 'fourteen hundred', '10:30 pm' -> 'ten thirty p m'."""
    match = re.fullmatch(r"(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?\s*([ap])\.?\s*m\.?", text.strip().lower())
    match = match or re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?()", text.strip())
    if match is None or int(match[1]) > 23 or int(match[2] or 0) > 59 or int(match[3] or 0) > 59:
        raise ValueError(f"'{text}' is not a time; send hh:mm, hh:mm:ss or h am/pm, such as 9:05 or 10 pm")
    hour, minute = int(match[1]), int(match[2] or 0)
    if minute == 0:
        words = cardinal(hour) if match[4] else f"{cardinal(hour)} hundred"
    else:
        words = f"{cardinal(hour)} {'oh ' if minute < 10 else ''}{cardinal(minute)}"
    if match[3] and int(match[3]):
        words += f" and {cardinal(int(match[3]))} seconds"
    return f"{words} {match[4]} m" if match[4] else words


def read_telephone(text: str, _: str = "") -> str:
    """'+1 (555) 123-4567' -> 'plus one, five five five, one two three, four five six seven'."""
    if not re.fullmatch(r"\+?[\d\s().-]*\d[\d\s().-]*", text.strip()):
        raise ValueError(f"'{text}' is not a telephone number; send digits, spaces, ( ) - . and a leading +")
    groups = [numbers.digits(g) for g in re.findall(r"\d+", text)]
    return ("plus " if text.strip().startswith("+") else "") + ", ".join(groups)


INTERPRETERS: dict[str, Callable[[str, str], str]] = {
    "characters": spell,
    "spell-out": spell,
    "cardinal": read_cardinal,
    "ordinal": read_ordinal,
    "digits": read_digits,
    "date": read_date,
    "time": read_time,
    "telephone": read_telephone,
}
"""``interpret-as`` value -> its reader (text, format) -> words."""
