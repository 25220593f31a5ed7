"""The ledger tools: read_budget_table, compute_ceiling, check_pool_contract.

Each reads one boot ledger in its engine's dialect (sources.engine_logs.read_ledger), asks the pure core
(radiance_mcp.core.rules.capacity: the cards of a boot of any engine, one ceiling rule;
radiance_mcp.core.rules.contract: the pool contract by the rule of the engine's rate) and shapes its
output model (models/ledger.py): one path and one shape for every engine.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from radiance_mcp.core import engine_facts, planning
from radiance_mcp.core.boot import Boot, Figure, Line, Missing, RankView
from radiance_mcp.core.errors import FigureMissing, InputError
from radiance_mcp.core.rules import book, capacity
from radiance_mcp.core.rules.book import Check
from radiance_mcp.core.rules.contract import CONTRACT_INPUTS, NO_LEDGER_REMEDY, boot_contract, contract_checks
from radiance_mcp.core.rules.settled import finding
from radiance_mcp.core.units import fmt_mib
from radiance_mcp.models.base import LineRef, boot_ref, line_ref, mib, rule_check
from radiance_mcp.models.ledger import (
    BudgetCard,
    CeilingCheck,
    CheckPoolContractInput,
    ComputeCeilingInput,
    ComputeCeilingOutput,
    FigureOut,
    MissingFigure,
    PoolContractOutput,
    ReadBudgetTableInput,
    ReadBudgetTableOutput,
    ReserveCandidate,
    ReserveInput,
    ReserveOutput,
    ceiling_card,
    outside,
)
from radiance_mcp.models.ledger_ref import LedgerRef
from radiance_mcp.sources.engine_logs import read_ledger
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.sources.settling import read_settled
from radiance_mcp.tools.registry import Progress, ToolFamily

FAMILY = ToolFamily()


def _numbers(lines: Sequence[Line]) -> list[int]:
    """The lines' numbers, each once (K and V sizes read off one line cite it once), in their order."""
    return list(dict.fromkeys(line.number for line in lines))


def figure_out(figure: Figure | None) -> FigureOut | None:
    """A figure as read_budget_table shows it: its value and unit, as printed, its rounding, the numbers of its
    lines (each once: K and V sizes on one line name it once; their text is the answer's lines), its arithmetic."""
    if figure is None:
        return None
    return FigureOut(value=mib(figure.value), unit=figure.unit, printed=figure.printed,
                     resolution=mib(figure.resolution), lines=_numbers(figure.lines),
                     arithmetic=figure.arithmetic)


CARD_FIGURES = ("weights_mib", "kv_mib", "kv_tokens", "kv_bytes_per_token", "activation_mib", "graph_mib", "free_mib",
                "floor_mib", "window_tokens", "full_length_sequences", "unclaimed_mib", "gpu_headroom_mib")
"""The card's figures that keep their name in the answer (the card total and static region gain a word)."""


NOT_YET = "the boot has not finished starting, so it may yet print it (notes)"
"""The remedy of a figure an unsettled boot has not printed: not the log level, nor a flag, but time."""


def budget_card(card: RankView) -> BudgetCard:
    """One card or rank of a boot of any engine as read_budget_table shows it: its figures (what the whole boot
    says, and the figures it does not print, are said once beside the cards)."""
    return BudgetCard(
        card=card.card, rank=card.rank,
        **{name: figure_out(getattr(card, name)) for name in CARD_FIGURES},
        card_total_mib=figure_out(card.total_mib), static_region_mib=figure_out(card.static_mib),
        pair_mib=mib(card.pair.value) if card.pair else None, pair_source=card.pair_source,
        pair_lines=_numbers(card.pair.lines) if card.pair else [],
    )


def cited_lines(boot: Boot, cards: Sequence[RankView]) -> dict[int, str]:
    """Each ledger line a figure of the cards or the boot's settings is read off, by number, as printed: once."""
    figures = [*(getattr(c, name) for c in cards for name in (*CARD_FIGURES, "total_mib", "static_mib", "pair")),
               *boot.settings.values()]
    return dict(sorted({line.number: line.text for f in figures if f is not None for line in f.lines}.items()))


def missing_figures(boot: Boot, cards: Sequence[RankView]) -> list[MissingFigure]:
    """Each figure the cards do not print, said once with the ranks it is missing on (in their order): what every
    rank of a tensor-parallel boot says alike is said once; a rank whose remedy differs has its own entry."""
    ranks: dict[Missing, list[str]] = {}
    for card in cards:
        for gap in card.missing:
            ranks.setdefault(gap if boot.state.status != "unsettled" else replace(gap, remedy=NOT_YET),
                             []).append(card.rank)
    return [MissingFigure(figure=gap.figure, ranks=names, why=gap.why)
            for gap, names in ranks.items()]


