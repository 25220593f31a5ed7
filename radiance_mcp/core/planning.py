"""What the free VRAM can buy, and what measured arms can say: pure arithmetic.

Two jobs, both numbers in and frozen records out (no I/O):
- ``compare_arms``: arms of one knob (a value and a measured rate each) against a noise band;
  which differences lie inside the noise, and whether a plateau or threshold claim stands.
  No threshold or plateau is ever read off fewer than MIN_ARMS_FOR_THRESHOLD arms.
- the free VRAM (plan_free_vram, for a boot of any engine): the card figures a plan shows
  (``card_figures``), the card that binds and what its reserves leave to spend (``spend``), the
  headroom counted once per physical card (``share``), and the options it buys, priced by what the
  boot prints (``sets_pair_in_mib`` says which): a pair the boot sets in MiB (radiance's --vram-kv-mib
  and --vram-weights-mib) prices the pool per KV dtype at the model's constants, with the slab as the
  other option (``price_pool``); an engine that sizes its KV memory by its own flag prices one more-KV
  option at its own bytes per token (``price_engine_kv``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal
from typing import Literal

from radiance_mcp.core import knobs
from radiance_mcp.core.boot import Boot, Figure, Line, RankView
from radiance_mcp.core.constants import (
    MAX_POOL_MIB,
    MIB,
    MIN_ARMS_FOR_THRESHOLD,
    SLAB_MIB_PER_STEP,
    SLAB_SLOTS_PER_STEP,
    KVDtype,
    LedgerEngine,
    ModelConstants,
)
from radiance_mcp.core.errors import InputError
from radiance_mcp.core.rules import sampler
from radiance_mcp.core.rules.book import Check
from radiance_mcp.core.rules.capacity import BudgetReading, Reserve, pool_contract
from radiance_mcp.core.rules.contract import binding_rank, served_seats
from radiance_mcp.core.units import round_down

# ---------------------------------------------------------------------------------------
# Arms

MAX_ARMS = 1_000
"""More arms than any campaign measures: a longer list is a pasted table gone wrong."""
MAX_ARM_FIGURE = 1e15
MIN_RATE = 1e-6
"""Figures past these are unit mistakes; inside them every percentage and midpoint stays finite."""

Claim = Literal["plateau", "threshold"]


@dataclass(frozen=True)
class Arm:
    value: float
    """The knob's setting (e.g. slab MiB)."""
    rate: float
    """The measured rate (e.g. prefill t/s)."""


@dataclass(frozen=True)
class ArmStep:
    """Two neighbouring arms (by knob value): the change from the lower to the higher."""

    low: Arm
    high: Arm
    change_pct: float
    """(high.rate - low.rate) / low.rate, in percent: the lower arm is the baseline."""
    inside_noise: bool
    """|change| <= the band: the two arms cannot be told apart."""
    intervals_overlap: bool
    """Each rate's own +-band interval overlaps the other's: a change outside the band by less than
    the band again is still within what two noisy measurements can show."""


@dataclass(frozen=True)
class ClaimVerdict:
    claim: Claim
    arms: tuple[float, ...]
    verdict: Literal["refused", "supported", "contradicted"]
    reason: str
    rule: str
    remedy: str | None
    measure_next: float | None
    """The knob value to measure next, where one more arm would settle the claim."""


@dataclass(frozen=True)
class ArmsComparison:
    arms: tuple[Arm, ...]
    band_pct: float
    steps: tuple[ArmStep, ...]
    span_pct: float
    """From the lowest to the highest rate, relative to the lowest."""
    claim: ClaimVerdict | None


RULE = (
    f"a plateau or threshold needs at least {MIN_ARMS_FOR_THRESHOLD} arms: two arms give one difference, "
    "which cannot show where a change starts or that it stops"
)


def _pct(low: float, high: float) -> float:
    return (high - low) / low * 100


