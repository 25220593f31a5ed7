"""The budget reading of a radiance boot, pure: per card the table rows, the settled line and the pair.

Text records in (core.boot.Boot), frozen records out; no I/O. MiB is the unit of record and
Decimal keeps the printed figures exact (2.01 GiB is 2,058.24 MiB, not a float near it).

A boot that refused to start or never settled has no ceiling: ``read_budget`` raises
``BootNotSettled`` with its lines and the next tool (core.rules.settled), and a boot whose
figures cannot be physical (more free than the card, a pair above the card, floor parts that
do not add up) is refused naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from radiance_mcp.core.boot import Boot, Figure, Hit, Line, Missing, RankView, quoted
from radiance_mcp.core.errors import LedgerError
from radiance_mcp.core.ledger import PHRASES
from radiance_mcp.core.rules.settled import require_settled
from radiance_mcp.core.units import fmt_mib, parse_number

PAIR_FLAGS = ("vram-weights-mib", "vram-kv-mib")


# ---------------------------------------------------------------------------------------
# The budget table


@dataclass(frozen=True)
class BudgetReading:
    boot: Boot
    cards: tuple[RankView, ...]
    """One per settled card, in card order (``RankView.card``)."""
    flags: dict[str, str]


def _figure(hit: Hit, name: str, source: str) -> Figure:
    return Figure.of_size(hit.size(name, source), hit.line)


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
    'settled' line names its card itself. A boot that refused or never settled raises
    BootNotSettled; figures no card can have raise LedgerError naming the line.
    """
    src = boot.where()
    require_settled(boot)
    _refuse_negative_rows(boot)
    rows = _table_rows(boot, src)
    _refuse_contradicting_flags(boot)
    settled = _settled_lines(boot, src)
    funded = _funded_pair(boot)
    cards: dict[int, RankView] = {}
    for number, hit in settled.items():
        table = rows.get(number, {})
        budget = _card_budget(number, hit, table, _card_pair(number, table, boot.flags, src), src)
        _refuse_impossible(budget, funded, src)
        _refuse_floor_against_flag(budget, boot.flags.get("gpu-headroom-mib"), src)
        cards[number] = budget
    missing_cards = ", ".join(str(c) for c in sorted(set(rows) - set(cards)))
    if missing_cards:
        raise LedgerError(
            f"{src}: card(s) {missing_cards} print a budget table but no 'card N settled at' line; "
            "the boot may not have settled yet (read again once it serves), or the log was cut"
        )
    flags = {name: str(hit.fields["value"]) for name, hit in boot.flags.items()}
    return BudgetReading(boot, tuple(cards[c] for c in sorted(cards)), flags)


def _table_rows(boot: Boot, src: str) -> dict[int, dict[str, Figure]]:
    """The budget table's rows by card: under the nearest header, else in the order the cards print them."""
    rows: dict[int, dict[str, Figure]] = {}
    card, headed = -1, False
    for hit in boot.hits:
        if hit.key == "budget_header":
            card, headed = _card_index(hit, src), True
        elif hit.key == "card_total" and not headed and (card < 0 or "card_total" in rows.get(card, {})):
            card = max([card, *rows]) + 1
        if hit.key in ("card_total", "vram_weights", "vram_kv", "unclaimed"):
            table = rows.setdefault(max(card, 0), {})
            if hit.key in table:
                _refuse_twice(src, f"card {max(card, 0)}'s {PHRASES[hit.key].keyword!r} row", table[hit.key].line,
                              hit.line)
            table[hit.key] = _figure(hit, "size", src)
    return rows


def _settled_lines(boot: Boot, src: str) -> dict[int, Hit]:
    """Each card's 'card N settled at' line; a card settled twice in one boot is refused by both lines."""
    settled: dict[int, Hit] = {}
    for hit in boot.all("settled"):
        number = _card_index(hit, src)
        if number in settled:
            _refuse_twice(src, f"a 'card {number} settled at' line", settled[number].line, hit.line)
        settled[number] = hit
    return settled


@dataclass(frozen=True)
class _Pair:
    mib: Decimal
    source: Literal["echoed flags", "table rows"]
    lines: tuple[Line, ...]
    resolution_mib: Decimal
    disagreements: tuple[str, ...]