def candidates_out(reading: capacity.BudgetReading) -> list[ReserveCandidate]:
    return [
        ReserveCandidate(card=c.card, line=line_ref(c.line), mib=mib(c.mib), printed=c.printed, why=c.why)
        for c in capacity.reserve_candidates(reading)
    ]


def trace_reserves(reading: capacity.BudgetReading, given: list[ReserveInput]) -> tuple[capacity.Reserve, ...]:
    """Each given reserve traced (or taken as personal) in order; a candidate backs one reserve."""
    reserves: tuple[capacity.Reserve, ...] = ()
    for r in given:
        reserves += (capacity.trace_reserve(reading, Decimal(str(r.mib)), r.label, r.line, r.personal, reserves),)
    return reserves


def reserves_out(reserves: tuple[capacity.Reserve, ...]) -> list[ReserveOutput]:
    return [
        ReserveOutput(mib=mib(r.mib), label=r.label, kind="personal" if r.line is None else "traced",
                      line=line_ref(r.line) if r.line else None, card=r.card)
        for r in reserves
    ]


def provenance_notes(boot: Boot) -> list[str]:
    """A boot read from caller text says so: nothing has checked its figures against a host."""
    if boot.origin != "caller text":
        return []
    return [
        f"figures from caller-supplied text ({boot.source}), unverified: they were not read from a host or a "
        "file; read the service's own ledger (service, or log or container on its host) before a gate relies on them"
    ]


# ---------------------------------------------------------------------------------------


@FAMILY.tool("Read the VRAM budget table", open_world=True)
async def read_budget_table(runtime: Runtime, args: ReadBudgetTableInput,
                            ctx: Progress | None = None) -> ReadBudgetTableOutput:
    """Read a boot ledger's per-card VRAM budget, each figure with its line.

    When: first, for any resize (its reserve_candidates are what a reserve may cite). Rule: free
    memory seen outside the engine is not spare. Next: compute_ceiling.
    """
    boot = await read_settled(functools.partial(read_ledger, runtime, args), args, ctx)
    reading = capacity.budget(boot, unsettled=True)
    return ReadBudgetTableOutput(
        ledger=boot_ref(boot),
        boot_status=boot.state.status,
        engine=boot.engine,
        cards=[budget_card(c) for c in reading.cards],
        missing=missing_figures(boot, reading.cards),
        settings={name: out for name, f in boot.settings.items() if (out := figure_out(f)) is not None},
        kv_flag=engine_facts.KV_FLAGS[boot.engine], floor=engine_facts.FLOORS[boot.engine],
        flags=reading.flags,
        pair_source=reading.cards[0].pair_source if reading.cards else None,
        disagreements=[d for c in reading.cards for d in c.disagreements],
        reserve_candidates=candidates_out(reading),
        lines=cited_lines(boot, reading.cards),
        notes=[finding(boot)] if boot.state.status == "unsettled" else [],
    )


@FAMILY.tool("Compute the pair's ceiling", open_world=True)
async def compute_ceiling(runtime: Runtime, args: ComputeCeilingInput,
                          ctx: Progress | None = None) -> ComputeCeilingOutput:
    """The largest pair each card backs: settled free - engine floor + the pair; the smallest binds.

    When: before changing the pair. Rule: a reserve cites a reserve_candidates line or is
    personal; figures the ceiling counts are refused. Next: check_pool_contract.
    """
    boot = await read_settled(functools.partial(read_ledger, runtime, args), args, ctx)
    reading, said = capacity.with_outside_free(capacity.budget(boot), outside(args.outside_free))
    reserves = trace_reserves(reading, args.reserves)
    ranks = capacity.rank_ceilings(reading)
    result = capacity.hold_reserves(tuple(r.card for r in ranks), reserves)
    binding = next(r for r in ranks if r.card.card == result.binding_card)
    derivations = {r.card.card: r.derivation for r in ranks}
    return ComputeCeilingOutput(
        ledger=boot_ref(boot),
        ceiling_mib=result.ceiling_mib,
        binding_card=result.binding_card,
        pair_mib=mib(result.pair_mib),
        headroom_mib=result.headroom_mib,
        derivation=binding.derivation,
        cards=[ceiling_card(c, derivations[c.card]) for c in result.cards],
        reserves=reserves_out(reserves),
        personal_reserves=[r.label for r in reserves if r.line is None],
        max_pair_mib=result.max_pair_mib,
        reserve_candidates=candidates_out(reading),
        # A flag the table contradicts: the ceiling stands on the flag, so the reader must see it.
        warnings=[*result.warnings, *(d for c in reading.cards for d in c.disagreements)],
        sources=[line_ref(line) for line in binding.lines],
        notes=[*ceiling_notes(boot, ranks, binding), *said],
    )


