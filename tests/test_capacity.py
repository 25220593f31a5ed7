"""capacity: the budget reading, the ceiling, reserves and the pool contract, against the seed's figures."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radiance_mcp.core.boot import Boot
from radiance_mcp.core.constants import DEFAULT_MODEL, WORKED_CEILING_MIB, WORKED_PAIR_MIB
from radiance_mcp.core.errors import (
    BootNotSettled,
    InputError,
    LedgerError,
    RadianceMCPError,
)
from radiance_mcp.core.ledger import read_text, render
from radiance_mcp.core.rules.capacity import (
    REFUSAL,
    card_ceiling,
    compute_ceiling,
    pool_contract,
    read_budget,
    trace_reserve,
)

Builder = Callable[..., str]
NO_PAIR_FLAGS = {"max-model-len": "200000", "max-num-seqs": "2", "kv-cache-dtype": "fp8", "tp": "1"}


def boot_of(text: str) -> Boot:
    return read_text(text, source="t.log")


# ---------------------------------------------------------------------------------------
# The ceiling


def test_worked_example(example_text: str) -> None:
    """The seed's worked example (dankserver, 2026-10-13), from the example ledger."""
    ceiling = compute_ceiling(read_budget(boot_of(example_text)))
    assert ceiling.ceiling_mib == WORKED_CEILING_MIB == 30_969
    assert ceiling.pair_mib == WORKED_PAIR_MIB == 29_120  # --vram-weights-mib 24,000 + --vram-kv-mib 5,120
    assert ceiling.headroom_mib == 1_849  # 30,969 - 29,120
    assert ceiling.max_pair_mib == 30_969  # no reserves
    assert [c.derivation for c in ceiling.cards] == ["29,120 + (2,058 - 209) = 30,969 MiB/card"]


@pytest.mark.parametrize(
    ("free_mib", "floor_mib", "pair_mib", "ceiling_mib", "derivation"),
    [
        # 29,120 + (2,058.24 - 209.19) = 30,969.05 -> 30,969; whole MiB add up: 29,120 + 1,849
        ("2058.24", "209.19", "29120", 30_969, "29,120 + (2,058 - 209) = 30,969 MiB/card"),
        # the pair from table rows, 23.44 + 5.00 GiB = 29,122.56: 29,122.56 + 1,849.05 = 30,971.61 -> 30,971;
        # whole MiB would say 29,123 + (2,058 - 209) = 30,972, so two decimals are shown
        ("2058.24", "209.19", "29122.56", 30_971,
         "29,122.56 + (2,058.24 - 209.19) = 30,971 MiB/card"),
        # 30,000 + (1,024 - 512) = 30,512, exact
        ("1024", "512", "30000", 30_512, "30,000 + (1,024 - 512) = 30,512 MiB/card"),
        # free below the floor: 29,120 + (200 - 209.19) = 29,110.81 -> 29,110 (the ceiling is under the pair)
        ("200", "209.19", "29120", 29_110, "29,120 + (200 - 209.19) = 29,110 MiB/card"),
        # 29,120 + (2,058.99 - 209.19) = 30,969.80 -> 30,969, never rounded up (whole MiB would say 30,970)
        ("2058.99", "209.19", "29120", 30_969, "29,120 + (2,058.99 - 209.19) = 30,969 MiB/card"),
    ],
)
def test_card_ceiling(free_mib: str, floor_mib: str, pair_mib: str, ceiling_mib: int, derivation: str) -> None:
    card = card_ceiling(0, Decimal(free_mib), Decimal(floor_mib), Decimal(pair_mib))
    assert (card.ceiling_mib, card.derivation) == (ceiling_mib, derivation)


def test_derivation_is_arithmetic_that_adds_up() -> None:
    """Whatever the places, the derivation's own figures give its result, rounded down."""
    for free, floor, pair in [("2058.24", "209.19", "29122.56"), ("2058.99", "209.19", "29120"), ("1.5", "0.5", "1")]:
        card = card_ceiling(0, Decimal(free), Decimal(floor), Decimal(pair))
        a, b, c, result = (Decimal(x.replace(",", "")) for x in re.findall(r"\d[\d,.]*", card.derivation))
        assert int(a + (b - c)) == result == card.ceiling_mib


