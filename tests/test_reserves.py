"""Reserve semantics, provenance, impossible boots and refused boots on the pure core (issue 9).

Every figure radiance prints either may back a reserve (the unclaimed row less its card's
floor) or is refused with its own reason; the arithmetic never takes a figure it cannot
honour. Expected values are the procedures': ceiling 29,120 + (2,058 - 209) = 30,969 MiB/card.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest
from guard_ledgers import REFUSED, REFUSED_LINES, TP2, TP2_LINE, TWO_BOOTS, TWO_BOOTS_REFUSAL_LINES, prefixed

from radiance_mcp.core.audit.step_shape import read_shape
from radiance_mcp.core.boot import Boot
from radiance_mcp.core.errors import BootNotSettled, GuardRailError, InputError, LedgerError
from radiance_mcp.core.ledger import PHRASES, read_text
from radiance_mcp.core.rules.capacity import (
    REFUSALS,
    Reserve,
    compute_ceiling,
    read_budget,
    reserve_candidates,
    trace_reserve,
)
from radiance_mcp.sources import ledger_file

USER_FACING_BANNED = re.compile(r"PHRASES|ledger\.py|radiance_mcp/|PHRASEBOOK|\bseeds?\b|adapt that")


def reading_of(text: str, boot: int = -1):  # type: ignore[no-untyped-def]
    return read_budget(read_text(text, source="t.log", boot=boot))


def trace(text: str, mib: str, line: int | None, personal: bool = False, label: str = "r") -> Reserve:
    return trace_reserve(reading_of(text), Decimal(mib), label, line, personal)


# ---------------------------------------------------------------------------------------
# What may back a reserve


def test_every_size_the_phrase_table_reads_is_marked() -> None:
    """One home: each size group of each phrase says whether it can back a reserve (checked at import too)."""
    for phrase in PHRASES.values():
        for group, mark in phrase.reserve.items():
            assert mark.kind in {*REFUSALS, "may serve"}, (phrase.key, group)
    serving = [(p.key, g) for p in PHRASES.values() for g, m in p.reserve.items() if m.kind == "may serve"]
    assert serving == [("unclaimed", "size")]


def test_the_unclaimed_row_less_the_floor_is_the_only_candidate(example_text: str) -> None:
    (candidate,) = reserve_candidates(reading_of(example_text))
    # 477.30 MiB unclaimed - 209.19 MiB floor = 268.11 MiB (the floor is already out of the ceiling)
    assert (candidate.card, candidate.line.number, candidate.mib) == (0, 18, Decimal("268.11"))
    assert "477.30 MiB unclaimed less the 209.19 MiB engine floor (line 26)" == candidate.printed


def test_a_traced_reserve_lowers_the_gate(example_text: str) -> None:
    reading = reading_of(example_text)
    reserve = trace_reserve(reading, Decimal("268.11"), "unusable", 18, personal=False)
    assert (reserve.card, reserve.line and reserve.line.number) == (0, 18)
    ceiling = compute_ceiling(reading, (reserve,))
    # 30,969 - 268.11 = 30,700.89 -> 30,700; the ceiling itself stays the engine's
    assert (ceiling.ceiling_mib, ceiling.max_pair_mib, ceiling.warnings) == (30_969, 30_700, ())


# (figure in MiB, line of the example ledger, what it is, the reason it cannot back a reserve)
EXAMPLE_REFUSALS = [
    ("96", 26, "--gpu-headroom-mib, part of the engine floor", "already in the engine floor"),
    ("96", 11, "--gpu-headroom-mib, part of the engine floor", "already in the engine floor"),  # the echoed flag
    ("113.19", 26, "the static region, part of the engine floor", "already in the engine floor"),
    ("209.19", 26, "the engine floor", "already in the engine floor"),
    ("2058.24", 26, "the settled free memory", "the ceiling is built from it"),  # 2.01 GiB
    ("2060", 26, "the settled free memory", "the ceiling is built from it"),  # 2.01 GiB is +-5.12 MiB
    ("504", 12, "the activation arena", "charged to the card before claimable"),
    ("24000", 9, "--vram-weights-mib, a member of the pair", "part of the pair"),
    ("5120", 10, "--vram-kv-mib, a member of the pair", "part of the pair"),
    ("24002.56", 16, "vram_weights, a member of the pair", "part of the pair"),  # 23.44 GiB
    ("5120", 17, "vram_kv, a member of the pair", "part of the pair"),
    ("5120", 23, "the KV cache the boot funded", "part of the pair"),
    ("1792", 22, "the KV memory the ledger mover lends", "part of the pair"),  # 1.75 GiB
    ("32624.64", 15, "the card total", "a total of the card"),  # 31.86 GiB
    ("31610.88", 13, "claimable", "a total of the card"),  # 30.87 GiB
    ("29122.56", 19, "the VRAM budgets total", "a total of the card"),  # 28.44 GiB
    ("3502.08", 19, "what the budgets leave of the card", "a total of the card"),  # 3.42 GiB
    ("7580", 5, "--host-pool-mib, the pinned host pool", "host RAM or disk"),
    ("10455.04", 20, "the weights in the host pool", "host RAM or disk"),  # 10.21 GiB
]


@pytest.mark.parametrize(("mib", "line", "what", "reason"), EXAMPLE_REFUSALS)
def test_a_figure_the_ceiling_already_counts_is_refused_with_its_reason(
    mib: str, line: int, what: str, reason: str, example_text: str
) -> None:
    with pytest.raises(GuardRailError) as caught:
        trace(example_text, mib, line)
    message = str(caught.value)
    assert f"line {line} holds it as {what}" in message
    assert reason in message and "Remedy: " in message
    # the next step is obvious: the one figure that may serve, and the personal route
    assert "line 18 (card 0): mib=268.11" in message and "personal=true" in message
    assert not USER_FACING_BANNED.search(message)


def test_the_whole_unclaimed_row_counts_the_floor_twice(example_text: str) -> None:
    with pytest.raises(GuardRailError, match=r"line 18 holds it as the unclaimed row \(477.30 MiB\), which counts "
                                             r"the engine floor .* mib=268.11"):
        trace(example_text, "477.30", 18)


@pytest.mark.parametrize(
    ("mib", "line", "message"),
    [
        ("330", None, r"neither traced nor labelled: cite the line of this boot "
                      r"\(t\.log \(boot 1 of 1, lines 1-27\)\)"),
        ("330", 26, r"line 26 \('W card 0 settled at .*'\) does not hold 330 MiB "
                    r"\(it holds 2.01 GiB = 2,058.24 MiB"),
        ("330", 27, r"line 27 \('I serving on 0.0.0.0:8000'\) does not hold 330 MiB \(it holds no size\)"),
        ("330", 999, r"line 999 is outside the boot read \(t\.log \(boot 1 of 1, lines 1-27\)\)"),
        ("100", 18, r"line 18 .* does not hold 100 MiB"),  # a part of a candidate is not traced
    ],
)
def test_untraced_reserves_are_refused_and_list_the_candidates(
    mib: str, line: int | None, message: str, example_text: str
) -> None:
    with pytest.raises(GuardRailError, match=message) as caught:
        trace(example_text, mib, line)
    assert "line 18 (card 0): mib=268.11" in str(caught.value)


def test_a_refusal_quotes_a_long_line_of_many_sizes_in_part(example_text: str) -> None:
    """A hostile ledger line of 56 KB and 8,000 sizes: the refusal stays a few hundred characters."""
    settled = next(line for line in example_text.splitlines() if "settled at" in line)
    text = example_text.replace(settled, settled + " 7 MiB," * 8_000)
    with pytest.raises(GuardRailError) as caught:
        trace(text, "330", 26)
    message = str(caught.value)
    assert "(it holds 2.01 GiB = 2,058.24 MiB, 209.19 MiB = 209.19 MiB" in message
    assert "and 7,996 more)" in message  # the line's 4 figures and 8,000 added: 8 shown
    assert f"({settled[:80]}" in message.replace("'", "") and "...')" in message
    assert len(message) < 2_000


def test_a_line_without_a_phrase_inside_the_boot_is_refused(example_text: str) -> None:
    text = example_text.replace("I serving on", "I some chatter\nI serving on")
    with pytest.raises(GuardRailError, match=r"line 27 holds no ledger phrase of t\.log"):
        trace(text, "330", 27)


def test_a_line_of_another_boot_is_outside_the_boot_read() -> None:
    """The multi-boot log: boot 1 (lines 1-18) settled; citing its unclaimed row against boot 2 is refused."""
    reading = read_budget(read_text(TWO_BOOTS, source="t.log", boot=-2))
    assert [c.line.number for c in reserve_candidates(reading)] == [15]
    boot1_reserve = trace_reserve(reading, Decimal("268.11"), "unusable", 15, personal=False)
    assert boot1_reserve.line is not None
    with pytest.raises(GuardRailError, match=r"line 33 is outside the boot read \(t\.log \(boot 1 of 2, lines 1-18"):
        trace_reserve(reading, Decimal("268.11"), "unusable", 33, personal=False)


def test_a_candidate_backs_one_reserve_once(example_text: str) -> None:
    reading = reading_of(example_text)
    first = trace_reserve(reading, Decimal("268.11"), "a", 18, personal=False)
    with pytest.raises(GuardRailError, match=r"line 18's figure already backs reserve 'a'"):
        trace_reserve(reading, Decimal("268.11"), "b", 18, personal=False, taken=(first,))


def test_two_cards_each_reserve_holds_its_own_card() -> None:
    """tp=2, journald prefixes, tabs: card 1 binds (30,710); a reserve on card 0 leaves card 1's bound alone."""
    reading = reading_of(TP2)
    candidates = reserve_candidates(reading)
    unclaimed_0 = TP2_LINE["I\tunclaimed\t477.30 MiB\tthe headroom, the unusable above, rounding"]
    unclaimed_1 = TP2_LINE["I\tunclaimed\t520.00 MiB\tthe headroom, the unusable above, rounding"]
    assert (unclaimed_0, unclaimed_1) == (16, 21)
    # card 0: 477.30 - 209.19 = 268.11; card 1: 520.00 - 209.19 = 310.81
    assert [(c.card, c.line.number, c.mib) for c in candidates] == [
        (0, unclaimed_0, Decimal("268.11")), (1, unclaimed_1, Decimal("310.81"))]
    on_0 = trace_reserve(reading, Decimal("268.11"), "card 0", unclaimed_0, personal=False)
    ceiling = compute_ceiling(reading, (on_0,))
    # card 0: 30,969 - 268.11 = 30,700.89 -> 30,700; card 1 untouched: 30,710 binds the gate
    assert [c.max_pair_mib for c in ceiling.cards] == [30_700, 30_710]
    assert (ceiling.binding_card, ceiling.ceiling_mib, ceiling.max_pair_mib) == (1, 30_710, 30_700)
    on_1 = trace_reserve(reading, Decimal("310.81"), "card 1", unclaimed_1, personal=False)
    # card 1: its ceiling 30,710 (rounded down first) - 310.81 = 30,399.19 -> 30,399
    assert compute_ceiling(reading, (on_0, on_1)).max_pair_mib == 30_399
    with pytest.raises(GuardRailError, match=r"holds it as the VRAM|the expert prefetch, lent out of the KV cache"):
        trace_reserve(reading, Decimal("1597.44"), "prefetch", 23, personal=False)  # 1.56 GiB