def _step(low: Arm, high: Arm, band_pct: float) -> ArmStep:
    change = _pct(low.rate, high.rate)
    band = band_pct / 100
    overlap = low.rate * (1 - band) <= high.rate * (1 + band) and high.rate * (1 - band) <= low.rate * (1 + band)
    return ArmStep(low, high, change, abs(change) <= band_pct, overlap)


def fmt_value(value: float) -> str:
    """A knob value or rate as a reader writes it: 22,208, or 0.125."""
    return f"{value:,.0f}" if value == int(value) else f"{value:,.6g}"


def compare_arms(
    arms: Sequence[Arm], band_pct: float, claim: Claim | None = None, claim_arms: Sequence[float] = ()
) -> ArmsComparison:
    """Neighbouring arms compared against the band; a claim judged on the arms it rests on.

    The change between two arms is taken from the arm of the lower knob value (the baseline).
    A claim on fewer than MIN_ARMS_FOR_THRESHOLD arms is refused, naming the value to measure.
    """
    if not 2 <= len(arms) <= MAX_ARMS:
        raise InputError(f"arms: {len(arms)} given; compare 2 to {MAX_ARMS:,} arms (a knob value and a rate each)")
    if not 0 < band_pct < 100:
        raise InputError(f"noise_band_pct={band_pct}: a band is a percentage above 0 and below 100 (e.g. 3 for +-3 %)")
    seen: dict[float, Arm] = {}
    for arm in arms:
        if not (MIN_RATE <= arm.rate <= MAX_ARM_FIGURE and abs(arm.value) <= MAX_ARM_FIGURE):
            raise InputError(f"arm value={arm.value}, rate={arm.rate}: a value is a finite number within "
                             f"+-{MAX_ARM_FIGURE:g} and a rate is a finite measured rate above 0, from {MIN_RATE:g} "
                             f"to {MAX_ARM_FIGURE:g}")
        if arm.value in seen:
            raise InputError(
                f"arms: value {fmt_value(arm.value)} is given twice (rates {fmt_value(seen[arm.value].rate)} and "
                f"{fmt_value(arm.rate)}); give one rate per value: the median of repeated runs"
            )
        seen[arm.value] = arm
    ordered = tuple(sorted(arms, key=lambda a: a.value))
    steps = tuple(_step(a, b, band_pct) for a, b in zip(ordered, ordered[1:], strict=False))
    rates = [a.rate for a in ordered]
    verdict = None
    if claim is not None:
        verdict = judge(claim, ordered, claim_arms or [a.value for a in ordered], band_pct)
    return ArmsComparison(ordered, band_pct, steps, _pct(min(rates), max(rates)), verdict)


