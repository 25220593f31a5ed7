"""The resize-planning tools: compare_arms, and plan_free_vram (what the free VRAM can buy).

Each tool reads its sources, calls the pure core (core/planning.py, core/rules/capacity.py) and shapes the
output model (models/plan.py); plan_free_vram's options and the picture drawn from them live
here together; the shipping tools that build on it live in tools/gates.py.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from radiance_mcp.core import planning
from radiance_mcp.core.boot import Boot, Hit, Line, RankView
from radiance_mcp.core.constants import (
    AT_CEILING_WORST_FREE_MIB,
    MAX_POOL_MIB,
    MIB,
    MIN_ARMS_FOR_THRESHOLD,
    MIN_DECODE_TOKENS,
    PREFERRED_DECODE_TOKENS,
    SLAB_MIB_PER_STEP,
    SLAB_SLOTS_PER_STEP,
    KVDtype,
    ModelConstants,
)
from radiance_mcp.core.errors import InputError, RadianceMCPError
from radiance_mcp.core.rules import capacity
from radiance_mcp.core.units import fmt_mib, round_down
from radiance_mcp.models.base import (
    boot_ref,
    line_ref,
    mib,
)
from radiance_mcp.models.ledger import ReserveOutput
from radiance_mcp.models.ledger_ref import LedgerRef
from radiance_mcp.models.plan import (
    ArmStepOutput,
    CardPlan,
    ClaimOutput,
    CompareArmsInput,
    CompareArmsOutput,
    PhysicalCard,
    PlanFreeVramInput,
    PlanFreeVramOutput,
    PlanOption,
    ServicePlan,
    Source,
    Traced,
    Unreadable,
)
from radiance_mcp.sources.engine_logs import read_ledger
from radiance_mcp.sources.offload import gather
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools.ledger import trace_reserves
from radiance_mcp.tools.registry import ToolFamily

if TYPE_CHECKING:  # another engine's boots load its part (tools/engine_plan.py) and the dialects, when read
    from radiance_mcp.core.boot import Boot

FAMILY = ToolFamily()


# ---------------------------------------------------------------------------------------
# compare_arms


@FAMILY.tool("Compare measured arms against the noise")
async def compare_arms(runtime: Runtime, args: CompareArmsInput) -> CompareArmsOutput:
    """Compare measured arms of one knob (value and rate each) against the noise band, and refuse a
    plateau or threshold read off fewer than three arms.

    When: before writing a law or a prediction from a throughput campaign. Rule: a change inside
    the band (default 3 %) is noise; a refused claim names the value to measure next.
    """
    comparison = planning.compare_arms(
        [planning.Arm(a.value, a.rate) for a in args.arms], args.noise_band_pct, args.claim, args.claim_arms
    )
    band = f"+-{args.noise_band_pct:g} %"
    steps = []
    for s in comparison.steps:
        pair = f"{planning.fmt_value(s.low.value)} -> {planning.fmt_value(s.high.value)}"
        if s.inside_noise:
            reading = f"{pair}: {s.change_pct:+.2f} %, inside the {band} band: noise"
        elif s.intervals_overlap:
            reading = (f"{pair}: {s.change_pct:+.2f} %, outside the {band} band, but the two arms' own {band} "
                       "intervals overlap: a repeat run could close it")
        else:
            reading = f"{pair}: {s.change_pct:+.2f} %, outside the {band} band"
        steps.append(ArmStepOutput(
            low_value=s.low.value, high_value=s.high.value, low_rate=s.low.rate, high_rate=s.high.rate,
            change_pct=round(s.change_pct, 2), inside_noise=s.inside_noise, intervals_overlap=s.intervals_overlap,
            reading=reading,
        ))
    claim = comparison.claim
    notes = []
    if len(comparison.arms) < MIN_ARMS_FOR_THRESHOLD:
        notes.append(f"{len(comparison.arms)} arms: enough to compare, not to read a plateau or threshold")
    return CompareArmsOutput(
        knob=args.knob,
        rate_unit=args.rate_unit,
        noise_band_pct=args.noise_band_pct,
        steps=steps,
        inside_noise=[f"{planning.fmt_value(s.low.value)} and {planning.fmt_value(s.high.value)}"
                      for s in comparison.steps if s.inside_noise],
        span_pct=round(comparison.span_pct, 2),
        claim=None if claim is None else ClaimOutput(
            claim=claim.claim, arms=list(claim.arms), verdict=claim.verdict, reason=claim.reason, rule=claim.rule,
            remedy=claim.remedy, measure_next=claim.measure_next,
        ),
        ok=claim is None or claim.verdict == "supported",
        notes=notes,
    )


# ---------------------------------------------------------------------------------------
# plan_free_vram


def _ledger(name: str, value: Decimal | int, unit: str, line: Line) -> Traced:
    return Traced(name=name, value=mib(Decimal(value)), unit=unit, source="ledger", line=line.number, text=line.text)


def _arith(name: str, value: Decimal | int, unit: str, text: str, source: Source = "arithmetic") -> Traced:
    return Traced(name=name, value=mib(Decimal(value)), unit=unit, source=source, line=None, text=text)


DECODE = (
    "decode is a separate axis: it follows the KV dtype, memory bandwidth and draft acceptance, not the slab "
    f"nor the pool size; no option here is priced in decode t/s: measure it (at least {MIN_DECODE_TOKENS} "
    f"generated tokens, {PREFERRED_DECODE_TOKENS} preferred)"
)


def boot_flag(boot: Boot, name: str) -> Hit | None:
    return boot.flags.get(name)


def _card_plan(card: RankView, boot: Boot, physical: str | None) -> CardPlan:
    src = boot.where()
    free, floor = card.require("free_mib"), card.require("floor_mib")
    ceiling = capacity.card_ceiling(card.card, free.value, floor.value, card.require("pair").value)
    figures = {}
    for row, flag, name in ((card.weights_mib, "vram-weights-mib", "vram_weights"),
                            (card.kv_mib, "vram-kv-mib", "vram_kv")):
        hit = boot_flag(boot, flag)
        if hit is not None:
            figures[name] = _ledger(name, hit.number("value", src), "MiB", hit.line)
        else:
            assert row is not None  # read_budget refuses a card with neither
            figures[name] = _ledger(name, row.value, "MiB", row.line)
    arena, total, unclaimed = boot.first("activation_arena"), card.total_mib, card.unclaimed_mib
    return CardPlan(
        card=card.card,
        physical=physical,
        card_total=_ledger("card total", total.value, "MiB", total.line) if total else None,
        vram_weights=figures["vram_weights"],
        vram_kv=figures["vram_kv"],
        activation_arena=_ledger("activation arena", arena.size("size", src).mib, "MiB", arena.line) if arena else None,
        engine_floor=_ledger("engine floor", floor.value, "MiB", floor.line),
        settled_free=_ledger("settled free", free.value, "MiB", free.line),
        unclaimed=_ledger("unclaimed", unclaimed.value, "MiB", unclaimed.line) if unclaimed else None,
        ceiling_mib=ceiling.ceiling_mib,
        derivation=ceiling.derivation,
        headroom_mib=ceiling.headroom_mib,
        shared_with=[],
        headroom_once_mib=ceiling.headroom_mib,
    )


def _seats(value: int) -> str:
    return f"{value:,} seat{'' if value == 1 else 's'}"


def _kv_option(pool: Decimal, usable: int, seqs: int, window: int, dtype: KVDtype, current: str | None,
               model: ModelConstants, slope: planning.Slope, slope_text: str) -> PlanOption:
    """The pool grown by the headroom at one dtype: seats and window the contract allows, and the slots it takes."""
    price = planning.price_kv(pool, usable, seqs, window, dtype, model, slope)
    now = capacity.pool_contract(pool, seqs, window, dtype, model)
    rate = model.rate_bytes_per_token[dtype]
    per_seq = Decimal(window * rate) / MIB + model.per_seq_mib
    seats_text = (f"({price.pool_mib:,} - {model.fixed_mib}) MiB / ({window:,} x {rate:,} B + {model.per_seq_mib} "
                  f"MiB) = {price.pool_mib - model.fixed_mib:,} / {fmt_mib(per_seq, 2)} -> {price.seats_at_window}; "
                  f"now {now.max_seqs_at_window}")
    window_text = (f"({price.pool_mib:,} - {model.fixed_mib} - {model.per_seq_mib} x {seqs}) MiB / ({seqs} x "
                   f"{rate:,} B) -> {price.window_at_seats:,} tokens; now {now.max_window_at_seqs:,}")

    def mover(name: str, pool_text: str, shape: str, idle_mib: Decimal) -> Traced:
        return _arith(name, slope.slots_for(idle_mib), "slots", f"pool {pool_text} - contract at {shape} = "
                      f"{fmt_mib(idle_mib, 2)} MiB idle x {slope_text}")

    flags = [f"--vram-kv-mib {fmt_mib(pool)} -> {price.pool_mib:,}"]
    if current != dtype:
        flags.append(f"--kv-cache-dtype {current or '(not echoed)'} -> {dtype}")
    new_pool = f"{price.pool_mib:,}"
    return PlanOption(
        name=f"more KV, {dtype}",
        axis="capacity: seats at the window, or the window at the seats",
        adds_mib=usable,
        flags=flags,
        gains=[
            _arith(f"seats at {window:,} tokens", price.seats_at_window, "seats", seats_text),
            _arith(f"window at {_seats(seqs)}", price.window_at_seats, "tokens", window_text),
        ],
        takes=[
            _arith("slab slots forgone", price.slab_slots_forgone, "slots",
                   f"{usable:,} MiB kept out of the slab x {slope_text}"),
            mover("mover slots now, seats full", fmt_mib(pool), f"{seqs} x {window:,}", price.idle_now_mib),
            mover(f"mover slots, {_seats(price.seats_at_window)} full", new_pool,
                  f"{price.seats_at_window} x {window:,}", price.idle_seats_mib),
            mover(f"mover slots, {_seats(seqs)} full at {price.window_at_seats:,}", new_pool,
                  f"{seqs} x {price.window_at_seats:,}", price.idle_window_mib),
        ],
        notes=[f"a bigger pool takes residency twice: the {usable:,} MiB never reach the slab, and once the new "
               "seats or window fill, the idle KV the mover lends to the experts is taken back (the mover slots: "
               "idle KV when every seat is full, now and with this option)",
               f"the mover lends {fmt_mib(slope.slots)} slots at boot (line {slope.line.number})"
               if slope.line else "the boot prints no ledger mover line: the slope is the model's constant"]
        + (["a window past the model's own context length buys nothing; that length is not in the ledger"]
           if price.window_at_seats > window else []),
    )


def _slab_option(weights: Decimal, usable: int, slope: planning.Slope, slope_text: str,
                 slab: planning.SlabLine | None) -> PlanOption:
    """The headroom into the weights: resident expert slots gained (prefill), the KV option forgone."""
    grow = planning.price_slab(weights, usable, slope, slab)
    cap = (f", capped at the host pool's {slab.host_pool_slots:,} slots (line {slab.line.number})"
           if grow.capped_by_host_pool and slab is not None else "")
    gains = [_arith("resident expert slots gained", grow.slots_gained, "slots", f"{usable:,} MiB x {slope_text}{cap}")]
    if slab is not None:
        gains.append(_arith("resident slots after", slab.resident_slots + grow.slots_gained, "slots",
                            f"{slab.resident_slots:,} (line {slab.line.number}) + {grow.slots_gained:,}"))
    return PlanOption(
        name="more slab",
        axis="prefill throughput: resident experts leave the pinned host pool, the slow path",
        adds_mib=usable,
        flags=[f"--vram-weights-mib {fmt_mib(weights)} -> {grow.weights_mib:,}"],
        gains=gains,
        takes=[_arith("KV MiB forgone", usable, "MiB",
                      "the same headroom the KV options would spend; the pool, its seats and window stay as they are")],
        notes=["slab MiB is throughput, but the law is not linear: measure arms (compare_arms) before predicting t/s"],
    )


def _options(boot: Boot, card: CardPlan, usable: int, model: ModelConstants) -> tuple[list[PlanOption], list[str]]:
    """More KV (per dtype) and more slab, each priced, with what it takes from the other."""
    notes: list[str] = []
    slope = planning.slab_slope(boot)
    slope_text = (f"{fmt_mib(slope.slots)} slots / {fmt_mib(slope.mib, 2)} MiB (ledger line {slope.line.number})"
                  if slope.line else f"{SLAB_SLOTS_PER_STEP:,} slots / {SLAB_MIB_PER_STEP:,} MiB (model constant)")
    src = boot.where()
    seqs_hit, window_hit, dtype_hit = (boot_flag(boot, f) for f in ("max-num-seqs", "max-model-len", "kv-cache-dtype"))
    pool = Decimal(str(card.vram_kv.value))
    options = []
    if pool + usable > MAX_POOL_MIB:
        notes.append(f"the headroom {usable:,} MiB is past any card's memory: read the settled line "
                     f"(line {card.settled_free.line}) again; the KV options are not priced")
    elif seqs_hit and window_hit:
        seqs, window = int(seqs_hit.number("value", src)), int(window_hit.number("value", src))
        current = dtype_hit.raw("value", src) if dtype_hit else None
        dtypes: tuple[KVDtype, ...] = ("fp8", "bf16")
        options = [_kv_option(pool, usable, seqs, window, d, current, model, slope, slope_text) for d in dtypes]
    else:
        missing = [f for f, h in (("--max-num-seqs", seqs_hit), ("--max-model-len", window_hit)) if h is None]
        notes.append(f"the boot does not echo {' and '.join(missing)}: the KV options cannot be priced")
    weights = Decimal(str(card.vram_weights.value))
    options.append(_slab_option(weights, usable, slope, slope_text, planning.slab_slots(boot)))
    return options, notes


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
    if not single and not names:
        raise InputError("the fleet config names no services: name a ledger (service, log or log_text) to plan")
    return names


def _ref(args: PlanFreeVramInput, name: str, boot: int) -> LedgerRef:
    if name:
        return LedgerRef(service=name, boot=boot)
    given = {n: getattr(args, n) for n in ("log", "log_text", "host", "container") if getattr(args, n) is not None}
    return LedgerRef.model_validate({**given, "boot": boot})


async def _read_boots(runtime: Runtime, args: PlanFreeVramInput, names: list[str], single: bool,
                      ) -> tuple[dict[str, Boot], dict[str, Boot], list[Unreadable]]:
    """The boots to plan, read concurrently, each in its engine's dialect: another engine's views
    (vLLM, SGLang, llama.cpp), radiance's boots, and the reads that failed.

    The asked ledger's failure is the call's; another service's goes to unreadable with its reason.
    """
    # The asked service's boot as asked; the others' (co-tenants of its cards, or the fleet) newest.
    wanted = [args.boot if single and i == 0 else -1 for i in range(len(names))]
    reads: list[Any] = await gather(*(read_ledger(runtime, _ref(args, n, b))
                                      for n, b in zip(names, wanted, strict=True)), return_exceptions=True)
    views: dict[str, Boot] = {}
    boots: dict[str, Boot] = {}
    unreadable: list[Unreadable] = []
    for name, result in zip(names, reads, strict=True):
        if isinstance(result, RadianceMCPError) and not (single and name == names[0]):
            unreadable.append(Unreadable(service=name, error=str(result)))
        elif isinstance(result, BaseException):
            raise result
        elif result.engine == "radiance":
            boots[name] = result
        else:
            views[name] = result
    return views, boots, unreadable


def picture(out: PlanFreeVramOutput) -> str:
    """Each planned card as a stacked bar, from the output's own figures; the options as ghosts."""
    from radiance_mcp.core import svg  # on first picture: tools/list does not draw

    bars = []
    for plan in out.services:
        for card in plan.cards:
            held = sum(r.mib for r in plan.reserves if r.card in (None, card.card))
            free, floor = card.settled_free.value, card.engine_floor.value
            arena = card.activation_arena.value if card.activation_arena else 0.0
            headroom = max(0.0, free - floor - held)
            used = card.vram_weights.value + card.vram_kv.value + arena + free
            total = card.card_total.value if card.card_total else used
            segments = (
                svg.Segment("weights", "vram_weights", card.vram_weights.value, _source(card.vram_weights)),
                svg.Segment("kv", "vram_kv (the KV pool)", card.vram_kv.value, _source(card.vram_kv)),
                svg.Segment("arena", "activation arena", arena, _source(card.activation_arena) or "not printed"),
                svg.Segment("other", "not attributed (driver context, the rest)", max(0.0, total - used),
                            "card total less the rest"),
                svg.Segment("headroom", "headroom to spend", headroom, "settled free - floor - reserves"),
                svg.Segment("reserves", "reserves", held, ", ".join(r.label for r in plan.reserves)),
                svg.Segment("floor", "engine floor", floor, _source(card.engine_floor)),
            )
            start = total - free if total >= used else used - free
            ghosts = tuple(
                svg.Ghost("kv" if option.name.startswith("more KV") else "weights",
                          f"{option.name}: +{option.adds_mib:,} MiB -> "
                          + "; ".join(f"{g.name}: {_value(g)}" for g in option.gains),
                          start, option.adds_mib)
                for option in plan.options
            )
            who = plan.service or Path(plan.ledger.source).name
            where = f" ({card.physical})" if card.physical else ""
            if card.shared_with:
                where = (f" ({card.physical}, shared with {', '.join(card.shared_with)}: "
                         f"{card.headroom_once_mib:,} MiB of headroom counted once)")
            bars.append(svg.Bar(f"{who} card {card.card}{where}", total, segments, free, ghosts))
    return svg.render(bars)


