"""plan_free_vram over the whole fleet (or a host's services), in an answer of bounded size (issue 26).

The plan of every service is priced (tools/plan.py); the answer holds what a reader of the whole fleet needs of
them, at most FLEET_ANSWER_CHARS characters of structured content whatever the fleet's size: the fleet's
headroom counted once per physical card, the best options by each measure (seats at the window, window at the
seats, resident slots), every problem grouped where services say the same, and one page of services, a line
each, with a cursor for the next (as MCP's own list calls page). One service's whole plan is asked by service=.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from radiance_mcp.core.errors import BootNotSettled, InputError, RadianceMCPError
from radiance_mcp.core.units import fmt_mib
from radiance_mcp.models.plan import (
    MEASURE_UNITS,
    BestOption,
    Measure,
    PhysicalCard,
    PlanFreeVramOutput,
    PlanOption,
    Problem,
    ServicePlan,
    ServiceRow,
    Traced,
    Unreadable,
)

FLEET_ANSWER_CHARS = 16_000
"""The whole fleet's answer, in characters of compact JSON structured content (issue 26)."""
PAGE_ROWS = 40
"""Services per page at most; fewer where their lines would pass FLEET_ANSWER_CHARS."""
BEST_PER_MEASURE = 5
NAMED = 8
"""Services a problem or a note names before it counts the rest."""
DETAIL_CHARS = 800
"""A problem's detail past its location (the ledger's path and lines, kept whole) is clipped to this: a refused
boot's reason and its remedy (about 650) are said whole, so its unreadable entry need not say them again."""
SHARED_CARDS = 10
"""Shared physical cards shown (the page's first); a service's own plan shows its cards."""

Gain = tuple[Measure, str, int, float, float]
"""A ranked gain of an option: by, the option, MiB it adds, the measure after it, its gain over now."""
Said = tuple[str, str | None, str]
"""A problem a plan says: kind, rule, text."""
CardsKept = tuple[Any, Any, list[Any]]
"""tools/plan.py's Cards: a budget reading, its cards' ceilings, their plans."""


def named(names: Sequence[str]) -> str:
    """Names, the first NAMED of them, and how many more."""
    more = f" and {len(names) - NAMED:,} more" if len(names) > NAMED else ""
    return ", ".join(names[:NAMED]) + more


def _located(text: str) -> tuple[str, str]:
    """A reason's location ("PATH (boot 1 of 2, lines 1-26)", or "" where it names none) and what it says."""
    at = text.find("): ")
    return (text[:at + 1], text[at + 3:]) if at >= 0 else ("", text)


def _clip(text: str) -> str:
    """The text's location ("PATH (boot 1 of 2, lines 1-26): ") whole, what it says clipped to DETAIL_CHARS: the
    reason a problem gives does not get shorter as the ledger's path gets longer."""
    head, said = _located(text)
    return (f"{head}: " if head else "") + (said if len(said) <= DETAIL_CHARS else said[:DETAIL_CHARS - 3] + "...")


