"""The attack on issues 9 and 10 replayed at the MCP boundary (the SDK's client, in memory) and the CLI.

Each test failed before its fix: a second settled line or budget row for one card was taken
silently (the first won); a settled floor that contradicts the echoed --gpu-headroom-mib was
accepted; Unicode digits read as ASCII figures; JSON booleans passed as ints and strings as
booleans; a boundary probe was planned against a service whose newest boot refused; a serve
script that sources an unreadable file refused the whole check.
"""

from __future__ import annotations

from typing import Any

import pytest
from guard_ledgers import SETTLED_LINES
from mcp import Client

from radiance_mcp.config import Fleet
from radiance_mcp.runtime import Runtime
from radiance_mcp.server import build_server

SETTLED_AT = next(n for n, line in enumerate(SETTLED_LINES) if "settled at" in line)


def ledger(lines: list[str]) -> str:
    """Lines in a style of their own: a syslog-ish prefix and a trailing blank."""
    return "".join(f"<6>gpu7 radiance: {line} \n" for line in lines)


async def ceiling(lines: list[str]) -> tuple[bool, Any]:
    async with Client(build_server(Runtime(Fleet()))) as client:
        result = await client.call_tool("compute_ceiling", {"log_text": ledger(lines)})
    if result.is_error:
        return True, " ".join(getattr(block, "text", "") for block in result.content)
    return False, result.structured_content


async def test_the_unaltered_ledger_reads_30969() -> None:
    error, out = await ceiling(SETTLED_LINES)
    assert not error and out["ceiling_mib"] == 30969, out


# ---------------------------------------------------------------------------------------
# 1. One figure printed twice in one boot is ambiguous: refused naming both lines

SPOOF = "W card 0 settled at 2.20 GiB free against 209.19 MiB"


@pytest.mark.parametrize("before", [True, False], ids=["spoof-first", "spoof-after"])
async def test_a_second_settled_line_for_one_card_is_refused_naming_both(before: bool) -> None:
    at = SETTLED_AT if before else SETTLED_AT + 1
    lines = SETTLED_LINES[:at] + [SPOOF] + SETTLED_LINES[at:]
    error, text = await ceiling(lines)
    real, spoof = (SETTLED_AT + 2, SETTLED_AT + 1) if before else (SETTLED_AT + 1, SETTLED_AT + 2)
    assert error, text
    assert "printed twice" in text and f"line {min(real, spoof)}" in text and f"line {max(real, spoof)}" in text
    assert "2.20 GiB" in text and "2.01 GiB" in text


@pytest.mark.parametrize(("row", "extra"), [
    ("unclaimed", "I   unclaimed   3.90 GiB   the headroom, the unusable above, rounding"),
    ("vram_kv", "I   vram_kv   4.00 GiB   stated by --vram-kv-mib"),
    ("vram_weights", "I   vram_weights   20.00 GiB   stated by --vram-weights-mib"),
])
async def test_a_budget_row_printed_twice_for_one_card_is_refused(row: str, extra: str) -> None:
    at = next(n for n, line in enumerate(SETTLED_LINES) if row in line and "stated by" not in line.split(row)[0])
    lines = SETTLED_LINES[: at + 1] + [extra] + SETTLED_LINES[at + 1:]
    error, text = await ceiling(lines)
    assert error and "printed twice" in text and f"line {at + 1}" in text and f"line {at + 2}" in text, text


async def test_a_card_total_printed_twice_under_one_header_is_refused() -> None:
    at = next(n for n, line in enumerate(SETTLED_LINES) if "card total" in line)
    lines = SETTLED_LINES[:at] + ["I VRAM budget, card 0", SETTLED_LINES[at], "I   card total   40.00 GiB"] + \
        SETTLED_LINES[at + 1:]
    error, text = await ceiling(lines)
    assert error and "'card total' row is printed twice" in text, text


async def test_a_pair_flag_echoed_twice_with_two_values_is_refused() -> None:
    at = next(n for n, line in enumerate(SETTLED_LINES) if "--vram-kv-mib" in line)
    lines = SETTLED_LINES[: at + 1] + ["I   --vram-kv-mib    9000"] + SETTLED_LINES[at + 1:]
    error, text = await ceiling(lines)
    assert error and "--vram-kv-mib with two values" in text and f"line {at + 2}" in text, text


async def test_a_flag_echoed_twice_with_one_value_still_reads() -> None:
    at = next(n for n, line in enumerate(SETTLED_LINES) if "--vram-kv-mib" in line)
    lines = SETTLED_LINES[: at + 1] + ["I   --vram-kv-mib    5,120"] + SETTLED_LINES[at + 1:]
    error, out = await ceiling(lines)
    assert not error and out["ceiling_mib"] == 30969, out


# ---------------------------------------------------------------------------------------
# 2. The settled floor cannot contradict the echoed --gpu-headroom-mib

HEADROOM_LINE = next(n for n, line in enumerate(SETTLED_LINES) if "--gpu-headroom-mib" in line) + 1


@pytest.mark.parametrize("settled", [
    "W card 0 settled at 2.01 GiB free against 1.00 MiB (the 0.50 MiB --gpu-headroom-mib and 0.50 MiB kept for "
    "the static region)",
    "W card 0 settled at 2.01 GiB free against 1.00 MiB",
], ids=["parts", "no-parts"])
async def test_a_floor_that_contradicts_the_echoed_headroom_is_refused(settled: str) -> None:
    lines = SETTLED_LINES[:SETTLED_AT] + [settled] + SETTLED_LINES[SETTLED_AT + 1:]
    error, text = await ceiling(lines)
    assert error, text
    assert f"line {HEADROOM_LINE}" in text and f":{SETTLED_AT + 1}:" in text and "--gpu-headroom-mib" in text


async def test_a_floor_without_parts_above_the_headroom_still_reads() -> None:
    lines = SETTLED_LINES[:SETTLED_AT] + ["W card 0 settled at 2.01 GiB free against 209.19 MiB"] + \
        SETTLED_LINES[SETTLED_AT + 1:]
    error, out = await ceiling(lines)
    assert not error and out["ceiling_mib"] == 30969, out
