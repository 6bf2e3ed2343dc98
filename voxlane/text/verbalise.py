"""English text verbalised before phonemes: numbers, money, dates, times, units, phone numbers, web
addresses and common abbreviations written out the way people say them (espeak-ng alone reads "$5.50" as
"dollar five point five zero" and "Ms." as "M S").

:data:`RULES` is an ordered table; :func:`verbalise` applies each rule to the whole text in turn, so a rule
sees only what earlier rules left as written (web addresses go first, so their digits and dots are never
read as numbers; plain cardinals go last). Each rule's function shows what it does in its docstring.

Choices a reader could make otherwise:
- Dates with slashes are read only with a four-digit year (1/2 could be a fraction). The order is the one
  that makes a valid date: 15/03/2024 is day first, 03/15/2024 month first; when both would do (03/04/2024)
  it is month first, the en_US voice's reading. Every date is said "March fourth, twenty twenty-four",
  except one written day first in words ("4 March 2024": "the fourth of March, twenty twenty-four").
- A four-digit number is read as a year only where it reads as one: after "in", "since", "of" and the like,
  in a date, a range of years or a decade ("the 1990s"); elsewhere it is a cardinal ("1999 people").
- AM and PM are written in capitals: espeak spells those out, while "a m" would be read "uh m".
- A phone number is read digit by digit, its groups separated by commas (a short pause each). Seven digits
  as 555-1234 are a phone number after a word such as "call", "dial" or "phone", or when a group starts
  with 0 or neither group is a multiple of ten; otherwise a range ("500-1000": "five hundred to one
  thousand").
- A unit before one of the nouns of ``ATTRIBUTIVE_HEADS`` is singular, as people say it ("a 5 km run": "a
  five kilometer run"); before anything else it is plural ("ran 5 km today").

Pure functions on strings; no rule raises on any input, and text with nothing to verbalise comes back as it was.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from voxlane.text.numbers import LARGEST, MONTHS, cardinal, digits, number, ordinal, year


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    replace: Callable[[re.Match[str]], str]
    needs_digit: bool = True
    """Skipped for text without digits (no rule writes one), so plain prose costs only the address rules."""


_NUM = r"\d{1,3}(?:,\d{3})+|\d+"
"""A whole number, thousands separators allowed (1,234,567)."""
_DEC = rf"(?:{_NUM})(?:\.\d+)?"
_START = r"(?<![\w.,])"
"""A number starts here: not inside a word, a version string (1.2.3) or a longer number."""
_END = r"(?![\w]|[.,]\d)"
_MONTH_NAMES = {m.lower(): m for m in MONTHS} | {m[:3].lower(): m for m in MONTHS} | {"sept": "September"}
_MONTH = r"(?:" + "|".join(MONTHS) + r"|(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?)"
_SAY = {".": " dot ", "/": " slash ", ":": " colon ", "-": " dash ", "_": " underscore ", "@": " at "}
_SAY |= {"?": " question mark ", "=": " equals ", "&": " and ", "#": " hash ", "+": " plus ", "~": " tilde "}


def _say_address(text: str) -> str:
    spoken = []
    for piece in re.split(r"([./:\-_@?=&#+~])", text):
        if piece in _SAY:
            spoken.append(_SAY[piece])
        elif piece.lower() == "www":
            spoken.append("w w w")
        elif piece:
            spoken.append(" ".join(digits(p) if p.isdigit() else p for p in re.split(r"(\d+)", piece) if p))
    return " ".join("".join(spoken).split())


def _url(m: re.Match[str]) -> str:
    """Reads "https://www.example.com/docs" as "w w w dot example dot com slash docs" (the scheme is not said)."""
    return _say_address(re.sub(r"^[a-z]+://", "", m[0], flags=re.IGNORECASE).rstrip("/"))


def _email(m: re.Match[str]) -> str:
    """Reads "jane.doe@example.org" as "jane dot doe at example dot org"."""
    return _say_address(m[0])


def _phone(m: re.Match[str]) -> str:
    """Reads "(555) 123-4567" as "five five five, one two three, four five six seven"; "+44 20 7946 0958" as
    "plus four four, two zero, seven nine four six, zero nine five eight"."""
    groups = ", ".join(digits(g) for g in re.findall(r"\d+", m[0]))
    return ("plus " if m[0].startswith("+") else "") + groups


_PHONE_WORDS = re.compile(
    r"(?i:\b(?:call|calls|called|calling|dial|phone|telephone|tel|text|fax|ring|reach|contact|number|no|ext)"
    r"\b[.:]?(?:\s+(?:me|us|him|her|them|on|at))*\s*)$"
)
"""Words just before seven digits (searched in the 30 characters before them) that make them a phone number."""


def _local_phone(m: re.Match[str]) -> str:
    """Reads "Call 555-1234" and "555-0199" as "five five five, one two three four"; leaves a range such as
    "500-1000" to the range rule."""
    if (
        _PHONE_WORDS.search(m.string, max(0, m.start() - 30), m.start())
        or "0" in (m[1][0], m[2][0])
        or (int(m[1]) % 10 and int(m[2]) % 10)
    ):
        return f"{digits(m[1])}, {digits(m[2])}"
    return m[0]


def _date(month: int | str, day: int, year_text: str | None, day_first: bool = False) -> str:
    name = MONTHS[month - 1] if isinstance(month, int) else _MONTH_NAMES[month.rstrip(".").lower()]
    said = f"the {ordinal(day)} of {name}" if day_first else f"{name} {ordinal(day)}"
    return f"{said}, {year(int(year_text))}" if year_text else said


def _iso_date(m: re.Match[str]) -> str:
    """Reads "2024-03-15" as "March fifteenth, twenty twenty-four"."""
    return _date(int(m[2]), int(m[3]), m[1])


def _slash_date(m: re.Match[str]) -> str:
    """Reads "15/03/2024" as "March fifteenth, twenty twenty-four"; "03/04/2024" as "March fourth, ..." (month
    first when both orders would do); "13/14/2024" is no date and stays as written."""
    first, second = int(m[1]), int(m[2])
    if 1 <= first <= 12 and 1 <= second <= 31:
        return _date(first, second, m[3])
    if 1 <= second <= 12 and 1 <= first <= 31:
        return _date(second, first, m[3])
    return m[0]


def _month_day(m: re.Match[str]) -> str:
    """Reads "March 15, 2024" as "March fifteenth, twenty twenty-four"; "Jan. 2nd" as "January second"."""
    return _date(m[1], int(m[2]), m[3]) if 1 <= int(m[2]) <= 31 else m[0]


def _day_month(m: re.Match[str]) -> str:
    """Reads "15 March 2024" as "the fifteenth of March, twenty twenty-four"."""
    return _date(m[2], int(m[1]), m[3], day_first=True) if 1 <= int(m[1]) <= 31 else m[0]


def _time(m: re.Match[str]) -> str:
    """Reads "3:30 pm" as "three thirty PM", "14:05" as "fourteen oh five", "9:00" as "nine o'clock",
    "14:00" as "fourteen hundred", "3pm" as "three PM"."""
    hour, minute = int(m[1]), int(m[2] or 0)
    meridiem = f" {m[3].upper()}M" if m[3] else ""
    if minute == 0:
        said = cardinal(hour) + (meridiem or (" hundred" if hour > 12 or m[1].startswith("0") else " o'clock"))
        return said.strip()
    minutes = f"oh {cardinal(minute)}" if minute < 10 else cardinal(minute)
    return f"{cardinal(hour)} {minutes}{meridiem}"


_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "£": ("pound", "pounds", "penny", "pence")}
_CURRENCIES |= {"€": ("euro", "euros", "cent", "cents"), "¥": ("yen", "yen", "sen", "sen")}
_SCALE_WORDS = {"k": "thousand", "m": "million", "mn": "million", "b": "billion", "bn": "billion"}


def _money(m: re.Match[str]) -> str:
    """Reads "$5" as "five dollars", "$1" as "one dollar", "$5.50" as "five dollars and fifty cents",
    "$0.99" as "ninety-nine cents", "£3" as "three pounds", "€1.2 million" as "one point two million euros",
    "$5k" as "five thousand dollars"."""
    one, many, sub_one, sub_many = _CURRENCIES[m[1]]
    whole, fraction, scale = m[2].replace(",", ""), m[3], m[4]
    if scale:
        scale = _SCALE_WORDS.get(scale.lower(), scale.lower())
        return f"{number(whole + ('.' + fraction if fraction else ''))} {scale} {many}"
    if fraction and len(fraction) != 2:
        return f"{number(whole + '.' + fraction)} {many}"
    said = [f"{number(whole)} {one if whole == '1' else many}"] if whole.strip("0") or not fraction else []
    if fraction and fraction.strip("0"):
        said.append(f"{cardinal(int(fraction))} {sub_one if fraction == '01' else sub_many}")
    return " and ".join(said) if said else f"zero {many}"


def _percent(m: re.Match[str]) -> str:
    """Reads "50%" as "fifty percent", "-2.5 %" as "minus two point five percent"."""
    return f"{number(m[1])} percent"


_UNITS = {
    "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "m": ("meter", "meters"),
    "mi": ("mile", "miles"),
    "ft": ("foot", "feet"),
    "kg": ("kilogram", "kilograms"),
    "g": ("gram", "grams"),
    "mg": ("milligram", "milligrams"),
    "lb": ("pound", "pounds"),
    "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"),
    "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "L": ("liter", "liters"),
    "ms": ("millisecond", "milliseconds"),
    "s": ("second", "seconds"),
    "min": ("minute", "minutes"),
    "h": ("hour", "hours"),
    "hr": ("hour", "hours"),
    "hrs": ("hour", "hours"),
    "KB": ("kilobyte", "kilobytes"),
    "kB": ("kilobyte", "kilobytes"),
    "MB": ("megabyte", "megabytes"),
    "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"),
    "Mbps": ("megabit per second", "megabits per second"),
    "Gbps": ("gigabit per second", "gigabits per second"),
    "Hz": ("hertz", "hertz"),
    "kHz": ("kilohertz", "kilohertz"),
    "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"),
    "W": ("watt", "watts"),
    "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"),
    "V": ("volt", "volts"),
    "mph": ("mile per hour", "miles per hour"),
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
}
_LETTER_UNITS = frozenset(u for u in _UNITS if len(u) == 1 and u.isalpha())
"""Units of one letter need a space before them: "20s" is an age or a decade, "5 s" five seconds."""
_UNIT = "|".join(re.escape(u) for u in sorted(set(_UNITS) - _LETTER_UNITS, key=len, reverse=True))
_LETTER_UNIT = "|".join(sorted(_LETTER_UNITS))


_ATTRIBUTIVE = (
    "run race walk hike ride trip drive swim loop course route trail journey commute radius limit zone stretch "
    "file download upload disk card plan bag sack box bottle pack dose pill tablet battery bulb motor heater "
    "panel weight cable rope pipe board screen display lens gap margin increase drop rise"
)
ATTRIBUTIVE_HEADS = frozenset(_ATTRIBUTIVE.split())
"""Nouns that a measure before them describes ("a 5 km run", "a 100 MB file"): the unit is then singular."""
_NEXT_WORD = re.compile(r"[ \t]+([a-z]+)\b")


def _unit(m: re.Match[str]) -> str:
    """Reads "5 km" as "five kilometers", "1 kg" as "one kilogram", "3 ms" as "three milliseconds",
    "100 MB" as "one hundred megabytes", "20°C" as "twenty degrees Celsius", "a 5 km run" as "a five
    kilometer run"."""
    one, many = _UNITS[m[2].strip()]
    head = _NEXT_WORD.match(m.string, m.end())
    singular = m[1] == "1" or (head is not None and head[1] in ATTRIBUTIVE_HEADS)
    return f"{number(m[1])} {one if singular else many}"


