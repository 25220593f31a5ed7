"""Numbers as people write them: the one place the eval reads a figure from words.

Pure: text in, quantities out. ``quantities(text)`` reads every figure of a text with its
sign, unit and place, after ``normalise`` has written it the one way the rest reads:

- a thousands separator may be a comma, a thin space (U+2009), a narrow no-break space
  (U+202F) or a no-break space (U+00A0): ``30,969``, ``30 969``; a plain space separates two
  figures (``card 1 209 MiB`` is 1 and 209);
- a minus may be typographic (U+2212 and the dashes U+2012, U+2013 before a digit);
- a fall is a negative change: ``fell 3.15 %``, ``dropped by 3.15 %``, ``a drop of 3.15 %`` read -3.15, and so
  does a share said to be lower after it: ``3.15 % lower`` (``down``, ``less``, ``slower``, ``smaller``, ``fewer``);
- a small count may be a word: ``backs two sequences`` reads 2 (zero to twelve);
- the unit after a figure is read (``MiB``, ``GiB``, ``KiB``, ``B``, ``%``, ``t/s``, ``tokens``,
  ``sequences``), and memory converts (``convert``: 1 GiB = 1,024 MiB), never matched as a string.

A figure glued to a word (``x2``, ``v3.1``) is no figure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from radiance_mcp.core.units import UNIT_MIB

SEPARATORS = ",\u2009\u202f\u00a0"
"""What people put between groups of three digits."""
_MINUS = re.compile(r"[\u2212\u2012\u2013](?=\d)")
WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
         "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
"""Small counts people write in words."""
_WORD = re.compile(r"\b(" + "|".join(WORDS) + r")\b", re.IGNORECASE)
_FALL = re.compile(r"\b(?:fell|fall(?:s|en)?|dropped|drops?|decrease[sd]?|declined?|declines|shrank|down|lower)"
                   r"(?: by| of)? *$", re.IGNORECASE)
"""Words before a figure that make it a fall: 'fell 3.15 %' and 'a drop of 3.15 %' are -3.15."""
_LOWER = re.compile(r" *(?:lower|down|less|slower|smaller|fewer)\b", re.IGNORECASE)
"""Words after a share that make it a fall: '3.15 % lower' is -3.15."""
_NUMBER = re.compile(
    r"(?<![\w.])([-+]?)(\d{1,3}(?:[" + SEPARATORS + r"]\d{3})+(?:\.\d+)?(?!\d)|\d+(?:\.\d+)?)(?![\w])"
    r"(?:[ \u2009\u202f\u00a0]?(MiB|GiB|KiB|B|%|t/s|tokens?|sequences?|sequence\(s\)|seqs|seats?)(?![\w]))?"
)
UNITS = {"MiB": "MiB", "GiB": "GiB", "KiB": "KiB", "B": "B", "%": "%", "t/s": "t/s", "token": "tokens",
         "tokens": "tokens", "sequence": "seqs", "sequences": "seqs", "sequence(s)": "seqs", "seqs": "seqs",
         "seat": "seqs", "seats": "seqs"}
"""A unit as written -> the unit it is (models.answer.Unit's names)."""
MIB_PER = {unit: float(UNIT_MIB[unit]) for unit in ("B", "KiB", "MiB", "GiB")}
"""Memory units in MiB, the unit of record (core.units' sizes, those an answer writes)."""


@dataclass(frozen=True)
class Quantity:
    """A figure the text states: its value (signed), its unit (None: none written), where it is."""

    value: float
    unit: str | None
    decimals: int
    """Digits after the point, as written: the precision a conversion keeps."""
    start: int
    end: int
    written: str


def normalise(text: str) -> str:
    """The text with typographic minus signs as '-' and small counts in words as digits."""
    text = _MINUS.sub("-", text)
    return _WORD.sub(lambda m: str(WORDS[m.group(1).lower()]), text)


def quantities(text: str) -> list[Quantity]:
    """Every figure the (normalised) text states, in order."""
    found = []
    for match in _NUMBER.finditer(text):
        sign, digits, unit = match.group(1), match.group(2), match.group(3)
        value = float(re.sub(f"[{SEPARATORS}]", "", digits))
        falls = _FALL.search(text[max(0, match.start() - 20):match.start()]) or (
            unit == "%" and _LOWER.match(text, match.end()))
        if sign == "-" or (not sign and falls):
            value = -value
        decimals = len(digits.partition(".")[2])
        found.append(Quantity(value, UNITS.get(unit) if unit else None, decimals, match.start(), match.end(),
                              match.group(0)))
    return found


def numbers_in(text: str) -> list[float]:
    """Every figure's value, in order."""
    return [q.value for q in quantities(normalise(text))]


def read_figure(text: str) -> tuple[float, str | None] | None:
    """The first figure of a short text ('10.65 GiB', '1024') with its unit, or None."""
    found = quantities(normalise(text))
    return (found[0].value, found[0].unit) if found else None


def dimension(unit: str | None) -> str:
    """What a unit measures: memory, a share, a rate, or a count (tokens, seqs, count; a fact without a unit)."""
    if unit in MIB_PER:
        return "memory"
    return unit if unit in ("%", "t/s") else "count"


def convert(value: float, unit: str | None, to: str | None) -> float | None:
    """value in unit as a figure in ``to``; None when they measure different things.

    A figure without a unit is read in ``to``, as a person reads 'ceiling 30,969' of a ceiling in MiB.
    """
    if unit is None or unit == to:
        return value
    if unit in MIB_PER and to in MIB_PER:
        return value * MIB_PER[unit] / MIB_PER[to]
    return value if dimension(unit) == dimension(to) == "count" else None


def slack(unit: str | None, to: str | None, decimals: int) -> float:
    """What rounding to the written decimals allows once converted: half the last place, in ``to``.

    Nothing in the fact's own unit (30,969 states 30,969); 30.24 GiB covers 30.235-30.245 GiB, +-5.12 MiB.
    """
    converted = convert(0.5 * 10 ** -decimals, unit, to)
    return 0.0 if unit is None or unit == to or converted is None else abs(converted)
