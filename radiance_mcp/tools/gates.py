"""The shipping tools: render_gates (the env-file pair, its predictions and bats gates) and verify_deploy.

render_gates reads the ceiling from a boot, judges the plan by the rule book (core/rules/plan.py, with
the shared cards and co-tenants tools/standing.py reads), refuses a plan that would fail its own
gates, and returns the env file and the bats file as text (gates.py writes them); verify_deploy
reads the new boot first, judges nothing on a boot that is not the plan's (core/rules/deploy.py),
then marks each prediction of the env file kept, killed or pending. Neither writes to a host.
Their models live in models/gates.py.
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

from radiance_mcp.core import gates, planning
from radiance_mcp.core.boot import Boot, Line
from radiance_mcp.core.constants import (
    AT_CEILING_WORST_FREE_MIB,
    KV_DTYPES,
    SAMPLER_ROW_BOUND,
    KVDtype,
    ModelConstants,
)
from radiance_mcp.core.errors import InputError, SourceError
from radiance_mcp.core.rules import book, capacity, deploy, sampler
from radiance_mcp.core.rules import plan as rules_plan
from radiance_mcp.core.rules.contract import from_ledger
from radiance_mcp.core.units import fmt_mib
from radiance_mcp.models.base import boot_ref, line_ref, mib
from radiance_mcp.models.gates import (
    DeployCheck,
    PredictionOutput,
    RenderGatesInput,
    RenderGatesOutput,
    Verdict,
    VerifyDeployInput,
    VerifyDeployOutput,
)
from radiance_mcp.sources.env_files import read_env_file
from radiance_mcp.sources.ledgers import read_boot
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.sources.settling import read_settled
from radiance_mcp.tools import standing
from radiance_mcp.tools.ledger import trace_reserves
from radiance_mcp.tools.registry import Progress, ToolFamily

FAMILY = ToolFamily()

SLAB_TOLERANCE_PCT = 1.0
"""A slab-slot prediction from the slope is kept within this: the slope is measured, ~1,300 per 1,792 MiB."""

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
        f"within {SLAB_TOLERANCE_PCT:g} %")


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


@FAMILY.tool("Render the env file and bats gates", open_world=True)
async def render_gates(runtime: Runtime, args: RenderGatesInput) -> RenderGatesOutput:
    """Render a planned resize's env-file pair with falsifiable predictions and the bats gates
    (pair <= ceiling less reserves, pool >= contract, each reserve labelled).

    When: after choosing a pair (plan_free_vram's plans are its arguments). Rule: a plan over the
    ceiling, under its contract, past the sampler bound or past a shared card's headroom is
    refused; text is returned, never written to a host. Next: deploy, then verify_deploy.
    """
    boot = await read_boot(runtime, args)
    start = boot.first("boot_start")
    name = args.service or (start.fields.get("name") if start else None) or "service"
    model = runtime.fleet.model_constants(args.service)
    reading = capacity.read_budget(boot)
    reserves = trace_reserves(reading, args.reserves)
    ceiling = capacity.compute_ceiling(reading, reserves)
    binding = next(c for c in ceiling.cards if c.card == ceiling.binding_card)
    settled = next(c for c in reading.cards if c.card == ceiling.binding_card)
    settled_free, settled_pair = settled.require("free_mib"), settled.require("pair")

    def given_or_echoed(argument: str, given: Any) -> Any:
        return given if given is not None else from_ledger(boot, argument)[0]

    weights: int = given_or_echoed("vram_weights_mib", args.vram_weights_mib)
    seqs: int = given_or_echoed("seqs", args.seqs)
    window: int = given_or_echoed("max_model_len", args.max_model_len)
    dtype: KVDtype = given_or_echoed("kv_cache_dtype", args.kv_cache_dtype)
    spec, spec_line = (args.spec, None) if args.spec is not None else sampler.boot_spec(boot)
    resize = rules_plan.ResizePlan(weights, args.vram_kv_mib, seqs, window, dtype, spec)
    against = await standing.standing(runtime, args.service, boot, ceiling, model, spec_line)
    checks = rules_plan.judge(resize, against)
    for check in checks:
        check.enforce(_refusal_text(check, resize, ceiling, reserves))
    contract = capacity.pool_contract(Decimal(args.vram_kv_mib), seqs, window, dtype, model)
    contract_text = next(c.arithmetic for c in checks if c.rule == "pool_contract")
    pair = resize.pair_mib
    predictions = _predictions(
        boot, ceiling_mib=binding.ceiling_mib, floor_mib=settled.require("floor_mib").value, weights_mib=weights,
        pool_mib=args.vram_kv_mib, seqs=seqs, window=window, contract=contract, spec=spec,
        rows=None if spec is None else seqs * (1 + spec),
    )
    env_file, bats_file = _gate_files(runtime, args, name)
    plan = gates.GatePlan(
        service=name, prefix=args.env_prefix or gates.env_prefix(name), env_file=env_file, bats_file=bats_file,
        weights_mib=weights,
        kv_mib=args.vram_kv_mib, seqs=seqs, max_model_len=window, dtype=dtype, model=model,
        ceiling_mib=binding.ceiling_mib,
        ceiling_text=f"{binding.derivation} ({boot.source}, boot {boot.index}, line {settled_free.line.number})",
        contract_text=contract_text,
        reserves=tuple(gates.GateReserve(float(r.mib), r.label, r.line.number if r.line else None) for r in reserves),
        predictions=tuple(predictions),
        planned_from=(boot.source, boot.index),
        shared=_shared_gates(against, planning.held_on(reserves, binding.card)),
    )
    return RenderGatesOutput(
        ledger=boot_ref(boot),
        service=name,
        pair_mib=pair,
        ceiling_mib=binding.ceiling_mib,
        ceiling_derivation=binding.derivation,
        max_pair_mib=ceiling.max_pair_mib,
        contract=contract_text,
        contract_margin_mib=mib(contract.margin_mib),
        sampler_rows=None if spec is None else seqs * (1 + spec),
        personal_reserves=[r.label for r in reserves if r.line is None],
        env_file=env_file,
        env_text=gates.render_env(plan),
        bats_file=bats_file,
        bats_text=gates.render_bats(plan),
        predictions=[PredictionOutput(key=p.key, value=p.value, text=p.text) for p in predictions],
        sources=[line_ref(line) for line in dict.fromkeys([settled_free.line, *settled_pair.lines])],
        notes=[f"write {env_file} and {bats_file}, then run: bats {bats_file}; the server writes nothing to a host",
               "decode is not predicted here: it is a separate axis, measured by the decode probe",
               *(c.arithmetic for c in checks if c.rule == "shared_card"), *against.notes],
    )


# ---------------------------------------------------------------------------------------
# verify_deploy


async def _env_text(runtime: Runtime, args: VerifyDeployInput) -> str:
    if args.env_text is not None:
        return args.env_text
    entry = runtime.fleet.service(args.service) if args.service else None
    if entry is None or entry.env_file is None or entry.host is not None:
        raise InputError("env_text is needed: pass the env file's text as render_gates wrote it"
                         + (" (the service's env_file is on another host)" if entry and entry.host else ""))
    path = Path(entry.env_file).expanduser()
    try:
        return await read_env_file(path)
    except SourceError as exc:
        raise InputError(f"{exc}; or pass env_text") from exc


def _check(name: str, ok: bool | None, expected: str, found: str, line: Line | None) -> DeployCheck:
    return DeployCheck(check=name, ok=ok, expected=expected, found=found, line=line_ref(line) if line else None)


Found = dict[str, tuple[str, bool | None, Line | None]]
"""Per prediction key: the figure the boot shows, its verdict where the check decides it, and its line."""


def _shape_checks(boot: Boot, plan: gates.EnvPlan, found: Found) -> list[DeployCheck]:
    """The referee line and the sampler rows against the shape asked."""
    src, seqs, window = boot.where(), plan.seqs, plan.window
    checks = []
    backs = boot.first("backs")
    if backs is None:
        checks.append(_check("referee", None, f"backs {seqs} sequences all at {window} tokens at once",
                             "no 'backs ... sequences all at ... tokens at once' line", None))
    else:
        n, m = int(backs.number("seqs", src)), int(backs.number("tokens", src))
        checks.append(_check("referee", (n, m) == (seqs, window), f"{seqs} sequences at {window:,} tokens",
                             f"{n} sequences at {m:,} tokens", backs.line))
        found["referee"] = (f"{n}x{m}", None, backs.line)
    line = boot.first("sampler")
    if line is None:
        checks.append(_check("sampler", None, f"rows = {seqs} x (1 + spec) <= {SAMPLER_ROW_BOUND}",
                             "no 'sampler:' line", None))
    else:
        rows = int(line.number("rows", src))
        spec, _ = sampler.boot_spec(boot)
        want = seqs * (1 + spec) if spec is not None else None
        expected = f"{seqs} x (1 + {spec}) = {want} rows" if want is not None else f"{seqs} x (1 + spec) rows"
        # The printed rows inside the bound and, where the spec is known, the rows the env file's seats make.
        checks.append(_check("sampler", sampler.within_bound(rows) and want in (None, rows),
                             f"{expected}, <= {SAMPLER_ROW_BOUND}", f"{rows} rows", line.line))
        found["sampler"] = (str(rows), None, line.line)
    return checks


def _budget_checks(boot: Boot, plan: gates.EnvPlan, model: ModelConstants,
                   found: Found) -> tuple[list[DeployCheck], bool]:
    """Settled free per card, the pair under the ceiling, the pool against its contract, unclaimed printed;
    and whether the boot's echoed flags differ from the env file."""
    src, pair = boot.where(), plan.weights_mib + plan.pool_mib
    reading = capacity.read_budget(boot)
    ceiling = capacity.compute_ceiling(reading)
    checks = []
    for card in reading.cards:
        settled, floor = card.require("free_mib"), card.require("floor_mib").value
        free = settled.value
        checks.append(_check(
            f"settled, card {card.card}", free >= floor,
            f"free >= floor {fmt_mib(floor, 2)} MiB (about {AT_CEILING_WORST_FREE_MIB} MiB at worst at the ceiling)",
            f"{settled.printed} = {fmt_mib(free, 2)} MiB free, {fmt_mib(free - floor, 2)} MiB above the floor",
            settled.line))
    worst = min(reading.cards, key=lambda c: (c.require("free_mib").value - c.require("floor_mib").value, c.card))
    worst_free, worst_floor = worst.require("free_mib"), worst.require("floor_mib")
    found["settled"] = (fmt_mib(worst_free.value, 2), worst_free.value >= worst_floor.value, worst_free.line)
    first = reading.cards[0]
    binding = next(c for c in ceiling.cards if c.card == ceiling.binding_card)
    # That the boot's pair is the env file's (within the table rows' rounding) is plan_boot's, checked first.
    first_pair, first_free = first.require("pair"), first.require("free_mib")
    checks.append(_check("pair <= ceiling", pair <= ceiling.ceiling_mib,
                         f"pair {plan.weights_mib:,} + {plan.pool_mib:,} = {pair:,} MiB (the env file) <= the ceiling",
                         f"boot pair {fmt_mib(first_pair.value, 2)} MiB ({first.pair_source}); ceiling "
                         f"{binding.derivation}", first_free.line))
    found["ceiling"] = (str(ceiling.ceiling_mib), ceiling.ceiling_mib >= pair, first_free.line)

    flags = boot.flags
    asked = {"max-num-seqs": plan.seqs, "max-model-len": plan.window, "vram-kv-mib": plan.pool_mib}
    echoed = {f: int(flags[f].number("value", src)) for f in asked if f in flags}
    boot_dtype = flags["kv-cache-dtype"].raw("value", src) if "kv-cache-dtype" in flags else plan.dtype
    dtype = boot_dtype if boot_dtype in KV_DTYPES else plan.dtype  # an unreadable echo: the env file's
    contract = capacity.pool_contract(Decimal(echoed.get("vram-kv-mib", plan.pool_mib)),
                                      echoed.get("max-num-seqs", plan.seqs), echoed.get("max-model-len", plan.window),
                                      dtype, model)
    contract_line = flags["vram-kv-mib"].line if "vram-kv-mib" in flags else None
    checks.append(_check("pool >= contract", contract.ok,
                         f"pool >= {fmt_mib(contract.required_mib, 2)} MiB ({contract.seqs} x "
                         f"{contract.max_model_len:,} {contract.dtype})",
                         f"pool {fmt_mib(contract.pool_mib)} MiB, margin {fmt_mib(contract.margin_mib, 2)} MiB",
                         contract_line))
    found["contract"] = (fmt_mib(contract.margin_mib, 2).replace(",", ""), contract.ok, contract_line)
    unclaimed = [c.unclaimed_mib for c in reading.cards if c.unclaimed_mib is not None]
    checks.append(_check("unclaimed", bool(unclaimed) or None, "the table's unclaimed row, printed",
                         ", ".join(u.printed for u in unclaimed) or "no unclaimed row",
                         unclaimed[0].line if unclaimed else None))
    return checks, any(echoed[f] != v for f, v in asked.items() if f in echoed)


@FAMILY.tool("Verify a deploy and its predictions", open_world=True)
async def verify_deploy(runtime: Runtime, args: VerifyDeployInput, ctx: Progress | None = None) -> VerifyDeployOutput:
    """Verify a deploy from its new boot: the referee line, sampler rows, settled floor, pair
    against the ceiling, pool against the contract, each with its line; then mark each
    prediction of the env file kept, killed or pending.

    When: after the deploy boots. Rule: the ledger first, then the probes; a killed prediction
    is recorded too. The env file with verdicts is returned, never written.
    """
    text = await _env_text(runtime, args)
    plan = gates.read_env_plan(text)
    predictions = gates.read_predictions(text)
    if not predictions:
        raise InputError("the env file records no predictions ('# prediction KEY = VALUE: ...'): pass the env_text "
                         "render_gates returned, with its predictions")
    boot = await read_settled(functools.partial(read_boot, runtime, args), args, ctx)
    planned_from = gates.read_planned_from(text)
    mine = deploy.plan_boot(boot, capacity.read_budget(boot).cards[0], plan.weights_mib, plan.pool_mib, planned_from)
    if not mine.passed:
        return _not_the_plans_boot(boot, plan, planned_from, mine, predictions, text)
    found: Found = {}
    checks = [_check("plan's boot", True, _plans_boot_expected(plan, planned_from), mine.arithmetic, mine.lines[0]),
              *_shape_checks(boot, plan, found)]
    budget, differs = _budget_checks(boot, plan, runtime.fleet.model_constants(args.service), found)
    checks += budget
    slab = planning.slab_slots(boot)
    planned = next((p for p in predictions if p.key == "slab"), None)
    if slab is not None:
        found["slab"] = (str(slab.resident_slots), None, slab.line)
    if planned is not None:
        checks.append(_check("slab slots", None if slab is None else _slab_kept(planned.value, slab.resident_slots),
                             f"about {planned.value} resident (within {SLAB_TOLERANCE_PCT:g} %)",
                             f"{slab.resident_slots:,} resident" if slab else "no 'slab slots' line",
                             slab.line if slab else None))
    verdicts = [_verdict(p, found, boot, args.boundary_found) for p in predictions]
    notes = [f"checked against {plan.prefix}_* of the env file: {plan.seqs} x {plan.window:,} {plan.dtype}, pair "
             f"{plan.weights_mib:,} + {plan.pool_mib:,}"]
    if differs:
        notes.append("the boot's echoed flags differ from the env file: the deploy did not take the planned shape "
                     "(a serve-script mode carrying its own flags? check_serve_script finds it)")
    killed = [v.key for v in verdicts if v.verdict == "killed"]
    if killed:
        notes.append(f"killed: {', '.join(killed)}; write the verdicts as they are, then re-plan from this boot")
    return VerifyDeployOutput(
        ledger=boot_ref(boot),
        ok=all(c.ok is True for c in checks) and not killed,
        checks=checks,
        verdicts=verdicts,
        env_text=gates.fill_verdicts(text, {v.key: f"{v.verdict}: {v.text}" for v in verdicts}),
        notes=notes,
    )


def _plans_boot_expected(plan: gates.EnvPlan, planned_from: tuple[str, int] | None) -> str:
    after = f", booted after boot {planned_from[1]} (the plan's)" if planned_from else ""
    return f"the env file's pair {plan.weights_mib:,} + {plan.pool_mib:,} MiB{after}"


def _not_the_plans_boot(boot: Boot, plan: gates.EnvPlan, planned_from: tuple[str, int] | None, check: book.Check,
                        predictions: list[gates.Prediction], text: str) -> VerifyDeployOutput:
    """A boot the env file did not start: no prediction judged, the env file as it was (plan_boot)."""
    return VerifyDeployOutput(
        ledger=boot_ref(boot),
        ok=False,
        checks=[_check("plan's boot", False, _plans_boot_expected(plan, planned_from), check.arithmetic,
                       check.lines[0] if check.lines else None)],
        verdicts=[Verdict(key=p.key, predicted=p.value, verdict="pending",
                          text=f"not judged: boot {boot.index} is not the plan's boot") for p in predictions],
        env_text=text,
        notes=[f"{check.arithmetic}; {check.remedy}", "the env file is returned as it was: no verdict is written"],
    )


def _slab_kept(predicted: str, resident: int) -> bool:
    try:
        want = int(predicted)
    except ValueError:
        return False
    return abs(resident - want) <= want * SLAB_TOLERANCE_PCT / 100


def _verdict(p: gates.Prediction, found: Found, boot: Boot,
             boundary_found: int | None) -> Verdict:
    where = f"boot {boot.index}"
    if p.key == "boundary":
        if boundary_found is None:
            return Verdict(key=p.key, predicted=p.value, verdict="pending",
                           text="run boundary_probe on the new deploy, then verify again with boundary_found")
        sent = p.value.split("/")[-1]
        kept = f"{boundary_found}/{sent}" == p.value
        return Verdict(key=p.key, predicted=p.value, verdict="kept" if kept else "killed",
                       text=f"boundary probe retrieved {boundary_found}/{sent} markers (predicted {p.value})")
    if p.key not in found:
        return Verdict(key=p.key, predicted=p.value, verdict="pending",
                       text=f"the new boot ({where}) prints no line to judge it by")
    value, judged, line = found[p.key]
    at = f"{where}, line {line.number}: {line.text.strip()}" if line else where
    if p.key == "slab":
        kept = _slab_kept(p.value, int(value))
    elif p.key == "contract":  # exact arithmetic: the margin of the shape planned, and no less than 0
        kept = bool(judged) and value == p.value
    elif judged is not None:
        kept = judged
    else:
        kept = value == p.value
    detail = {"ceiling": f"ceiling {value} MiB/card", "settled": f"settled {value} MiB free",
              "contract": f"contract margin {value} MiB"}.get(p.key, value)
    return Verdict(key=p.key, predicted=p.value, verdict="kept" if kept else "killed",
                   text=f"{detail} (predicted {p.value}; {at})")
