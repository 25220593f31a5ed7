"""verify_deploy: a deploy's new boot against the env file render_gates wrote, its predictions marked.

It reads the new boot first, judges nothing on a boot that is not the plan's (core/rules/deploy.py), then
marks each prediction of the env file kept, killed or pending, for a boot of any engine: radiance's by its
referee, sampler, settled, pair and contract lines; another engine's by its KV memory, tokens, rate, window,
seats and ceiling. It writes nothing to a host. Its models live in models/gates.py.
"""

from __future__ import annotations

import functools
from decimal import Decimal
from pathlib import Path

from radiance_mcp.core import gates, knobs, planning
from radiance_mcp.core.boot import Boot, Line
from radiance_mcp.core.constants import (
    AT_CEILING_WORST_FREE_MIB,
    KV_DTYPES,
    SAMPLER_ROW_BOUND,
    ModelConstants,
)
from radiance_mcp.core.errors import InputError, LedgerError, SourceError
from radiance_mcp.core.rules import book, capacity, deploy, sampler
from radiance_mcp.core.rules.contract import binding_rank, served_seats
from radiance_mcp.core.units import fmt_mib
from radiance_mcp.models.base import boot_ref, line_ref
from radiance_mcp.models.gates import (
    DeployCheck,
    Verdict,
    VerifyDeployInput,
    VerifyDeployOutput,
)
from radiance_mcp.models.ledger import outside
from radiance_mcp.sources.engine_logs import read_ledger
from radiance_mcp.sources.env_files import read_env_file
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.sources.settling import read_settled
from radiance_mcp.tools.registry import Progress, ToolFamily

FAMILY = ToolFamily()

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
    assert dtype is not None  # a radiance env file's (read_env_plan)
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
    """Verify a deploy from its new boot (each check with its line) and mark each prediction of
    the env file kept, killed or pending.

    When: after the deploy boots. Rule: the ledger first, then the probes; a killed prediction
    is recorded too.
    """
    text = await _env_text(runtime, args)
    plan = gates.read_env_plan(text)
    predictions = gates.read_predictions(text)
    if not predictions:
        raise InputError("the env file records no predictions ('# prediction KEY = VALUE: ...'): pass the env_text "
                         "render_gates returned, with its predictions")
    boot = await read_settled(functools.partial(read_ledger, runtime, args), args, ctx)
    if boot.engine != plan.engine:
        raise InputError(f"the env file sets {plan.engine}'s knobs ({plan.prefix}_*) and {boot.where()} is a "
                         f"{boot.engine} boot: verify the service the plan was rendered for")
    planned_from = gates.read_planned_from(text)
    reading, said = capacity.with_outside_free(capacity.budget(boot), outside(args.outside_free))
    engine_kv = None if plan.kv is None else (knobs.KNOBS[plan.engine].kv_unit, plan.kv)
    card = binding_rank(boot) if engine_kv else reading.cards[0]
    mine = deploy.plan_boot(boot, card, plan.weights_mib, plan.pool_mib, planned_from, engine_kv)
    if not mine.passed and not deploy.booted_after(boot, planned_from):
        return _not_the_plans_boot(boot, plan, planned_from, mine, predictions, text)
    found: Found = {}
    checks = [_check("plan's boot", mine.passed, _plans_boot_expected(plan, planned_from), mine.arithmetic,
                     mine.lines[0] if mine.lines else None)]
    if engine_kv is not None:
        checks += _engine_checks(boot, reading, plan, found)
        differs = not mine.passed
    else:
        checks += _shape_checks(boot, plan, found)
        budget, differs = _budget_checks(boot, plan, runtime.fleet.model_constants(args.service), found)
        checks += budget
    slab = planning.slab_slots(boot)
    planned = next((p for p in predictions if p.key == "slab"), None)
    if slab is not None:
        found["slab"] = (str(slab.resident_slots), None, slab.line)
    if planned is not None:
        checks.append(_check("slab slots", None if slab is None else _slab_kept(planned.value, slab.resident_slots),
                             f"about {planned.value} resident (within {gates.SLAB_TOLERANCE_PCT:g} %)",
                             f"{slab.resident_slots:,} resident" if slab else "no 'slab slots' line",
                             slab.line if slab else None))
    verdicts = [_verdict(p, found, boot, args.boundary_found) for p in predictions]
    notes = [f"checked against {plan.prefix}_* of the env file: {plan.seqs} x {plan.window:,}"
             f"{f' {plan.dtype}' if plan.dtype else ''}, pair {plan.weights_mib:,} + {plan.pool_mib:,}", *said]
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
    if plan.kv is not None:
        return f"the env file's {plan.prefix}_{knobs.KNOBS[plan.engine].variable('kv')}={plan.kv}{after}"
    return f"the env file's pair {plan.weights_mib:,} + {plan.pool_mib:,} MiB{after}"