def judge(claim: Claim, arms: Sequence[Arm], values: Sequence[float], band_pct: float) -> ClaimVerdict:
    """A plateau: every step between the claim's arms, and their whole span, inside the noise. A threshold:
    one step out of the noise, the others inside it (a step among steps is a slope, not a threshold)."""
    by_value = {a.value: a for a in arms}
    unknown = [v for v in values if v not in by_value]
    if unknown:
        raise InputError(
            f"claim_arms: {', '.join(fmt_value(v) for v in unknown)} is not the value of any arm "
            f"(arms: {', '.join(fmt_value(a.value) for a in arms)}); name arms by their knob value"
        )
    chosen = tuple(sorted(set(values)))
    steps = [_step(by_value[a], by_value[b], band_pct) for a, b in zip(chosen, chosen[1:], strict=False)]
    if len(chosen) < MIN_ARMS_FOR_THRESHOLD:
        others = [a.value for a in arms if a.value not in chosen]
        low, high = chosen[0], chosen[-1]
        measure = round((low + high) / 2) if high - low >= 2 else None
        if others:
            nearest = min(others, key=lambda v: min(abs(v - low), abs(v - high)))
            remedy = (f"add the arm you already measured at {fmt_value(nearest)} to claim_arms, or measure a third arm "
                      f"at {fmt_value(measure if measure is not None else high + (high - low))}")
        else:
            at = measure if measure is not None else high + (high - low)
            remedy = (f"measure a third arm at {fmt_value(at)} (between the two{', the midpoint' if measure else ''}), "
                      f"with the same workload, and compare again")
        change = f"{steps[0].change_pct:+.2f} %" if steps else "no difference"
        return ClaimVerdict(
            claim, chosen, "refused",
            f"a {claim} read off {len(chosen)} arm{'s' if len(chosen) > 1 else ''} ({change}) is refused",
            RULE, remedy, measure if measure is not None else high + (high - low),
        )
    outside = [s for s in steps if not s.inside_noise]
    if claim == "plateau":
        rates = [by_value[v].rate for v in chosen]
        span = _pct(min(rates), max(rates))
        if not outside and span <= band_pct:
            return ClaimVerdict(claim, chosen, "supported",
                                f"all {len(steps)} steps, and the whole span ({span:.2f} %), lie inside the "
                                f"+-{band_pct:g} % band", RULE, None, None)
        if not outside:
            return ClaimVerdict(claim, chosen, "contradicted",
                                f"each step lies inside the +-{band_pct:g} % band, but the rate moves {span:.2f} % "
                                "from the lowest arm to the highest: a slow slope, not a plateau", RULE, None, None)
        worst = max(outside, key=lambda s: abs(s.change_pct))
        return ClaimVerdict(
            claim, chosen, "contradicted",
            f"{len(outside)} of {len(steps)} steps leave the +-{band_pct:g} % band; the largest, "
            f"{fmt_value(worst.low.value)} -> {fmt_value(worst.high.value)}, is {worst.change_pct:+.2f} %",
            RULE, None, None,
        )
    if len(outside) == 1 and len(steps) >= 2:
        step = outside[0]
        return ClaimVerdict(
            claim, chosen, "supported",
            f"one step leaves the +-{band_pct:g} % band, {fmt_value(step.low.value)} -> {fmt_value(step.high.value)} "
            f"({step.change_pct:+.2f} %), and the other {len(steps) - 1} lie inside it: the threshold is between "
            f"those two values",
            RULE, f"measure between {fmt_value(step.low.value)} and {fmt_value(step.high.value)} to place it closer",
            round((step.low.value + step.high.value) / 2),
        )
    if not outside:
        reason = f"every step lies inside the +-{band_pct:g} % band: nothing changes, so there is no threshold"
    else:
        listed = ", ".join(f"{fmt_value(s.low.value)} -> {fmt_value(s.high.value)} {s.change_pct:+.2f} %"
                           for s in outside)
        reason = (f"{len(outside)} of {len(steps)} steps leave the +-{band_pct:g} % band ({listed}): "
                  "the rate moves along the whole range, a slope rather than one threshold")
    return ClaimVerdict(claim, chosen, "contradicted", reason, RULE, None, None)



# ---------------------------------------------------------------------------------------
# The free VRAM: headroom, sharing, and what it buys


@dataclass(frozen=True)
class Slope:
    """Resident expert slots per slab MiB, and where the figure came from."""

    slots: Decimal
    mib: Decimal
    line: Line | None
    """The boot's `ledger mover` line; None: the model's constant."""

    @property
    def per_mib(self) -> Decimal:
        return self.slots / self.mib

    def slots_for(self, mib: Decimal) -> int:
        return round_down(mib * self.per_mib)


def slab_slope(boot: Boot) -> Slope:
    """The boot's own slope (`ledger mover: N slots can be lent out of the KV cache (X GiB)`: N slots
    per X), else the measured constant, SLAB_SLOTS_PER_STEP slots per SLAB_MIB_PER_STEP MiB."""
    hit = boot.first("ledger_mover")
    if hit is not None:
        slots = hit.number("slots", boot.where())
        size = hit.size("size", boot.where()).mib
        if slots > 0 and size > 0:
            return Slope(slots, size, hit.line)
    return Slope(Decimal(SLAB_SLOTS_PER_STEP), Decimal(SLAB_MIB_PER_STEP), None)


