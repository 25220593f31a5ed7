"""The resize procedure's arithmetic, pure: the budget reading, the ceiling, reserves, the pool contract.

Numbers in, frozen records out; no I/O. MiB is the unit of record and Decimal keeps the
printed figures exact (2.01 GiB is 2,058.24 MiB, not a float near it).

What may back a reserve (decided here, once)
--------------------------------------------
The ceiling, ``(settled_free - engine_floor) + pair`` per card, stands on what the engine
measured once boot settled. Whatever was charged to the card before that (the driver's
context, the activation arena, the static region) is outside the settled free figure; the
engine floor is subtracted from it; the pair is added back whole. A reserve lowers the gate
below the ceiling, so it is *traced* only when the line it cites holds card memory the
ceiling does not already account for. Every size radiance prints has a mark in the phrase
table (``ledger.PHRASES``, ``reserve=``), and each kind has its reason and remedy in
``REFUSALS``:

- ``may serve``: the ``unclaimed`` row, less the engine floor of its card. The engine prints
  it as card memory no budget claims, "the headroom, the unusable above, rounding". Its
  headroom part is the engine floor, which the ceiling already subtracts (a reserve of it
  would count it twice), so only the rest serves: the unusable memory and rounding (477.30 -
  209.19 = 268.11 MiB in the example boot). The engine does not say whether its settled free
  figure leaves that memory out; if it does not, the ceiling counts as room for the pair
  memory the engine says no budget can use. A reserve of it counts nothing twice and stands
  on the engine's own figure: conservative, never double. It is the only one.
- ``ceiling input``: the settled free memory; the ceiling is built from it.
- ``engine floor``: ``--gpu-headroom-mib``, the static region and the floor they make; the
  ceiling subtracts them already.
- ``before claimable``: the activation arena, charged to the card before claimable; the
  settled free figure is measured after it, so the ceiling already leaves it out.
- ``pair``: vram_weights and vram_kv (rows and flags), the weights in VRAM, the KV cache the
  boot funded, and the expert prefetch and the ledger mover's lendable KV (both lent out of
  the KV cache, inside vram_kv): the pair is what the ceiling bounds; holding part of it back
  below the ceiling counts the pair against itself.
- ``card totals``: the card total, claimable, the VRAM budgets total and what it leaves: sums
  of the parts above.
- ``not VRAM``: ``--host-pool-mib``, the weights in the host pool, the container-on-disk tier:
  host RAM and disk never come out of the card.

A line outside the boot read, a line that holds no phrase, a figure no phrase names, and a
candidate cited twice are refused too. A personal reserve (``personal=true``) needs no line;
it is labelled as such in the output and the gate. The arithmetic never takes a figure it
cannot honour: a reserve must be finite and at least 0, no reserve may exceed its card's
ceiling, and the reserves together may not leave ``max_pair_mib`` below 0; leaving it below
the current pair is allowed, with a warning.

A boot that refused to start or never settled has no ceiling: ``read_budget`` raises
``BootNotSettled`` with its lines and the next tool (``boot_finding``), and a boot whose
figures cannot be physical (more free than the card, a pair above the card, floor parts that
do not add up) is refused naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Literal

from radiance_mcp.constants import MAX_POOL_MIB, MIB, KVDtype, ModelConstants
from radiance_mcp.errors import BootNotSettled, GuardRailError, InputError, LedgerError
from radiance_mcp.ledger import PHRASES, Boot, BootState, Hit, Line, ReserveKind, ReserveMark, boot_state
from radiance_mcp.units import SIZE, Size, fmt_mib, parse_number, parse_size, round_down

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
    pair_resolution_mib: Decimal = Decimal(0)
    """The pair's rounding step: 0 from the echoed flags, the rows' steps from the table."""


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


def _quoted(line: Line) -> str:
    text = line.text.strip()
    return repr(text if len(text) <= 200 else text[:200] + "...")


def boot_finding(boot: Boot, state: BootState) -> str:
    """What a boot that did not settle tells the reader: its lines, and the tool to call next."""
    src = boot.where()
    this = boot.index - boot.boots_seen - 1 if boot.boots_seen else None
    earlier = f"boot={this - 1}" if this is not None and boot.index > 1 else None
    lines = "; ".join(f"line {line.number}: {_quoted(line)}" for line in state.lines)
    if state.status == "refused":
        where = (f"on this ledger, proven_boot={this - 1} and candidate_boot={this}" if earlier and this
                 else "this boot as the candidate, the last boot that served (its own ledger) as the proven one")
        read_from = f" ({earlier}, if it served)" if earlier else ""
        return (
            f"{src}: this boot refused to start ({lines}). A refused boot never settles, so it has no "
            f"ceiling and its pool backs nothing. Next: audit_step_shape ({where}) to price the shape "
            f"change that refused; read the ceiling from a boot that settled{read_from}."
        )
    words = PHRASES["settled"].keyword
    detail = [f"line {line.number} holds {words!r} but not as 'card N settled at X free against F' with "
              f"sizes (a negative or malformed figure?): {_quoted(line)}"
              for key, line in boot.near_misses if key == "settled"]
    serving = boot.first("serving")
    before = f" (or an earlier boot, {earlier})" if earlier else ""
    if serving is not None:
        detail.append(f"it serves (line {serving.line.number}), so the log read was filtered or cut")
        next_step = f"pass the service's complete boot log{before}"
    else:
        next_step = (f"it has not settled yet (still starting, or the log was cut): read it again once the service "
                     f"serves{before}")
    found = f" ({'; '.join(detail)})" if detail else ""
    return (
        f"{src}: this boot printed no 'card N settled at X free against F' line and no refusal{found}, so it has "
        f"no ceiling. Next: {next_step}; to compare its shape with a boot that served, call audit_step_shape."
    )


def read_budget(boot: Boot) -> BudgetReading:
    """Per card: the table rows, the settled line, and the pair with where it came from.

    Table rows belong to the card named by the nearest 'VRAM budget, card N' header before
    them, else to the cards in order (the first 'card total' row starts card 0). The
    'settled' line names its card itself. A boot that refused or never settled raises
    BootNotSettled; figures no card can have raise LedgerError naming the line.
    """
    src = boot.where()
    state = boot_state(boot)
    if state.status != "settled":
        raise BootNotSettled(boot_finding(boot, state), state.status, tuple(line.number for line in state.lines))
    _refuse_negative_rows(boot)
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

    _refuse_contradicting_flags(boot)
    flags = {name: str(hit.fields["value"]) for name, hit in boot.flags.items()}
    flag_hits = boot.flags
    settled_at: dict[int, Line] = {}
    for hit in boot.all("settled"):
        number = _card_index(hit, src)
        if number in settled_at:
            _refuse_twice(src, f"a 'card {number} settled at' line", settled_at[number], hit.line)
        settled_at[number] = hit.line
    cards: dict[int, CardBudget] = {}
    for hit in boot.all("settled"):
        number = _card_index(hit, src)
        table = rows.get(number, {})
        disagreements: list[str] = []
        if all(f in flag_hits for f in PAIR_FLAGS):
            values = [flag_hits[f].number("value", src) for f in PAIR_FLAGS]
            pair = sum(values, Decimal(0))
            pair_source: Literal["echoed flags", "table rows"] = "echoed flags"
            pair_lines = tuple(flag_hits[f].line for f in PAIR_FLAGS)
            resolution = Decimal(0)
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
            resolution = table["vram_weights"].size.resolution_mib + table["vram_kv"].size.resolution_mib
        budget = CardBudget(
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
            pair_resolution_mib=resolution,
        )
        _refuse_impossible(budget, _funded_pair(boot), src)
        _refuse_floor_against_flag(budget, flag_hits.get("gpu-headroom-mib"), src)
        cards[number] = budget
    missing_cards = ", ".join(str(c) for c in sorted(set(rows) - set(cards)))
    if missing_cards:
        raise LedgerError(
            f"{src}: card(s) {missing_cards} print a budget table but no 'card N settled at' line; "
            "the boot may not have settled yet (read again once it serves), or the log was cut"
        )
    return BudgetReading(boot, tuple(cards[c] for c in sorted(cards)), flags)


def _refuse_twice(src: str, what: str, first: Line, second: Line) -> None:
    """One figure printed twice in one boot: which one counts is ambiguous, so neither is taken."""
    raise LedgerError(
        f"{src}: {what} is printed twice in one boot, at line {first.number} ({_quoted(first)}) and line "
        f"{second.number} ({_quoted(second)}); which figure counts is ambiguous. Read the service's own "
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


def _refuse_floor_against_flag(card: CardBudget, flag: Hit | None, src: str) -> None:
    """The settled line's headroom (or, without it, its whole floor) cannot contradict the echoed flag."""
    if flag is None:
        return
    flag_mib = flag.number("value", src)
    part, figure = ("headroom", card.headroom) if card.headroom is not None else ("floor", card.floor)
    contradicts = not figure.size.agrees_with(flag_mib) if part == "headroom" else (
        figure.size.mib + figure.size.resolution_mib / 2 < flag_mib)
    if contradicts:
        relation = "is not" if part == "headroom" else "is less than"
        raise LedgerError(
            f"{src}:{figure.line.number}: card {card.card}'s {part} of {figure.size.text} on its settled line "
            f"{relation} the echoed --gpu-headroom-mib {fmt_mib(flag_mib, 2)} MiB (line {flag.line.number}: "
            f"{_quoted(flag.line)}); this is not a boot radiance printed: read the service's own ledger "
            "(service, or log on its host)"
        )


