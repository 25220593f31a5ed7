"""The resize procedure's arithmetic, pure: the budget reading, the ceiling, the pool contract.

Numbers in, frozen records out; no I/O. MiB is the unit of record and Decimal keeps the
printed figures exact (2.01 GiB is 2,058.24 MiB, not a float near it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from radiance_mcp.constants import MIB, KVDtype, ModelConstants
from radiance_mcp.errors import GuardRailError, InputError, LedgerError
from radiance_mcp.ledger import PHRASES, Boot, Hit, Line
from radiance_mcp.units import SIZE, Size, fmt_mib, parse_size, round_down

PAIR_FLAGS = ("vram-weights-mib", "vram-kv-mib")


# ---------------------------------------------------------------------------------------
# The budget table


@dataclass(frozen=True)
class Figure:
    """A size read off one ledger line."""

    size: Size
    line: Line


@dataclass(frozen=True)
class CardBudget:
    card: int
    total: Figure | None
    weights: Figure | None
    kv: Figure | None
    unclaimed: Figure | None
    free: Figure
    floor: Figure
    headroom: Figure | None
    static: Figure | None
    pair_mib: Decimal
    pair_source: Literal["echoed flags", "table rows"]
    pair_lines: tuple[Line, ...]
    disagreements: tuple[str, ...]


@dataclass(frozen=True)
class BudgetReading:
    boot: Boot
    cards: tuple[CardBudget, ...]
    flags: dict[str, str]


def _figure(hit: Hit, name: str, source: str) -> Figure:
    return Figure(hit.size(name, source), hit.line)


MAX_CARDS = 1024


def _card_index(hit: Hit, source: str) -> int:
    """The card a header or settled line names; a figure no machine has is refused, not converted."""
    raw = hit.raw("card", source)
    if len(raw) > 4 or int(raw) >= MAX_CARDS:
        shown = raw if len(raw) <= 20 else f"{raw[:20]}... ({len(raw)} digits)"
        raise LedgerError(
            f"{source}:{hit.line.number}: card {shown} is not a card index (0 to {MAX_CARDS - 1}) in line "
            f"{hit.line.text[:200]!r}"
        )
    return int(raw)


def read_budget(boot: Boot) -> BudgetReading:
    """Per card: the table rows, the settled line, and the pair with where it came from.

    Table rows belong to the card named by the nearest 'VRAM budget, card N' header before
    them, else to the cards in order (the first 'card total' row starts card 0). The
    'settled' line names its card itself.
    """
    src = boot.where()
    rows: dict[int, dict[str, Figure]] = {}
    card = -1
    for hit in boot.hits:
        if hit.key == "budget_header":
            card = _card_index(hit, src)
        elif hit.key == "card_total" and (card < 0 or "card_total" in rows.get(card, {})):
            card = max([card, *rows]) + 1
        if hit.key in ("card_total", "vram_weights", "vram_kv", "unclaimed"):
            rows.setdefault(max(card, 0), {}).setdefault(hit.key, _figure(hit, "size", src))

    settled = boot.all("settled")
    if not settled:
        boot.require("settled", "(radiance prints 'card N settled at X free against F' once boot settles)")
    flags = {name: str(hit.fields["value"]) for name, hit in boot.flags.items()}
    flag_hits = boot.flags
    cards: dict[int, CardBudget] = {}
    for hit in settled:
        number = _card_index(hit, src)
        if number in cards:
            continue
        table = rows.get(number, {})
        disagreements: list[str] = []
        if all(f in flag_hits for f in PAIR_FLAGS):
            values = [flag_hits[f].number("value", src) for f in PAIR_FLAGS]
            pair = sum(values, Decimal(0))
            pair_source: Literal["echoed flags", "table rows"] = "echoed flags"
            pair_lines = tuple(flag_hits[f].line for f in PAIR_FLAGS)
            for flag, value, row in zip(PAIR_FLAGS, values, ("vram_weights", "vram_kv"), strict=True):
                figure = table.get(row)
                if figure and not figure.size.agrees_with(value):
                    disagreements.append(
                        f"card {number}: --{flag} {fmt_mib(value)} MiB (line {flag_hits[flag].line.number}) "
                        f"but the table's {row} row says {figure.size.text} = {fmt_mib(figure.size.mib, 2)} "
                        f"MiB (line {figure.line.number}), beyond its rounding of "
                        f"+-{fmt_mib(figure.size.resolution_mib / 2, 2)} MiB"
                    )
        else:
            missing = [row for row in ("vram_weights", "vram_kv") if row not in table]
            if missing:
                raise LedgerError(
                    f"{src}: the pair of card {number} cannot be read: the boot echoes neither "
                    f"--vram-weights-mib and --vram-kv-mib nor the table's {' and '.join(missing)} "
                    f"row (phrase {PHRASES[missing[0]].keyword!r}); pass a log whose boot prints them"
                )
            pair = table["vram_weights"].size.mib + table["vram_kv"].size.mib
            pair_source = "table rows"
            pair_lines = (table["vram_weights"].line, table["vram_kv"].line)
        cards[number] = CardBudget(
            card=number,
            total=table.get("card_total"),
            weights=table.get("vram_weights"),
            kv=table.get("vram_kv"),
            unclaimed=table.get("unclaimed"),
            free=_figure(hit, "free", src),
            floor=_figure(hit, "floor", src),
            headroom=_figure(hit, "headroom", src) if hit.fields.get("headroom") else None,
            static=_figure(hit, "static", src) if hit.fields.get("static") else None,
            pair_mib=pair,
            pair_source=pair_source,
            pair_lines=pair_lines,
            disagreements=tuple(disagreements),
        )
    missing_cards = ", ".join(str(c) for c in sorted(set(rows) - set(cards)))
    if missing_cards:
        raise LedgerError(
            f"{src}: card(s) {missing_cards} print a budget table but no 'card N settled at' line; "
            "the boot may not have settled yet (read again once it serves), or the log was cut"
        )
    return BudgetReading(boot, tuple(cards[c] for c in sorted(cards)), flags)


# ---------------------------------------------------------------------------------------
# The ceiling


@dataclass(frozen=True)
class Reserve:
    """MiB held back below the ceiling: traced to a ledger line, or labelled personal."""

    mib: Decimal
    label: str
    line: Line | None
    """The ledger line that holds the figure (a traced reserve); None for a personal one."""


@dataclass(frozen=True)
class CardCeiling:
    card: int
    free_mib: Decimal
    floor_mib: Decimal
    pair_mib: Decimal
    ceiling_mib: int
    derivation: str


@dataclass(frozen=True)
class Ceiling:
    cards: tuple[CardCeiling, ...]
    binding_card: int
    ceiling_mib: int
    pair_mib: Decimal
    headroom_mib: int
    reserves: tuple[Reserve, ...]
    max_pair_mib: int
    """The ceiling less every reserve: the largest pair the gate should allow."""


def card_ceiling(card: int, free_mib: Decimal, floor_mib: Decimal, pair_mib: Decimal) -> CardCeiling:
    """ceiling = (settled_free - engine_floor) + current_pair_sum, rounded down to whole MiB.

    The derivation is written with whole MiB as the seed's worked example does
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