_LONGEST = len(str(LARGEST))
_AFTER_BETWEEN = re.compile(r"\bbetween\s+$", re.IGNORECASE)


def _ordinal(m: re.Match[str]) -> str:
    """Reads "1st" as "first", "22nd" as "twenty-second", "1,000th" as "one thousandth"."""
    written = m[1].replace(",", "")
    return ordinal(int(written)) if len(written) <= _LONGEST else m[0]


def _decade(m: re.Match[str]) -> str:
    """Reads "the 1990s" as "the nineteen nineties", "the '80s" as "the eighties", "1900s" as "nineteen
    hundreds"."""
    said = year(int(m[1])) if m[1][0].isdigit() else cardinal(int(m[1][1:]))
    return said[:-1] + "ies" if said.endswith("y") else said + "s"


def _to(m: re.Match[str]) -> str:
    """The word between the ends of a range: "and" after "between", else "to"."""
    return "and" if _AFTER_BETWEEN.search(m.string, max(0, m.start() - 9), m.start()) else "to"


def _year_range(m: re.Match[str]) -> str:
    """Reads "1990-1995" as "nineteen ninety to nineteen ninety-five" (a later second year only),
    "between 2019-2021" as "between twenty nineteen and twenty twenty-one"."""
    if int(m[2]) <= int(m[1]):
        return m[0]
    return f"{year(int(m[1]))} {_to(m)} {year(int(m[2]))}"


