"""The ledger tools, and ``TOOLS``: the one registry of every tool.

Each tool reads its sources, calls the pure core and shapes the output model. The MCP
server registers every entry of ``TOOLS`` and the CLI makes a subcommand of each, with the
same input model, so the two cannot drift apart; the audit and probe tools come from
audit_tools.AUDIT_TOOLS and probes.tools.PROBE_TOOLS. A tool's
docstring is its description for agents; it states the rule and the traps with numbers
taken from radiance_mcp.constants (a test checks they agree).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from radiance_mcp import capacity
from radiance_mcp.audit_tools import AUDIT_TOOLS
from radiance_mcp.capacity import Figure
from radiance_mcp.constants import AT_CEILING_WORST_FREE_MIB, KV_DTYPES
from radiance_mcp.errors import InputError
from radiance_mcp.fleet_tools import FLEET_TOOLS
from radiance_mcp.ledger import Boot, Line
from radiance_mcp.models import (
    BudgetCard,
    CeilingCard,
    CheckPoolContractInput,
    ComputeCeilingInput,
    ComputeCeilingOutput,
    LedgerArgs,
    LineRef,
    PoolContractOutput,
    ReadBudgetTableInput,
    ReadBudgetTableOutput,
    ReserveOutput,
    SourcedFigure,
    mib,
)
from radiance_mcp.plan_tools import PLAN_TOOLS
from radiance_mcp.probes.tools import PROBE_TOOLS
from radiance_mcp.runtime import Runtime, ToolSpec, boot_ref, ledger_source, line_ref, read_boot
from radiance_mcp.units import fmt_mib


def sourced(figure: Figure | None) -> SourcedFigure | None:
    if figure is None:
        return None
    return SourcedFigure(
        mib=mib(figure.size.mib),
        printed=figure.size.text,
        resolution_mib=mib(figure.size.resolution_mib),
        line=figure.line.number,
        text=figure.line.text,
    )


# ---------------------------------------------------------------------------------------


async def read_budget_table(runtime: Runtime, args: ReadBudgetTableInput) -> ReadBudgetTableOutput:
    """Read radiance's per-card VRAM budget table and settled line from a boot ledger.

    Returns, per card, the table rows (card total, vram_weights, vram_kv, unclaimed), the
    settled free memory and the engine floor (--gpu-headroom-mib plus the static region),
    each with its ledger line, and the pair (vram_weights + vram_kv). The pair comes from the
    echoed --vram-weights-mib / --vram-kv-mib flags when the boot echoes them (exact), else
    from the table rows (rounded to 0.01 GiB); a disagreement beyond rounding is reported.
    Free memory seen from outside the engine (rocm-smi) is not spare capacity: only this
    table and the settled line are. A log can hold several boots; the newest is read unless
    `boot` says otherwise.
    """
    boot = await read_boot(runtime, args)
    reading = capacity.read_budget(boot)
    cards = [
        BudgetCard(
            card=c.card,
            card_total=sourced(c.total),
            vram_weights=sourced(c.weights),
            vram_kv=sourced(c.kv),
            unclaimed=sourced(c.unclaimed),
            settled_free=sourced(c.free),  # type: ignore[arg-type]
            engine_floor=sourced(c.floor),  # type: ignore[arg-type]
            gpu_headroom=sourced(c.headroom),
            static_region=sourced(c.static),
            pair_mib=mib(c.pair_mib),
            pair_source=c.pair_source,
            pair_lines=[line_ref(line) for line in c.pair_lines],
        )
        for c in reading.cards
    ]
    return ReadBudgetTableOutput(
        ledger=boot_ref(boot),
        cards=cards,
        flags=reading.flags,
        pair_source=reading.cards[0].pair_source,
        disagreements=[d for c in reading.cards for d in c.disagreements],
    )


async def compute_ceiling(runtime: Runtime, args: ComputeCeilingInput) -> ComputeCeilingOutput:
    """The engine's ceiling for the KV/VRAM pair, per card, from the boot ledger.

    ceiling = (settled_free_MiB - engine_floor_MiB) + current_pair_sum, per card, rounded
    down to whole MiB; with several cards the smallest ceiling binds. Worked example
    (dankserver, 2026-10-13): 29,120 + (2,058 - 209) = 30,969 MiB/card. A pair at the
    ceiling settles about 330 MiB free at worst. The ceiling is the engine's, never a
    hand-picked reserve: free memory seen from outside (rocm-smi) is not spare capacity.
    Every reserve below the ceiling must cite the ledger line that holds its figure
    (line=N), or be labelled personal (personal=true) so the gate shows it as one; an
    untraced, unlabelled reserve is refused.
    """
    boot = await read_boot(runtime, args)
    reading = capacity.read_budget(boot)
    reserves = tuple(
        capacity.trace_reserve(boot, Decimal(str(r.mib)), r.label, r.line, r.personal) for r in args.reserves
    )
    result = capacity.compute_ceiling(reading, reserves)
    binding = next(c for c in result.cards if c.card == result.binding_card)
    budget = next(c for c in reading.cards if c.card == result.binding_card)
    notes = [
        f"a pair at the ceiling settles about {AT_CEILING_WORST_FREE_MIB} MiB free at worst",
        f"the pair comes from the {budget.pair_source}",
        *[d for c in reading.cards for d in c.disagreements],
    ]
    if len(result.cards) > 1:
        notes.append(f"card {result.binding_card} has the smallest ceiling and binds every card")
    lines = [budget.free.line, *budget.pair_lines]
    return ComputeCeilingOutput(
        ledger=boot_ref(boot),
        ceiling_mib=result.ceiling_mib,
        binding_card=result.binding_card,
        pair_mib=mib(result.pair_mib),
        headroom_mib=result.headroom_mib,
        derivation=binding.derivation,
        cards=[
            CeilingCard(
                card=c.card,
                settled_free_mib=mib(c.free_mib),
                engine_floor_mib=mib(c.floor_mib),
                pair_mib=mib(c.pair_mib),
                ceiling_mib=c.ceiling_mib,
                headroom_mib=int(c.ceiling_mib - c.pair_mib),
                derivation=c.derivation,
            )
            for c in result.cards
        ],
        reserves=[
            ReserveOutput(
                mib=mib(r.mib),
                label=r.label,
                kind="personal" if r.line is None else "traced",
                line=line_ref(r.line) if r.line else None,
            )
            for r in reserves
        ],
        personal_reserves=[r.label for r in reserves if r.line is None],
        max_pair_mib=result.max_pair_mib,
        sources=[line_ref(line) for line in dict.fromkeys(lines)],
        notes=notes,
    )


async def check_pool_contract(runtime: Runtime, args: CheckPoolContractInput) -> PoolContractOutput:
    """Check the KV pool against the contract radiance enforces at request time, not at boot.

    pool_mib >= seqs * max_model_len * rate + 110 * seqs + 448, with rate 7,488 B per token
    per rank for fp8 and 14,144 B for bf16 (1.89x, not 2x: the QSA block key is 3.25 KiB at
    both dtypes), 110 MiB of recurrent state per sequence and 448 MiB of prefix checkpoints,
    both dtype-independent. These are the seed model's constants; a service's model in the
    fleet config may override them. --kv-cache-dtype takes only bf16 or fp8. A pool that
    fails boots, serves short chats, then answers every long request with HTTP 400 'does not
    fit the N token context, which leaves nothing to generate into': radiance refuses, it
    never truncates. Omitted values are read from the ledger (service, log or log_text, or
    log or container on a host).
    """
    model = runtime.fleet.model_constants(args.service)
    given: dict[str, Any] = {
        "pool_mib": args.pool_mib,
        "seqs": args.seqs,
        "max_model_len": args.max_model_len,
        "kv_cache_dtype": args.kv_cache_dtype,
    }
    inputs_from: dict[str, LineRef | str] = {k: "argument" for k, v in given.items() if v is not None}
    missing = [k for k, v in given.items() if v is None]
    if missing:
        named = args.log is not None or args.log_text is not None or args.container is not None
        if args.service is None and not named:
            raise InputError(
                f"{', '.join(missing)} not given and no ledger to read them from: pass them, "
                "or name a service (or log / log_text, or host with log / container) whose boot echoes them"
            )
        boot = await read_boot(
            runtime,
            LedgerArgs(service=None if named else args.service, log=args.log, log_text=args.log_text,
                       host=args.host, container=args.container, boot=args.boot),
        )
        for name in missing:
            value, line = _from_ledger(boot, name)
            given[name] = value
            inputs_from[name] = line_ref(line)
    contract = capacity.pool_contract(
        Decimal(str(given["pool_mib"])), int(given["seqs"]), int(given["max_model_len"]),
        given["kv_cache_dtype"], model,
    )
    formula = (
        f"{contract.seqs} x {contract.max_model_len:,} x {contract.rate_bytes_per_token:,} B = "
        f"{fmt_mib(contract.kv_mib, 2)} MiB + {model.per_seq_mib} x {contract.seqs} + {model.fixed_mib} = "
        f"{fmt_mib(contract.required_mib, 2)} MiB {'<=' if contract.ok else '>'} "
        f"pool {fmt_mib(contract.pool_mib, 2)} MiB"
    )
    return PoolContractOutput(
        model=model.name,
        pool_mib=mib(contract.pool_mib),
        seqs=contract.seqs,
        max_model_len=contract.max_model_len,
        kv_cache_dtype=contract.dtype,
        rate_bytes_per_token=contract.rate_bytes_per_token,
        kv_mib=mib(contract.kv_mib),
        per_seq_total_mib=contract.per_seq_total_mib,
        fixed_mib=contract.fixed_mib,
        required_mib=mib(contract.required_mib),
        margin_mib=mib(contract.margin_mib),
        ok=contract.ok,
        max_seqs_at_window=contract.max_seqs_at_window,
        max_window_at_seqs=contract.max_window_at_seqs,
        formula=formula,
        refusal=contract.refusal,
        inputs_from=inputs_from,
    )


_LEDGER_FLAGS = {
    "seqs": "max-num-seqs",
    "max_model_len": "max-model-len",
    "kv_cache_dtype": "kv-cache-dtype",
    "pool_mib": "vram-kv-mib",
}


def _from_ledger(boot: Boot, name: str) -> tuple[Any, Line]:
    """An omitted contract input, read from the boot's echoed flags (the pool also from vram_kv)."""
    hit = boot.flags.get(_LEDGER_FLAGS[name])
    if hit is None and name == "pool_mib":
        row = boot.first("vram_kv")
        if row is not None:
            return row.size("size", boot.where()).mib, row.line
    if hit is None:
        raise InputError(
            f"{name} was not given and {boot.where()} does not echo --{_LEDGER_FLAGS[name]}; pass {name}"
        )
    raw = hit.raw("value", boot.where())
    if name == "kv_cache_dtype":
        if raw not in KV_DTYPES:
            raise InputError(f"{boot.where()}:{hit.line.number}: --kv-cache-dtype {raw!r} is not bf16 or fp8")
        return raw, hit.line
    return hit.number("value", boot.where()), hit.line


# ---------------------------------------------------------------------------------------


TOOLS: list[ToolSpec] = [
    ToolSpec("read_budget_table", "Read the VRAM budget table", ReadBudgetTableInput, ReadBudgetTableOutput,
             read_budget_table, open_world=True),
    ToolSpec("compute_ceiling", "Compute the pair's ceiling", ComputeCeilingInput, ComputeCeilingOutput,
             compute_ceiling, open_world=True),
    ToolSpec("check_pool_contract", "Check the KV pool contract", CheckPoolContractInput, PoolContractOutput,
             check_pool_contract, open_world=True),
    *AUDIT_TOOLS,
    *PROBE_TOOLS,
    *FLEET_TOOLS,
    *PLAN_TOOLS,
]

__all__ = ["TOOLS", "Runtime", "ToolSpec", "ledger_source", "read_boot"]
