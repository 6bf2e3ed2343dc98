"""The verbaliser's rules, one table row per behaviour: text as written -> text as a person says it."""

from __future__ import annotations

import random

import pytest

from voxlane.text.normalise import normalise
from voxlane.text.numbers import cardinal, number, ordinal, year
from voxlane.text.verbalise import RULES, verbalise

CASES = {
    "url": [
        ("See https://www.example.com/docs.", "See w w w dot example dot com slash docs."),
        (
            "Go to http://example.org/a-b_c?x=1 now",
            "Go to example dot org slash a dash b underscore c question mark x equals one now",
        ),
    ],
    "email": [
        ("Write to jane.doe@example.org today.", "Write to jane dot doe at example dot org today."),
        ("ops+alerts@mail.example.com", "ops plus alerts at mail dot example dot com"),
    ],
    "domain": [("It is on voxlane.dev now.", "It is on voxlane dot dev now.")],
    "abbreviation": [
        ("Dr. Smith met Mr. Jones and Mrs. Brown.", "Doctor Smith met Mister Jones and Missus Brown."),
        ("Ms. Green and Prof. White", "Miz Green and Professor White"),
        ("Walk down Main St. to St. Paul's.", "Walk down Main Street to Saint Paul's."),
        ("Fruit, e.g. apples, i.e. red ones.", "Fruit, for example apples, that is red ones."),
        ("Cats vs. dogs and cats vs dogs.", "Cats versus dogs and cats versus dogs."),
        ("Pens, pencils, etc. are here.", "Pens, pencils, et cetera are here."),
        ("Pens, pencils, etc. Then more.", "Pens, pencils, et cetera. Then more."),
        ("He lives on Main St.", "He lives on Main Street."),
        ("It was No. 5.", "It was number five."),
    ],
    "phone": [
        ("Call (555) 123-4567 now.", "Call five five five, one two three, four five six seven now."),
        ("Call 555-123-4567.", "Call five five five, one two three, four five six seven."),
        ("Dial +44 20 7946 0958.", "Dial plus four four, two zero, seven nine four six, zero nine five eight."),
    ],
    "local_phone": [
        ("Call 555-1234 now.", "Call five five five, one two three four now."),
        ("Reach us at 500-1000.", "Reach us at five zero zero, one zero zero zero."),
        ("It is 555-0199.", "It is five five five, zero one nine nine."),
        ("It is 234-5678.", "It is two three four, five six seven eight."),
        ("Seats 500-1000 people.", "Seats five hundred to one thousand people."),
        ("Pages 250-1205.", "Pages two hundred fifty to one thousand two hundred five."),
    ],
    "iso_date": [("Due 2024-03-15.", "Due March fifteenth, twenty twenty-four.")],
    "slash_date": [
        ("On 15/03/2024 we met.", "On March fifteenth, twenty twenty-four we met."),
        ("On 03/04/2024 we met.", "On March fourth, twenty twenty-four we met."),
        ("On 12/25/2024 we met.", "On December twenty-fifth, twenty twenty-four we met."),
    ],
    "month_day": [
        ("On March 15, 2024 it rained.", "On March fifteenth, twenty twenty-four it rained."),
        ("Since Jan. 2nd we wait.", "Since January second we wait."),
    ],
    "day_month": [("Born 4 July 1776.", "Born the fourth of July, seventeen seventy-six.")],
    "time": [
        ("At 3:30 pm we eat.", "At three thirty PM we eat."),
        ("At 14:05 we leave.", "At fourteen oh five we leave."),
        ("At 9:00 we start.", "At nine o'clock we start."),
        ("At 14:00 we stop.", "At fourteen hundred we stop."),
        ("At 11:45 a.m. on Monday.", "At eleven forty-five AM on Monday."),
    ],
    "clock": [("Open at 7am and 10 p.m.", "Open at seven AM and ten PM.")],
    "money": [
        ("It costs $5.", "It costs five dollars."),
        ("It costs $1.", "It costs one dollar."),
        ("It costs $5.50.", "It costs five dollars and fifty cents."),
        ("It costs $0.99.", "It costs ninety-nine cents."),
        ("It costs $2.01.", "It costs two dollars and one cent."),
        ("It costs £3.", "It costs three pounds."),
        ("It costs €1.2 million.", "It costs one point two million euros."),
        ("It costs $5k.", "It costs five thousand dollars."),
        ("It costs $1,250.", "It costs one thousand two hundred fifty dollars."),
    ],
    "percent": [("Up 50% and down -2.5 %.", "Up fifty percent and down minus two point five percent.")],
    "decade": [("In the 1990s and the '80s.", "In the nineteen nineties and the eighties.")],
    "unit": [
        ("Run 5 km.", "Run five kilometers."),
        ("The 5 km run starts.", "The five kilometer run starts."),
        ("A 100 MB file and 100 MB of files.", "A one hundred megabyte file and one hundred megabytes of files."),
        ("We ran 5 km today.", "We ran five kilometers today."),
        ("Lift 10 kg or 1 kg.", "Lift ten kilograms or one kilogram."),
        ("Wait 3 ms.", "Wait three milliseconds."),
        ("Store 100 MB.", "Store one hundred megabytes."),
        ("It was 20°C and -5 °F.", "It was twenty degrees Celsius and minus five degrees Fahrenheit."),
        ("Drive 60 mph for 2 h.", "Drive sixty miles per hour for two hours."),
        ("I was in my 20s.", "I was in my 20s."),
    ],
    "ordinal": [("The 1st, 22nd and 101st.", "The first, twenty-second and one hundred first.")],
    "year_range": [
        ("From 1990-1995.", "From nineteen ninety to nineteen ninety-five."),
        ("Between 2019-2021.", "Between twenty nineteen and twenty twenty-one."),
    ],
    "year": [
        (
            "In 1999 and since 2005, by 2024.",
            "In nineteen ninety-nine and since two thousand five, by twenty twenty-four.",
        ),
        ("The summer of 1969.", "The summer of nineteen sixty-nine."),
        ("It dates from 1066.", "It dates from ten sixty-six."),
        ("From 1000 to 2000.", "From one thousand to two thousand."),
        ("It fell in 1066 AD.", "It fell in ten sixty-six AD."),
        ("We had 1999 people.", "We had one thousand nine hundred ninety-nine people."),
    ],
    "range": [
        ("Pages 5-10 and 2.5–3.", "Pages five to ten and two point five to three."),
        ("Between 5-10 guests.", "Between five and ten guests."),
    ],
    "number": [
        (
            "We had 1,234,567 visitors.",
            "We had one million two hundred thirty-four thousand five hundred sixty-seven visitors.",
        ),
        ("It is -7 and 3.14.", "It is minus seven and three point one four."),
        ("Agent 007 saw 0 cats.", "Agent zero zero seven saw zero cats."),
        ("Version 1.2.3, mp3, A4 and COVID-19.", "Version 1.2.3, mp3, A4 and COVID-nineteen."),
    ],
}