def _year(m: re.Match[str]) -> str:
    """Reads "in 1999" as "in nineteen ninety-nine", "since 2005" as "since two thousand five",
    "by 2024" as "by twenty twenty-four", "May 2010" as "May twenty ten", "1066 AD" as "ten sixty-six AD"."""
    if m["bc"]:
        return m[0].replace(m["bc"], year(int(m["bc"])))
    return year(int(m["year"])) if _YEAR_CONTEXT.search(m.string, max(0, m.start() - 12), m.start()) else m[0]


def _range(m: re.Match[str]) -> str:
    """Reads "5-10" as "five to ten", "2.5-3" as "two point five to three", "between 5-10" as "between five
    and ten"."""
    return f"{number(m[1])} {_to(m)} {number(m[2])}"


def _number(m: re.Match[str]) -> str:
    """Reads "1,234" as "one thousand two hundred thirty-four", "-7" as "minus seven", "3.14" as "three
    point one four"."""
    return number(m[0])


_ABBREVIATIONS = {
    "Dr.": "Doctor",
    "Mr.": "Mister",
    "Mrs.": "Missus",
    "Ms.": "Miz",
    "Prof.": "Professor",
    "Jr.": "Junior",
    "Sr.": "Senior",
    "Mt.": "Mount",
    "Ave.": "Avenue",
    "approx.": "approximately",
    "e.g.": "for example",
    "i.e.": "that is",
    "vs.": "versus",
    "vs": "versus",
    "etc.": "et cetera",
}
_MAY_END_A_SENTENCE = frozenset({"etc.", "Jr.", "Sr.", "Ave.", "St.", "approx."})
_SENTENCE_GOES_ON = re.compile(r"\s*[,;:]|\s+[a-z]")