def _engine_checks(boot: Boot, reading: capacity.BudgetReading, plan: gates.EnvPlan,
                   found: Found) -> list[DeployCheck]:
    """Another engine's new boot against the env file: its KV memory, tokens and rate, the window and seats it
    prints, its ceiling over the pair (where free is known) and its tokens over the seats x window."""
    rank = binding_rank(boot)
    checks = []
    for key, name in (("kv_mib", "kv_mib"), ("kv_tokens", "kv_tokens"), ("bytes_per_token", "kv_bytes_per_token"),
                      ("window", "window_tokens")):
        figure = getattr(rank, name)
        if figure is not None:
            shown = f"{figure.value:.2f}" if key in ("kv_mib", "bytes_per_token") else str(int(figure.value))
            found[key] = (shown, None, figure.lines[0] if figure.lines else None)
    seats = served_seats(boot)
    if seats is not None:
        found["seats"] = (str(int(seats.value)), None, seats.lines[0])
    tokens = rank.kv_tokens
    need = plan.seqs * plan.window
    if tokens is not None:
        checks.append(_check("KV tokens >= seats x window", tokens.value >= need, f"{plan.seqs} x {plan.window:,} = "
                             f"{need:,} tokens", f"{int(tokens.value):,} KV tokens", tokens.lines[0]))
        found["contract"] = (str(need), tokens.value >= need, tokens.lines[0])
    try:
        ceiling = capacity.compute_ceiling(reading)
    except LedgerError as exc:
        checks.append(_check("pair <= ceiling", None, f"pair {plan.weights_mib:,} + {plan.pool_mib:,} MiB <= the "
                             "ceiling", f"no ceiling: {exc}", None))
        return checks
    pair = plan.weights_mib + plan.pool_mib
    binding = next(c for c in ceiling.cards if c.card == ceiling.binding_card)
    checks.append(_check("pair <= ceiling", pair <= ceiling.ceiling_mib, f"pair {plan.weights_mib:,} + "
                         f"{plan.pool_mib:,} = {pair:,} MiB <= the ceiling", binding.derivation, None))
    found["ceiling"] = (str(ceiling.ceiling_mib), ceiling.ceiling_mib >= pair, None)
    return checks


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


def _within(predicted: str, found: str) -> bool:
    """A KV figure kept within a hundredth of the printed one (or 0.5 % where the line prints it rounded more
    coarsely: vLLM's GiB to two places)."""
    want, got = Decimal(predicted), Decimal(found)
    return abs(want - got) <= max(Decimal("0.01"), abs(want) * Decimal("0.005"))


def _slab_kept(predicted: str, resident: int) -> bool:
    try:
        want = int(predicted)
    except ValueError:
        return False
    return abs(resident - want) <= want * gates.SLAB_TOLERANCE_PCT / 100


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
    elif p.key in ("kv_mib", "bytes_per_token"):  # another engine's figures, within the printed resolution
        kept = _within(p.value, value)
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