@dataclass(frozen=True)
class SlabLine:
    resident_slots: int
    host_pool_slots: int | None
    line: Line


def slab_slots(boot: Boot) -> SlabLine | None:
    """`slab slots N resident, host pool M`: the slots in VRAM now, and those still on the slow path."""
    hit = boot.first("slab_slots")
    if hit is None:
        return None
    host = hit.fields.get("host")
    return SlabLine(int(hit.number("slots", boot.where())),
                    int(hit.number("host", boot.where())) if host else None, hit.line)


@dataclass(frozen=True)
class KVPrice:
    """A bigger KV pool at one dtype: what the contract then allows, and what it takes from the slab."""

    dtype: KVDtype
    pool_mib: int
    seats_at_window: int
    """The seats at the window the pool holds, at most what the sampler bound allows."""
    pool_seats_at_window: int
    """The seats at the window the pool alone would hold."""
    window_at_seats: int
    slab_slots_forgone: int
    """The headroom given to the pool is not given to the slab: headroom x slope."""
    idle_now_mib: Decimal
    """The pool now less its contract at the current shape: the KV left idle when every seat is full."""
    idle_seats_mib: Decimal
    """The new pool less the contract at (seats_at_window, window)."""
    idle_window_mib: Decimal
    """The new pool less the contract at (seats, window_at_seats)."""
    rate_bytes_per_token: int
    """The model's KV bytes per token at this dtype."""
    spare_mib: int
    """The new pool less the model's fixed MiB: what the sequences share."""
    sequence_mib: Decimal
    """One full-length sequence: window x rate + the model's per-sequence MiB."""
    seats_now: int
    """What the contract allows of the pool as it is: seats at the window (at most the sampler bound's), and the
    window at the seats."""
    window_now: int
    mover_now_slots: int
    """The idle KV, as slots the mover may lend the experts: now, and with the new seats or window full."""
    mover_seats_slots: int
    mover_window_slots: int


def price_kv(
    pool_mib: Decimal, headroom_mib: int, seqs: int, window: int, dtype: KVDtype, model: ModelConstants,
    slope: Slope, seat_cap: int | None = None,
) -> KVPrice:
    """The pool grown by the headroom, at one dtype, its seats at most seat_cap (the sampler bound's). The mover
    lends only idle KV to the expert cache, so what stays idle once the new seats (or the longer window) fill
    is what it can still lend."""
    new_pool = Decimal(round_down(pool_mib) + headroom_mib)
    grown = pool_contract(new_pool, seqs, window, dtype, model)
    now = pool_contract(pool_mib, seqs, window, dtype, model)
    seats, longest = grown.max_seqs_at_window, grown.max_window_at_seqs
    pool_seats = seats
    if seat_cap is not None:
        seats = min(seats, seat_cap)
    rate = model.rate_bytes_per_token[dtype]

    def idle(pool: Decimal, n: int, tokens: int) -> Decimal:
        return max(Decimal(0), pool_contract(pool, n, tokens, dtype, model).margin_mib) if n and tokens else pool

    idle_now = idle(pool_mib, seqs, window)
    idle_seats, idle_window = idle(new_pool, seats, window), idle(new_pool, seqs, longest)
    return KVPrice(
        dtype=dtype,
        pool_mib=int(new_pool),
        seats_at_window=seats,
        pool_seats_at_window=pool_seats,
        window_at_seats=longest,
        slab_slots_forgone=slope.slots_for(Decimal(headroom_mib)),
        idle_now_mib=idle_now,
        idle_seats_mib=idle_seats,
        idle_window_mib=idle_window,
        rate_bytes_per_token=rate,
        spare_mib=int(new_pool) - model.fixed_mib,
        sequence_mib=Decimal(window * rate) / MIB + model.per_seq_mib,
        seats_now=now.max_seqs_at_window if seat_cap is None else min(now.max_seqs_at_window, seat_cap),
        window_now=now.max_window_at_seqs,
        mover_now_slots=slope.slots_for(idle_now),
        mover_seats_slots=slope.slots_for(idle_seats),
        mover_window_slots=slope.slots_for(idle_window),
    )