def _card(free: str, **changes: str) -> dict[str, str]:
    card = {"total": "31.86 GiB", "weights": "23.44 GiB", "kv": "5.00 GiB", "unclaimed": "477.30 MiB",
            "budgets": "28.44 GiB", "unaccounted": "3.42 GiB", "free": free, "floor": "209.19 MiB",
            "headroom": "96.00 MiB", "static": "113.19 MiB"}
    return card | changes


@pytest.mark.parametrize(
    ("frees", "ceilings", "binding"),
    [
        # card 0: 29,120 + (2,058.24 - 209.19) = 30,969; card 1: 29,120 + (1,800 - 209.19) = 30,710.81 -> 30,710
        (("2.01 GiB", "1,800.00 MiB"), [30_969, 30_710], 1),
        # card 1 has more: 29,120 + (2,100 - 209.19) = 31,010.81 -> 31,010; card 0 binds
        (("2.01 GiB", "2,100.00 MiB"), [30_969, 31_010], 0),
        # equal ceilings: the lower card number is named
        (("2.01 GiB", "2.01 GiB"), [30_969, 30_969], 0),
    ],
)
def test_two_cards_smallest_ceiling_binds(
    frees: tuple[str, str], ceilings: list[int], binding: int, boot_text: Builder
) -> None:
    flags = {"tp": "2", "vram-weights-mib": "24000", "vram-kv-mib": "5120"}
    reading = read_budget(boot_of(boot_text(flags=flags, cards=[_card(f) for f in frees])))
    assert [c.card for c in reading.cards] == [0, 1]  # two tables, two settled lines
    assert [c.total_mib.line.number for c in reading.cards if c.total_mib] == [8, 14]  # each card's own table rows
    ceiling = compute_ceiling(reading)
    assert [c.ceiling_mib for c in ceiling.cards] == ceilings
    assert (ceiling.binding_card, ceiling.ceiling_mib) == (binding, min(ceilings))
    assert ceiling.headroom_mib == min(ceilings) - 29_120


def test_two_cards_without_headers_follow_the_table_order(boot_text: Builder) -> None:
    """No 'VRAM budget, card N' lines: the first 'card total' row starts card 0, the next card 1."""
    text = boot_text(flags=NO_PAIR_FLAGS, cards=[_card("2.01 GiB"), _card("2.01 GiB", weights="20.00 GiB")])
    reading = read_budget(boot_of("\n".join(line for line in text.splitlines() if "VRAM budget, card" not in line)))
    pairs = [c.require("pair").value for c in reading.cards]
    assert pairs == [Decimal("29122.56"), Decimal(25_600)]  # 20 x 1,024 + 5,120


def test_flags_not_echoed_pair_from_table_rows(boot_text: Builder) -> None:
    reading = read_budget(boot_of(boot_text(flags=NO_PAIR_FLAGS)))
    card = reading.cards[0]
    assert card.pair_source == "table rows"
    assert card.require("pair").value == Decimal("29122.56")  # 23.44 GiB + 5.00 GiB = 24,002.56 + 5,120
    assert [line.number for line in card.require("pair").lines] == [10, 11]  # the rows, below 4 flags (2-5), not flags
    assert compute_ceiling(reading).ceiling_mib == 30_971  # 29,122.56 + (2,058.24 - 209.19) = 30,971.61


def test_flags_echoed_pair_is_exact(example_text: str) -> None:
    card = read_budget(boot_of(example_text)).cards[0]
    assert (card.pair_source, card.require("pair").value) == ("echoed flags", Decimal(29_120))
    assert [line.number for line in card.require("pair").lines] == [9, 10]
    assert card.disagreements == ()


