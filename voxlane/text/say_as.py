"""SSML ``say-as``: numbers, dates, times, phone numbers and spelt-out letters as plain English words.

Table-driven and deliberately small: one function per ``interpret-as`` value in ``INTERPRETERS``, each taking
the element's text and its ``format`` attribute. A text an interpreter cannot read raises ValueError saying
what it expects; the SSML parser adds the element's position.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (10**3, "thousand"))
_ORDINAL_LAST = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth"}
_ORDINAL_LAST |= {"nine": "ninth", "twelve": "twelfth"}
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
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
_MAX_CARDINAL = 10**15 - 1


def cardinal(n: int) -> str:
    """0 -> 'zero', 1234 -> 'one thousand two hundred thirty four'; negatives with 'minus'."""
    if n < 0:
        return f"minus {cardinal(-n)}"
    if n < 1000:
        return _under_thousand(n) or "zero"
    words = []
    for scale, name in _SCALES:
        if n >= scale:
            words.append(f"{_under_thousand(n // scale)} {name}")
            n %= scale
    if n:
        words.append(_under_thousand(n))
    return " ".join(words)


def _under_thousand(n: int) -> str:
    words = []
    if n >= 100:
        words.append(f"{_ONES[n // 100]} hundred")
        n %= 100
    if n >= 20:
        words.append(_TENS[n // 10] + (f" {_ONES[n % 10]}" if n % 10 else ""))
    elif n:
        words.append(_ONES[n])
    return " ".join(words)


def ordinal(n: int) -> str:
    """1 -> 'first', 22 -> 'twenty second', 40 -> 'fortieth'."""
    *head, last = cardinal(n).split()
    if last in _ORDINAL_LAST:
        last = _ORDINAL_LAST[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return " ".join([*head, last])


def year(n: int) -> str:
    """1999 -> 'nineteen ninety nine', 1905 -> 'nineteen oh five', 2000-2009 and others -> cardinal."""
    if not 1100 <= n <= 9999 or 2000 <= n <= 2009:
        return cardinal(n)
    high, low = divmod(n, 100)
    if low == 0:
        return f"{cardinal(high)} hundred"
    return f"{cardinal(high)} {'oh ' if low < 10 else ''}{cardinal(low)}"


def _digit_words(digits: str) -> str:
    return " ".join(_ONES[int(d)] for d in digits)


def read_cardinal(text: str, _: str = "") -> str:
    match = re.fullmatch(r"([+-]?)(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?", text.strip())
    if match is None or int(match[2].replace(",", "")) > _MAX_CARDINAL:
        raise ValueError(f"'{text}' is not a number; send digits such as 1234, -5 or 3.14 (under 10^15)")
    words = cardinal(int(match[2].replace(",", "")))
    if match[1] == "-":
        words = f"minus {words}"
    return f"{words} point {_digit_words(match[3])}" if match[3] else words


def read_ordinal(text: str, _: str = "") -> str:
    match = re.fullmatch(r"(\d{1,15})(?:st|nd|rd|th)?", text.strip().lower())
    if match is None:
        raise ValueError(f"'{text}' is not an ordinal; send digits such as 3 or 3rd")
    return ordinal(int(match[1]))


def read_digits(text: str, _: str = "") -> str:
    if not re.fullmatch(r"[\d\s-]*\d[\d\s-]*", text):
        raise ValueError(f"'{text}' is not a run of digits; send digits only, such as 0042")
    return _digit_words(re.sub(r"\D", "", text))


def spell(text: str, _: str = "") -> str:
    """Letters by name, digits as words, a few symbols by name; anything else is skipped."""
    words = [_LETTERS.get(c) or _SYMBOLS.get(c) or (_ONES[int(c)] if c in "0123456789" else "") for c in text.lower()]
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
        return _MONTHS[int(field) - 1]
    for name in _MONTHS:
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
    groups = [_digit_words(g) for g in re.findall(r"\d+", text)]
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
