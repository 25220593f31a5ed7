"""plan_free_vram on a vLLM, SGLang or llama.cpp boot: the headroom above its pair, spent on more KV.

tools/plan.py hands an engine's boot here (sources/engine_logs.py read it in its dialect). The cards
and their ceilings are radiance_mcp.core.rules.engine_capacity's; the one option is more KV memory,
priced at the engine's own bytes per token in KV tokens and full-length sequences at its
window, with the flag that moves it. radiance's slab has no counterpart in these engines.
"""

from __future__ import annotations

from decimal import ROUND_DOWN, Decimal

from radiance_mcp.core import engine_facts
from radiance_mcp.core.boot import Boot, Figure
from radiance_mcp.core.constants import MIB
from radiance_mcp.core.rules import capacity, engine_capacity
from radiance_mcp.core.units import fmt_mib, round_down
from radiance_mcp.models.base import boot_ref, mib
from radiance_mcp.models.ledger import ReserveInput, ReserveOutput
from radiance_mcp.models.plan import CardPlan, PlanOption, ServicePlan, Traced
from radiance_mcp.tools.ledger import trace_reserves

DECODE = ("decode is a separate axis: it follows the KV dtype, memory bandwidth and batch, not the pool size; no "
          "option here is priced in decode t/s: measure it (decode_probe)")


def traced(name: str, figure: Figure) -> Traced:
    """An engine's figure as the plan shows it: its first line, or its arithmetic over its lines."""
    if figure.arithmetic:
        return Traced(name=name, value=mib(figure.value), unit=figure.unit, source="arithmetic", line=None,
                      text=f"{figure.arithmetic} (lines {', '.join(str(line.number) for line in figure.lines)})")
    line = figure.lines[0]
    return Traced(name=name, value=mib(figure.value), unit=figure.unit, source="ledger", line=line.number,
                  text=line.text)


def _arith(name: str, value: Decimal, unit: str, text: str) -> Traced:
    return Traced(name=name, value=mib(value), unit=unit, source="arithmetic", line=None, text=text)


def cards(view: Boot, physical: tuple[str, ...]) -> list[CardPlan]:
    """One CardPlan per rank (llama.cpp: per device), physical cards from the config in rank order."""
    plans = []
    for position, rank in enumerate(capacity.ceilings(view)):
        figures = next(r for r in view.ranks if r.rank == rank.rank)
        assert figures.weights_mib and figures.kv_mib and figures.free_mib  # ceilings() needs them
        floor = (traced("engine floor", figures.floor_mib) if figures.floor_mib else
                 _arith("engine floor", Decimal(0), "MiB", rank.floor_note))
        activation = figures.activation_mib or figures.graph_mib
        headroom = rank.card.headroom_mib
        plans.append(CardPlan(
            card=rank.card.card, physical=physical[position] if position < len(physical) else None, card_total=None,
            vram_weights=traced("weights", figures.weights_mib), vram_kv=traced("KV memory", figures.kv_mib),
            activation_arena=traced("activation", activation) if activation else None, engine_floor=floor,
            settled_free=traced("settled free", figures.free_mib), unclaimed=None, ceiling_mib=rank.card.ceiling_mib,
            derivation=f"{rank.rank}: {rank.card.derivation}", headroom_mib=headroom, shared_with=[],
            headroom_once_mib=headroom,
        ))
    return plans


def _more_kv(view: Boot, usable: int) -> PlanOption:
    """usable MiB more KV: KV tokens at the engine's own rate, and full-length sequences at its window."""
    rank = engine_capacity.binding_rank(view)
    gains: list[Traced] = []
    notes: list[str] = []
    rate, tokens, window = rank.kv_bytes_per_token, rank.kv_tokens, rank.window_tokens
    if rate is None or tokens is None:
        gaps = [str(g) for g in rank.missing if g.figure in ("kv_tokens", "kv_bytes_per_token")]
        notes.append(f"not priced in tokens: {'; '.join(gaps)}")
    else:
        added = int(Decimal(usable) * MIB / rate.value)
        gains.append(_arith("KV tokens", Decimal(tokens.value + added), "tokens",
                            f"{tokens.value:,} + {usable:,} MiB x {MIB:,} B / {rate.value:,} B = "
                            f"{tokens.value + added:,} tokens"))
        if window is not None:
            seqs = ((tokens.value + added) / window.value).quantize(Decimal("0.01"), rounding=ROUND_DOWN)
            gains.append(_arith("full-length sequences", seqs, "sequences",
                                f"{tokens.value + added:,} / {window.value:,} tokens = {seqs}"))
    return PlanOption(name="more KV", axis="capacity (full-length sequences at the window)", adds_mib=usable,
                      flags=[f"+{usable:,} MiB of KV memory per card: {engine_facts.KV_FLAGS[view.engine]}"],
                      gains=gains, takes=[], notes=notes)


def service_plan(view: Boot, name: str, plans: list[CardPlan], given: list[ReserveInput]) -> ServicePlan:
    reserves = trace_reserves(capacity.budget(view), given)
    held = sum((r.mib for r in reserves), Decimal(0))
    binding = min(plans, key=lambda c: (c.headroom_once_mib, c.card))
    usable = round_down(binding.headroom_once_mib - held)
    rank = engine_capacity.binding_rank(view)
    shape = [traced("window", rank.window_tokens)] if rank.window_tokens else []
    seats = view.settings.get(engine_facts.SEATS.get(view.engine, ""))
    shape += [traced("sequences served at once", seats)] if seats else []
    notes = [f"the floor is {engine_facts.FLOORS[view.engine]}"]
    if binding.shared_with:
        notes.append(f"card {binding.card} ({binding.physical}) is shared with {', '.join(binding.shared_with)}: "
                     f"its {binding.headroom_once_mib:,} MiB are spent once, by one service")
    if usable <= 0:
        notes.append(f"no headroom to spend: {binding.headroom_once_mib:,} MiB less {fmt_mib(held, 2)} MiB of "
                     f"reserves; {view.engine} holds its KV memory at what the flag allows")
    return ServicePlan(
        service=name or None, ledger=boot_ref(view), model=view.engine, shape=shape, kv_cache_dtype=None,
        cards=plans, binding_card=binding.card,
        reserves=[ReserveOutput(mib=mib(r.mib), label=r.label, kind="personal", line=None, card=None)
                  for r in reserves],
        personal_reserves=[r.label for r in reserves], headroom_mib=binding.headroom_once_mib, usable_mib=usable,
        slope=None, slab=None, options=[_more_kv(view, usable)] if usable > 0 else [], decode=DECODE,
        sharing="known" if all(c.physical for c in plans) else "unknown", notes=notes,
    )