def _abbreviation(m: re.Match[str]) -> str:
    """Reads "Dr. Smith" as "Doctor Smith", "e.g." as "for example", "St. Paul" as "Saint Paul",
    "Main St." as "Main Street", "No. 5" as "number 5"; the dot stays where it also ends a sentence."""
    word = m[0]
    if word == "St.":
        said = "Saint" if re.match(r"\s+[A-Z]", m.string[m.end() :]) else "Street"
    elif word == "No.":
        return "number"
    else:
        said = _ABBREVIATIONS[word]
    ends_sentence = word in _MAY_END_A_SENTENCE and not _SENTENCE_GOES_ON.match(m.string, m.end())
    return said + "." if ends_sentence and said != "Saint" else said


def _rule(
    name: str, pattern: str, replace: Callable[[re.Match[str]], str], flags: int = 0, needs_digit: bool = True
) -> Rule:
    return Rule(name, re.compile(pattern, flags), replace, needs_digit)


_M = r"(?:\.m\.(?=\s+[a-z])|\.m(?=\.)|m\b)"
"""The m of am/pm: "p.m." keeps its last dot where it may end a sentence."""
_TLD = r"(?:com|org|net|io|dev|edu|gov|co\.uk|ai|app)"
_ABBR = "|".join(re.escape(a) for a in sorted(_ABBREVIATIONS, key=len, reverse=True))
_YEAR_WORDS = (
    r"in|since|by|from|to|until|till|of|during|before|after|around|circa|year|spring|summer|autumn|fall|winter|"
    + _MONTH
)
_YEAR_CONTEXT = re.compile(rf"(?i:\b(?:{_YEAR_WORDS})\s+)$")
"""The words before a four-digit number that make it a year (searched in the 12 characters before it)."""