def _card_pair(number: int, table: dict[str, Figure], flag_hits: dict[str, Hit], src: str) -> _Pair:
    """The pair from the echoed flags (exact; each row that disagrees beyond its rounding said), else the rows."""
    if all(f in flag_hits for f in PAIR_FLAGS):
        values = [flag_hits[f].number("value", src) for f in PAIR_FLAGS]
        disagreements = []
        for flag, value, row in zip(PAIR_FLAGS, values, ("vram_weights", "vram_kv"), strict=True):
            figure = table.get(row)
            if figure and not figure.agrees_with(value):
                disagreements.append(
                    f"card {number}: --{flag} {fmt_mib(value)} MiB (line {flag_hits[flag].line.number}) "
                    f"but the table's {row} row says {figure.printed} = {fmt_mib(figure.value, 2)} "
                    f"MiB (line {figure.line.number}), beyond its rounding of "
                    f"+-{fmt_mib(figure.resolution / 2, 2)} MiB"
                )
        return _Pair(sum(values, Decimal(0)), "echoed flags", tuple(flag_hits[f].line for f in PAIR_FLAGS),
                     Decimal(0), tuple(disagreements))
    missing = [row for row in ("vram_weights", "vram_kv") if row not in table]
    if missing:
        raise LedgerError(
            f"{src}: the pair of card {number} cannot be read: the boot echoes neither "
            f"--vram-weights-mib and --vram-kv-mib nor the table's {' and '.join(missing)} "
            f"row (phrase {PHRASES[missing[0]].keyword!r}); pass a log whose boot prints them"
        )
    weights, kv = table["vram_weights"], table["vram_kv"]
    return _Pair(weights.value + kv.value, "table rows", (weights.line, kv.line),
                 weights.resolution + kv.resolution, ())


def _card_budget(number: int, hit: Hit, table: dict[str, Figure], pair: _Pair, src: str) -> RankView:
    weights, kv = table.get("vram_weights"), table.get("vram_kv")
    return RankView(
        rank=str(number),
        card=number,
        total_mib=table.get("card_total"),
        weights_mib=weights,
        kv_mib=kv,
        unclaimed_mib=table.get("unclaimed"),
        free_mib=_figure(hit, "free", src),
        floor_mib=_figure(hit, "floor", src),
        gpu_headroom_mib=_figure(hit, "headroom", src) if hit.fields.get("headroom") else None,
        static_mib=_figure(hit, "static", src) if hit.fields.get("static") else None,
        pair=Figure(pair.mib, "MiB", pair.lines, pair.resolution_mib, f"the pair from the {pair.source}"),
        pair_source=pair.source,
        disagreements=pair.disagreements,
        missing=KV_IN_MIB,
    )


KV_IN_MIB = (
    Missing("kv_tokens", "its KV cache in MiB only (the table's vram_kv row, the echoed --vram-kv-mib)",
            "check_pool_contract prices the tokens at the model's bytes per token for --kv-cache-dtype"),
    Missing("kv_bytes_per_token", "the model's constant per --kv-cache-dtype, not a ledger line",
            "the fleet config's [models] table holds it (the seed's model is built in)"),
)
"""What radiance does not print of a card that the other engines do: its KV cache in tokens, and their rate."""


def _refuse_twice(src: str, what: str, first: Line, second: Line) -> None:
    """One figure printed twice in one boot: which one counts is ambiguous, so neither is taken."""
    raise LedgerError(
        f"{src}: {what} is printed twice in one boot, at line {first.number} ({quoted(first)}) and line "
        f"{second.number} ({quoted(second)}); which figure counts is ambiguous. Read the service's own "
        "ledger (service, or log on its host), or pass one boot's lines as printed"
    )


def _refuse_contradicting_flags(boot: Boot) -> None:
    """A '--*-mib' flag the budget reads, echoed twice in one boot with two values, is refused by both lines."""
    seen: dict[str, Hit] = {}
    for hit in boot.all("flag"):
        name = str(hit.fields["flag"])
        if f"--{name}" not in PHRASES["flag"].reserve:
            continue
        first = seen.setdefault(name, hit)
        if first is not hit and _flag_value(first) != _flag_value(hit):
            _refuse_twice(boot.where(), f"--{name} with two values", first.line, hit.line)


def _flag_value(hit: Hit) -> Decimal | str:
    try:
        return parse_number(str(hit.fields["value"]))
    except LedgerError:
        return str(hit.fields["value"])