def cursor_of(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode()


def _start(cursor: str | None, names: Sequence[str]) -> int:
    """Where the page of this cursor starts; a cursor that names no service is refused, naming the remedy."""
    if cursor is None:
        return 0
    try:
        name = base64.urlsafe_b64decode(cursor.encode("ascii")).decode()
    except (binascii.Error, UnicodeError, ValueError):
        name = ""
    if not name or name not in names:
        raise InputError(f"cursor {cursor[:40]!r} is not a next_cursor of this fleet (its services may have "
                         "changed): call plan_free_vram without cursor for the first page")
    return list(names).index(name)


def _measure(gain: Traced) -> Measure | None:
    if gain.now is None:
        return None
    if gain.unit in ("seats", "sequences"):
        return "seats at the window"
    if gain.unit == "tokens" and gain.name.startswith("window"):
        return "window at the seats"
    if gain.unit == "slots":
        return "resident slots"
    return None


def option_line(option: PlanOption) -> str:
    """An option in a line: what it adds, what each gain comes to (and is now)."""
    gains = "; ".join(f"{g.name}: {fmt_mib(g.value, 2)}" + (f" (now {fmt_mib(g.now, 2)})" if g.now is not None else "")
                      for g in option.gains)
    return f"{option.name} +{option.adds_mib:,} MiB: {gains or 'not priced'}"


def _gains(plan: ServicePlan) -> tuple[Gain, ...]:
    """Each gain of the plan's options that one of the measures ranks, over what the service has now."""
    return tuple((by, option.name, option.adds_mib, gain.value, round(gain.value - gain.now, 2))
                 for option in plan.options for gain in option.gains
                 if (by := _measure(gain)) is not None and gain.now is not None and gain.value > gain.now)


def _best(briefs: Sequence[Brief]) -> list[BestOption]:
    found: dict[Measure, list[tuple[float, str, Gain]]] = {}
    for brief in briefs:
        for gain in brief.gains:
            found.setdefault(gain[0], []).append((-gain[4], brief.service, gain))
    return [BestOption(by=by, service=service, option=option, adds_mib=adds, value=value, gain=gained)
            for measure in MEASURE_UNITS
            for _, service, (by, option, adds, value, gained) in sorted(
                found.get(measure, []), key=lambda found: found[:2])[:BEST_PER_MEASURE]]


def _kind(exc: RadianceMCPError) -> Literal["refused boot", "unsettled boot", "unreadable ledger"]:
    if isinstance(exc, BootNotSettled):
        return "refused boot" if exc.status == "refused" else "unsettled boot"
    return "unreadable ledger"


def _problems(plan: ServicePlan) -> tuple[Said, ...]:
    """The plan's problems, (kind, rule, what it says) each: the rules it fails as it runs, and headroom stranded
    on a card no plan spends (a card past the binding one's, or headroom no option passes the rule book with)."""
    said: list[Said] = []
    for check in plan.checks:
        if check.verdict == "fail":
            kind = "below its contract" if check.rule == "pool_contract" else "fails a rule"
            said.append((kind, check.rule, f"{check.arithmetic}; {check.remedy}"))
    binding = next(c for c in plan.cards if c.card == plan.binding_card)
    past = sum(c.headroom_once_mib - binding.headroom_once_mib for c in plan.cards)
    if past > 0:
        said.append(("stranded headroom", None, (
            f"{past:,} MiB on cards past card {binding.card}'s {binding.headroom_once_mib:,}: the pair is per "
            "card, so no plan spends it")))
    elif plan.usable_mib > 0 and not plan.options:
        said.append(("stranded headroom", None, f"{plan.usable_mib:,} MiB no option spends (its notes say why)"))
    return tuple(said)


def problems(briefs: Sequence[Brief], failures: dict[str, RadianceMCPError]) -> list[Problem]:
    """Every problem of the fleet, grouped by kind and rule: refused and unsettled boots, unreadable ledgers,
    pools below their contract today (and any other rule a running service fails), stranded headroom."""
    groups: dict[tuple[str, str | None], list[tuple[str, str]]] = {}
    for name, exc in sorted(failures.items()):
        groups.setdefault((_kind(exc), exc.rule), []).append((name, str(exc)))
    for brief in briefs:
        for kind, rule, text in brief.problems:
            groups.setdefault((kind, rule), []).append((brief.service, text))
    return [Problem(kind=kind, rule=rule, count=len(said), services=[n for n, _ in said[:NAMED]],  # type: ignore[arg-type]
                    detail=_clip(said[0][1]))
            for (kind, rule), said in groups.items()]


@dataclass(frozen=True)
class Brief:
    """What the whole fleet's answer takes of one service's plan: its row, its ranked gains, its problems. The
    fleet's answer keeps these, not the plans, but for its page's (whose pictures it draws)."""

    service: str
    headroom_mib: int
    usable_mib: int
    options: tuple[str, ...]
    gains: tuple[Gain, ...]
    problems: tuple[Said, ...]


def brief(plan: ServicePlan) -> Brief:
    return Brief(plan.service or "", plan.headroom_mib, plan.usable_mib, tuple(option_line(o) for o in plan.options),
                 _gains(plan), _problems(plan))


@dataclass
class _Kept:
    """What the last whole-fleet answers of one fleet config were made of, by service (bounded by its services): a
    service whose inputs are the same again is not worked out again. A new config (another Fleet object) starts
    afresh."""

    fleet: object
    cards: dict[str, tuple[object, CardsKept, tuple[str, ...]]] = field(default_factory=dict)
    """Its boot and configured cards, its cards' plans (the budget reading, the ceilings, the card plans) and the
    notes they add."""
    briefs: dict[str, tuple[object, Brief]] = field(default_factory=dict)
    """What its plan is made of (its boot, its cards and who shares them, the growth planned on them, the
    reserves asked) and its brief."""


_kept: _Kept | None = None


def _kept_of(fleet: object) -> _Kept:
    global _kept
    if _kept is None or _kept.fleet is not fleet:
        _kept = _Kept(fleet)
    return _kept


def card_plans(fleet: object, name: str, inputs: object, notes: list[str],
               make: Callable[[list[str]], CardsKept], *, keep: bool) -> CardsKept:
    """make(notes): a service's card plans, from inputs (its boot and configured cards); with keep, kept, so the
    same inputs again give them (a new list of its card plans, which the caller may change) and their notes."""
    if not keep:
        return make(notes)
    kept = _kept_of(fleet)
    known = kept.cards.get(name)
    if known is None or known[0] != inputs:
        said: list[str] = []
        known = (inputs, make(said), tuple(said))
        kept.cards[name] = known
    notes += known[2]
    reading, ranks, cards = known[1]
    return reading, ranks, list(cards)


def briefs(wanted: Sequence[str], plan_of: Callable[[str], ServicePlan], inputs_of: Callable[[str], object],
           fleet: object, page: Sequence[str]) -> tuple[list[Brief], dict[str, ServicePlan]]:
    """The brief of each wanted service, in order, and the whole plan of those on the page; a service off the
    page whose inputs_of(name) equal those of its kept brief takes that brief."""
    kept = _kept_of(fleet).briefs
    on_page, plans, out = set(page), {}, []
    for name in wanted:
        inputs, known = inputs_of(name), kept.get(name)
        if known is None or name in on_page or known[0] != inputs:
            plan = plan_of(name)
            if name in on_page:
                plans[name] = plan
            known = (inputs, brief(plan))
            kept[name] = known
        out.append(known[1])
    return out, plans


def answer(wanted: Sequence[str], plan_of: Callable[[str], ServicePlan], inputs_of: Callable[[str], object],
           fleet: object, failures: dict[str, RadianceMCPError], physical: Sequence[PhysicalCard],
           head: Callable[..., PlanFreeVramOutput], names: Sequence[str], hosts: dict[str, str | None],
           cursor: str | None) -> PlanFreeVramOutput:
    """The bounded answer of the wanted services (plan_of(name): a service's plan; inputs_of(name): what it is
    made of, see briefs): head(...) builds the output with the fleet-wide parts; a page of rows from the cursor
    on, as many of PAGE_ROWS as keep it within FLEET_ANSWER_CHARS."""
    start = _start(cursor, names)
    said, plans = briefs(wanted, plan_of, inputs_of, fleet, names[start:start + PAGE_ROWS])
    by_name = {b.service: b for b in said}
    best, found = _best(said), problems(said, failures)
    for rows in range(min(PAGE_ROWS, len(names) - start), 0, -1):
        page = names[start:start + rows]
        out = _page(by_name, plans, failures, physical, head, page, hosts, best, found,
                    cursor_of(names[start + rows]) if start + rows < len(names) else None, start, len(names))
        if len(json.dumps(out.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))) \
                <= FLEET_ANSWER_CHARS:
            return out
    return _page(by_name, plans, failures, physical, head, [], hosts, best, found,
                 cursor_of(names[start]) if start < len(names) else None, start, len(names))