def test_every_rule_has_cases() -> None:
    assert {rule.name for rule in RULES} == set(CASES)


@pytest.mark.parametrize(
    ("written", "spoken"),
    [case for cases in CASES.values() for case in cases],
    ids=[f"{name}-{i}" for name, cases in CASES.items() for i in range(len(cases))],
)
def test_rule(written: str, spoken: str) -> None:
    assert normalise(written) == spoken


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "zero"),
        (13, "thirteen"),
        (40, "forty"),
        (99, "ninety-nine"),
        (101, "one hundred one"),
        (1000, "one thousand"),
        (20_019, "twenty thousand nineteen"),
        (3_000_000_005, "three billion five"),
    ],
)
def test_cardinal(n: int, words: str) -> None:
    assert cardinal(n) == words


@pytest.mark.parametrize(
    ("n", "words"),
    [(1, "first"), (2, "second"), (3, "third"), (5, "fifth"), (12, "twelfth"), (20, "twentieth"), (43, "forty-third")],
)
def test_ordinal(n: int, words: str) -> None:
    assert ordinal(n) == words


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (1999, "nineteen ninety-nine"),
        (1905, "nineteen oh five"),
        (1900, "nineteen hundred"),
        (2000, "two thousand"),
        (2005, "two thousand five"),
        (2010, "twenty ten"),
        (2024, "twenty twenty-four"),
    ],
)
def test_year(n: int, words: str) -> None:
    assert year(n) == words


def test_huge_numbers_are_read_digit_by_digit() -> None:
    assert number("12345678901234567890") == " ".join(["one two three four five six seven eight nine zero"] * 2)


@pytest.mark.parametrize(
    "text",
    [
        "The quick brown fox jumps over the lazy dog.",
        "Don't stop; it's fine, isn't it? Yes!",
        "May I see Mr Smith's notes at the station, sir?",
        "",
    ],
)
def test_text_with_nothing_to_verbalise_is_unchanged(text: str) -> None:
    assert verbalise(text) == text


def test_never_raises_on_random_text() -> None:
    rng = random.Random(1234)
    alphabet = "0123456789" * 4 + "$£€¥%°:/.,-–+@()'’ apmkgsMBCFhxst" + "ÿ\u00a0\n\t#?=&_"
    pieces = ["Dr.", "St.", "etc.", " in ", "www.", ".com", "http://", "March ", "AD", "1st", "1999", "e.g."]
    for _ in range(3000):
        text = "".join(
            rng.choice(pieces) if rng.random() < 0.1 else rng.choice(alphabet) for _ in range(rng.randint(0, 40))
        )
        assert isinstance(verbalise(text), str), text
        assert isinstance(normalise(text), str), text


@pytest.mark.parametrize(
    "text",
    [
        "1" * 5000,
        "1" * 5000 + "th",
        "$" + "1" * 5000,
        "1-" * 3000,
        "1." * 3000,
        "a." * 3000 + "com",
        "x@" + "a." * 3000,
    ],
    ids=["digits", "ordinal", "money", "dashes", "dots", "domain", "email"],
)
def test_long_runs_do_not_raise(text: str) -> None:
    assert isinstance(verbalise(text), str)