@pytest.mark.parametrize(
    ("weights_flag", "kv_flag", "disagreements"),
    [
        ("24000", "5120", []),  # 23.44 GiB = 24,002.56: |24,000 - 24,002.56| = 2.56 <= 5.12
        ("24007", "5125", []),  # 4.56 and 5.00 MiB off: inside half of 0.01 GiB (5.12 MiB)
        # |24,100 - 24,002.56| = 97.44 > 5.12
        ("24100", "5120", ["card 0: --vram-weights-mib 24,100 MiB (line 9) but the table's vram_weights row says "
                           "23.44 GiB = 24,002.56 MiB (line 16), beyond its rounding of +-5.12 MiB"]),
        # |6,144 - 5,120| = 1,024 > 5.12
        ("24000", "6144", ["card 0: --vram-kv-mib 6,144 MiB (line 10) but the table's vram_kv row says "
                           "5.00 GiB = 5,120 MiB (line 17), beyond its rounding of +-5.12 MiB"]),
    ],
)
def test_flag_and_table_disagreement(
    weights_flag: str, kv_flag: str, disagreements: list[str], example_text: str
) -> None:
    text = example_text.replace("24000", weights_flag).replace("5120\n", f"{kv_flag}\n")
    card = read_budget(boot_of(text)).cards[0]
    assert list(card.disagreements) == disagreements
    assert card.require("pair").value == Decimal(weights_flag) + Decimal(kv_flag)  # the flags stay the pair (exact)


# ---------------------------------------------------------------------------------------
# What the budget reading refuses


def _without(text: str, *words: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not any(w in line for w in words))


def test_no_settled_line_is_a_finding_not_a_reader_bug(example_text: str) -> None:
    """A serving boot without its settled line: the log was cut; nothing says to edit the reader."""
    with pytest.raises(BootNotSettled) as caught:
        read_budget(boot_of(_without(example_text, "settled at")))
    message = str(caught.value)
    assert message.startswith("t.log (boot 1 of 1, lines 1-26): this boot printed no 'card N settled at")
    assert "it serves (line 26)" in message and "complete boot log" in message and "audit_step_shape" in message
    assert caught.value.status == "unsettled"
    assert not re.search(r"PHRASES|ledger\.py|PHRASEBOOK|seed|adapt", message)


def test_no_pair_anywhere(example_text: str) -> None:
    text = _without(example_text, "I   --vram-", "vram_weights", "vram_kv")
    with pytest.raises(LedgerError, match=r"pair of card 0 cannot be read.*vram_weights and vram_kv row "
                                          r"\(phrase 'vram_weights'\)"):
        read_budget(boot_of(text))


def test_table_without_its_settled_line(boot_text: Builder) -> None:
    text = boot_text(cards=[_card("2.01 GiB"), _card("2.01 GiB")])
    text = _without(text, "card 1 settled")
    with pytest.raises(LedgerError, match=r"card\(s\) 1 print a budget table but no 'card N settled at' line"):
        read_budget(boot_of(text))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # an echoed pair flag that is not a number: named with its source and line
        ("--vram-kv-mib             5120", "--vram-kv-mib             5,12", r"t\.log .*:10: malformed number '5,12'"),
        ("--vram-weights-mib        24000", "--vram-weights-mib        lots",
         r"t\.log .*:9: malformed number 'lots'"),
        # sizes with units radiance does not print
        ("2.01 GiB free", "2.01 XiB free", r"t\.log .*:26: unknown unit 'XiB'"),
        ("against 209.19 MiB", "against 209.19 Mb", r"t\.log .*:26: unknown unit 'Mb'"),
        # a figure no card has
        ("2.01 GiB free", "99999999999999999999 GiB free", r"t\.log .*:26: implausible number"),
        # a card index that is not one
        ("card 0 settled", "card 00000000000000000000000000000000000000000000000 settled", r"t\.log .*:26: card"),
        ("card 0 settled", "card " + "9" * 5000 + " settled", r"t\.log .*:26: card"),
        # a malformed figure where the phrase needs one: the phrase is named, nothing is guessed
        ("2.01 GiB free", "2..01 GiB free", r"t\.log .*line 26 holds 'settled at' but not as 'card N settled at"),
        ("2.01 GiB free", "1,2345 MiB free", r"line 26 holds 'settled at' but not as"),
        ("2.01 GiB free", "GiB free", r"line 26 holds 'settled at' but not as"),
        # a negative figure: named by its line, never read as a size
        ("2.01 GiB free", "-2.01 GiB free", r"line 26 holds 'settled at' but not as .*negative or malformed"),
    ],
)
def test_bad_figures(old: str, new: str, message: str, example_text: str) -> None:
    assert old in example_text
    with pytest.raises(LedgerError, match=message):
        compute_ceiling(read_budget(boot_of(example_text.replace(old, new))))