@FAMILY.tool("Plan what the free VRAM can buy", open_world=True, picture=picture)
async def plan_free_vram(runtime: Runtime, args: PlanFreeVramInput) -> PlanFreeVramOutput:
    """What the free VRAM can buy per card: the headroom above the pair less reserves, then each
    option priced and traced: more KV (seats, window; fp8 and bf16) or more slab, and what each
    takes from the other.

    When: asked what to do with free VRAM, for a service or the whole fleet. Rule: services
    sharing a card (config cards) share its headroom once. Next: render_gates.
    """
    single = any(getattr(args, n) is not None for n in ("service", "log", "log_text", "container"))
    names = _names(runtime, args, single)
    engines, boots, unreadable = await _read_boots(runtime, args, names, single)
    plans: dict[str, tuple[Boot, capacity.BudgetReading, list[CardPlan]]] = {}
    engine_cards: dict[str, tuple[Boot, list[CardPlan]]] = {}
    notes: list[str] = []
    if engines:
        from radiance_mcp.tools import engine_plan
    for name, view in engines.items():
        try:
            engine_cards[name] = (view, engine_plan.cards(view, runtime.fleet.services[name].cards if name else ()))
        except RadianceMCPError as exc:
            if single and name == names[0]:
                raise
            unreadable.append(Unreadable(service=name, error=str(exc)))
    for name, boot in boots.items():
        try:
            reading = capacity.read_budget(boot)
        except RadianceMCPError as exc:
            if single and name == names[0]:
                raise
            unreadable.append(Unreadable(service=name, error=str(exc)))
            continue
        cards_of = runtime.fleet.services[name].cards if name else ()
        if cards_of and len(cards_of) != len(reading.cards):
            notes.append(f"{name}: the config names {len(cards_of)} card(s) but its boot has {len(reading.cards)}; "
                         "its sharing is unknown until cards lists one physical card per engine card")
            cards_of = ()
        plans[name] = (boot, reading, [
            _card_plan(c, boot, cards_of[i] if cards_of else None) for i, c in enumerate(reading.cards)
        ])
    every = {name: cards for name, (_, _, cards) in plans.items()} | {n: c for n, (_, c) in engine_cards.items()}
    views = [planning.CardHeadroom(name, c.card, c.physical, c.headroom_mib, Decimal(str(c.engine_floor.value)))
             for name, cards in every.items() for c in cards]
    shared = planning.share(views)
    for name, cards in every.items():
        for i, c in enumerate(cards):
            if c.physical is not None:
                group = shared[c.physical]
                cards[i] = c.model_copy(update={
                    "shared_with": sorted({v.service for v in group.views if v.service != name}),
                    "headroom_once_mib": group.headroom_mib,
                })
    wanted = [n for n in names if n in every and (not single or n == names[0])]
    services = [_service_plan(runtime, args, name, *plans[name]) if name in plans else
                engine_plan.service_plan(engine_cards[name][0], name, engine_cards[name][1], args.reserves)
                for name in wanted]
    physical = [
        PhysicalCard(card=p, services=sorted(f"{v.service} card {v.card}" for v in s.views),
                     headroom_mib=s.headroom_mib, derivation=s.derivation)
        for p, s in sorted(shared.items())
    ]
    unmapped = [(n, c) for n, cards in every.items() for c in cards if c.physical is None]
    fleet_headroom = sum(max(0, s.headroom_mib) for s in shared.values()) + sum(max(0, c.headroom_mib)
                                                                               for _, c in unmapped)
    mapped = len(views) - len(unmapped)
    sharing: Literal["known", "unknown", "partial"] = (
        "known" if not unmapped else "unknown" if not mapped else "partial"
    )
    if unmapped:
        listed = ", ".join(sorted({n or "the ledger" for n, _ in unmapped}))
        notes.append(f"which physical card {listed} run on is not in the config (cards = [\"host:0\", ...] per "
                     "service): if two of them share a card, its headroom is counted once per service here, so "
                     "the fleet total is an upper bound")
    return PlanFreeVramOutput(services=services, physical_cards=physical, unreadable=unreadable,
                              fleet_headroom_mib=fleet_headroom, sharing=sharing,
                              summary=[line for plan in services for line in _summary(plan)], notes=notes)


