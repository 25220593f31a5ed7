"""The shipping tools: render_gates (the env-file pair, its predictions and bats gates) and verify_deploy.

render_gates reads the ceiling from a boot, judges the plan by the rule book (core/rules/plan.py, with
the shared cards and co-tenants tools/standing.py reads), refuses a plan that would fail its own
gates, and returns the env file and the bats file as text (gates.py writes them); verify_deploy
reads the new boot first, judges nothing on a boot that is not the plan's (core/rules/deploy.py),
then marks each prediction of the env file kept, killed or pending. Neither writes to a host.
Their models live in models/gates.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from radiance_mcp.core import gates, knobs, planning
from radiance_mcp.core.boot import Boot, Figure, Line, RankView
from radiance_mcp.core.constants import (
    AT_CEILING_WORST_FREE_MIB,
    MIB,
    SAMPLER_ROW_BOUND,
)
from radiance_mcp.core.errors import InputError, LedgerError
from radiance_mcp.core.rules import book, capacity, sampler, unprinted
from radiance_mcp.core.rules import plan as rules_plan
from radiance_mcp.core.rules.contract import binding_rank, from_ledger, given_or_read, seats_printed_as, served_seats
from radiance_mcp.core.rules.probe_shape import api_of
from radiance_mcp.core.units import fmt_mib
from radiance_mcp.models.base import boot_ref, line_ref, mib
from radiance_mcp.models.gates import (
    PredictionOutput,
    RenderGatesInput,
    RenderGatesOutput,
)
from radiance_mcp.models.ledger import outside
from radiance_mcp.sources.engine_logs import read_ledger
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools import standing
from radiance_mcp.tools.ledger import trace_reserves
from radiance_mcp.tools.registry import ToolFamily

FAMILY = ToolFamily()

# ---------------------------------------------------------------------------------------
# render_gates


def _slab_prediction(boot: Boot, weights: int) -> gates.Prediction | None:
    """Resident slots after the weights change, by the slope (the boot's mover ratio, else the constant)."""
    slab = planning.slab_slots(boot)
    current = boot.flags.get("vram-weights-mib")
    if slab is None or current is None:
        return None
    delta = Decimal(weights) - current.number("value", boot.where())
    moved = planning.slab_slope(boot).slots_for(abs(delta)) * (1 if delta >= 0 else -1)
    if slab.host_pool_slots is not None:
        moved = min(moved, slab.host_pool_slots)  # past the host pool's slots every expert is resident
    return gates.Prediction(
        "slab", str(slab.resident_slots + moved),
        f"slab slots about {slab.resident_slots + moved:,} resident ({slab.resident_slots:,} now, line "
        f"{slab.line.number}, {'+' if moved >= 0 else ''}{moved:,} for {fmt_mib(delta)} MiB of weights), "
        f"within {gates.SLAB_TOLERANCE_PCT:g} %")


def _predictions(
    boot: Boot, *, ceiling_mib: int, floor_mib: Decimal, weights_mib: int, pool_mib: int, seqs: int, window: int,
    contract: capacity.PoolContract, spec: int | None, rows: int | None,
) -> list[gates.Prediction]:
    """What the new boot must show, each falsifiable: the referee line, the ceiling, settled free,
    the contract's margin, the sampler rows and slab slots where known, the boundary probe."""
    pair = weights_mib + pool_mib
    predictions = [
        gates.Prediction("referee", f"{seqs}x{window}",
                         f"the boot prints 'backs {seqs} sequences all at {window} tokens at once'"),
        gates.Prediction("ceiling", str(ceiling_mib),
                         f"the new boot's ceiling ({ceiling_mib:,} MiB/card on this boot) stays at or above "
                         f"the pair {pair:,} MiB"),
        gates.Prediction("settled", fmt_mib(floor_mib, 2).replace(",", ""),
                         f"settled free stays at or above the floor {fmt_mib(floor_mib, 2)} MiB "
                         f"({fmt_mib(ceiling_mib - pair)} MiB under the ceiling left; a pair at the ceiling settles "
                         f"about {AT_CEILING_WORST_FREE_MIB} MiB free at worst)"),
        gates.Prediction("contract", fmt_mib(contract.margin_mib, 2).replace(",", ""),
                         f"pool {pool_mib:,} >= contract {fmt_mib(contract.required_mib, 2)} MiB, margin "
                         f"{fmt_mib(contract.margin_mib, 2)} MiB"),
    ]
    if rows is not None:
        predictions.append(gates.Prediction("sampler", str(rows), f"sampler: {seqs} x (1 + {spec}) = {rows} rows, "
                                            f"inside the {SAMPLER_ROW_BOUND}-row bound"))
    slab = _slab_prediction(boot, weights_mib)
    if slab is not None:
        predictions.append(slab)
    predictions.append(gates.Prediction(
        "boundary", f"{seqs}/{seqs}", f"the boundary probe retrieves {seqs}/{seqs} markers: {seqs} concurrent "
        f"prompts of max_model_len - gen tokens, a unique marker at each head"))
    return predictions


def _shared_gates(against: rules_plan.Standing, held: Decimal) -> tuple[gates.SharedGate, ...]:
    """A gate per shared physical card, its co-tenants' growth read from their env files when the gate runs."""
    out = []
    for card in against.shared_cards:
        names = sorted({v.service for v in card.views} - {against.service})
        mates = [(n, (against.cotenants or {})[n]) for n in names]
        out.append(gates.SharedGate(
            card.physical, math.floor(card.headroom_mib - held), math.floor(against.pair_now_mib),
            tuple((n, c.prefix, c.env_file, math.floor(c.pair_now_mib))
                  for n, c in mates if c.env_file and c.prefix),
            tuple(n for n, c in mates if not (c.env_file and c.prefix))))
    return tuple(out)


def _refusal_text(check: book.Check, plan: rules_plan.ResizePlan, ceiling: capacity.Ceiling,
                  reserves: tuple[capacity.Reserve, ...]) -> str:
    """What render_gates says of a failed check: the rule's arithmetic and remedy, as the gates would fail."""
    if check.rule == "pair_within_ceiling":
        binding = next(c for c in ceiling.cards if c.card == ceiling.binding_card)
        held = planning.held_on(reserves, binding.card)
        return (f"the planned pair {plan.weights_mib:,} + {plan.pool_mib:,} = {plan.pair_mib:,} MiB is over the "
                f"ceiling {ceiling.ceiling_mib:,} MiB/card ({binding.derivation})"
                f"{f' less {fmt_mib(held, 2)} MiB of reserves' if held else ''}: its gate would fail; {check.remedy}")
    if check.rule == "pool_contract":
        return (f"the pool fails its contract: {check.arithmetic}; radiance would boot, then refuse every long "
                f"request ('{capacity.REFUSAL.format(window=plan.window)}'): {check.remedy}")
    if check.rule == "sampler_rows":
        return (f"sampler rows {plan.seqs} x (1 + {plan.spec}) = {plan.seqs * (1 + (plan.spec or 0))} exceed the "
                f"{SAMPLER_ROW_BOUND}-row wht6 exactness bound: {check.remedy}")
    return f"{check.arithmetic}: {check.remedy}"


def _gate_files(runtime: Runtime, args: RenderGatesInput, name: str) -> tuple[str, str]:
    """The env file (given, else the service's, else NAME.env) and the bats file beside it."""
    entry = runtime.fleet.services.get(args.service) if args.service else None
    env_file = args.env_file or (entry.env_file if entry and entry.env_file else f"{name}.env")
    bats_file = str(Path(env_file).with_suffix(".bats")) if env_file.endswith(".env") else f"{env_file}.bats"
    return env_file, bats_file


@dataclass(frozen=True)
class Shape:
    """The plan render_gates renders, with what another engine's knobs are priced at."""

    resize: rules_plan.ResizePlan
    spec_line: Line | None
    rate: Figure | None = None
    """Another engine's KV bytes per token (its binding rank's); None: radiance's, the model's constants."""


def _radiance_shape(boot: Boot, args: RenderGatesInput) -> Shape:
    def given_or_echoed(argument: str, given: Any) -> Any:
        return given if given is not None else from_ledger(boot, argument)[0]

    if args.vram_kv_mib is None:
        raise InputError("vram_kv_mib is needed: radiance's pool is its --vram-kv-mib (plan_free_vram's plans give "
                         "it); pass vram_kv_mib")
    spec, spec_line = (args.spec, None) if args.spec is not None else sampler.boot_spec(boot)
    resize = rules_plan.ResizePlan(
        given_or_echoed("vram_weights_mib", args.vram_weights_mib), args.vram_kv_mib,
        given_or_echoed("seqs", args.seqs), given_or_echoed("max_model_len", args.max_model_len),
        given_or_echoed("kv_cache_dtype", args.kv_cache_dtype), spec)
    return Shape(resize, spec_line)


def _engine_shape(boot: Boot, args: RenderGatesInput, settled: RankView) -> Shape:
    """Another engine's plan: its weights (the model's, no flag moves them), its rate (the binding rank's own KV
    pair), the seats and window given or as the boot prints them, and its KV memory given (llama.cpp: it
    follows from seats x window cells)."""
    where, engine = boot.where(), boot.engine
    for name, value in (("vram_weights_mib", args.vram_weights_mib), ("kv_cache_dtype", args.kv_cache_dtype),
                        ("spec", args.spec)):
        if value is not None:
            raise InputError(f"{name}={value!r}: {where} is a {engine} boot, whose weights are the model's and whose "
                             f"KV rate is its own KV pair's (set its cache type on the engine); leave {name} out")
    rank = binding_rank(boot)
    try:
        rate, weights = rank.require("kv_bytes_per_token"), settled.require("weights_mib")
    except LedgerError as exc:
        raise InputError(f"{where}: {exc}; render_gates prices {engine}'s knobs at its own rate") from exc
    window_gap = next((str(g) for g in rank.missing if g.figure == "window_tokens"), "it prints no window")
    seqs, _ = given_or_read(args.seqs, served_seats(boot), "seqs",
                            f"{where} prints no seats ({seats_printed_as(engine) or 'vLLM: none at INFO'})")
    window, _ = given_or_read(args.max_model_len, rank.window_tokens, "max_model_len", f"{where}: {window_gap}")
    if api_of(engine, boot) == "llama-cpp-python" and seqs != 1:
        raise InputError(f"seqs={seqs}: {where} is llama-cpp-python's server, which serves one sequence at a time "
                         "(no --parallel); plan seqs=1, or serve the model with llama-server -np N")
    derived = knobs.cells_pool_mib(engine, seqs, window, rate.value)
    pool = args.vram_kv_mib if args.vram_kv_mib is not None else derived
    if pool is None:
        raise InputError(f"vram_kv_mib is needed: {engine}'s KV memory is set by {knobs.KNOBS[engine].knobs[0].flag}, "
                         "not by the shape (plan_free_vram's plans give it); pass vram_kv_mib")
    if derived is not None and pool != derived:
        raise InputError(f"vram_kv_mib={pool:,}: on llama.cpp the KV memory follows from the window, {seqs} x "
                         f"{window:,} cells x {fmt_mib(rate.value, 2)} B = {derived:,} MiB (rounded up); leave it out")
    resize = rules_plan.ResizePlan(math.ceil(weights.value), pool, seqs, window, None, None)
    return Shape(resize, None, rate)



@FAMILY.tool("Render the env file and bats gates", open_world=True)
async def render_gates(runtime: Runtime, args: RenderGatesInput) -> RenderGatesOutput:
    """Render a planned resize's env-file pair, its predictions and bats gates, in the engine's knobs.

    When: after choosing a plan (plan_free_vram's plans are its arguments). Rule: a plan over the
    ceiling, under its contract, past the sampler bound or a shared card's headroom is refused;
    text is returned, never written. Next: deploy, then verify_deploy.
    """
    boot = await read_ledger(runtime, args)
    start = boot.first("boot_start")
    name = args.service or (start.fields.get("name") if start else None) or "service"
    model = runtime.fleet.model_constants(args.service)
    reading, said = capacity.with_outside_free(capacity.budget(boot), outside(args.outside_free))
    reserves = trace_reserves(reading, args.reserves)
    ceiling = capacity.compute_ceiling(reading, reserves)
    binding = next(c for c in ceiling.cards if c.card == ceiling.binding_card)
    settled = next(c for c in reading.cards if c.card == ceiling.binding_card)
    settled_free = settled.require("free_mib")
    shape = _radiance_shape(boot, args) if planning.sets_pair_in_mib(settled) else _engine_shape(boot, args, settled)
    resize, rate = shape.resize, shape.rate
    against = await standing.standing(runtime, args.service, boot, ceiling, model, shape.spec_line)
    against = replace(against, rate=rate.value if rate else None)
    checks = rules_plan.judge(resize, against)
    for check in checks:
        check.enforce(_refusal_text(check, resize, ceiling, reserves))
    contract = rules_plan.contract_of(resize, against)
    contract_text = next(c.arithmetic for c in checks if c.rule == "pool_contract")
    spec = resize.spec
    rows = None if spec is None else resize.seqs * (1 + spec)
    if rate is None:
        predictions = _predictions(
            boot, ceiling_mib=binding.ceiling_mib, floor_mib=settled.require("floor_mib").value,
            weights_mib=resize.weights_mib, pool_mib=resize.pool_mib, seqs=resize.seqs, window=resize.window,
            contract=contract, spec=spec, rows=rows)
    else:
        predictions = _engine_predictions(boot, resize, rate, binding.ceiling_mib, settled)
    env_file, bats_file = _gate_files(runtime, args, name)
    pair_lines = settled.require("pair").lines if settled.pair is not None else (
        *settled.require("weights_mib").lines, *settled.require("kv_mib").lines)
    free_at = f", line {settled_free.line.number}" if settled_free.lines else f"; {settled_free.arithmetic}"
    plan = gates.GatePlan(
        service=name, prefix=args.env_prefix or gates.env_prefix(name), env_file=env_file, bats_file=bats_file,
        weights_mib=resize.weights_mib, kv_mib=resize.pool_mib, seqs=resize.seqs, max_model_len=resize.window,
        dtype=resize.dtype, model=model, ceiling_mib=binding.ceiling_mib,
        ceiling_text=f"{binding.derivation} ({boot.source}, boot {boot.index}{free_at})",
        contract_text=contract_text,
        reserves=tuple(gates.GateReserve(float(r.mib), r.label, r.line.number if r.line else None) for r in reserves),
        predictions=tuple(predictions),
        planned_from=(boot.source, boot.index),
        shared=_shared_gates(against, planning.held_on(reserves, binding.card)),
        engine=boot.engine, rate=rate.value if rate else None, rate_line=rate.lines[0].number if rate else None,
    )
    return RenderGatesOutput(
        ledger=boot_ref(boot),
        service=name,
        pair_mib=resize.pair_mib,
        ceiling_mib=binding.ceiling_mib,
        ceiling_derivation=binding.derivation,
        max_pair_mib=ceiling.max_pair_mib,
        contract=contract_text,
        contract_margin_mib=mib(contract.margin_mib),
        sampler_rows=rows,
        personal_reserves=[r.label for r in reserves if r.line is None],
        env_file=env_file,
        env_text=gates.render_env(plan),
        bats_file=bats_file,
        bats_text=gates.render_bats(plan),
        predictions=[PredictionOutput(key=p.key, value=p.value, text=p.text) for p in predictions],
        sources=[line_ref(line) for line in dict.fromkeys([*settled_free.lines, *pair_lines])],
        notes=[f"write {env_file} and {bats_file}, then run: bats {bats_file}; the server writes nothing to a host",
               "decode is not predicted here: it is a separate axis, measured by the decode probe",
               *(c.arithmetic for c in checks if c.rule == "shared_card"), *against.notes, *said,
               *_unprinted(boot, resize)],
    )


def _unprinted(boot: Boot, resize: rules_plan.ResizePlan) -> list[str]:
    note = unprinted.host_logits(boot, Decimal(resize.seqs * resize.window))
    return [note] if note else []


def _engine_predictions(boot: Boot, resize: rules_plan.ResizePlan, rate: Figure, ceiling_mib: int,
                        settled: RankView) -> list[gates.Prediction]:
    """What another engine's new boot must show: its KV memory and tokens as its knobs fund them, its bytes per
    token unchanged (the rate the knobs are priced at), the window and seats, the ceiling, the boundary probe."""
    engine, seqs, window = boot.engine, resize.seqs, resize.window
    kv = knobs.kv_value(engine, resize.pool_mib, seqs, window, rate.value)
    memory = knobs.pool_of(engine, kv, rate.value)
    tokens = kv if knobs.KNOBS[engine].kv_unit in ("tokens", "cells") else int(memory * MIB / rate.value)
    out = [
        gates.Prediction("kv_mib", f"{memory:.2f}", f"the KV memory is {fmt_mib(memory, 2)} MiB per card "
                         f"({knobs.KNOBS[engine].knobs[0].flag} {kv:,})"),
        gates.Prediction("bytes_per_token", f"{rate.value:.2f}", f"{fmt_mib(rate.value, 2)} B per token, as boot "
                         f"{boot.index} (line {rate.lines[0].number}): the rate the knobs are priced at"),
        gates.Prediction("window", str(window), f"each sequence's window is {window:,} tokens"),
    ]
    if knobs.KNOBS[engine].kv_unit != "bytes":  # vLLM's tokens are its blocks': the contract bounds them
        out.insert(1, gates.Prediction("kv_tokens", str(tokens), f"the KV cache holds {tokens:,} tokens"))
    if served_seats(boot) is not None:
        out.append(gates.Prediction("seats", str(seqs), f"the engine serves {seqs} sequence(s) at once"))
    out += [
        gates.Prediction("ceiling", str(ceiling_mib), f"the new boot's ceiling stays at or above the pair "
                         f"{resize.pair_mib:,} MiB"),
        gates.Prediction("contract", str(seqs * window), f"the KV tokens hold {seqs} x {window:,} = "
                         f"{seqs * window:,} tokens"),
        gates.Prediction("boundary", f"{seqs}/{seqs}", f"the boundary probe retrieves {seqs}/{seqs} markers"),
    ]
    if settled.floor_mib is not None:
        floor = settled.floor_mib.value
        out.insert(-2, gates.Prediction("settled", fmt_mib(floor, 2).replace(",", ""),
                                        f"settled free stays at or above the floor {fmt_mib(floor, 2)} MiB"))
    return out