def ceiling_notes(boot: Boot, ranks: tuple[capacity.RankCeiling, ...], binding: capacity.RankCeiling) -> list[str]:
    """What a ceiling's reader must know beside its figures, for a boot of any engine."""
    at_ceiling = engine_facts.AT_CEILING.get(boot.engine)
    notes = [*([at_ceiling] if at_ceiling else []), f"the pair comes from the {binding.pair_from}",
             f"the floor: {binding.floor_note}", f"the KV memory moves with {engine_facts.KV_FLAGS[boot.engine]}",
             *provenance_notes(boot)]
    if len(ranks) > 1:
        notes.append(f"card {binding.card.card} has the smallest ceiling and binds every card")
    if any(r.rank != str(r.card.card) for r in ranks):
        notes.append(f"cards are numbered in rank order ({', '.join(f'{r.card.card}={r.rank}' for r in ranks)})")
    return notes


@FAMILY.tool("Check the KV pool contract", open_world=True)
async def check_pool_contract(runtime: Runtime, args: CheckPoolContractInput,
                              ctx: Progress | None = None) -> PoolContractOutput:
    """Check a KV pool's contract: pool >= seqs * (window * rate + per-seq MiB) + fixed MiB.

    When: seats, window, dtype or pool change. Rule: ok only if every check passed (null: one
    unchecked). Next: render_gates.
    """
    named = _names_ledger(runtime, args)
    read = await read_settled(functools.partial(read_ledger, runtime, _contract_ref(runtime, args)), args,
                              ctx) if named else None
    given: dict[str, Any] = {name: getattr(args, name) for name in CONTRACT_INPUTS}
    boot = _contract_ledger(read, args, [k for k, v in given.items() if v is None])
    reading = boot_contract(boot, given, runtime.fleet.model_constants(args.service))
    contract, notes = reading.contract, list(reading.notes)
    check: CeilingCheck | None = None
    refusal_lines: list[LineRef] = []
    if boot is None:
        why = f"service {args.service!r} names no ledger in the fleet config" if args.service else "no ledger named"
        notes.append(f"the ceiling was not checked ({why}): name the service's ledger to check the pool against it")
        pair = _pair_unchecked(f"{why}: the ceiling is read from a boot that settled; {NO_LEDGER_REMEDY}")
    elif boot.state.status != "settled":
        refusal_lines = [line_ref(line) for line in boot.state.lines]
        notes.append(finding(boot))
        pair = _pair_unchecked(f"the boot is {boot.state.status}: a ceiling is read from a boot that settled "
                               "(notes: what to read)", boot.state.lines)
    else:
        try:
            assert contract is not None  # only a refused boot's pool goes unpriced
            check, pair = _ceiling_check(boot, contract.pool_mib, args, notes)
        except FigureMissing as exc:  # another engine's log may lack what the ceiling needs: said, not guessed
            notes.append(f"the ceiling was not checked: {exc}")
            pair = _pair_unchecked(str(exc))
    if boot is not None:
        notes += provenance_notes(boot)
    checks = contract_checks(reading, boot, pair)
    return PoolContractOutput(
        model=reading.model,
        **_contract_fields(contract, reading.shape),
        ok=False if boot is not None and boot.state.status != "settled" else book.verdict(checks),
        checks=[rule_check(c) for c in checks],
        formula=reading.formula,
        inputs_from={name: line_ref(line) if line else "argument" for name, line in reading.inputs_from.items()},
        ceiling=check,
        ledger=boot_ref(boot) if boot is not None else None,
        boot_status=boot.state.status if boot is not None else None,
        refusal_lines=refusal_lines,
        notes=notes,
    )


def _contract_fields(contract: capacity.PoolContract | None, shape: tuple[int | None, int | None]) -> dict[str, Any]:
    """The contract's figures; for a refused boot whose pool was never priced (None), its shape and no rate or
    MiB figure: its pool backs nothing."""
    if contract is None:
        return {"pool_mib": None, "seqs": shape[0], "max_model_len": shape[1], "kv_cache_dtype": None,
                "rate_bytes_per_token": None, "kv_mib": None, "per_seq_total_mib": 0, "fixed_mib": 0,
                "required_mib": None, "margin_mib": None, "max_seqs_at_window": 0, "max_window_at_seqs": 0,
                "refusal": "the boot refused to start: its KV cache backs no sequence", "contract_ok": False}
    return {
        "pool_mib": mib(contract.pool_mib), "seqs": contract.seqs, "max_model_len": contract.max_model_len,
        "kv_cache_dtype": contract.dtype, "rate_bytes_per_token": contract.rate_bytes_per_token,
        "kv_mib": mib(contract.kv_mib), "per_seq_total_mib": contract.per_seq_total_mib,
        "fixed_mib": contract.fixed_mib, "required_mib": mib(contract.required_mib),
        "margin_mib": mib(contract.margin_mib), "max_seqs_at_window": contract.max_seqs_at_window,
        "max_window_at_seqs": contract.max_window_at_seqs, "refusal": contract.refusal, "contract_ok": contract.ok,
    }