def compute_ceiling(reading: BudgetReading, reserves: tuple[Reserve, ...] = ()) -> Ceiling:
    """The ceiling of every card; the smallest binds."""
    cards = tuple(
        card_ceiling(c.card, c.free.size.mib, c.floor.size.mib, c.pair_mib) for c in reading.cards
    )
    binding = min(cards, key=lambda c: (c.ceiling_mib, c.card))
    held = sum((r.mib for r in reserves), Decimal(0))
    return Ceiling(
        cards=cards,
        binding_card=binding.card,
        ceiling_mib=binding.ceiling_mib,
        pair_mib=binding.pair_mib,
        headroom_mib=round_down(binding.ceiling_mib - binding.pair_mib),
        reserves=reserves,
        max_pair_mib=round_down(binding.ceiling_mib - held),
    )


def trace_reserve(boot: Boot, mib: Decimal, label: str, line_number: int | None, personal: bool) -> Reserve:
    """Accept a reserve only if a line of this boot holds its figure, or it is labelled personal.

    A reserve that cannot be traced to the ledger is a personal reserve: the procedures allow
    it only under that label, so the gate shows it for what it is.
    """
    if mib < 0:
        raise InputError(f"reserve {label!r}: mib={mib} is negative; a reserve holds memory back (>= 0)")
    if personal:
        if line_number is not None:
            raise InputError(
                f"reserve {label!r}: give either line (traced) or personal=true, not both"
            )
        if not label.strip():
            raise GuardRailError("a personal reserve needs a label saying whose reserve it is and why")
        return Reserve(mib, label, None)
    if line_number is None:
        raise GuardRailError(
            f"reserve {label!r} of {fmt_mib(mib, 2)} MiB is neither traced nor labelled: cite the "
            f"number of a line of this boot ({boot.where()}) that holds the figure (line=N), "
            "or label it personal (personal=true) so the gate records it as a personal reserve"
        )
    line = boot.line(line_number)
    if line is None:
        raise GuardRailError(
            f"reserve {label!r}: line {line_number} is not a ledger line of {boot.where()}; "
            "cite a line the tool reported (e.g. the settled or unclaimed line), or label it personal"
        )
    sizes = _sizes_on(line)
    if not any(size.agrees_with(mib) for size in sizes):
        shown = ", ".join(f"{s.text} = {fmt_mib(s.mib, 2)} MiB" for s in sizes) or "no size"
        raise GuardRailError(
            f"reserve {label!r}: line {line_number} ({line.text.strip()!r}) does not hold "
            f"{fmt_mib(mib, 2)} MiB (it holds {shown}); cite the line that does, or label it personal"
        )
    return Reserve(mib, label, line)


def _sizes_on(line: Line) -> list[Size]:
    """Every size printed on the line, and the MiB value of every echoed --*-mib flag."""
    sizes = []
    for match in re.finditer(SIZE, line.text):
        try:
            sizes.append(parse_size(match.group(0)))
        except LedgerError:
            continue
    for flag_match in re.finditer(r"(?<![a-z-])--(?:[a-z]++-)++mib\s+(\d[\d,]*)", line.text):
        try:
            sizes.append(parse_size(f"{flag_match.group(1)} MiB"))
        except LedgerError:
            continue
    return sizes


# ---------------------------------------------------------------------------------------
# The pool contract


@dataclass(frozen=True)
class PoolContract:
    pool_mib: Decimal
    seqs: int
    max_model_len: int
    dtype: KVDtype
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


MAX_POOL_MIB = 1 << 30
"""1 PiB: no card's pool is larger; a bigger figure is a unit mistake (bytes passed as MiB)."""

REFUSAL = "does not fit the {window} token context, which leaves nothing to generate into"


def pool_contract(
    pool_mib: Decimal, seqs: int, max_model_len: int, dtype: KVDtype, model: ModelConstants
) -> PoolContract:
    """pool_mib >= seqs * max_model_len * rate + per_seq * seqs + fixed (rate in B, the rest MiB)."""
    if dtype not in model.rate_bytes_per_token:
        raise InputError(
            f"kv_cache_dtype={dtype!r}: radiance takes only bf16 or fp8, one dtype for the whole cache"
        )
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