def _refuse_negative_rows(boot: Boot) -> None:
    """A budget row printed with a negative size (its pattern reads only sizes) is refused by its line."""
    for key, line in boot.near_misses:
        if re.search(rf"{re.escape(PHRASES[key].keyword)}\s+-\s*\d", line.text):
            raise LedgerError(
                f"{boot.where()}:{line.number}: {PHRASES[key].keyword!r} with a negative size, which no card "
                f"has: {_quoted(line)}; this is not a boot radiance printed: read the service's own ledger"
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


def _refuse_impossible(card: CardBudget, funded: tuple[Decimal, Decimal] | None, src: str) -> None:
    """Figures no card can show together: refused naming their lines, within the printed rounding.

    Free memory and the pair cannot share the card past its total; the pair counted is the
    one allocated (the funded pair where the boot prints one below the stated pair).
    """

    def over(a: Decimal, a_step: Decimal, b: Decimal, b_step: Decimal) -> bool:
        return a - b > (a_step + b_step) / 2

    free, floor, total = card.free, card.floor, card.total
    pair_at = ", ".join(str(line.number) for line in card.pair_lines)
    remedy = "this is not a boot radiance printed: read the service's own ledger (service, or log on its host)"
    if total is not None:
        t, t_step = total.size.mib, total.size.resolution_mib
        if over(free.size.mib, free.size.resolution_mib, t, t_step):
            raise LedgerError(
                f"{src}:{free.line.number}: card {card.card} settled at {free.size.text} free, more than the card "
                f"total of {total.size.text} (line {total.line.number}); {remedy}"
            )
        if over(card.pair_mib, card.pair_resolution_mib, t, t_step):
            raise LedgerError(
                f"{src}: card {card.card}'s pair of {fmt_mib(card.pair_mib, 2)} MiB (lines {pair_at}) is more than "
                f"the card total of {total.size.text} (line {total.line.number}); {remedy}"
            )
        pair, pair_step = (card.pair_mib, card.pair_resolution_mib)
        if funded is not None and funded[0] < pair:
            pair, pair_step = funded
        both = free.size.mib + pair
        if over(both, free.size.resolution_mib + pair_step, t, t_step):
            raise LedgerError(
                f"{src}:{free.line.number}: card {card.card} settled at {free.size.text} free with a pair of "
                f"{fmt_mib(pair, 2)} MiB (lines {pair_at}) allocated: {fmt_mib(both, 2)} MiB, more than "
                f"the card total of {total.size.text} (line {total.line.number}); {remedy}"
            )
    if card.headroom is not None and card.static is not None:
        parts = card.headroom.size.mib + card.static.size.mib
        step = card.headroom.size.resolution_mib + card.static.size.resolution_mib
        if over(parts, step, floor.size.mib, floor.size.resolution_mib) or over(
            floor.size.mib, floor.size.resolution_mib, parts, step
        ):
            raise LedgerError(
                f"{src}:{floor.line.number}: card {card.card}'s floor of {floor.size.text} is not its "
                f"{card.headroom.size.text} headroom plus {card.static.size.text} static region "
                f"({fmt_mib(parts, 2)} MiB); {remedy}"
            )


# ---------------------------------------------------------------------------------------
# Reserves


@dataclass(frozen=True)
class Candidate:
    """A figure of this boot that may back a reserve: the unclaimed row less its card's engine floor."""

    card: int
    line: Line
    mib: Decimal
    tolerance_mib: Decimal
    """How far a cited figure may be from mib and still be this one (the printed figures' rounding)."""
    printed: str
    why: str


def reserve_candidates(reading: BudgetReading) -> tuple[Candidate, ...]:
    """Every figure of the boot a reserve may cite (see the module docstring: only unclaimed serves)."""
    candidates = []
    for card in reading.cards:
        unclaimed = card.unclaimed
        if unclaimed is None:
            continue
        rest = unclaimed.size.mib - card.floor.size.mib
        if rest <= 0:
            continue
        candidates.append(Candidate(
            card=card.card,
            line=unclaimed.line,
            mib=rest,
            tolerance_mib=(unclaimed.size.resolution_mib + card.floor.size.resolution_mib) / 2,
            printed=f"{unclaimed.size.text} unclaimed less the {card.floor.size.text} engine floor "
                    f"(line {card.floor.line.number})",
            why=f"card {card.card}'s memory no budget can use (the unusable above, and rounding): the engine "
                "does not say whether its settled free figure leaves it out, so the ceiling may count it "
                "as room for the pair; its headroom part is the engine floor, already subtracted",
        ))
    return tuple(candidates)


REFUSALS: dict[ReserveKind | str, tuple[str, str]] = {
    "ceiling input": (
        "the ceiling is built from it: (settled free - engine floor) + pair",
        "drop the reserve: the ceiling already stands on this figure",
    ),
    "engine floor": (
        "it is already in the engine floor, which the ceiling subtracts from the settled free memory; "
        "a reserve of it counts it twice",
        "drop the reserve: the ceiling keeps the floor already",
    ),
    "before claimable": (
        "the activation arena is charged to the card before claimable, so the settled free memory is "
        "measured after it: the ceiling already leaves it out",
        "drop the reserve; to change the arena, change --max-num-batched-tokens and price the step with "
        "audit_step_shape",
    ),
    "pair": (
        "it is part of the pair (vram_weights + vram_kv), which is what the ceiling bounds; holding it back "
        "below the ceiling counts the pair against itself",
        "compare the pair (or the member you want to size) with max_pair_mib instead of reserving it",
    ),
    "card totals": (
        "it is a total of the card or of its budgets: each of its parts is already in the pair, the engine "
        "floor or the settled free memory",
        "drop the reserve: the ceiling is the bound these totals give",
    ),
    "not VRAM": (
        "it is host RAM or disk, not card memory: it never comes out of the ceiling",
        "drop the reserve: host memory is bounded by the host, not by this ceiling",
    ),
    "unnamed": (
        "no phrase of the ledger names this figure, so nothing says it is card memory the ceiling "
        "leaves out",
        "cite a figure this boot can back, or label the reserve personal (personal=true)",
    ),
}
"""Why each kind of figure cannot back a reserve, and what to do instead (the module docstring says why)."""


@dataclass(frozen=True)
class Reserve:
    """MiB held back below the ceiling: traced to a ledger line, or labelled personal."""

    mib: Decimal
    label: str
    line: Line | None
    """The ledger line that holds the figure (a traced reserve); None for a personal one."""
    card: int | None = None
    """The card whose memory a traced reserve holds back; None (personal): every card."""


MAX_SHOWN_MIB = Decimal(10) ** 12


def shown_mib(value: Decimal) -> str:
    """A caller's figure in a message: '1,986.22', or '1.000E+308' from 10^12 MiB up (never 300 digits)."""
    if value.is_finite() and abs(value) < MAX_SHOWN_MIB:
        return fmt_mib(value, 2)
    return f"{value:.3E}" if value.is_finite() else str(value)


def _candidate_list(candidates: tuple[Candidate, ...]) -> str:
    if not candidates:
        return ("This boot prints no figure that can back a reserve: a reserve of your own goes in with "
                "personal=true and a label saying why.")
    listed = "; ".join(f"line {c.line.number} (card {c.card}): mib={fmt_mib(c.mib, 2)}, {c.printed}"
                       for c in candidates)
    return f"Figures of this boot that can back a reserve: {listed}. Anything else goes in with personal=true."


def trace_reserve(
    reading: BudgetReading, mib: Decimal, label: str, line_number: int | None, personal: bool,
    taken: tuple[Reserve, ...] = (),
) -> Reserve:
    """Accept a reserve only if its line holds a figure that may serve (reserve_candidates), or it is personal.

    taken: the reserves already accepted in this call (a candidate backs one reserve, once).
    """
    if not mib.is_finite():
        raise InputError(f"reserve {label!r}: mib={mib} is not a finite number of MiB; pass the reserve in MiB")
    if mib < 0:
        raise InputError(f"reserve {label!r}: mib={shown_mib(mib)} is negative; a reserve holds memory back (>= 0)")
    boot = reading.boot
    if personal:
        if line_number is not None:
            raise InputError(f"reserve {label!r}: give either line (traced) or personal=true, not both")
        if not label.strip():
            raise GuardRailError("a personal reserve needs a label saying whose reserve it is and why",
                                 rule="reserve_traced")
        return Reserve(mib, label, None)
    candidates = reserve_candidates(reading)
    head = f"reserve {label!r} of {shown_mib(mib)} MiB"
    if line_number is None:
        raise GuardRailError(
            f"{head} is neither traced nor labelled: cite the line of this boot ({boot.where()}) that holds "
            f"its figure (line=N), or label it personal (personal=true) so the gate records it as a personal "
            f"reserve. {_candidate_list(candidates)}",
            rule="reserve_traced",
        )
    if not boot.first_line <= line_number <= boot.last_line:
        raise GuardRailError(
            f"{head}: line {line_number} is outside the boot read ({boot.where()}); a reserve is traced "
            f"only to the boot whose ceiling it lowers: cite a line of it, or read the other boot with "
            f"boot=N. {_candidate_list(candidates)}",
            rule="reserve_traced",
        )
    line = boot.line(line_number)
    if line is None:
        raise GuardRailError(
            f"{head}: line {line_number} holds no ledger phrase of {boot.where()}, so no figure on it is traced. "
            f"{_candidate_list(candidates)}",
            rule="reserve_traced",
        )
    for candidate in candidates:
        if candidate.line.number == line_number and abs(candidate.mib - mib) <= candidate.tolerance_mib:
            used = next((r for r in taken if r.line is not None and r.line.number == line_number), None)
            if used is not None:
                raise GuardRailError(
                    f"{head}: line {line_number}'s figure already backs reserve {used.label!r}; a figure backs "
                    "one reserve, once",
                    rule="reserve_not_counted",
                )
            return Reserve(mib, label, line, candidate.card)
    figures = _figures_on(boot, line)
    same = [(size, mark) for size, mark in figures if size.agrees_with(mib)]
    if same:
        size, mark = same[0]
        if mark is not None and mark.kind == "may serve":
            rest = next((c for c in candidates if c.line.number == line_number), None)
            part = (f"only its part beyond the engine floor may serve: mib={fmt_mib(rest.mib, 2)} "
                    f"({rest.printed})" if rest else "this boot's floor leaves none of it to serve")
            raise GuardRailError(
                f"{head}: line {line_number} holds it as {mark.what} ({size.text}), which counts the engine "
                f"floor the ceiling already subtracts; {part}. {_candidate_list(candidates)}",
                rule="reserve_not_counted",
            )
        reason, remedy = REFUSALS[mark.kind if mark is not None else "unnamed"]
        what = mark.what if mark is not None else "a figure"
        raise GuardRailError(
            f"{head}: line {line_number} holds it as {what} ({size.text}), which cannot back a reserve: {reason}. "
            f"Remedy: {remedy}. {_candidate_list(candidates)}",
            rule="reserve_not_counted",
        )
    shown = ", ".join(f"{s.text} = {fmt_mib(s.mib, 2)} MiB" for s, _ in figures) or "no size"
    raise GuardRailError(
        f"{head}: line {line_number} ({line.text.strip()!r}) does not hold {shown_mib(mib)} MiB (it holds "
        f"{shown}). {_candidate_list(candidates)}",
        rule="reserve_traced",
    )


def _figures_on(boot: Boot, line: Line) -> list[tuple[Size, ReserveMark | None]]:
    """Every size on the line, with the mark its phrase gives it (None: a size no phrase names).

    The echoed '--*-mib' flags count as sizes in MiB, marked by flag.
    """
    figures: list[tuple[Size, ReserveMark | None]] = []
    named: set[str] = set()
    for hit in boot.hits:
        if hit.line.number != line.number:
            continue
        marks = PHRASES[hit.key].reserve
        if hit.key == "flag":
            flag = f"--{hit.fields.get('flag')}"
            if flag.endswith("-mib"):
                try:
                    size = parse_size(f"{hit.fields.get('value')} MiB")
                except LedgerError:
                    continue
                figures.append((size, marks.get(flag)))
            continue
        for group, mark in marks.items():
            raw = hit.fields.get(group)
            if raw:
                try:
                    figures.append((parse_size(raw), mark))
                    named.add(raw)
                except LedgerError:
                    continue
    for match in re.finditer(SIZE, line.text):
        if match.group(0) not in named:
            try:
                figures.append((parse_size(match.group(0)), None))
            except LedgerError:
                continue
    return figures


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


def compute_ceiling(reading: BudgetReading, reserves: tuple[Reserve, ...] = ()) -> Ceiling:
    """The ceiling of every card (the smallest binds), and the largest pair its reserves leave.

    A traced reserve holds memory back on its own card, a personal one on every card. A
    reserve above its card's ceiling, or reserves leaving a card's max pair below 0, are
    refused (GuardRailError); a max pair below the current pair comes back with a warning.
    """
    cards = tuple(
        card_ceiling(c.card, c.free.size.mib, c.floor.size.mib, c.pair_mib) for c in reading.cards
    )
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
    if max_pair < tightest.pair_mib:
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
        headroom_mib=round_down(binding.ceiling_mib - binding.pair_mib),
        reserves=reserves,
        max_pair_mib=max_pair,
        warnings=tuple(warnings),
    )


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
