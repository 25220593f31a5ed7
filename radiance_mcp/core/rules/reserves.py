"""Reserves below the ceiling, pure: which figures of a boot may back one, and the tracing of each.

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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from radiance_mcp.core.boot import Boot, Line, ReserveKind, ReserveMark
from radiance_mcp.core.budget import BudgetReading
from radiance_mcp.core.errors import GuardRailError, InputError, LedgerError
from radiance_mcp.core.units import SIZE, Size, fmt_mib, parse_size


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
        unclaimed = card.unclaimed_mib
        if unclaimed is None:
            continue
        floor = card.require("floor_mib")
        rest = unclaimed.value - floor.value
        if rest <= 0:
            continue
        candidates.append(Candidate(
            card=card.card,
            line=unclaimed.line,
            mib=rest,
            tolerance_mib=(unclaimed.resolution + floor.resolution) / 2,
            printed=f"{unclaimed.printed} unclaimed less the {floor.printed} engine floor "
                    f"(line {floor.line.number})",
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


SHOWN_FIGURES = 8
"""Sizes a refusal lists of the cited line (a ledger line holds a few; a hostile one up to 32,768)."""
SHOWN_LINE_CHARS = 200
"""Characters a refusal quotes of the cited line (a ledger line is short; one may run to 64 KiB)."""
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


def _untraced(boot: Boot, mib: Decimal, label: str, line_number: int | None, personal: bool) -> Reserve | None:
    """The checks before a reserve is traced: its figure, and a personal reserve taken as it is (None: trace it)."""
    if not mib.is_finite():
        raise InputError(f"reserve {label!r}: mib={mib} is not a finite number of MiB; pass the reserve in MiB")
    if mib < 0:
        raise InputError(f"reserve {label!r}: mib={shown_mib(mib)} is negative; a reserve holds memory back (>= 0)")
    if personal:
        if line_number is not None:
            raise InputError(f"reserve {label!r}: give either line (traced) or personal=true, not both")
        if not label.strip():
            raise GuardRailError("a personal reserve needs a label saying whose reserve it is and why",
                                 rule="reserve_traced")
        return Reserve(mib, label, None)
    if not _reservable(boot):
        raise GuardRailError(
            f"reserve {label!r}: {boot.engine}'s log prints no figure a traced reserve may cite (its free memory "
            "and floor are the ceiling's own inputs); label it personal=true with what it is for",
            rule="reserve_traced",
        )
    return None


def trace_reserve(
    reading: BudgetReading, mib: Decimal, label: str, line_number: int | None, personal: bool,
    taken: tuple[Reserve, ...] = (),
) -> Reserve:
    """Accept a reserve only if its line holds a figure that may serve (reserve_candidates), or it is personal.

    taken: the reserves already accepted in this call (a candidate backs one reserve, once).
    """
    boot = reading.boot
    personal_reserve = _untraced(boot, mib, label, line_number, personal)
    if personal_reserve is not None:
        return personal_reserve
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
    raise GuardRailError(
        f"{head}: line {line_number} ({_quoted(line)}) does not hold {shown_mib(mib)} MiB (it holds "
        f"{_shown(figures)}). {_candidate_list(candidates)}",
        rule="reserve_traced",
    )


def _quoted(line: Line) -> str:
    """The cited line as a refusal quotes it: whole, or its first SHOWN_LINE_CHARS characters."""
    text = line.text.strip()
    return repr(text if len(text) <= SHOWN_LINE_CHARS else text[:SHOWN_LINE_CHARS] + "...")


def _shown(figures: list[tuple[Size, ReserveMark | None]]) -> str:
    """The sizes of the cited line as a refusal lists them: the first SHOWN_FIGURES, and how many more."""
    shown = ", ".join(f"{s.text} = {fmt_mib(s.mib, 2)} MiB" for s, _ in figures[:SHOWN_FIGURES]) or "no size"
    more = len(figures) - SHOWN_FIGURES
    return f"{shown} and {more:,} more" if more > 0 else shown


def _reservable(boot: Boot) -> bool:
    """Whether any phrase of the boot's dialect prints a figure that may back a reserve (radiance's unclaimed
    row; the other engines print none: their free memory and floor are the ceiling's own inputs)."""
    return any(mark.kind == "may serve" for phrase in boot.phrases.values() for mark in phrase.reserve.values())


def _figures_on(boot: Boot, line: Line) -> list[tuple[Size, ReserveMark | None]]:
    """Every size on the line, with the mark its phrase gives it (None: a size no phrase names).

    The echoed '--*-mib' flags count as sizes in MiB, marked by flag.
    """
    figures: list[tuple[Size, ReserveMark | None]] = []
    named: set[str] = set()
    for hit in boot.hits:
        if hit.line.number != line.number:
            continue
        marks = boot.phrases[hit.key].reserve
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