@dataclass(frozen=True)
class SlabPrice:
    weights_mib: int
    slots_gained: int
    capped_by_host_pool: bool
    resident_after: int | None = None
    """The resident slots the `slab slots` line prints, plus those gained; None without the line."""


def price_slab(weights_mib: Decimal, headroom_mib: int, slope: Slope, slab: SlabLine | None) -> SlabPrice:
    """The headroom into --vram-weights-mib: headroom x slope slots move from the host pool into VRAM,
    no more than the host pool holds (past that, every expert is resident already)."""
    gained = slope.slots_for(Decimal(headroom_mib))
    cap = slab.host_pool_slots if slab is not None else None
    capped = cap is not None and gained > cap
    slots = min(gained, cap) if capped and cap is not None else gained
    return SlabPrice(round_down(weights_mib) + headroom_mib, slots, capped,
                     slab.resident_slots + slots if slab is not None else None)


# ---------------------------------------------------------------------------------------
# One plan for a boot of any engine: its cards' figures, the card that binds, the options priced


@dataclass(frozen=True)
class CardFigures:
    """What a plan shows of a card beside its ceiling: the pair's two parts and the activation memory."""

    weights: Figure
    kv: Figure
    activation: Figure | None


def echoed_or_printed(boot: Boot, card: RankView, flag: str, name: str) -> Figure:
    """A part of the pair as the boot echoes its flag (--vram-weights-mib, exact), else as the card prints it
    (LedgerError: the card lacks it)."""
    hit = boot.flags.get(flag)
    return card.require(name) if hit is None else Figure(hit.number("value", boot.where()), "MiB", (hit.line,))


def card_figures(boot: Boot, card: RankView) -> CardFigures:
    """The weights and the KV memory as echoed (--vram-weights-mib, --vram-kv-mib), else as the card prints
    them; the activation memory of the card (another engine's activation or graph figure), else the boot's
    activation arena line. A LedgerError names a figure the card lacks (rank_ceilings has named it first)."""
    src = boot.where()
    arena = boot.first("activation_arena")
    return CardFigures(
        weights=echoed_or_printed(boot, card, "vram-weights-mib", "weights_mib"),
        kv=echoed_or_printed(boot, card, "vram-kv-mib", "kv_mib"),
        activation=card.activation_mib or card.graph_mib or (
            Figure.of_size(arena.size("size", src), arena.line) if arena is not None else None),
    )


def held_on(reserves: Sequence[Reserve], card: int) -> Decimal:
    """MiB the reserves hold back on one card: every personal one, and the traced ones of that card."""
    return sum((r.mib for r in reserves if r.card in (None, card)), Decimal(0))


@dataclass(frozen=True)
class Spend:
    """The card that binds a service's plan, and what it leaves to spend."""

    card: int
    headroom_mib: int
    """Its headroom, counted once where the card is shared."""
    held_mib: Decimal
    """The reserves it holds back."""
    usable_mib: int
    """headroom - held, rounded down: what every option spends."""


def spend(headrooms: Sequence[tuple[int, int]], reserves: Sequence[Reserve]) -> Spend:
    """Of (card, headroom counted once) pairs, the card with the least left after its reserves binds
    (the lower card on a tie): one pair is set for every card, so the least room sets it."""
    card, headroom = min(headrooms, key=lambda c: (c[1] - held_on(reserves, c[0]), c[0]))
    held = held_on(reserves, card)
    return Spend(card, headroom, held, round_down(headroom - held))