# ---------------------------------------------------------------------------------------
# Arithmetic that never gives garbage


@pytest.mark.parametrize(
    ("mib", "error", "message"),
    [
        ("Infinity", InputError, r"mib=Infinity is not a finite number of MiB"),
        ("NaN", InputError, r"mib=NaN is not a finite number of MiB"),
        ("-1", InputError, r"mib=-1 is negative"),
        # 1e9 MiB > the 30,969 MiB ceiling: the old output was max_pair_mib -999,969,031
        ("1E+9", GuardRailError, r"reserve 'p' of 1,000,000,000 MiB is larger than card 0's ceiling of 30,969 MiB"),
        ("1E+308", GuardRailError, r"reserve 'p' of 1\.000E\+308 MiB is larger than card 0's ceiling"),
        ("30970", GuardRailError, r"larger than card 0's ceiling of 30,969 MiB \(29,120 \+ \(2,058 - 209\)"),
    ],
)
def test_absurd_reserves_are_refused(mib: str, error: type[Exception], message: str, example_text: str) -> None:
    reading = reading_of(example_text)
    with pytest.raises(error, match=message):
        compute_ceiling(reading, (trace_reserve(reading, Decimal(mib), "p", None, personal=True),))


def test_reserves_leaving_the_max_pair_below_zero_are_refused(example_text: str) -> None:
    reading = reading_of(example_text)
    reserves = (trace_reserve(reading, Decimal(20_000), "a", None, personal=True),
                trace_reserve(reading, Decimal(11_000), "b", None, personal=True))
    # 30,969 - 31,000 = -31
    with pytest.raises(GuardRailError, match=r"hold back 31,000 MiB on card 0, more than its ceiling of 30,969 MiB.*"
                                             r"max_pair_mib would be -31"):
        compute_ceiling(reading, reserves)


