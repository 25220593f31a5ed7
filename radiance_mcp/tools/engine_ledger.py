"""check_pool_contract on a vLLM, SGLang or llama.cpp boot: the pool contract in the engine's own terms.

The one ledger tool still answered here rather than in tools/ledger.py's one path (read_budget_table,
compute_ceiling and plan_free_vram answer every engine alike): another engine's contract counts
seqs x window tokens against the KV tokens it holds at its own bytes per token
(radiance_mcp.core.rules.engine_capacity), where radiance's prices MiB at the model's constants.
"""

from __future__ import annotations

from decimal import Decimal

from radiance_mcp.core import engine_facts
from radiance_mcp.core.boot import Boot
from radiance_mcp.core.errors import InputError, LedgerError
from radiance_mcp.core.rules import capacity, engine_capacity
from radiance_mcp.core.rules.settled import finding
from radiance_mcp.core.units import fmt_mib
from radiance_mcp.models.base import LineRef, boot_ref, line_ref, mib
from radiance_mcp.models.ledger import (
    CeilingCheck,
    CheckPoolContractInput,
    PoolContractOutput,
)
from radiance_mcp.tools.ledger import trace_reserves


def notes(view: Boot) -> list[str]:
    said = [f"{view.engine}: the KV memory moves with {engine_facts.KV_FLAGS[view.engine]}"]
    if view.origin == "caller text":
        said.append(f"figures from caller-supplied text ({view.source}), unverified: read the service's own log "
                    "before a gate relies on them")
    return said


def contract_output(view: Boot, args: CheckPoolContractInput) -> PoolContractOutput:
    """check_pool_contract on another engine's boot: seqs x window tokens against its KV tokens, at its own rate."""
    if args.kv_cache_dtype is not None:
        raise InputError(
            f"kv_cache_dtype={args.kv_cache_dtype!r}: {view.engine}'s rate is its own KV pair's (KV memory over KV "
            "tokens); change its cache type on the engine and read its new boot, or leave kv_cache_dtype out"
        )
    pool = Decimal(str(args.pool_mib)) if args.pool_mib is not None else None
    result = engine_capacity.contract(view, args.seqs, args.max_model_len, pool)
    said = notes(view)
    refusal_lines: list[LineRef] = []
    check = None
    if view.refused:
        refusal_lines = [line_ref(r.line) for r in view.refusals if r.final]
        said.append(finding(view))
    else:
        check = _ceiling_check(view, result, args, said)
    inputs_from: dict[str, LineRef | str] = {"pool_mib": "argument" if pool is not None else line_ref(
        result.lines["kv_tokens"]), "rate_bytes_per_token": line_ref(result.lines["rate"])}
    for name, key in (("max_model_len", "window"), ("seqs", "seqs")):
        inputs_from[name] = line_ref(result.lines[key]) if key in result.lines else "argument"
    return PoolContractOutput(
        model=f"{view.engine} ({result.rank})",
        pool_mib=mib(result.pool_mib),
        seqs=result.seqs,
        max_model_len=result.window,
        kv_cache_dtype=None,
        rate_bytes_per_token=int(result.rate.value.to_integral_value()),
        kv_mib=mib(result.required_mib),
        per_seq_total_mib=0,
        fixed_mib=0,
        required_mib=mib(result.required_mib),
        margin_mib=mib(result.margin_mib),
        ok=result.ok and (check is None or check.ok) and not view.refused,
        max_seqs_at_window=result.max_seqs_at_window,
        max_window_at_seqs=result.max_window_at_seqs,
        formula=result.formula,
        refusal=result.refusal,
        inputs_from=inputs_from,
        contract_ok=result.ok,
        ceiling=check,
        ledger=boot_ref(view),
        boot_status=view.state.status,
        refusal_lines=refusal_lines,
        notes=said,
    )


def _ceiling_check(view: Boot, result: engine_capacity.EngineContract, args: CheckPoolContractInput,
                   said: list[str]) -> CeilingCheck | None:
    """weights + pool + reserves against the ceiling, where the log prints what the ceiling needs."""
    try:
        ranks = capacity.ceilings(view)
    except LedgerError as exc:
        said.append(f"the ceiling was not checked: {exc}")
        return None
    reserves = trace_reserves(capacity.budget(view), args.reserves)
    ceiling = capacity.hold_reserves(tuple(r.card for r in ranks), reserves)
    tightest = min(ceiling.cards, key=lambda c: (c.max_pair_mib or 0, c.card))
    rank = next(r for r in ranks if r.card.card == tightest.card)
    weights_figure = next(v for v in view.ranks if v.rank == rank.rank).weights_mib
    assert weights_figure is not None  # ceilings() needs it
    weights = Decimal(str(args.weights_mib)) if args.weights_mib is not None else weights_figure.value
    pair = weights + result.pool_mib
    margin = (tightest.max_pair_mib or 0) - pair
    held = tightest.ceiling_mib - (tightest.max_pair_mib or 0)
    return CeilingCheck(
        ok=margin >= 0, ceiling_mib=ceiling.ceiling_mib, binding_card=ceiling.binding_card, weights_mib=mib(weights),
        weights_from="argument" if args.weights_mib is not None else line_ref(weights_figure.lines[0]),
        pool_mib=mib(result.pool_mib), reserves_mib=mib(Decimal(held)), reserves=[], max_pair_mib=ceiling.max_pair_mib,
        pair_mib=mib(pair), margin_mib=mib(margin),
        formula=(f"weights {fmt_mib(weights, 2)} + pool {fmt_mib(result.pool_mib, 2)} = {fmt_mib(pair, 2)} MiB "
                 f"{'<=' if margin >= 0 else '>'} {rank.rank}'s ceiling less reserves "
                 f"{fmt_mib(tightest.max_pair_mib or 0)} MiB ({tightest.derivation})"),
    )