# ---------------------------------------------------------------------------------------
# The pool contract


@pytest.mark.parametrize(
    ("pool_mib", "seqs", "window", "dtype", "required_mib", "ok", "max_seqs", "max_window"),
    [
        # the seed's figures (PHRASEBOOK section 3), MiB = 2^20 B:
        # 1 x 200,000 x 7,488 B = 1,428.22 MiB + 110 + 448 = 1,986.22; max window (1,987 - 558) x 2^20 / 7,488
        ("1987", 1, 200_000, "fp8", "1986.22", True, 1, 200_108),
        # 2 x 200,000 x 7,488 B = 2,856.45 MiB + 220 + 448 = 3,524.45 (exactly 3,524.4453125)
        ("3524.45", 2, 200_000, "fp8", "3524.45", True, 2, 200_000),
        # one MiB short of it fails: (3,524 - 448) / 1,538.22 per seq = 1.99 -> 1; (3,524 - 668) x 2^20 / 14,976
        ("3524", 2, 200_000, "fp8", "3524.45", False, 1, 199_968),
        # 2 x 200,000 x 14,144 B = 5,395.51 MiB + 220 + 448 = 6,063.51
        ("6063.51", 2, 200_000, "bf16", "6063.51", True, 2, 200_000),
        # 8 x 32,768 x 7,488 B = 1,872 MiB + 880 + 448 = 3,200.00, exact
        ("3200", 8, 32_768, "fp8", "3200.00", True, 8, 32_768),
        # a MiB short: (3,199 - 448) / (234 + 110) = 7.997 -> 7; (3,199 - 1,328) x 2^20 / 59,904 = 32,750.5
        ("3199", 8, 32_768, "fp8", "3200.00", False, 7, 32_750),
        # the example's 5,120 MiB pool: (5,120 - 448) / 1,538.22 = 3.04 -> 3 ('3.0 full-length sessions')
        ("5120", 2, 200_000, "fp8", "3524.45", True, 3, 311_716),
        # the same pool at bf16: 4,672 / (2,697.75 + 110) = 1.66 -> 1; (5,120 - 668) x 2^20 / 28,288 = 165,026
        ("5120", 2, 200_000, "bf16", "6063.51", False, 1, 165_026),
        # a pool below the fixed 448 MiB backs nothing
        ("400", 1, 1_000, "fp8", "565.14", False, 0, 0),
    ],
)
def test_pool_contract(
    pool_mib: str, seqs: int, window: int, dtype: str, required_mib: str, ok: bool, max_seqs: int, max_window: int
) -> None:
    contract = pool_contract(Decimal(pool_mib), seqs, window, dtype, DEFAULT_MODEL)  # type: ignore[arg-type]
    assert round(contract.required_mib, 2) == Decimal(required_mib)
    assert contract.margin_mib == Decimal(pool_mib) - contract.required_mib
    assert (contract.ok, contract.max_seqs_at_window, contract.max_window_at_seqs) == (ok, max_seqs, max_window)
    assert contract.refusal == (None if ok else REFUSAL.format(window=window))
    if max_seqs:  # the largest shapes found really fit, and one more does not
        assert pool_contract(Decimal(pool_mib), max_seqs, window, dtype, DEFAULT_MODEL).ok  # type: ignore[arg-type]
        assert pool_contract(Decimal(pool_mib), seqs, max_window, dtype, DEFAULT_MODEL).ok  # type: ignore[arg-type]
    assert not pool_contract(Decimal(pool_mib), max_seqs + 1, window, dtype, DEFAULT_MODEL).ok  # type: ignore[arg-type]
    assert not pool_contract(Decimal(pool_mib), seqs, max_window + 1, dtype, DEFAULT_MODEL).ok  # type: ignore[arg-type]


