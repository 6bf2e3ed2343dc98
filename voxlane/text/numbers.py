"""English number words, written out: cardinals, ordinals, years, decimals and digit strings.

American style (no "and" after hundred), as the bundled en_US voice would be read aloud. Pure functions;
every one takes digits as a string or an int and never raises on digits.
"""

from __future__ import annotations

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
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (1000, "thousand"))
_ORDINAL_WORDS = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}
MONTHS = [
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
LARGEST = 10**15 - 1
"""Above this, a number is read digit by digit: nobody says "four quadrillion"."""


def _below_thousand(n: int) -> str:
    hundreds, rest = divmod(n, 100)
    words = [f"{_ONES[hundreds]} hundred"] if hundreds else []
    if rest >= 20:
        tens, ones = divmod(rest, 10)
        words.append(_TENS[tens] + (f"-{_ONES[ones]}" if ones else ""))
    elif rest or not hundreds:
        words.append(_ONES[rest])
    return " ".join(words)


def cardinal(n: int) -> str:
    """1234 -> "one thousand two hundred thirty-four"; -5 -> "minus five"; past :data:`LARGEST`, digits."""
    if n < 0:
        return "minus " + cardinal(-n)
    if n > LARGEST:
        return digits(str(n))
    words = []
    for scale, name in _SCALES:
        count, n = divmod(n, scale)
        if count:
            words.append(f"{_below_thousand(count)} {name}")
    if n or not words:
        words.append(_below_thousand(n))
    return " ".join(words)


def ordinal(n: int) -> str:
    """22 -> "twenty-second", 100 -> "one hundredth", 11 -> "eleventh"."""
    words = cardinal(n)
    head, sep, last = words.rpartition(" ") if "-" not in words.rsplit(" ", 1)[-1] else words.rpartition("-")
    if last in _ORDINAL_WORDS:
        last = _ORDINAL_WORDS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return head + sep + last


def year(n: int) -> str:
    """1999 -> "nineteen ninety-nine", 1905 -> "nineteen oh five", 1900 -> "nineteen hundred",
    2005 -> "two thousand five", 2024 -> "twenty twenty-four", 1066 -> "ten sixty-six"; 1000, 2000 and
    numbers outside 1000-9999 as plain cardinals."""
    if not 1000 <= n <= 9999 or 2000 <= n <= 2009 or n % 1000 == 0:
        return cardinal(n)
    high, low = divmod(n, 100)
    if low == 0:
        return f"{cardinal(high)} hundred"
    if low < 10:
        return f"{cardinal(high)} oh {cardinal(low)}"
    return f"{cardinal(high)} {cardinal(low)}"


def digits(text: str) -> str:
    """Reads "4075" as "four zero seven five": each digit on its own; anything else in ``text`` is dropped."""
    return " ".join(_ONES[int(c)] for c in text if c in "0123456789")


def number(text: str) -> str:
    """A written number, thousands separators allowed: "1,234" -> "one thousand two hundred thirty-four",
    "3.14" -> "three point one four", "-2" -> "minus two", "007" -> "zero zero seven"."""
    sign = "minus " if text.startswith("-") else ""
    text = text.lstrip("-+").replace(",", "")
    whole, _, fraction = text.partition(".")
    if (len(whole) > 1 and whole.startswith("0")) or len(whole) > len(str(LARGEST)) or not whole.isdigit():
        spoken = digits(whole)
    else:
        spoken = cardinal(int(whole))
    if fraction:
        spoken = (spoken + " point " + digits(fraction)).strip()
    return sign + spoken if spoken else text