def _value(figure: Traced) -> str:
    if figure.unit == "seats":
        return _seats(int(figure.value))
    return f"{figure.value:,.0f} {figure.unit}" if figure.value == int(figure.value) else \
        f"{figure.value:,.2f} {figure.unit}"


def _summary(plan: ServicePlan) -> list[str]:
    card = next(c for c in plan.cards if c.card == plan.binding_card)
    who = plan.service or plan.ledger.source
    shared = f", shared with {', '.join(card.shared_with)}: {card.headroom_once_mib:,} MiB counted once" \
        if card.shared_with else ""
    lines = [f"{who}: card {card.card} ceiling {card.derivation}; headroom {card.headroom_mib:,} MiB{shared}; "
             f"{plan.usable_mib:,} MiB to spend after reserves"]
    for option in plan.options:
        gains = "; ".join(f"{g.name}: {_value(g)}" for g in option.gains)
        takes = "; ".join(f"{t.name}: {_value(t)}" for t in option.takes)
        lines.append(f"  {option.name} (+{option.adds_mib:,} MiB, {', '.join(option.flags)}) gives {gains}. "
                     f"Takes {takes}")
    return lines


def _service_plan(runtime: Runtime, args: PlanFreeVramInput, name: str, boot: Boot,
                  reading: capacity.BudgetReading, cards: list[CardPlan]) -> ServicePlan:
    model = runtime.fleet.model_constants(name or None)
    reserves = trace_reserves(reading, args.reserves)
    binding = min(cards, key=lambda c: (c.headroom_once_mib - held_on(reserves, c.card), c.card))
    held = held_on(reserves, binding.card)
    usable = round_down(binding.headroom_once_mib - held)
    notes = []
    if binding.shared_with:
        notes.append(f"card {binding.card} ({binding.physical}) is shared with {', '.join(binding.shared_with)}: "
                     f"its {binding.headroom_once_mib:,} MiB are spent once, by one service")
    if len(cards) > 1:
        notes.append(f"card {binding.card} has the least headroom and binds every card (the pair is per card)")
    notes.append(f"a pair at the ceiling settles about {AT_CEILING_WORST_FREE_MIB} MiB free at worst")
    options: list[PlanOption] = []
    if usable > 0:
        options, more = _options(boot, binding, usable, model)
        notes += more
    else:
        notes.append(f"no headroom to spend: {binding.headroom_once_mib:,} MiB less {fmt_mib(held, 2)} MiB of "
                     "reserves; the pair is at or above what the ceiling allows")
    slope = planning.slab_slope(boot)
    slab = planning.slab_slots(boot)
    shape = []
    src = boot.where()
    for flag, unit in (("max-num-seqs", "seats"), ("max-model-len", "tokens"), ("tp", "cards")):
        hit = boot_flag(boot, flag)
        if hit is not None:
            shape.append(_ledger(f"--{flag}", hit.number("value", src), unit, hit.line))
    dtype = boot_flag(boot, "kv-cache-dtype")
    return ServicePlan(
        service=name or None,
        ledger=boot_ref(boot),
        model=model.name,
        shape=shape,
        kv_cache_dtype=dtype.raw("value", src) if dtype else None,
        cards=cards,
        binding_card=binding.card,
        reserves=[ReserveOutput(mib=mib(r.mib), label=r.label, kind="personal" if r.line is None else "traced",
                                line=line_ref(r.line) if r.line else None, card=r.card) for r in reserves],
        personal_reserves=[r.label for r in reserves if r.line is None],
        headroom_mib=binding.headroom_once_mib,
        usable_mib=usable,
        slope=(Traced(name="slab slope", value=float(round(slope.per_mib, 4)), unit="slots/MiB", source="ledger",
                      line=slope.line.number, text=slope.line.text) if slope.line else
               Traced(name="slab slope", value=float(round(slope.per_mib, 4)), unit="slots/MiB",
                      source="model constant", line=None,
                      text=f"{SLAB_SLOTS_PER_STEP:,} slots per {SLAB_MIB_PER_STEP:,} MiB, measured")),
        slab=_ledger("slab slots resident", slab.resident_slots, "slots", slab.line) if slab else None,
        options=options,
        decode=DECODE,
        sharing="known" if all(c.physical for c in cards) else "unknown",
        notes=notes,
    )


def held_on(reserves: tuple[capacity.Reserve, ...], card: int) -> Decimal:
    """MiB the reserves hold back on one card: every personal one, and the traced ones of that card."""
    return sum((r.mib for r in reserves if r.card in (None, card)), Decimal(0))


def _source(figure: Traced | None) -> str:
    return "" if figure is None else f"line {figure.line}" if figure.line else figure.source
