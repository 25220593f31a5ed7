"""Sizes as radiance prints them, to MiB and back.

MiB is the unit of record. A printed size keeps its resolution (half a unit of its last
digit), so a figure read off "2.01 GiB" is known to +-5.12 MiB and comparisons can say
whether two figures disagree beyond rounding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal, InvalidOperation

from radiance_mcp.core.errors import LedgerError

UNIT_MIB: dict[str, Decimal] = {
    "B": Decimal(1) / Decimal(1 << 20),
    "KiB": Decimal(1) / Decimal(1024),
    "MiB": Decimal(1),
    "GiB": Decimal(1024),
    "TiB": Decimal(1024 * 1024),
}

NUMBER = r"(?<![\d,.])(?>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
r"""A number as radiance prints it: thousands separators optional, decimals optional.

Linear in a search: it starts only where no digit, separator or point precedes (so a run of
digits is tried once, not from each of its digits) and the group is atomic (never given back).
A plain `\d+` searched through a 16,000-digit run costs 10 s; this costs a scan of the run.
"""
SIZE = rf"{NUMBER}\s*+[A-Za-z]++"
"""A size: a number and a unit word (validated by parse_size, so a wrong unit is named)."""
_SIZE_RE = re.compile(rf"^\s*(?P<num>{NUMBER})\s*(?P<unit>[A-Za-z]+)\s*$", re.ASCII)
"""ASCII digits only (re.ASCII), as the engine prints them: '２,100.00 MiB' is no size."""


@dataclass(frozen=True)
class Size:
    """A size read from the ledger: exact MiB of the printed figure, and its resolution."""

    mib: Decimal
    resolution_mib: Decimal
    text: str

    def agrees_with(self, other_mib: Decimal) -> bool:
        """True when other_mib rounds to the printed figure (within half its last digit)."""
        return abs(self.mib - other_mib) <= self.resolution_mib / 2


MAX_INTEGER_DIGITS = 15
MAX_DECIMAL_DIGITS = 12
"""Beyond these a figure is not a size any card or pool has: refused, so the arithmetic stays exact."""


def parse_number(text: str) -> Decimal:
    """'29,120' -> Decimal('29120'); raises LedgerError naming the text."""
    cleaned = text.strip().replace(",", "")
    shown = repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text)} characters)"
    if not re.fullmatch(NUMBER, text.strip(), re.ASCII):
        raise LedgerError(f"malformed number {shown}: expected ASCII digits 0-9, optional ',' thousands and decimals")
    whole, _, decimals = cleaned.partition(".")
    if len(whole.lstrip("0")) > MAX_INTEGER_DIGITS or len(decimals) > MAX_DECIMAL_DIGITS:
        raise LedgerError(
            f"implausible number {shown}: more than {MAX_INTEGER_DIGITS} digits before the point or "
            f"{MAX_DECIMAL_DIGITS} after it; no ledger figure is that large or that fine"
        )
    try:
        return Decimal(cleaned)
    except InvalidOperation as exc:  # pragma: no cover - the pattern above admits only digits
        raise LedgerError(f"malformed number {text!r}") from exc


def parse_size(text: str) -> Size:
    """'2.01 GiB' -> Size(mib=2058.24, resolution 10.24 MiB). Units: B, KiB, MiB, GiB, TiB."""
    match = _SIZE_RE.match(text)
    if not match:
        raise LedgerError(f"malformed size {text!r}: expected a number and a unit such as '2.01 GiB'")
    unit = match["unit"]
    if unit not in UNIT_MIB:
        raise LedgerError(f"unknown unit {unit!r} in {text!r}: expected one of {', '.join(UNIT_MIB)}")
    number = parse_number(match["num"])
    exponent = number.as_tuple().exponent
    assert isinstance(exponent, int)
    step = Decimal(1).scaleb(exponent)
    return Size(mib=number * UNIT_MIB[unit], resolution_mib=step * UNIT_MIB[unit], text=text.strip())


def round_down(value: Decimal) -> int:
    """Round down to whole MiB (a ceiling is never rounded up)."""
    return int(value.to_integral_value(rounding=ROUND_FLOOR))


def fmt_mib(value: Decimal | float | int, places: int = 0) -> str:
    """A figure as every text writes it (MiB, bytes, tokens alike): thousands separated, a whole number bare and a
    fraction to `places` decimals. 29120 -> '29,120'; places=2: 1986.2168 -> '1,986.22', 2048.00 -> '2,048'
    (never '2,048.00' in one sentence and '2,048' in the next); places=0 rounds to the whole number. A float is
    read as it prints (its repr, as the JSON beside the text gives it), not as its binary expansion."""
    # rounded first: 1,849.996 is '1,850', not '1,850.00'
    number = round(Decimal(str(value) if isinstance(value, float) else value), places)
    if number == number.to_integral_value():
        number, places = abs(number) if number.is_zero() else number, 0  # -0.001 is '0', never '-0'
    return f"{number:,.{places}f}"


def fmt_gib(value_mib: Decimal | float | int) -> str:
    """Display only: 2058.24 -> '2.01 GiB'."""
    return f"{Decimal(value_mib) / 1024:,.2f} GiB"