def sets_pair_in_mib(card: RankView) -> bool:
    """Whether the boot sets the card's pair itself, in MiB (radiance's --vram-weights-mib and --vram-kv-mib,
    or its budget table's rows): its KV pool is then priced per dtype at the model's constants and its
    weights are the expert slab, the other option. Otherwise the engine sizes its KV memory by its own flag
    (a share of the card, a token count) and the one option is more KV at the engine's own bytes per token."""
    return card.pair is not None


SHAPE_FLAGS = (("max-num-seqs", "seats"), ("max-model-len", "tokens"), ("tp", "cards"))


def plan_shape(reading: BudgetReading) -> tuple[tuple[str, Figure], ...]:
    """The service's shape as its boot prints it: the echoed --max-num-seqs, --max-model-len and --tp, then
    the KV rank's window and the sequences the engine says it serves at once (contract.served_seats)."""
    boot, src = reading.boot, reading.boot.where()
    shape = [(f"--{flag}", Figure(hit.number("value", src), unit, (hit.line,)))
             for flag, unit in SHAPE_FLAGS if (hit := boot.flags.get(flag)) is not None]
    window = kv_rank(reading).window_tokens
    seats = served_seats(boot)
    return (*shape, *((("window", window),) if window else ()), *((("sequences served at once", seats),)
                                                                    if seats else ()))


def kv_rank(reading: BudgetReading) -> RankView:
    """The card whose KV cache binds the window and the tokens: the engine's binding rank (the fewest KV
    tokens, core.rules.contract) where its dialect read ranks, else the first card of the budget."""
    return binding_rank(reading.boot) if reading.boot.ranks else reading.cards[0]


@dataclass(frozen=True)
class PoolPrices:
    """The options of a pool and a slab set in MiB: more KV per dtype at the model's constants, more slab."""

    pool_mib: Decimal
    weights_mib: Decimal
    seqs: int | None
    window: int | None
    dtype: str | None
    """The --kv-cache-dtype the boot echoes; None: not echoed."""
    unpriced_flags: tuple[str, ...]
    """The shape flags the boot does not echo (--max-num-seqs, --max-model-len): no KV option without them."""
    past_any_card: bool
    """The pool grown by the headroom would be past any card's memory: the settled line is misread."""
    kv: tuple[KVPrice, ...]
    slope: Slope
    slab_line: SlabLine | None
    slab: SlabPrice
    sampler: Check | None = None
    """The sampler-row bound at the boot's seats, where its sampler line prints a spec: it caps every option's
    seats (sampler.max_seats)."""
    sampler_spec: int | None = None
    """The spec the sampler line prints (None: none)."""


KV_PRICED_DTYPES: tuple[KVDtype, ...] = ("fp8", "bf16")


def price_pool(boot: Boot, figures: CardFigures, usable_mib: int, model: ModelConstants) -> PoolPrices:
    """usable MiB into the KV pool (per dtype, at the boot's seats and window) or into the slab."""
    src = boot.where()
    flags = boot.flags
    seqs_hit, window_hit, dtype_hit = (flags.get(f) for f in ("max-num-seqs", "max-model-len", "kv-cache-dtype"))
    pool, weights = figures.kv.value, figures.weights.value
    slope, slab = slab_slope(boot), slab_slots(boot)
    seqs = int(seqs_hit.number("value", src)) if seqs_hit else None
    window = int(window_hit.number("value", src)) if window_hit else None
    past = pool + usable_mib > MAX_POOL_MIB
    kv: tuple[KVPrice, ...] = ()
    spec, spec_line = sampler.boot_spec(boot)
    seat_cap = None if spec is None else sampler.max_seats(spec)
    if not past and seqs is not None and window is not None:
        kv = tuple(price_kv(pool, usable_mib, seqs, window, d, model, slope, seat_cap) for d in KV_PRICED_DTYPES)
    return PoolPrices(
        pool_mib=pool, weights_mib=weights, seqs=seqs, window=window,
        dtype=dtype_hit.raw("value", src) if dtype_hit else None,
        unpriced_flags=tuple(f for f, h in (("--max-num-seqs", seqs_hit), ("--max-model-len", window_hit))
                             if h is None),
        past_any_card=past, kv=kv, slope=slope, slab_line=slab, slab=price_slab(weights, usable_mib, slope, slab),
        sampler=None if spec is None or seat_cap is None else sampler.sampler_rows(seat_cap, spec, spec_line),
        sampler_spec=spec,
    )