def test_refusal_text_is_the_engines() -> None:
    contract = pool_contract(Decimal(3_000), 2, 200_000, "fp8", DEFAULT_MODEL)
    assert contract.refusal == "does not fit the 200000 token context, which leaves nothing to generate into"


def test_bf16_rate_is_189_times_fp8_not_2() -> None:
    rates = DEFAULT_MODEL.rate_bytes_per_token
    assert round(Decimal(rates["bf16"]) / rates["fp8"], 2) == Decimal("1.89")  # 14,144 / 7,488 = 1.8889
    fp8 = pool_contract(Decimal(10_000), 2, 200_000, "fp8", DEFAULT_MODEL)
    bf16 = pool_contract(Decimal(10_000), 2, 200_000, "bf16", DEFAULT_MODEL)
    assert round(bf16.kv_mib / fp8.kv_mib, 2) == Decimal("1.89")  # 5,395.51 / 2,856.45
    assert bf16.per_seq_total_mib == fp8.per_seq_total_mib == 220 and bf16.fixed_mib == fp8.fixed_mib == 448


@pytest.mark.parametrize(
    ("pool_mib", "seqs", "window", "dtype", "message"),
    [
        ("3524.45", 2, 200_000, "fp16", r"kv_cache_dtype='fp16': radiance takes only bf16 or fp8"),
        ("3524.45", 2, 200_000, "FP8", r"kv_cache_dtype='FP8'"),
        ("3524.45", 0, 200_000, "fp8", r"seqs=0, max_model_len=200000: both must be at least 1"),
        ("3524.45", 2, 0, "fp8", r"both must be at least 1"),
        ("Infinity", 2, 200_000, "fp8", r"pool_mib=Infinity"),
        ("NaN", 2, 200_000, "fp8", r"pool_mib=NaN"),
        ("1E+300", 2, 200_000, "fp8", r"pool_mib=1E\+300"),
        ("-1", 2, 200_000, "fp8", r"pool_mib=-1"),
    ],
)
def test_pool_contract_refuses(pool_mib: str, seqs: int, window: int, dtype: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        pool_contract(Decimal(pool_mib), seqs, window, dtype, DEFAULT_MODEL)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Property: any ledger-shaped text gives a reading or one of radiance-mcp's errors

SIZES = st.builds(
    lambda number, unit: f"{number} {unit}",
    st.one_of(st.decimals(min_value=0, max_value=10**20, places=2, allow_nan=False).map(str),
              st.from_regex(r"\A[\d,.]{1,12}\Z"), st.sampled_from(["2.01", "209.19", "0", "29,120"])),
    st.sampled_from(["B", "KiB", "MiB", "GiB", "TiB", "XiB", "gib", ""]),
)
LINES = st.one_of(
    st.builds(lambda card, free, floor, headroom, static: render(
        "settled", card=card, free=free, floor=floor, headroom=headroom, static=static),
        st.from_regex(r"\A\d{1,30}\Z"), SIZES, SIZES, SIZES, SIZES),
    st.builds(lambda key, size: render(key, size=size),
              st.sampled_from(["card_total", "vram_weights", "vram_kv", "unclaimed"]), SIZES),
    st.builds(lambda card: render("budget_header", card=card), st.from_regex(r"\A\d{1,30}\Z")),
    st.builds(lambda flag, value: render("flag", flag=flag, value=value),
              st.sampled_from(["vram-weights-mib", "vram-kv-mib", "gpu-headroom-mib", "max-num-seqs"]),
              st.from_regex(r"\A[\d,.a-z]{1,25}\Z")),
    st.just(render("boot_start", name="x")),
    st.text(max_size=30),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(lines=st.lists(LINES, max_size=25), reserve=st.tuples(st.decimals(0, 10**6, places=2), st.integers(1, 30)))
def test_budget_and_ceiling_raise_only_their_own_errors(lines: list[str], reserve: tuple[Decimal, int]) -> None:
    try:
        reading = read_budget(read_text("\n".join(lines), source="fuzz"))
        reserves = (trace_reserve(reading, reserve[0], "fuzz", reserve[1], personal=False),)
        compute_ceiling(reading, reserves)
    except RadianceMCPError:
        pass
