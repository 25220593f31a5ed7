"""A physical card several services share: its headroom is spent once (pure).

Every service on a card reads the same free memory (the one booted last sees the others' budgets
already taken), and each engine keeps its own floor free in it. ``share`` groups the services' cards
by the physical card the config names, with the headroom counted once; ``shared_card`` checks a plan
against it: the growth of every service's pair on the card together stays within that headroom.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from radiance_mcp.core.rules.book import Check
from radiance_mcp.core.units import fmt_mib


@dataclass(frozen=True)
class CardHeadroom:
    """One service's reading of one of its cards."""

    service: str
    card: int
    physical: str | None
    """The physical card it names in the config (cards = [...]); None: not said."""
    headroom_mib: int
    """ceiling - pair, whole MiB: (settled free - engine floor) rounded down."""
    floor_mib: Decimal
    """The engine floor this service keeps free on the card."""


@dataclass(frozen=True)
class SharedCard:
    physical: str
    views: tuple[CardHeadroom, ...]
    headroom_mib: int
    """The card's headroom counted once: the least any service on it reads, less the other services'
    floors (free memory one engine reads is memory another engine keeps free)."""
    binding: CardHeadroom
    derivation: str


def share(views: Sequence[CardHeadroom]) -> dict[str, SharedCard]:
    """Group the views by physical card; a card's headroom is offered once, never once per service.

    Every service on a card reads the same free memory (the one booted last sees the others'
    budgets already taken), and each engine keeps its own floor free in it.
    """
    groups: dict[str, list[CardHeadroom]] = {}
    for view in views:
        if view.physical is not None:
            groups.setdefault(view.physical, []).append(view)
    shared = {}
    for physical, group in groups.items():
        def net(view: CardHeadroom, group: list[CardHeadroom] = group) -> int:
            others = sum((w.floor_mib for w in group if w is not view), Decimal(0))
            return view.headroom_mib - math.ceil(others)

        binding = min(group, key=lambda v: (net(v), v.service, v.card))
        others = [w for w in group if w is not binding]
        derivation = f"{binding.service} card {binding.card} reads {binding.headroom_mib:,} MiB"
        if others:
            floors = " - ".join(f"{fmt_mib(w.floor_mib, 2)} ({w.service}'s floor)" for w in others)
            derivation += f" - {floors} = {net(binding):,} MiB"
        shared[physical] = SharedCard(physical, tuple(group), net(binding), binding, derivation)
    return shared


def fleet_headroom(shared: Mapping[str, SharedCard], unmapped_mib: Sequence[int]) -> int:
    """Every card's headroom counted once: each physical card once (share), each card the config does not map
    on its own (an upper bound, as two of them may share a card); a card below its floor adds none."""
    return sum(max(0, s.headroom_mib) for s in shared.values()) + sum(max(0, h) for h in unmapped_mib)


def shared_card(card: SharedCard, growth_mib: Mapping[str, int], held_mib: Decimal = Decimal(0)) -> Check:
    """The pairs' growth of the services on card (by service; one not named grows by 0), with held_mib of
    the planning service's reserves, within the card's headroom counted once."""
    grown = {name: mib for name, mib in growth_mib.items() if mib}
    total = sum(grown.values())
    room = card.headroom_mib - held_mib
    ok = total <= room
    parts = " + ".join(f"{mib:,} ({name})" for name, mib in sorted(grown.items())) or "0"
    held = f" - {fmt_mib(held_mib, 2)} MiB of reserves" if held_mib else ""
    names = sorted({v.service for v in card.views})
    return Check(
        "shared_card", "pass" if ok else "fail",
        f"{card.physical}, shared by {', '.join(names)}: the pairs grow by {parts} = {total:,} MiB "
        f"{'<=' if ok else '>'} its headroom counted once {card.headroom_mib:,} MiB{held} ({card.derivation})",
        remedy="" if ok else (f"the services on {card.physical} may grow their pairs by {fmt_mib(room)} MiB in all: "
                              "shrink this plan, or another service's on the card (plan_free_vram prices the card "
                              "once)"),
    )