def _names_ledger(runtime: Runtime, args: CheckPoolContractInput) -> bool:
    """Whether the input names a ledger: log, log_text or container, or a service with one in the config."""
    if args.log is not None or args.log_text is not None or args.container is not None:
        return True
    if args.service is None:
        return False
    entry = runtime.fleet.service(args.service)
    return entry.log is not None or entry.container is not None


def _contract_ref(runtime: Runtime, args: CheckPoolContractInput) -> LedgerRef:
    explicit = args.log is not None or args.log_text is not None or args.container is not None
    return LedgerRef(service=None if explicit else args.service, log=args.log, log_text=args.log_text,
                     host=args.host, container=args.container, boot=args.boot)


def _contract_ledger(boot: Boot | None, args: CheckPoolContractInput, missing: list[str]) -> Boot | None:
    """The boot the contract is checked against (read where the input names a ledger, or its service
    has one); without one, the values it would have given must be arguments."""
    if boot is not None:
        return boot
    if missing:
        raise InputError(
            f"{', '.join(missing)} not given and no ledger to read them from: pass them, "
            "or name a service (or log / log_text, or host with log / container) whose boot echoes them"
        )
    if args.reserves or args.weights_mib is not None:
        raise InputError(
            "reserves and weights_mib are checked against a ceiling: name the ledger to read it from (a service "
            "with a ledger, or log / log_text, or host with log / container)"
        )
    return None


def _pair_unchecked(remedy: str, lines: tuple[Line, ...] = ()) -> Check:
    return Check("pair_within_ceiling", "unchecked", "weights + pool + reserves <= the ceiling: no ceiling read",
                 lines, remedy)


def _ceiling_check(
    boot: Boot, pool_mib: Decimal, args: CheckPoolContractInput, notes: list[str]
) -> tuple[CeilingCheck, Check]:
    """weights + pool + reserves against the ceiling of a boot that settled, and that as the rule book's
    pair_within_ceiling (FigureMissing: the log lacks what the ceiling needs)."""
    reading = capacity.budget(boot)
    reserves = trace_reserves(reading, args.reserves)
    ranks = capacity.rank_ceilings(reading)
    result = capacity.hold_reserves(tuple(r.card for r in ranks), reserves)
    tightest = min(result.cards, key=lambda c: (c.max_pair_mib or 0, c.card))
    rank = next(r for r in ranks if r.card.card == tightest.card)
    weights_from: LineRef | str
    lines = rank.lines
    if args.weights_mib is not None:
        weights, weights_from = Decimal(str(args.weights_mib)), "argument"
    else:
        card = next(c for c in reading.cards if c.rank == rank.rank)
        figure = planning.echoed_or_printed(boot, card, "vram-weights-mib", "weights_mib")
        weights, weights_from, lines = figure.value, line_ref(figure.line), (*lines, figure.line)
    pair = weights + pool_mib
    held = tightest.ceiling_mib - (tightest.max_pair_mib or 0)
    margin = (tightest.max_pair_mib or 0) - pair
    rule = capacity.pair_within_ceiling(weights, pool_mib, result)  # the rule book's verdict
    ok = rule.passed
    over = "" if ok else (
        f"the pair this pool makes ({fmt_mib(pair, 2)} MiB) is {fmt_mib(-margin, 2)} MiB over the "
        f"{fmt_mib(tightest.max_pair_mib or 0)} MiB the ceiling allows on card {tightest.card}: the boot would "
        "squeeze the KV cache or refuse; shrink the pool or the weights"
    )
    notes += [over] if over else []
    notes += list(result.warnings)
    rule = replace(rule, lines=tuple(dict.fromkeys(lines)), remedy=over)
    return CeilingCheck(
        ok=ok,
        ceiling_mib=result.ceiling_mib,
        binding_card=result.binding_card,
        weights_mib=mib(weights),
        weights_from=weights_from,
        pool_mib=mib(pool_mib),
        reserves_mib=mib(Decimal(held)),
        reserves=reserves_out(reserves),
        max_pair_mib=result.max_pair_mib,
        pair_mib=mib(pair),
        margin_mib=mib(margin),
        formula=rule.arithmetic,
    ), rule
