"""The resize procedure's arithmetic, pure: the ceiling and the pool contract.

Numbers in, frozen records out; no I/O. The ceiling is one rule for every engine (``rank_ceilings``:
(settled free - floor) + pair, per card, the smallest binding; ``ceilings`` reads a boot of any engine).
radiance's cards come from radiance_mcp.core.budget's reading, the other engines' from their dialects; the
reserves held below a ceiling are radiance_mcp.core.rules.reserves' (what may back one is decided there,
once); both are re-exported here, so `capacity` stays the one name callers use for the procedure's
arithmetic. The pool contract of a boot of any engine, its inputs read from the boot, is
radiance_mcp.core.rules.contract's (radiance's rule, pool_contract, is here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal

from radiance_mcp.core.boot import Boot, Figure, Line, per_rank
from radiance_mcp.core.budget import PAIR_FLAGS, BudgetReading, read_budget
from radiance_mcp.core.constants import KV_DTYPES, MAX_POOL_MIB, MIB, KVDtype, ModelConstants
from radiance_mcp.core.engine_facts import FLOORS
from radiance_mcp.core.errors import FigureMissing, GuardRailError, InputError
from radiance_mcp.core.rules.book import Check
from radiance_mcp.core.rules.reserves import (
    REFUSALS,
    Candidate,
    Reserve,
    _figures_on,
    reserve_candidates,
    shown_mib,
    trace_reserve,
)
from radiance_mcp.core.rules.settled import boot_finding, require_settled
from radiance_mcp.core.units import fmt_mib, round_down

__all__ = [
    "PAIR_FLAGS", "REFUSAL", "REFUSALS", "BudgetReading", "CardCeiling", "Candidate", "Ceiling",
    "PoolContract", "RankCeiling", "Reserve", "_figures_on", "boot_finding", "budget", "card_ceiling", "ceilings",
    "compute_ceiling", "contract_check", "pair_within_ceiling", "rank_ceilings",
    "hold_reserves", "kv_dtype", "pool_contract", "read_budget", "reserve_candidates", "shown_mib", "trace_reserve",
    "with_outside_free",
]


# ---------------------------------------------------------------------------------------
# The ceiling


@dataclass(frozen=True)
class CardCeiling:
    card: int
    free_mib: Decimal
    floor_mib: Decimal
    pair_mib: Decimal
    ceiling_mib: int
    derivation: str
    max_pair_mib: int | None = None
    """The ceiling less the reserves held on this card (set by compute_ceiling)."""

    @property
    def headroom_mib(self) -> int:
        """What the pair may still grow by: settled free less the floor, rounded down to whole MiB (-671.2 is
        -672: never rounded up). Worked from the unrounded ceiling, so a pair the engine measured to a fraction of
        a MiB (vLLM's GiB figures) is not charged the ceiling's rounding: where free is the floor, it is 0."""
        return round_down(self.free_mib - self.floor_mib)


@dataclass(frozen=True)
class Ceiling:
    cards: tuple[CardCeiling, ...]
    binding_card: int
    ceiling_mib: int
    pair_mib: Decimal
    headroom_mib: int
    reserves: tuple[Reserve, ...]
    max_pair_mib: int
    """The smallest card's ceiling less its reserves: the largest pair the gate should allow."""
    warnings: tuple[str, ...] = ()


def card_ceiling(card: int, free_mib: Decimal, floor_mib: Decimal, pair_mib: Decimal) -> CardCeiling:
    """ceiling = (settled_free - engine_floor) + current_pair_sum, rounded down to whole MiB.

    The derivation is written with whole MiB as the procedure's worked example does
    ('29,120 + (2,058 - 209) = 30,969 MiB/card'); where whole-MiB figures would not add up
    to the rounded-down result, it shows two decimals instead, so it is never wrong.
    """
    ceiling = round_down((free_mib - floor_mib) + pair_mib)
    whole = [round(v) for v in (pair_mib, free_mib, floor_mib)]
    places = 0 if whole[0] + (whole[1] - whole[2]) == ceiling else 2
    derivation = (
        f"{fmt_mib(pair_mib, places)} + ({fmt_mib(free_mib, places)} - {fmt_mib(floor_mib, places)})"
        f" = {fmt_mib(ceiling)} MiB/card"
    )
    return CardCeiling(card, free_mib, floor_mib, pair_mib, ceiling, derivation)


@dataclass(frozen=True)
class RankCeiling:
    """One card's ceiling with the figures it stands on."""

    rank: str
    card: CardCeiling
    """The arithmetic (card_ceiling); its card is the card's number (radiance) or its place in the order."""
    lines: tuple[Line, ...]
    """The lines of free, the pair and the floor."""
    floor_note: str
    pair_from: str
    """Where the pair comes from: radiance's echoed flags or table rows, the other engines' own figures."""

    @property
    def derivation(self) -> str:
        """The card's arithmetic, named by its rank where the engine names its cards ('TP1: ...'); radiance's
        cards are their own numbers."""
        named = f"{self.rank}: " if self.rank != str(self.card.card) else ""
        return named + self.card.derivation


ZERO_FLOOR_NOTE = "floor 0: llama.cpp ran without --fit, which keeps no margin"
ENGINE_PAIR = "engine's weights and KV memory"
"""Where another engine's pair comes from (radiance's: its echoed flags or its table rows)."""


def budget(boot: Boot, *, unsettled: bool = False) -> BudgetReading:
    """The cards of a settled boot of any engine: radiance's budget reading (read_budget: the table rows, the
    settled lines, the pair), another engine's ranks as its dialect read them. BootNotSettled otherwise;
    unsettled: another engine's boot that has not finished starting is read as far as it went (read_budget_table
    shows it, with its state), as radiance's has no cards before it settles."""
    if boot.engine == "radiance":
        return read_budget(boot)
    if not (unsettled and boot.state.status == "unsettled"):
        require_settled(boot)
    return BudgetReading(boot, boot.ranks, {})


OUTSIDE = "given outside the ledger, unverified: {label}"
"""How a free figure the caller read elsewhere is carried: its label, never a ledger line."""


def with_outside_free(reading: BudgetReading, given: Sequence[tuple[int | None, Decimal, str]],
                      ) -> tuple[BudgetReading, tuple[str, ...]]:
    """The reading with free memory the caller read outside the engine (card, MiB, label; card None: every card)
    on each card whose log prints none, labelled as unverified provenance; and a note per card saying so.

    The engine's own figure always stands: a given figure for a card that prints one is refused, as is one for a
    card the boot does not have (InputError)."""
    if not given:
        return reading, ()
    cards = {c.card: c for c in reading.cards if c.card >= 0}
    out, notes = dict(cards), []
    for card, mib, label in given:
        targets = list(cards) if card is None else [card]
        if card is not None and card not in cards:
            raise InputError(f"outside_free card {card}: {reading.boot.where()} has cards "
                             f"{', '.join(map(str, cards)) or 'none'}; name one of them")
        for number in targets:
            view = cards[number]
            if view.free_mib is not None:
                raise InputError(
                    f"outside_free for card {number}: the ledger prints its free memory "
                    f"({fmt_mib(view.free_mib.value, 2)} MiB, "
                    f"line {view.free_mib.line.number}), which stands; drop outside_free")
            figure = Figure(mib, "MiB", (), arithmetic=OUTSIDE.format(label=label))
            out[number] = replace(view, free_mib=figure)
            notes.append(f"card {number}'s free memory {fmt_mib(mib, 2)} MiB is {OUTSIDE.format(label=label)}: "
                         "the ceiling on it is as good as that reading")
    views = tuple(out.get(c.card, c) if c.card >= 0 else c for c in reading.cards)
    return replace(reading, cards=views), tuple(notes)


def rank_ceilings(reading: BudgetReading) -> tuple[RankCeiling, ...]:
    """Every card's ceiling, (free - floor) + pair, for any engine: the pair is radiance's (the echoed flags or
    the table rows), else weights + KV memory; a card with no floor figure keeps none only where its engine keeps
    none by design (llama.cpp without --fit). A view that totals other cards (card -1) has no ceiling of its own.

    FigureMissing names every figure the log lacks and how to get it (nothing is estimated)."""
    boot = reading.boot
    out: list[RankCeiling] = []
    gaps: list[tuple[str, str]] = []
    for view in (c for c in reading.cards if c.card >= 0):
        names = ["free_mib", *(["pair"] if view.pair is not None else ["weights_mib", "kv_mib"]), "floor_mib"]
        if view.floor_mib is None and boot.engine == "llama.cpp":
            names.remove("floor_mib")  # no --fit: llama.cpp keeps no floor of its own
        figures = {name: f for name in names if isinstance(f := getattr(view, name), Figure)}
        if len(figures) < len(names):
            gaps += [(view.rank, view.gap(name)) for name in names if name not in figures]
            continue
        floor = figures.get("floor_mib")
        pair = figures["pair"].value if "pair" in figures else figures["weights_mib"].value + figures["kv_mib"].value
        card = card_ceiling(view.card, figures["free_mib"].value, floor.value if floor else Decimal(0), pair)
        note = FLOORS[boot.engine] if floor else ZERO_FLOOR_NOTE
        lines = tuple(dict.fromkeys(line for f in figures.values() for line in f.lines))
        out.append(RankCeiling(view.rank, card, lines, note, view.pair_source or ENGINE_PAIR))
    if gaps:
        raise FigureMissing(
            f"{boot.where()}: no ceiling, since the log lacks a figure it needs (nothing is estimated). "
            + per_rank(gaps)
        )
    return tuple(out)


def ceilings(boot: Boot) -> tuple[RankCeiling, ...]:
    """Every card's ceiling, for a boot of any engine (BootNotSettled when it did not settle)."""
    return rank_ceilings(budget(boot))


def compute_ceiling(reading: BudgetReading, reserves: tuple[Reserve, ...] = ()) -> Ceiling:
    """The ceiling of every card of a boot (the smallest binds), and the largest pair its reserves leave.

    A traced reserve holds memory back on its own card, a personal one on every card. A
    reserve above its card's ceiling, or reserves leaving a card's max pair below 0, are
    refused (GuardRailError); a max pair below the current pair comes back with a warning.
    """
    return hold_reserves(tuple(r.card for r in rank_ceilings(reading)), reserves)


def hold_reserves(cards: tuple[CardCeiling, ...], reserves: tuple[Reserve, ...]) -> Ceiling:
    """The cards' ceilings (the smallest binds) less the reserves each holds: compute_ceiling's second step."""
    binding = min(cards, key=lambda c: (c.ceiling_mib, c.card))
    personal = sum((r.mib for r in reserves if r.card is None), Decimal(0))
    held: list[CardCeiling] = []
    for card in cards:
        mine = [r for r in reserves if r.card in (None, card.card)]
        for reserve in mine:
            if reserve.mib > card.ceiling_mib:
                raise GuardRailError(
                    f"reserve {reserve.label!r} of {shown_mib(reserve.mib)} MiB is larger than card {card.card}'s "
                    f"ceiling of {fmt_mib(card.ceiling_mib)} MiB ({card.derivation}); a reserve holds back part of "
                    "the ceiling: check its unit (MiB, not bytes or KiB) and its figure"
                )
        total = personal + sum((r.mib for r in mine if r.card is not None), Decimal(0))
        left = card.ceiling_mib - total
        if left < 0:
            raise GuardRailError(
                f"the reserves hold back {shown_mib(total)} MiB on card {card.card}, more than its ceiling of "
                f"{fmt_mib(card.ceiling_mib)} MiB ({card.derivation}): max_pair_mib would be "
                f"{shown_mib(left)}; drop or shrink a reserve ({', '.join(repr(r.label) for r in mine)})"
            )
        held.append(replace(card, max_pair_mib=round_down(left)))
    tightest = min(held, key=lambda c: (c.max_pair_mib or 0, c.card))
    max_pair = tightest.max_pair_mib or 0
    warnings = []
    if max_pair < round_down(tightest.pair_mib):  # a measured pair's fraction is the ceiling's rounding, no shortfall
        warnings.append(
            f"max_pair_mib {fmt_mib(max_pair)} is below card {tightest.card}'s current pair of "
            f"{fmt_mib(tightest.pair_mib, 2)} MiB by {fmt_mib(tightest.pair_mib - max_pair, 2)} MiB: a gate at "
            "this bound fails the pair that runs now; shrink the pair by that much, or drop a reserve"
        )
    return Ceiling(
        cards=tuple(held),
        binding_card=binding.card,
        ceiling_mib=binding.ceiling_mib,
        pair_mib=binding.pair_mib,
        headroom_mib=binding.headroom_mib,
        reserves=reserves,
        max_pair_mib=max_pair,
        warnings=tuple(warnings),
    )


def pair_within_ceiling(weights_mib: Decimal | int, pool_mib: Decimal | int, ceiling: Ceiling) -> Check:
    """weights + pool <= the ceiling less the reserves (max_pair_mib) on the tightest card; a measured pair's
    fractions are shown to two places."""
    pair = weights_mib + pool_mib
    binding = next(c for c in ceiling.cards if c.card == ceiling.binding_card)
    held = sum((r.mib for r in ceiling.reserves if r.card in (None, binding.card)), Decimal(0))
    ok = pair <= ceiling.max_pair_mib
    places = 0 if all(Decimal(v) == int(v) for v in (weights_mib, pool_mib)) else 2
    return Check(
        "pair_within_ceiling", "pass" if ok else "fail",
        f"pair {fmt_mib(Decimal(weights_mib), places)} + {fmt_mib(Decimal(pool_mib), places)} = "
        f"{fmt_mib(Decimal(pair), places)} MiB {'<=' if ok else '>'} {ceiling.max_pair_mib:,} MiB "
        f"(card {binding.card}'s ceiling {binding.derivation}"
        f"{f' less {fmt_mib(held, 2)} MiB of reserves' if held else ''})",
        remedy="" if ok else f"plan a pair of at most {ceiling.max_pair_mib:,} MiB (plan_free_vram prices it)",
    )


# ---------------------------------------------------------------------------------------
# The pool contract


@dataclass(frozen=True)
class PoolContract:
    pool_mib: Decimal
    seqs: int
    max_model_len: int
    dtype: KVDtype | None
    """None: the rate is the engine's own KV pair's, not a dtype's constant."""
    rate_bytes_per_token: int
    kv_mib: Decimal
    per_seq_total_mib: int
    fixed_mib: int
    required_mib: Decimal
    margin_mib: Decimal
    ok: bool
    max_seqs_at_window: int
    max_window_at_seqs: int
    refusal: str | None


REFUSAL = "does not fit the {window} token context, which leaves nothing to generate into"


def kv_dtype(raw: str, what: str, remedy: str = "pass kv_cache_dtype") -> KVDtype:
    """The dtype rule: radiance's KV cache is bf16 or fp8, one dtype for the whole cache. what names where the
    value came from (an argument, a boot line, an env variable); InputError otherwise."""
    if raw not in KV_DTYPES:
        raise InputError(f"{what}={raw[:40]!r}: radiance takes only bf16 or fp8, one dtype for the whole cache; "
                         f"{remedy}")
    return raw


def pool_contract(
    pool_mib: Decimal, seqs: int, max_model_len: int, dtype: KVDtype, model: ModelConstants
) -> PoolContract:
    """pool_mib >= seqs * max_model_len * rate + per_seq * seqs + fixed (rate in B, the rest MiB)."""
    kv_dtype(dtype, "kv_cache_dtype")
    if seqs < 1 or max_model_len < 1:
        raise InputError(f"seqs={seqs}, max_model_len={max_model_len}: both must be at least 1")
    if not pool_mib.is_finite() or not 0 <= pool_mib <= MAX_POOL_MIB:
        raise InputError(
            f"pool_mib={pool_mib}: a pool is a finite size from 0 to {fmt_mib(MAX_POOL_MIB)} MiB (1 PiB); "
            "pass the --vram-kv-mib value in MiB"
        )
    rate = model.rate_bytes_per_token[dtype]
    kv_mib = Decimal(seqs * max_model_len * rate) / MIB
    per_seq_total = model.per_seq_mib * seqs
    required = kv_mib + per_seq_total + model.fixed_mib
    margin = pool_mib - required
    spare = pool_mib - model.fixed_mib
    per_sequence_mib = Decimal(max_model_len * rate) / MIB + model.per_seq_mib
    max_seqs = max(0, round_down(spare / per_sequence_mib))
    window_bytes = (spare - per_seq_total) * MIB
    max_window = max(0, round_down(window_bytes / (seqs * rate)))
    ok = margin >= 0
    return PoolContract(
        pool_mib=pool_mib,
        seqs=seqs,
        max_model_len=max_model_len,
        dtype=dtype,
        rate_bytes_per_token=rate,
        kv_mib=kv_mib,
        per_seq_total_mib=per_seq_total,
        fixed_mib=model.fixed_mib,
        required_mib=required,
        margin_mib=margin,
        ok=ok,
        max_seqs_at_window=max_seqs,
        max_window_at_seqs=max_window,
        refusal=None if ok else REFUSAL.format(window=max_model_len),
    )



def contract_check(contract: PoolContract, line: Line | None = None) -> Check:
    """The pool against its contract, with the arithmetic as the gates write it and, failed, what the pool allows."""
    rate_text = f"{contract.seqs} x {contract.max_model_len:,} x {contract.rate_bytes_per_token:,} B"
    fixed = (f" + {contract.per_seq_total_mib // contract.seqs} x {contract.seqs} + {contract.fixed_mib}"
             if contract.per_seq_total_mib or contract.fixed_mib else "")
    required = f"{fixed} = {fmt_mib(contract.required_mib, 2)} MiB" if fixed else ""
    arithmetic = (f"{rate_text} = {fmt_mib(contract.kv_mib, 2)} MiB{required} "
                  f"{'<=' if contract.ok else '>'} pool {fmt_mib(contract.pool_mib)} MiB"
                  + (f" ({contract.dtype})" if contract.dtype else ""))
    remedy = "" if contract.ok else (
        f"at {fmt_mib(contract.pool_mib)} MiB the contract allows {contract.max_seqs_at_window} "
        f"seat{'' if contract.max_seqs_at_window == 1 else 's'} at "
        f"{contract.max_model_len:,} tokens or {contract.max_window_at_seqs:,} tokens at {contract.seqs} seats"
    )
    return Check("pool_contract", "pass" if contract.ok else "fail", arithmetic, (line,) if line else (), remedy)