@dataclass(frozen=True)
class EngineKVPrice:
    """usable MiB more KV memory at the engine's own bytes per token (its KV memory over its KV tokens)."""

    rank: str
    usable_mib: int
    tokens_now: Decimal | None
    """The KV tokens now (None: the rank prints no tokens or no rate, and gaps says which)."""
    rate_bytes_per_token: Decimal | None
    tokens_after: Decimal | None
    window_tokens: Decimal | None
    sequences_after: Decimal | None
    """tokens_after / window, cut to hundredths: full-length sequences at once."""
    gaps: tuple[str, ...]


def price_engine_kv(rank: RankView, usable_mib: int) -> EngineKVPrice:
    """usable MiB more KV: KV tokens at the rank's own rate, and full-length sequences at its window."""
    rate, tokens, window = rank.kv_bytes_per_token, rank.kv_tokens, rank.window_tokens
    if rate is None or tokens is None:
        gaps = tuple(str(g) for g in rank.missing if g.figure in ("kv_tokens", "kv_bytes_per_token"))
        return EngineKVPrice(rank.rank, usable_mib, None, None, None, None, None, gaps)
    after = tokens.value + int(Decimal(usable_mib) * MIB / rate.value)
    sequences = None if window is None else (after / window.value).quantize(Decimal("0.01"), rounding=ROUND_DOWN)
    return EngineKVPrice(rank.rank, usable_mib, tokens.value, rate.value, after,
                         window.value if window else None, sequences, ())


LLAMA_CELL_STEP = 256
"""llama.cpp pads its KV cache to a multiple of 256 cells in the builds that pad at all (llama_kv_cache's
get_padding, with flash attention; 32 without): a plan's cells are a multiple of it, so the boot holds what the
plan predicts whatever the build."""


def engine_plans(engine: LedgerEngine, seats: int | None, window: int | None, rate: Decimal, pool_max_mib: int,
                 one_seat: bool) -> tuple[tuple[int, int, int], ...]:
    """Another engine's plans for a KV memory of at most pool_max_mib, each (pool MiB, seats, window): the seats
    the memory holds at the window, then the window it holds at the seats (llama.cpp's cells seats x window a
    multiple of LLAMA_CELL_STEP, its pool what they take; one_seat: llama-cpp-python's server, one sequence).
    None where the boot prints no seats or no window (vLLM prints no --max-num-seqs at INFO)."""
    if seats is None or window is None or pool_max_mib <= 0:
        return ()
    tokens = int(Decimal(pool_max_mib) * MIB / rate)
    cells = knobs.KNOBS[engine].kv_unit == "cells"
    out = []
    shapes = [(seats, tokens // seats)] if one_seat else [(tokens // window, window), (seats, tokens // seats)]
    for s, w in shapes:
        if cells:  # the window in steps that keep s x w cells a multiple of LLAMA_CELL_STEP
            step = LLAMA_CELL_STEP // math.gcd(s, LLAMA_CELL_STEP) if s > 0 else 1
            w = w // step * step
        if s < 1 or w < 1:
            continue
        by_cells = knobs.cells_pool_mib(engine, s, w, rate)
        pool = pool_max_mib if by_cells is None else by_cells
        out.append((pool, s, w))
    return tuple(dict.fromkeys(out))
