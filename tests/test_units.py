"""units: sizes as radiance prints them, to MiB (the unit of record) and back."""

from __future__ import annotations

from decimal import Decimal

import pytest

from radiance_mcp.core.errors import LedgerError
from radiance_mcp.core.units import fmt_gib, fmt_mib, parse_number, parse_size, round_down


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("29,120", Decimal(29_120)),  # thousands separator dropped
        ("29120", Decimal(29_120)),  # no separator
        ("2,058.24", Decimal("2058.24")),  # separator and decimals
        ("1,234,567", Decimal(1_234_567)),  # several groups
        ("0", Decimal(0)),
        (" 96 ", Decimal(96)),  # blanks around are tolerated
        ("209.19", Decimal("209.19")),
        ("999,999,999,999,999", Decimal(999_999_999_999_999)),  # 15 digits: the most a figure may have
        ("0.123456789012", Decimal("0.123456789012")),  # 12 decimals: the finest a figure may be
    ],
)
def test_parse_number(text: str, expected: Decimal) -> None:
    assert parse_number(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",  # nothing
        "abc",  # no digits
        "1,2345",  # a group of four digits
        "12,34",  # a group of two digits (a decimal comma is not a thousands separator)
        "2..01",  # two points
        "-5",  # a size is never negative
        "1e3",  # no exponents in the ledger
        "1 000",  # blank as separator
        ",120",  # separator first
        "5.",  # point without decimals
        "9" * 40,  # 40 digits: no card holds that many MiB (and Decimal would round it)
        "1" + "0" * 15,  # 16 digits before the point
        "0.1234567890123",  # 13 decimals
    ],
)
def test_parse_number_refuses_malformed(text: str) -> None:
    with pytest.raises(LedgerError, match="number"):
        parse_number(text)


@pytest.mark.parametrize(
    ("text", "mib", "resolution_mib"),
    [
        ("2.01 GiB", Decimal("2058.24"), Decimal("10.24")),  # 2.01 x 1024 = 2,058.24; 0.01 GiB = 10.24 MiB
        ("209.19 MiB", Decimal("209.19"), Decimal("0.01")),  # MiB is the unit of record
        ("29,120 MiB", Decimal(29_120), Decimal(1)),  # thousands separator; whole MiB
        ("31.86 GiB", Decimal("32624.64"), Decimal("10.24")),  # 31.86 x 1024
        ("5.00 GiB", Decimal(5_120), Decimal("10.24")),  # 5 x 1024, decimals kept in the resolution
        ("5 GiB", Decimal(5_120), Decimal(1_024)),  # no decimals: known to the GiB
        ("512 KiB", Decimal("0.5"), Decimal(1) / 1024),  # 512 / 1024
        ("1,048,576 B", Decimal(1), Decimal(1) / (1 << 20)),  # 2^20 B = 1 MiB
        ("0 B", Decimal(0), Decimal(1) / (1 << 20)),  # 'container-on-disk 0 B'
        ("1 TiB", Decimal(1 << 20), Decimal(1 << 20)),  # 1,024 x 1,024
        ("477.30MiB", Decimal("477.30"), Decimal("0.01")),  # no blank before the unit
        ("  96.00   MiB ", Decimal(96), Decimal("0.01")),  # runs of blanks
    ],
)
def test_parse_size(text: str, mib: Decimal, resolution_mib: Decimal) -> None:
    size = parse_size(text)
    assert size.mib == mib
    assert size.resolution_mib == resolution_mib
    assert size.text == text.strip()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("5.00 XiB", "unknown unit 'XiB'"),  # not a unit radiance prints
        ("5.00 GB", "unknown unit 'GB'"),  # decimal units are ambiguous: refused, not converted
        ("5.00 gib", "unknown unit 'gib'"),  # case matters
        ("5.00", "malformed size"),  # no unit
        ("GiB", "malformed size"),  # no number
        ("5,00 GiB", "malformed"),  # decimal comma
        ("2..01 GiB", "malformed size"),
        ("-2.01 GiB", "malformed size"),
    ],
)
def test_parse_size_refuses(text: str, message: str) -> None:
    with pytest.raises(LedgerError, match=message):
        parse_size(text)


@pytest.mark.parametrize(
    ("printed", "other_mib", "agrees"),
    [
        ("23.44 GiB", Decimal(24_000), True),  # 23.44 GiB = 24,002.56 MiB; |24,000 - 24,002.56| = 2.56 <= 5.12
        ("23.44 GiB", Decimal(24_100), False),  # |24,100 - 24,002.56| = 97.44 > 5.12
        ("5.00 GiB", Decimal(5_120), True),  # exact
        ("5.00 GiB", Decimal("5125.12"), True),  # exactly half a step (5.12) still rounds to 5.00
        ("5.00 GiB", Decimal("5125.13"), False),  # just past half a step
        ("209.19 MiB", Decimal("209.194"), True),  # within 0.005
    ],
)
def test_size_agrees_with_within_half_its_last_digit(printed: str, other_mib: Decimal, agrees: bool) -> None:
    assert parse_size(printed).agrees_with(other_mib) is agrees


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Decimal("30969.05"), 30_969),  # 29,120 + (2,058.24 - 209.19) = 30,969.05 -> 30,969
        (Decimal("30969.99"), 30_969),  # a ceiling is never rounded up
        (Decimal(30_969), 30_969),
        (Decimal("-0.5"), -1),  # floor, not truncation
    ],
)
def test_round_down(value: Decimal, expected: int) -> None:
    assert round_down(value) == expected


@pytest.mark.parametrize(
    ("value", "places", "expected"),
    [
        (29_120, 0, "29,120"),
        (Decimal("1986.22265625"), 2, "1,986.22"),  # 200,000 x 7,488 B = 1,428.22 MiB + 110 + 448
        (Decimal("6063.5078125"), 2, "6,063.51"),  # bf16 2 x 200,000
        # a whole figure is bare in every text: '2,048' beside '2,048.00' was one figure written two ways
        (3_200, 2, "3,200"),
        (Decimal("2048.00"), 2, "2,048"),  # 2.00 GiB as a Decimal of MiB keeps the GiB line's places
        (Decimal("131072.00"), 2, "131,072"),  # 2,048.00 MiB x 1,048,576 B / 16,384 tokens, bytes per token
        (Decimal("0.5"), 2, "0.50"),
        (Decimal("1849.6"), 0, "1,850"),  # places=0 rounds
        (Decimal("1849.996"), 2, "1,850"),  # whole once rounded to its places: never '1,850.00'
        (8191.9999999, 2, "8,192"),  # a float's arithmetic a hair off a whole MiB (the picture's labels)
        (2.675, 2, "2.68"),  # a float as it prints (its binary expansion is 2.67499...: '2.67')
        (Decimal("-0.001"), 2, "0"),  # no '-0'
        (Decimal("-42.784"), 2, "-42.78"),
    ],
)
def test_fmt_mib(value: Decimal | int, places: int, expected: str) -> None:
    assert fmt_mib(value, places) == expected


@pytest.mark.parametrize(
    ("mib", "expected"),
    [
        (Decimal("2058.24"), "2.01 GiB"),  # 2,058.24 / 1,024
        (Decimal("32624.64"), "31.86 GiB"),
        (504, "0.49 GiB"),  # 504 / 1,024 = 0.492
    ],
)
def test_fmt_gib(mib: Decimal | int, expected: str) -> None:
    assert fmt_gib(mib) == expected
