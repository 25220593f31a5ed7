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
from typing import Literal

from radiance_mcp.core.errors import BootNotSettled, InputError, RadianceMCPError
from radiance_mcp.models.plan import (
    BestOption,
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
DETAIL_CHARS = 300
"""A problem's detail past its location (the ledger's path and lines, kept whole) is clipped to this."""
SHARED_CARDS = 10
"""Shared physical cards shown (the page's first); a service's own plan shows its cards."""

Measure = Literal["seats at the window", "window at the seats", "resident slots"]


def named(names: Sequence[str]) -> str:
    """Names, the first NAMED of them, and how many more."""
    more = f" and {len(names) - NAMED:,} more" if len(names) > NAMED else ""
    return ", ".join(names[:NAMED]) + more


def _clip(text: str) -> str:
    """The text's location ("PATH (boot 1 of 2, lines 1-26): ") whole, what it says clipped to DETAIL_CHARS: the
    reason a problem gives does not get shorter as the ledger's path gets longer."""
    at = text.find("): ")
    head, said = (text[:at + 3], text[at + 3:]) if at >= 0 else ("", text)
    return head + (said if len(said) <= DETAIL_CHARS else said[:DETAIL_CHARS - 3] + "...")


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


def _value(gain: Traced) -> str:
    return f"{gain.value:,.0f}" if gain.value == int(gain.value) else f"{gain.value:,.2f}"


def option_line(option: PlanOption) -> str:
    """An option in a line: what it adds, what each gain comes to (and is now)."""
    gains = "; ".join(f"{g.name}: {_value(g)}" + (f" (now {g.now:,.0f})" if g.now is not None else "")
                      for g in option.gains)
    return f"{option.name} +{option.adds_mib:,} MiB: {gains or 'not priced'}"


def _best(plans: Sequence[ServicePlan]) -> list[BestOption]:
    found: dict[Measure, list[BestOption]] = {}
    for plan in plans:
        for option in plan.options:
            for gain in option.gains:
                by = _measure(gain)
                if by is not None and gain.now is not None and gain.value > gain.now:
                    found.setdefault(by, []).append(BestOption(
                        by=by, service=plan.service or "", option=option.name, adds_mib=option.adds_mib,
                        value=gain.value, gain=round(gain.value - gain.now, 2)))
    return [b for by in ("seats at the window", "window at the seats", "resident slots")
            for b in sorted(found.get(by, []), key=lambda b: (-b.gain, b.service))[:BEST_PER_MEASURE]]


def _kind(exc: RadianceMCPError) -> Literal["refused boot", "unsettled boot", "unreadable ledger"]:
    if isinstance(exc, BootNotSettled):
        return "refused boot" if exc.status == "refused" else "unsettled boot"
    return "unreadable ledger"


def problems(plans: Sequence[ServicePlan], failures: dict[str, RadianceMCPError]) -> list[Problem]:
    """Every problem of the fleet, grouped by kind and rule: refused and unsettled boots, unreadable ledgers,
    pools below their contract today (and any other rule a running service fails), headroom stranded on a card
    no plan spends (a card past the binding one's, or headroom no option passes the rule book with)."""
    groups: dict[tuple[str, str | None], list[tuple[str, str]]] = {}
    for name, exc in sorted(failures.items()):
        groups.setdefault((_kind(exc), exc.rule), []).append((name, str(exc)))
    for plan in plans:
        name = plan.service or ""
        for check in plan.checks:
            if check.verdict == "fail":
                kind = "below its contract" if check.rule == "pool_contract" else "fails a rule"
                groups.setdefault((kind, check.rule), []).append((name, f"{check.arithmetic}; {check.remedy}"))
        binding = next(c for c in plan.cards if c.card == plan.binding_card)
        past = sum(c.headroom_once_mib - binding.headroom_once_mib for c in plan.cards)
        if past > 0:
            groups.setdefault(("stranded headroom", None), []).append((name, (
                f"{past:,} MiB on cards past card {binding.card}'s {binding.headroom_once_mib:,}: the pair is per "
                "card, so no plan spends it")))
        elif plan.usable_mib > 0 and not plan.options:
            groups.setdefault(("stranded headroom", None), []).append((name, (
                f"{plan.usable_mib:,} MiB no option spends (its notes say why)")))
    return [Problem(kind=kind, rule=rule, count=len(said), services=[n for n, _ in said[:NAMED]],  # type: ignore[arg-type]
                    detail=_clip(said[0][1]))
            for (kind, rule), said in groups.items()]


def answer(plans: Sequence[ServicePlan], failures: dict[str, RadianceMCPError], physical: Sequence[PhysicalCard],
           head: Callable[..., PlanFreeVramOutput], names: Sequence[str], hosts: dict[str, str | None],
           cursor: str | None) -> PlanFreeVramOutput:
    """The bounded answer: head(...) builds the output with the fleet-wide parts; a page of rows from the cursor
    on, as many of PAGE_ROWS as keep it within FLEET_ANSWER_CHARS."""
    start = _start(cursor, names)
    by_name = {plan.service or "": plan for plan in plans}
    best, found = _best(plans), problems(plans, failures)
    for rows in range(min(PAGE_ROWS, len(names) - start), 0, -1):
        page = names[start:start + rows]
        out = _page(by_name, failures, physical, head, page, hosts, best, found,
                    cursor_of(names[start + rows]) if start + rows < len(names) else None, start, len(names))
        if len(json.dumps(out.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))) \
                <= FLEET_ANSWER_CHARS:
            return out
    return _page(by_name, failures, physical, head, [], hosts, best, found,
                 cursor_of(names[start]) if start < len(names) else None, start, len(names))


def _page(by_name: dict[str, ServicePlan], failures: dict[str, RadianceMCPError], physical: Sequence[PhysicalCard],
          head: Callable[..., PlanFreeVramOutput], page: Sequence[str], hosts: dict[str, str | None],
          best: list[BestOption], found: list[Problem], next_cursor: str | None, start: int,
          total: int) -> PlanFreeVramOutput:
    rows = [ServiceRow(service=n, host=hosts.get(n), headroom_mib=by_name[n].headroom_mib,
                       usable_mib=by_name[n].usable_mib, options=[option_line(o) for o in by_name[n].options])
            for n in page if n in by_name]
    on_page = set(page)
    shared = [c for c in physical if len(c.services) > 1
              and any(s.split(" card ")[0] in on_page for s in c.services)][:SHARED_CARDS]
    lines: list[str] = []
    for b in best:
        if all(b.by != line.split(":")[0].removeprefix("most ") for line in lines):
            lines.append(f"most {b.by}: {b.service}, {b.option} (+{b.adds_mib:,} MiB): {b.value:,.0f} "
                         f"(+{b.gain:,.0f})")
    if found:
        lines.append("problems: " + "; ".join(f"{p.count:,} {p.kind}" + (f" ({p.rule})" if p.rule else "")
                                              for p in found))
    if page:
        more = "; next_cursor for the next" if next_cursor else ""
        lines.append(f"rows: services {start + 1:,}-{start + len(page):,} of {total:,}{more}; service=NAME for "
                     "one service's whole plan, host=HOST for a host's")
    return head(rows=rows, best=best, problems=found, physical_cards=shared, next_cursor=next_cursor,
                unreadable=[Unreadable(service=n, error=str(failures[n])) for n in page if n in failures],
                summary_tail=lines, pictured=[by_name[n] for n in page if n in by_name])