def test_a_max_pair_below_the_current_pair_is_a_warning(example_text: str) -> None:
    reading = reading_of(example_text)
    ceiling = compute_ceiling(reading, (trace_reserve(reading, Decimal(2_000), "second model", None, personal=True),))
    # 30,969 - 2,000 = 28,969, which is 151 MiB below the 29,120 pair that runs now
    assert ceiling.max_pair_mib == 28_969
    assert ceiling.warnings == (
        "max_pair_mib 28,969 is below card 0's current pair of 29,120 MiB by 151 MiB: a gate at this bound "
        "fails the pair that runs now; shrink the pair by that much, or drop a reserve",
    )


# ---------------------------------------------------------------------------------------
# Boots no card can print


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # 40.00 GiB free on a 31.86 GiB card
        ("settled at 2.01 GiB free", "settled at 40.00 GiB free",
         r"t\.log .*:26: card 0 settled at 40.00 GiB free, more than the card total of 31.86 GiB \(line 15\)"),
        # 3.00 GiB free with the 29,120 pair: 3,072 + 29,120 = 32,192 <= 32,624.64 is fine; 4.00 GiB is not
        ("settled at 2.01 GiB free", "settled at 4.00 GiB free",
         r":26: card 0 settled at 4.00 GiB free with a pair of 29,120 MiB \(lines 9, 10\) allocated: "
         r"33,216 MiB, more than the card total of 31.86 GiB"),
        # a pair of 24,000 + 50,000 MiB on a 31.86 GiB card
        ("--vram-kv-mib             5120", "--vram-kv-mib             50000",
         r"card 0's pair of 74,000 MiB \(lines 9, 10\) is more than the card total of 31.86 GiB \(line 15\)"),
        # 96.00 + 113.19 = 209.19, not 309.19
        ("against 209.19 MiB", "against 309.19 MiB",
         r":26: card 0's floor of 309.19 MiB is not its 96.00 MiB headroom plus 113.19 MiB static region "
         r"\(209.19 MiB\)"),
        ("vram_kv              5.00 GiB", "vram_kv             -5.00 GiB",
         r":17: 'vram_kv' with a negative size, which no card has"),
        ("settled at 2.01 GiB free", "settled at -2.01 GiB free", r"line 26 holds 'settled at' but not as"),
    ],
)
def test_impossible_boots_are_refused_naming_the_line(old: str, new: str, message: str, example_text: str) -> None:
    assert old in example_text
    with pytest.raises(LedgerError, match=message) as caught:
        reading_of(example_text.replace(old, new))
    assert not USER_FACING_BANNED.search(str(caught.value))