RULES: tuple[Rule, ...] = (
    _rule("url", r"\b(?:https?://|www\.)[^\s<>\"']+?(?=[.,;:!?)\]]*(?:\s|$))", _url, re.IGNORECASE, needs_digit=False),
    _rule("email", r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b", _email, needs_digit=False),
    _rule(
        "domain",
        rf"(?<![\w.-])[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.{_TLD}\b(?:/[\w/-]*\w)?",
        _url,
        re.IGNORECASE,
        needs_digit=False,
    ),
    _rule("abbreviation", rf"(?<![\w.])(?:{_ABBR}|St\.(?!\w)|No\.(?=\s?\d))(?!\w)", _abbreviation, needs_digit=False),
    _rule(
        "phone",
        r"(?<![\w+])(?:(?:\+1[ .-]?)?(?:\(\d{3}\) ?|\d{3}[.-])\d{3}[.-]\d{4}|\+\d{1,3}(?:[ .-]\d{1,4}){2,5})(?![\w-])",
        _phone,
    ),
    _rule("local_phone", r"(?<![\w+.,-])(\d{3})-(\d{4})(?![\w-]|[.,]\d)", _local_phone),
    _rule("iso_date", r"\b(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])\b", _iso_date),
    _rule("slash_date", r"(?<![\d/])(\d{1,2})/(\d{1,2})/(\d{4})(?![\d/])", _slash_date),
    _rule("month_day", rf"\b({_MONTH}) (\d{{1,2}})(?:st|nd|rd|th)?\b(?:,? (\d{{4}})\b)?", _month_day),
    _rule("day_month", rf"\b(\d{{1,2}})(?:st|nd|rd|th)? ({_MONTH})(?:,? (\d{{4}})\b)?", _day_month),
    _rule("time", rf"\b([01]?\d|2[0-3]):([0-5]\d)(?:\s?([ap]){_M})?", _time, re.IGNORECASE),
    _rule("clock", rf"\b(1[0-2]|0?[1-9])()\s?([ap]){_M}", _time, re.IGNORECASE),
    _rule("money", rf"([$£€¥])({_NUM})(?:\.(\d+))?(?:\s?(thousand|million|billion|trillion|[kKmMbB]n?)\b)?", _money),
    _rule("percent", rf"{_START}(-?{_DEC})\s?%", _percent),
    _rule("decade", r"(?<![\w.,])(1\d{2}0|20\d0|['’][1-9]0)s\b", _decade),
    _rule("unit", rf"{_START}(-?{_DEC})(\s?(?:{_UNIT})|\s(?:{_LETTER_UNIT}))(?![\w°/])", _unit),
    _rule("ordinal", rf"{_START}({_NUM})(?:st|nd|rd|th)\b", _ordinal),
    _rule("year_range", r"(?<![\w.,-])(1\d{3}|20\d{2})[-–](1\d{3}|20\d{2})(?![\w-])", _year_range),
    _rule("year", r"(?<![\w.,])(?P<year>1\d{3}|20\d{2})\b(?![.,]\d)|\b(?P<bc>\d{3,4}) (?:AD|BC)\b", _year),
    _rule("range", rf"(?<![\w.,-])({_DEC})[-–]({_DEC}){_END}(?!-)", _range),
    _rule("number", rf"(?:(?<![\w-])-)?{_START}{_DEC}{_END}", _number),
)


def verbalise(text: str) -> str:
    """``text`` with every rule of :data:`RULES` applied in order."""
    has_digit = any(c.isdigit() for c in text)
    for rule in RULES:
        if has_digit or not rule.needs_digit:
            text = rule.pattern.sub(rule.replace, text)
    return text