def _page(by_name: dict[str, Brief], plans: dict[str, ServicePlan], failures: dict[str, RadianceMCPError],
          physical: Sequence[PhysicalCard], head: Callable[..., PlanFreeVramOutput], page: Sequence[str],
          hosts: dict[str, str | None], best: list[BestOption], found: list[Problem], next_cursor: str | None,
          start: int, total: int) -> PlanFreeVramOutput:
    rows = [ServiceRow(service=n, host=hosts.get(n), headroom_mib=by_name[n].headroom_mib,
                       usable_mib=by_name[n].usable_mib, options=list(by_name[n].options))
            for n in page if n in by_name]
    on_page = set(page)
    shared = [c for c in physical if len(c.services) > 1
              and any(s.split(" card ")[0] in on_page for s in c.services)][:SHARED_CARDS]
    lines: list[str] = []
    for b in best:
        if all(b.by != line.split(":")[0].removeprefix("most ") for line in lines):
            lines.append(f"most {b.by}: {b.service}, {b.option} (+{b.adds_mib:,} MiB): {fmt_mib(b.value, 2)} "
                         f"(+{fmt_mib(b.gain, 2)})")
    if found:
        lines.append("problems: " + "; ".join(f"{p.count:,} {p.kind}" + (f" ({p.rule})" if p.rule else "")
                                              for p in found))
    if page:
        more = "; next_cursor for the next" if next_cursor else ""
        lines.append(f"rows: services {start + 1:,}-{start + len(page):,} of {total:,}{more}; service=NAME for "
                     "one service's whole plan, host=HOST for a host's")
    return head(rows=rows, best=best, problems=found, physical_cards=shared, next_cursor=next_cursor,
                unreadable=[unreadable(n, failures[n], found) for n in page if n in failures],
                summary_tail=lines, pictured=[plans[n] for n in page if n in plans])


def own_reason(name: str, exc: RadianceMCPError) -> Unreadable:
    """A co-tenant of one service's plan that could not be planned, and why (that answer has no problems)."""
    return Unreadable(service=name, problem=None, where=None, error=str(exc))


def unreadable(name: str, exc: RadianceMCPError, found: Sequence[Problem]) -> Unreadable:
    """A service of the page that could not be planned, naming the problem that says why: its ledger's location
    where the problem's detail names another's, its own reason only where the detail's (another service's, or
    clipped) is not it word for word."""
    at = next(i for i, p in enumerate(found) if (p.kind, p.rule) == (_kind(exc), exc.rule))
    (where, said), (named_at, detail) = _located(str(exc)), _located(found[at].detail)
    return Unreadable(service=name, problem=at, where=where if where != named_at else None,
                      error=said if said != detail else None)