def _refuse_floor_against_flag(card: RankView, flag: Hit | None, src: str) -> None:
    """The settled line's headroom (or, without it, its whole floor) cannot contradict the echoed flag."""
    if flag is None:
        return
    flag_mib = flag.number("value", src)
    part, figure = ("headroom", card.gpu_headroom_mib) if card.gpu_headroom_mib is not None else (
        "floor", card.require("floor_mib"))
    contradicts = not figure.agrees_with(flag_mib) if part == "headroom" else (
        figure.value + figure.resolution / 2 < flag_mib)
    if contradicts:
        relation = "is not" if part == "headroom" else "is less than"
        raise LedgerError(
            f"{src}:{figure.line.number}: card {card.card}'s {part} of {figure.printed} on its settled line "
            f"{relation} the echoed --gpu-headroom-mib {fmt_mib(flag_mib, 2)} MiB (line {flag.line.number}: "
            f"{quoted(flag.line)}); this is not a boot radiance printed: read the service's own ledger "
            "(service, or log on its host)"
        )


def _refuse_negative_rows(boot: Boot) -> None:
    """A budget row printed with a negative size (its pattern reads only sizes) is refused by its line."""
    for key, line in boot.near_misses:
        if re.search(rf"{re.escape(PHRASES[key].keyword)}\s+-\s*\d", line.text):
            raise LedgerError(
                f"{boot.where()}:{line.number}: {PHRASES[key].keyword!r} with a negative size, which no card "
                f"has: {quoted(line)}; this is not a boot radiance printed: read the service's own ledger"
            )


def _funded_pair(boot: Boot) -> tuple[Decimal, Decimal] | None:
    """(MiB, rounding step) of the pair the engine funded: its weights in VRAM and its KV cache, if printed.

    An engine that squeezes the KV cache funds less than the stated pair; the rest is free.
    """
    tiers, kv = boot.first("weights_by_tier"), boot.first("kv_backing")
    if tiers is None or kv is None:
        return None
    weights, cache = tiers.size("vram", boot.where()), kv.size("size", boot.where())
    return weights.mib + cache.mib, weights.resolution_mib + cache.resolution_mib


def _refuse_impossible(card: RankView, funded: tuple[Decimal, Decimal] | None, src: str) -> None:
    """Figures no card can show together: refused naming their lines, within the printed rounding.

    Free memory and the pair cannot share the card past its total; the pair counted is the
    one allocated (the funded pair where the boot prints one below the stated pair).
    """

    def over(a: Decimal, a_step: Decimal, b: Decimal, b_step: Decimal) -> bool:
        return a - b > (a_step + b_step) / 2

    free, floor, total = card.require("free_mib"), card.require("floor_mib"), card.total_mib
    whole = card.require("pair")
    pair_at = ", ".join(str(line.number) for line in whole.lines)
    remedy = "this is not a boot radiance printed: read the service's own ledger (service, or log on its host)"
    if total is not None:
        t, t_step = total.value, total.resolution
        if over(free.value, free.resolution, t, t_step):
            raise LedgerError(
                f"{src}:{free.line.number}: card {card.card} settled at {free.printed} free, more than the card "
                f"total of {total.printed} (line {total.line.number}); {remedy}"
            )
        if over(whole.value, whole.resolution, t, t_step):
            raise LedgerError(
                f"{src}: card {card.card}'s pair of {fmt_mib(whole.value, 2)} MiB (lines {pair_at}) is more than "
                f"the card total of {total.printed} (line {total.line.number}); {remedy}"
            )
        pair, pair_step = whole.value, whole.resolution
        if funded is not None and funded[0] < pair:
            pair, pair_step = funded
        both = free.value + pair
        if over(both, free.resolution + pair_step, t, t_step):
            raise LedgerError(
                f"{src}:{free.line.number}: card {card.card} settled at {free.printed} free with a pair of "
                f"{fmt_mib(pair, 2)} MiB (lines {pair_at}) allocated: {fmt_mib(both, 2)} MiB, more than "
                f"the card total of {total.printed} (line {total.line.number}); {remedy}"
            )
    headroom, static = card.gpu_headroom_mib, card.static_mib
    if headroom is not None and static is not None:
        parts = headroom.value + static.value
        step = headroom.resolution + static.resolution
        if over(parts, step, floor.value, floor.resolution) or over(
            floor.value, floor.resolution, parts, step
        ):
            raise LedgerError(
                f"{src}:{floor.line.number}: card {card.card}'s floor of {floor.printed} is not its "
                f"{headroom.printed} headroom plus {static.printed} static region "
                f"({fmt_mib(parts, 2)} MiB); {remedy}"
            )