# ---------------------------------------------------------------------------------------
# Refused and unsettled boots are findings


def test_a_refused_boot_is_a_finding_with_its_lines_and_the_next_tool() -> None:
    with pytest.raises(BootNotSettled) as caught:
        reading_of(REFUSED)
    error = caught.value
    assert (error.status, error.lines) == ("refused", (17, 18, 19))
    message = str(error)
    assert message.startswith("t.log (boot 1 of 1, lines 1-19): this boot refused to start (line 17: ")
    assert "0% backing of the 8 x 32768 worst case: 0.0 full-length sessions" in message
    assert "line 19: '2026-11-30T04:12:18.512345678+00:00 E startup stopped: out of memory'" in message
    assert "audit_step_shape (this boot as the candidate" in message
    assert not USER_FACING_BANNED.search(message)


def test_the_newest_boot_refused_after_a_wider_step() -> None:
    with pytest.raises(BootNotSettled) as caught:
        reading_of(TWO_BOOTS)
    assert caught.value.lines == TWO_BOOTS_REFUSAL_LINES == (35, 36, 37)
    assert "audit_step_shape (on this ledger, proven_boot=-2 and candidate_boot=-1)" in str(caught.value)
    assert "read the ceiling from a boot that settled (boot=-2, if it served)" in str(caught.value)
    assert compute_ceiling(reading_of(TWO_BOOTS, boot=-2)).ceiling_mib == 30_969


def test_a_kv_refusal_without_its_startup_stopped_line_is_still_refused() -> None:
    """The log was cut after the kv cache line: 0.0 full-length sessions and no settled line is a refusal."""
    cut = prefixed("{s}s ", REFUSED_LINES[:17])
    state = read_text(cut, source="t.log").state
    assert (state.status, [line.number for line in state.lines]) == ("refused", [17])
    assert read_shape(read_text(cut, source="t.log")).status == "refused"  # the audit agrees


def test_a_boot_still_starting_is_unsettled_not_a_reader_bug() -> None:
    starting = prefixed("", REFUSED_LINES[:15])
    with pytest.raises(BootNotSettled, match=r"no 'card N settled at X free against F' line and no refusal, so it "
                                             r"has no ceiling. Next: it has not settled yet") as caught:
        reading_of(starting)
    assert caught.value.status == "unsettled"


def test_caller_text_is_unverified_by_default(example_text: str) -> None:
    assert read_text(example_text, source="log_text").origin == "caller text"
    assert Boot.__dataclass_fields__["origin"].default == "caller text"


def test_a_malformed_settled_line_is_named_from_a_file_too(example_text: str, tmp_path: Path) -> None:
    """The streaming file reader keeps the near miss as read_text does."""
    path = tmp_path / "neg.log"
    path.write_text(example_text.replace("settled at 2.01 GiB free", "settled at -2.01 GiB free"), encoding="utf-8")
    with pytest.raises(BootNotSettled, match=r"line 26 holds 'settled at' but not as .*-2\.01 GiB free"):
        read_budget(ledger_file.read_file(path, source=str(path)))
