"""The resize-planning tool plan_free_vram (what the free VRAM can buy); compare_arms is tools/arms.py.

Each tool reads its sources, calls the pure core (core/planning.py, core/rules/capacity.py) and shapes the
output model (models/plan.py). plan_free_vram has one path for a boot of any engine: its cards and ceilings
(capacity.budget, capacity.rank_ceilings), the card that binds, and the options core/planning.py prices by
what the boot prints; the options and the picture drawn from them live here together; the shipping tools
that build on it live in tools/gates.py.
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal
from typing import Any, Literal

from radiance_mcp.core import engine_facts, knobs, planning
from radiance_mcp.core.boot import Boot, Figure, Line, RankView
from radiance_mcp.core.constants import (
    KV_DTYPES,
    MIB,
    SLAB_MIB_PER_STEP,
    SLAB_SLOTS_PER_STEP,
    LedgerEngine,
    ModelConstants,
)
from radiance_mcp.core.errors import InputError, RadianceMCPError
from radiance_mcp.core.rules import book, capacity, contract, sampler, unprinted
from radiance_mcp.core.rules import plan as rules_plan
from radiance_mcp.core.rules import shared as shared_rule
from radiance_mcp.core.rules.probe_shape import api_of
from radiance_mcp.core.units import fmt_mib, round_down
from radiance_mcp.models.base import boot_ref, mib
from radiance_mcp.models.ledger import outside
from radiance_mcp.models.ledger_ref import LedgerRef
from radiance_mcp.models.plan import (
    SHARING,
    CardFigure,
    CardPlan,
    PhysicalCard,
    PlanCheck,
    PlanFreeVramInput,
    PlanFreeVramOutput,
    PlanOption,
    ResizePlanOutput,
    ServicePlan,
    Source,
    Traced,
)
from radiance_mcp.sources.engine_logs import read_ledger
from radiance_mcp.sources.offload import gather
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools import plan_fleet, standing
from radiance_mcp.tools.ledger import reserves_out, trace_reserves
from radiance_mcp.tools.plan_picture import picture, source_of
from radiance_mcp.tools.registry import ToolFamily

FAMILY = ToolFamily()


# ---------------------------------------------------------------------------------------
# plan_free_vram


def _ledger(name: str, value: Decimal | int, unit: str, line: Line, kind: type[Traced] = Traced) -> Traced:
    return kind(name=name, value=mib(Decimal(value)), unit=unit, source="ledger", line=line.number, text=line.text)


def _arith(name: str, value: Decimal | int, unit: str, text: str, source: Source = "arithmetic",
           now: Decimal | int | None = None, kind: type[Traced] = Traced) -> Traced:
    return kind(name=name, value=mib(Decimal(value)), unit=unit, source=source, line=None, text=text,
                now=None if now is None else mib(Decimal(now)))


def traced(name: str, figure: Figure, kind: type[Traced] = Traced) -> Traced:
    """A figure as the plan shows it: the line it was read off, or its arithmetic over its lines."""
    if figure.arithmetic:
        numbers = list(dict.fromkeys(str(line.number) for line in figure.lines))
        cited = f"line{'s' if len(numbers) > 1 else ''} {', '.join(numbers)}"
        return _arith(name, figure.value, figure.unit, f"{figure.arithmetic} ({cited})", kind=kind)
    return _ledger(name, figure.value, figure.unit, figure.line, kind)


def _card_figure(name: str, figure: Figure) -> CardFigure:
    out = traced(name, figure, CardFigure)
    assert isinstance(out, CardFigure)
    return out


def _card_plan(boot: Boot, card: RankView, ceiling: capacity.RankCeiling, physical: str | None) -> CardPlan:
    """One card of a boot of any engine: its figures, each traced, and its ceiling (capacity.rank_ceilings)."""
    figures = planning.card_figures(boot, card)
    floor, total, unclaimed = card.floor_mib, card.total_mib, card.unclaimed_mib
    floor_figure = (_card_figure("engine floor", floor) if floor else
                    _arith("engine floor", 0, "MiB", ceiling.floor_note, kind=CardFigure))
    assert isinstance(floor_figure, CardFigure)
    shown = {
        "card_total": _card_figure("card total", total) if total else None,
        "vram_weights": _card_figure("vram_weights", figures.weights),
        "vram_kv": _card_figure("vram_kv", figures.kv),
        "activation_arena": _card_figure("activation arena", figures.activation) if figures.activation else None,
        "engine_floor": floor_figure,
        "settled_free": _card_figure("settled free", card.require("free_mib")),
        "unclaimed": _card_figure("unclaimed", unclaimed) if unclaimed else None,
    }
    plan = CardPlan(
        card=ceiling.card.card,
        physical=physical,
        **shown,
        ceiling_mib=ceiling.card.ceiling_mib,
        derivation=ceiling.derivation,
        headroom_mib=ceiling.card.headroom_mib,
        shared_with=[],
        headroom_once_mib=ceiling.card.headroom_mib,
    )
    plan._figures = {name: figure for name, figure in shown.items() if figure is not None}
    return plan


def _seats(value: int) -> str:
    return f"{value:,} seat{'' if value == 1 else 's'}"


def _kv_option(prices: planning.PoolPrices, price: planning.KVPrice, usable: int, model: ModelConstants,
               slope_text: str) -> PlanOption:
    """The pool grown by the headroom at one dtype: seats and window the contract allows, and the slots it takes."""
    assert prices.seqs is not None and prices.window is not None  # price_pool prices no dtype without them
    seqs, window, rate = prices.seqs, prices.window, price.rate_bytes_per_token
    seats_text = (f"({price.pool_mib:,} - {model.fixed_mib}) MiB / ({window:,} x {rate:,} B + {model.per_seq_mib} "
                  f"MiB) = {price.spare_mib:,} / {fmt_mib(price.sequence_mib, 2)} -> {price.pool_seats_at_window}")
    if prices.sampler is not None and price.seats_at_window < price.pool_seats_at_window:
        line = f", line {prices.sampler.lines[0].number}" if prices.sampler.lines else ""
        seats_text += f"; the sampler bound allows {price.seats_at_window}: {prices.sampler.arithmetic}{line}"
    window_text = (f"({price.pool_mib:,} - {model.fixed_mib} - {model.per_seq_mib} x {seqs}) MiB / ({seqs} x "
                   f"{rate:,} B) -> {price.window_at_seats:,} tokens")

    def mover(name: str, slots: int, pool_text: str, shape: str, idle_mib: Decimal) -> Traced:
        return _arith(name, slots, "slots", f"({pool_text} - contract at {shape}) = {fmt_mib(idle_mib, 2)} MiB "
                      f"idle x {slope_text}")

    flags = [f"--vram-kv-mib {fmt_mib(prices.pool_mib)} -> {price.pool_mib:,}"]
    if prices.dtype != price.dtype:
        flags.append(f"--kv-cache-dtype {prices.dtype or '(not echoed)'} -> {price.dtype}")
    return PlanOption(
        name=f"more KV, {price.dtype}",
        axis="capacity: seats at the window, window at the seats",
        adds_mib=usable,
        flags=flags,
        gains=[
            _arith(f"seats at {window:,} tokens", price.seats_at_window, "seats", seats_text, now=price.seats_now),
            _arith(f"window at {_seats(seqs)}", price.window_at_seats, "tokens", window_text, now=price.window_now),
        ],
        takes=[
            mover("mover slots now, seats full", price.mover_now_slots, fmt_mib(prices.pool_mib),
                  f"{seqs} x {window:,}", price.idle_now_mib),
        ],
        notes=[],
    )


def _kv_notes(prices: planning.PoolPrices) -> list[str]:
    """What every more-KV option shares, said once in the service's notes (the slope's line or constant is the
    plan's slope; what more KV takes, the options' takes)."""
    longer = any(price.window_at_seats > (prices.window or 0) for price in prices.kv)
    return ["more KV: a window past the model's own context length buys nothing; that length is not in the "
            "ledger"] if longer else []


def _slab_option(prices: planning.PoolPrices, usable: int, slope_text: str) -> PlanOption:
    """The headroom into the weights: resident expert slots gained (prefill), the KV option forgone."""
    grow, slab = prices.slab, prices.slab_line
    cap = (f", capped at the host pool's {slab.host_pool_slots:,} slots (line {slab.line.number})"
           if grow.capped_by_host_pool and slab is not None else "")
    gains = [_arith("resident expert slots gained", grow.slots_gained, "slots", f"{usable:,} MiB x {slope_text}{cap}")]
    if slab is not None and grow.resident_after is not None:
        gains.append(_arith("resident slots after", grow.resident_after, "slots",
                            f"{slab.resident_slots:,} (line {slab.line.number}) + {grow.slots_gained:,}",
                            now=slab.resident_slots))
    return PlanOption(
        name="more slab",
        axis="prefill throughput: resident experts leave the host pool",
        adds_mib=usable,
        flags=[f"--vram-weights-mib {fmt_mib(prices.weights_mib)} -> {grow.weights_mib:,}"],
        gains=gains,
        notes=["slab MiB is throughput, but the law is not linear: measure arms (compare_arms) before predicting t/s"],
    )


def _slope_text(slope: planning.Slope) -> str:
    """The slope in an option's arithmetic: the plan's slope figure says where it comes from."""
    return "the slope"


def _pool_options(prices: planning.PoolPrices, card: CardPlan, usable: int, model: ModelConstants,
                  ) -> tuple[list[PlanOption], list[str]]:
    """More KV (per dtype) and more slab, each priced, with what it takes from the other."""
    slope_text = _slope_text(prices.slope)
    notes: list[str] = []
    if prices.past_any_card:
        notes.append(f"the headroom {usable:,} MiB is past any card's memory: read the settled line "
                     f"({source_of(card.figure('settled_free'))}) again; the KV options are not priced")
    elif prices.unpriced_flags:
        notes.append(f"the boot does not echo {' and '.join(prices.unpriced_flags)}: the KV options cannot be priced")
    options = [_kv_option(prices, p, usable, model, slope_text) for p in prices.kv]
    if options:
        notes += _kv_notes(prices)
    return [*options, _slab_option(prices, usable, slope_text)], notes


def _engine_kv_option(price: planning.EngineKVPrice, kv_flag: str, boot: Boot) -> PlanOption:
    """usable MiB more KV: KV tokens at the engine's own rate, and full-length sequences at its window; what it
    costs that the log does not print (unprinted.host_logits at the KV tokens after: llama.cpp's cells)."""
    gains: list[Traced] = []
    notes: list[str] = [n for n in (unprinted.host_logits(boot, price.tokens_after),) if n]
    usable = price.usable_mib
    if price.tokens_now is None or price.tokens_after is None:
        notes.append(f"not priced in tokens: {'; '.join(price.gaps)}")
    else:
        gains.append(_arith("KV tokens", price.tokens_after, "tokens",
                            f"{price.tokens_now:,} + {usable:,} MiB x {MIB:,} B / {price.rate_bytes_per_token:,} B = "
                            f"{price.tokens_after:,} tokens"))
        if price.sequences_after is not None:
            gains.append(_arith("full-length sequences", price.sequences_after, "sequences",
                                f"{price.tokens_after:,} / {price.window_tokens:,} tokens = {price.sequences_after}",
                                now=price.tokens_now / price.window_tokens if price.window_tokens else None))
    return PlanOption(name="more KV", axis="capacity (full-length sequences at the window)", adds_mib=usable,
                      flags=[f"+{usable:,} MiB of KV memory per card: {kv_flag}"], gains=gains, takes=[], notes=notes)


def _names(runtime: Runtime, args: PlanFreeVramInput, single: bool) -> list[str]:
    """The services to plan: the one asked for and its card's co-tenants, or the fleet's; [""] for a log."""
    fleet = runtime.fleet
    if single and args.service is None:
        return [""]
    names: list[str] = sorted(fleet.services) if not single else []
    if args.service is not None:
        mine = set(fleet.service(args.service).cards)
        names = [args.service] + sorted(n for n, s in fleet.services.items()
                                        if n != args.service and mine & set(s.cards))
    if not single and args.host is not None:
        if args.host not in fleet.hosts:
            raise InputError(f"host {args.host!r} is not in the fleet config; its hosts: "
                             f"{plan_fleet.named(sorted(fleet.hosts)) or 'none'}. Give host with log or "
                             "container for a ledger there, or alone for the services on it")
        names = [n for n in names if fleet.services[n].host == args.host]
    if not single and not names:
        raise InputError(f"the fleet config names no services{' on host ' + args.host if args.host else ''}: "
                         "name a ledger (service, log or log_text) to plan")
    return names


def _ref(args: PlanFreeVramInput, name: str, boot: int) -> LedgerRef:
    if name:
        return LedgerRef(service=name, boot=boot)
    given = {n: getattr(args, n) for n in ("log", "log_text", "host", "container") if getattr(args, n) is not None}
    return LedgerRef.model_validate({**given, "boot": boot})


async def _read_boots(runtime: Runtime, args: PlanFreeVramInput, names: list[str], single: bool,
                      ) -> tuple[dict[str, Boot], dict[str, RadianceMCPError]]:
    """The boots to plan, read concurrently, each in its engine's dialect, and the reads that failed.

    The asked ledger's failure is the call's; another service's goes to the failures, with its reason.
    """
    # The asked service's boot as asked; the others' (co-tenants of its cards, or the fleet) newest.
    wanted = [args.boot if single and i == 0 else -1 for i in range(len(names))]
    reads: list[Any] = await gather(*(read_ledger(runtime, _ref(args, n, b))
                                      for n, b in zip(names, wanted, strict=True)), return_exceptions=True)
    boots: dict[str, Boot] = {}
    failures: dict[str, RadianceMCPError] = {}
    for name, result in zip(names, reads, strict=True):
        if isinstance(result, RadianceMCPError) and not (single and name == names[0]):
            failures[name] = result
        elif isinstance(result, BaseException):
            raise result
        else:
            boots[name] = result
    return boots, failures


Cards = tuple[capacity.BudgetReading, tuple[capacity.RankCeiling, ...], list[CardPlan]]
"""A service's budget reading, its cards' ceilings and their plans: read once, used by every later step."""


def _card_plans(boot: Boot, physical: tuple[str, ...], name: str, notes: list[str],
                outside: tuple[tuple[int | None, Decimal, str], ...] = ()) -> Cards:
    """The cards of a settled boot of any engine, each with its ceiling, named by the config's cards in order
    (none, with a note, when the config names another number of cards than the boot has); free memory read
    outside the engine where the caller gave it (capacity.with_outside_free)."""
    reading, said = capacity.with_outside_free(capacity.budget(boot), outside)
    notes += said
    ranks = capacity.rank_ceilings(reading)
    named = len(physical) == len(ranks)
    views = {c.rank: c for c in reading.cards}
    cards = [_card_plan(boot, views[r.rank], r, physical[i] if named else None) for i, r in enumerate(ranks)]
    if physical and not named:
        notes.append(f"{name}: the config names {len(physical)} card(s) but its boot has {len(ranks)}; "
                     "its sharing is unknown until cards lists one physical card per engine card")
    return reading, ranks, cards


@FAMILY.tool("Plan what the free VRAM can buy", open_world=True, picture=picture)
async def plan_free_vram(runtime: Runtime, args: PlanFreeVramInput) -> PlanFreeVramOutput:
    """What the free VRAM buys per card: the headroom above the pair less reserves, each option
    priced and traced (more KV: seats, window, per dtype; more slab) and what it takes. Decode
    is another axis (KV dtype, bandwidth, draft acceptance): no option is priced in it; measure
    it (decode_probe).

    When: for a service, a host or the fleet (bounded: best options, problems, rows; next_cursor
    pages). Rule: a shared card's headroom counts once. Next: render_gates.
    """
    single = any(getattr(args, n) is not None for n in ("service", "log", "log_text", "container"))
    names = _names(runtime, args, single)
    boots, failures = await _read_boots(runtime, args, names, single)
    plans: dict[str, Cards] = {}
    notes: list[str] = []
    for name, boot in boots.items():
        try:
            configured = runtime.fleet.services[name].cards if name else ()
            make = functools.partial(_card_plans, boot, configured, name,
                                     outside=outside(args.outside_free) if single and name == names[0] else ())
            plans[name] = plan_fleet.card_plans(runtime.fleet, name, (boot, configured), notes, make, keep=not single)
        except RadianceMCPError as exc:
            if single and name == names[0]:
                raise
            failures[name] = exc
    every = {name: cards for name, (_, _, cards) in plans.items()}
    views = [v for name, (_, ranks, _) in plans.items()
             for v in standing.headroom_views(name, ranks, runtime.fleet.services[name].cards if name else ())]
    shared = shared_rule.share(views)
    for name, cards in every.items():
        for i, c in enumerate(cards):
            if c.physical is not None:
                group = shared[c.physical]
                cards[i] = c.model_copy(update={
                    "shared_with": sorted({v.service for v in group.views if v.service != name}),
                    "headroom_once_mib": group.headroom_mib,
                })
    wanted = [n for n in names if n in every and (not single or n == names[0])]
    # A co-tenant's planned growth is spent first: read the env files of the services that share a card, only.
    cotenants = sorted({v.service for s in shared.values() if len({w.service for w in s.views}) > 1 for v in s.views})
    growth, unread = await standing.planned_growth(runtime, {n: plans[n][1][0].card.pair_mib for n in cotenants})
    notes += unread
    made = (runtime, args, plans, shared, growth)
    plan_of = functools.partial(_plan_of, *made)
    physical = [
        PhysicalCard(card=p, services=sorted(f"{v.service} card {v.card}" for v in s.views),
                     headroom_mib=s.headroom_mib, derivation=s.derivation)
        for p, s in sorted(shared.items())
    ]
    unmapped = [(n, c) for n, cards in every.items() for c in cards if c.physical is None]
    fleet_headroom = shared_rule.fleet_headroom(shared, [c.headroom_mib for _, c in unmapped])
    mapped = len(views)
    sharing: Literal["known", "unknown", "partial"] = (
        "known" if not unmapped else "unknown" if not mapped else "partial"
    )
    if unmapped:
        listed = plan_fleet.named(sorted({n or "the ledger" for n, _ in unmapped}))
        notes.append(f"which physical card {listed} run on is not in the config (cards = [\"host:0\", ...] per "
                     "service): if two of them share a card, its headroom is counted once per service here, so "
                     "the fleet total is an upper bound")
    if single:
        services = [plan_of(name) for name in wanted]
        return PlanFreeVramOutput(services=services, physical_cards=[p for p in physical if len(p.services) > 1],
                                  unreadable=[plan_fleet.own_reason(n, e) for n, e in failures.items()],
                                  fleet_headroom_mib=fleet_headroom, sharing=sharing,
                                  summary=[_summary(plan) for plan in services],
                                  services_total=1, notes=notes)
    where = f" on {args.host}" if args.host else ""

    def head(summary_tail: list[str], pictured: list[ServicePlan], **parts: Any) -> PlanFreeVramOutput:
        out = PlanFreeVramOutput(
            fleet_headroom_mib=fleet_headroom, sharing=sharing, services_total=len(names),
            summary=[f"{len(names):,} services{where}, {len(wanted):,} planned: {fleet_headroom:,} MiB of "
                     f"headroom, each physical card once (sharing {sharing}: {SHARING[sharing]})", *summary_tail],
            notes=notes, **parts)
        out._pictured = pictured
        return out

    hosts = {n: runtime.fleet.services[n].host for n in names}
    return plan_fleet.answer(wanted, plan_of, functools.partial(_plan_inputs, *made), runtime.fleet, failures,
                             physical, head, names, hosts, args.cursor)


def _plan_of(runtime: Runtime, args: PlanFreeVramInput, plans: dict[str, Cards],
             shared: dict[str, shared_rule.SharedCard], growth: dict[str, int], name: str) -> ServicePlan:
    """One service's plan, from what plan_free_vram made before: its card plans, the shared cards, the growth."""
    return _service_plan(runtime, args, name, plans[name][0], plans[name][2], shared, growth)


def _plan_inputs(runtime: Runtime, args: PlanFreeVramInput, plans: dict[str, Cards],
                 shared: dict[str, shared_rule.SharedCard], growth: dict[str, int], name: str) -> object:
    """What _plan_of(..., name) is made of, but the fleet config's constants: the boot, its cards and who shares
    them, the growth planned, the reserves asked (plan_fleet.briefs keeps a service's brief by them)."""
    return (plans[name][0].boot, runtime.fleet.services[name].cards,
            [shared[c.physical] for c in plans[name][2] if c.physical is not None], growth, args.reserves)


def _summary(plan: ServicePlan) -> str:
    """The plan's headline: the binding card's ceiling and headroom, what the reserves leave (options: its own)."""
    card = next(c for c in plan.cards if c.card == plan.binding_card)
    who = plan.service or plan.ledger.source
    shared = f", shared with {', '.join(card.shared_with)}: {card.headroom_once_mib:,} MiB counted once" \
        if card.shared_with else ""
    return (f"{who}: card {card.card} ceiling {card.derivation}; headroom {card.headroom_mib:,} MiB{shared}; "
            f"{plan.usable_mib:,} MiB to spend after reserves, {len(plan.options)} option(s)")


def _service_plan(runtime: Runtime, args: PlanFreeVramInput, name: str, reading: capacity.BudgetReading,
                  cards: list[CardPlan], shared: dict[str, shared_rule.SharedCard],
                  growth: dict[str, int]) -> ServicePlan:
    """One service's plan, for a boot of any engine: the card that binds, what its reserves and its
    co-tenants' planned growth leave, and the options priced by what the boot prints
    (planning.sets_pair_in_mib), each as plans the rule book judges as render_gates does."""
    boot = reading.boot
    reserves = trace_reserves(reading, args.reserves)
    taken = {c.card: sum(growth.get(o, 0) for o in c.shared_with) for c in cards}
    spend = planning.spend([(c.card, c.headroom_once_mib - taken[c.card]) for c in cards], reserves)
    binding = next(c for c in cards if c.card == spend.card)
    view = next(c for c in reading.cards if c.card == spend.card)
    model = runtime.fleet.model_constants(name or None) if planning.sets_pair_in_mib(view) else None
    notes = []
    if taken[binding.card]:
        notes.append(f"the env files of {', '.join(binding.shared_with)} plan {taken[binding.card]:,} MiB more on "
                     f"{binding.physical}: spent before this plan")
    if len(cards) > 1:
        notes.append(f"card {binding.card} has the least headroom and binds every card (the pair is per card)")
    at_ceiling = engine_facts.AT_CEILING.get(boot.engine)
    notes += [n for n in (at_ceiling, unprinted.host_logits(boot)) if n]
    options: list[PlanOption] = []
    rules: list[str] = []
    if spend.usable_mib <= 0:
        notes.append(f"no headroom to spend: {binding.headroom_once_mib:,} MiB less {fmt_mib(spend.held_mib, 2)} MiB "
                     "of reserves; the pair is at or above what the ceiling allows")
    elif model is not None:
        prices = planning.price_pool(boot, planning.card_figures(boot, view), spend.usable_mib, model)
        options, more = _pool_options(prices, binding, spend.usable_mib, model)
        ceiling = capacity.compute_ceiling(reading, reserves)
        against = rules_plan.Standing(
            ceiling, ceiling.pair_mib, model, sampler.boot_spec(boot)[1],
            [shared[c.physical] for c in cards if c.shared_with and c.physical], growth, name)
        judged = [_with_plans(o, _option_plans(o, prices), against, more, rules) for o in options]
        options = [o for o in judged if o is not None]
        notes += more
    else:
        price = planning.price_engine_kv(planning.kv_rank(reading), spend.usable_mib)
        ceiling = capacity.compute_ceiling(reading, reserves)
        against = rules_plan.Standing(
            ceiling, ceiling.pair_mib, runtime.fleet.model_constants(name or None), None,
            [shared[c.physical] for c in cards if c.shared_with and c.physical], growth, name,
            rate=price.rate_bytes_per_token)
        option = _with_plans(_engine_kv_option(price, engine_facts.KV_FLAGS[boot.engine], boot),
                             _engine_option_plans(reading, view, price), against, notes, rules, boot.engine)
        options = [option] if option is not None else []
    checks = standing.standing_checks(boot, runtime.fleet.model_constants(name or None))
    for check in book.failed(checks):
        notes.append(f"{name or 'the service'} fails {check.rule} as it runs: {check.arithmetic}; {check.remedy}; "
                     "a plan starts from that fix")
    slope = planning.slab_slope(boot) if model is not None else None
    slab = planning.slab_slots(boot)
    dtype = boot.flags.get("kv-cache-dtype")
    plan = ServicePlan(
        service=name or None,
        ledger=boot_ref(boot),
        model=model.name if model is not None else boot.engine,
        shape=[traced(shape_name, figure) for shape_name, figure in planning.plan_shape(reading)],
        kv_cache_dtype=dtype.raw("value", boot.where()) if dtype else None,
        cards=[c if c.card == binding.card else c.row() for c in cards],
        binding_card=binding.card,
        reserves=reserves_out(reserves),
        personal_reserves=[r.label for r in reserves if r.line is None],
        headroom_mib=binding.headroom_once_mib,
        usable_mib=spend.usable_mib,
        slope=None if slope is None else _slope(slope),
        slab=_ledger("slab slots resident", slab.resident_slots, "slots", slab.line) if slab else None,
        options=options,
        plan_rules=rules,
        sharing="known" if all(c.physical for c in cards) else "unknown",
        checks=[PlanCheck(rule=c.rule, verdict=c.verdict, arithmetic=c.arithmetic,
                          lines=[line.number for line in c.lines], remedy=c.remedy or None) for c in checks],
        notes=notes,
    )
    return plan.model_copy(update={"lines": plan.cited({line.number: line.text for c in checks for line in c.lines})})


Mover = tuple[Decimal, int] | None
"""A more-KV plan's idle KV with every seat full, and the slots the mover may lend of it; None: not priced."""


def _option_plans(option: PlanOption, prices: planning.PoolPrices,
                  ) -> list[tuple[rules_plan.ResizePlan, Mover]]:
    """An option as the plans render_gates would render: more KV at the seats its window holds, then at the
    window its seats hold, each with its mover's slots; more slab at the shape as it is. None without the shape
    or an echoed dtype."""
    weights, pool = round_down(prices.weights_mib), round_down(prices.pool_mib)
    if prices.seqs is None or prices.window is None:
        return []
    spec = prices.sampler_spec
    price = next((p for p in prices.kv if option.name == f"more KV, {p.dtype}"), None)
    if price is not None:
        return [(rules_plan.ResizePlan(weights, price.pool_mib, price.seats_at_window, prices.window, price.dtype,
                                       spec), (price.idle_seats_mib, price.mover_seats_slots)),
                (rules_plan.ResizePlan(weights, price.pool_mib, prices.seqs, price.window_at_seats, price.dtype,
                                       spec), (price.idle_window_mib, price.mover_window_slots))]
    if prices.dtype not in KV_DTYPES:
        return []
    return [(rules_plan.ResizePlan(prices.slab.weights_mib, pool, prices.seqs, prices.window,
                                   prices.dtype, spec), None)]


def _engine_option_plans(reading: capacity.BudgetReading, view: RankView,
                         price: planning.EngineKVPrice) -> list[tuple[rules_plan.ResizePlan, Mover]]:
    """Another engine's option as render_gates' plans: the KV memory the ceiling leaves past the weights (whole
    MiB up), at the seats it holds at the window, then the window at the seats (planning.engine_plans)."""
    boot, rank = reading.boot, planning.kv_rank(reading)
    if view.weights_mib is None or rank.kv_mib is None or price.rate_bytes_per_token is None:
        return []
    weights = math.ceil(view.weights_mib.value)
    pool_max = round_down(view.weights_mib.value + rank.kv_mib.value + price.usable_mib) - weights
    seats = contract.served_seats(boot)
    plans = planning.engine_plans(boot.engine, int(seats.value) if seats else None,
                                  int(price.window_tokens) if price.window_tokens else None,
                                  price.rate_bytes_per_token, pool_max, api_of(boot.engine, boot) == "llama-cpp-python")
    return [(rules_plan.ResizePlan(weights, pool, s, w, None, None), None) for pool, s, w in plans]


def _with_plans(option: PlanOption, plans: list[tuple[rules_plan.ResizePlan, Mover]],
                standing: rules_plan.Standing, notes: list[str], rules: list[str],
                engine: LedgerEngine = "radiance") -> PlanOption | None:
    """The option with each plan the rule book passes; a plan it fails is not offered, and said so in notes,
    nor an option none of whose plans passes. The rules judged go to rules, once."""
    kept = []
    for plan, mover in plans:
        checks = rules_plan.judge(plan, standing)
        rules += [c.rule for c in checks if c.rule not in rules]
        failed = book.failed(checks)
        if failed:
            notes.append(f"{option.name}: the plan {plan.weights_mib:,} + {plan.pool_mib:,} MiB at {plan.seqs} x "
                         f"{plan.window:,} is not offered: " + "; ".join(f"{c.rule}: {c.arithmetic}" for c in failed))
            continue
        unit = knobs.KNOBS[engine].kv_unit  # what the engine's env file sets: its pair in MiB, or its own knobs
        unchecked = [c.rule for c in checks if not c.passed]
        kept.append(ResizePlanOutput(
            vram_weights_mib=plan.weights_mib if unit == "MiB" else None,
            vram_kv_mib=None if unit == "cells" else plan.pool_mib, seqs=plan.seqs, max_model_len=plan.window,
            kv_cache_dtype=plan.dtype, spec=plan.spec, unchecked=unchecked or None,
            idle_kv_mib=None if mover is None else mib(mover[0]), mover_slots=None if mover is None else mover[1]))
    return option.model_copy(update={"plans": kept}) if kept or not plans else None


def _slope(slope: planning.Slope) -> Traced:
    per_mib = float(round(slope.per_mib, 4))
    if slope.line:
        return Traced(name="slab slope", value=per_mib, unit="slots/MiB", source="ledger", line=slope.line.number,
                      text=slope.line.text)
    return Traced(name="slab slope", value=per_mib, unit="slots/MiB", source="model constant", line=None,
                  text=f"{SLAB_SLOTS_PER_STEP:,} slots per {SLAB_MIB_PER_STEP:,} MiB, measured")
