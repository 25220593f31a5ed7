"""The pool contract of a boot of any engine, its inputs read from the boot where the caller left them out.

Two arithmetic rules, chosen by how the engine states its KV rate (core.engine_facts.RATE_FROM): radiance's
rate is the model's constant per --kv-cache-dtype, priced in MiB with per-sequence and fixed overheads
(capacity.pool_contract), the inputs from its echoed flags and the pool it funded; another engine's rate is
its own KV pair's, counted in tokens against the KV tokens it holds (engine_capacity.contract), the inputs
from its binding rank. Both come back as one ContractReading.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from radiance_mcp.core.boot import Boot, BootState, Line
from radiance_mcp.core.constants import KV_DTYPES, KVDtype, ModelConstants
from radiance_mcp.core.engine_facts import RATE_FROM
from radiance_mcp.core.errors import InputError
from radiance_mcp.core.rules import engine_capacity
from radiance_mcp.core.rules.capacity import PoolContract, pool_contract
from radiance_mcp.core.units import fmt_mib

CONTRACT_INPUTS = ("pool_mib", "seqs", "max_model_len", "kv_cache_dtype")


@dataclass(frozen=True)
class ContractReading:
    contract: PoolContract
    model: str
    """What the rate is of: the model whose constants priced it, or the engine and rank whose pair it is."""
    formula: str
    inputs_from: dict[str, Line | None]
    """Where each input came from: a line of the boot, or None for the caller's argument."""
    notes: tuple[str, ...]


def boot_contract(boot: Boot | None, given: dict[str, Any], model: ModelConstants) -> ContractReading:
    """The contract of the given inputs (pool_mib, seqs, max_model_len, kv_cache_dtype; None: read it from the
    boot), by the rule of the boot's engine (radiance's without a boot). InputError names an input that is
    neither given nor printed."""
    if boot is not None and RATE_FROM[boot.engine] == "ledger":
        return _engine_contract(boot, given)
    inputs_from: dict[str, Line | None] = {k: None for k, v in given.items() if v is not None}
    values, notes = dict(given), []
    for name in (k for k, v in given.items() if v is None):
        if boot is None:  # the tool refuses missing values without a ledger before it asks
            raise InputError(f"{name} was not given and no ledger to read it from: pass it")
        value, line, note = _from_ledger(boot, name, boot.state)
        values[name], inputs_from[name] = value, line
        notes += [note] if note else []
    contract = pool_contract(Decimal(str(values["pool_mib"])), int(values["seqs"]), int(values["max_model_len"]),
                             values["kv_cache_dtype"], model)
    return ContractReading(contract, model.name, _contract_formula(contract, model), inputs_from, tuple(notes))


def _engine_contract(boot: Boot, given: dict[str, Any]) -> ContractReading:
    dtype: KVDtype | None = given["kv_cache_dtype"]
    if dtype is not None:
        raise InputError(
            f"kv_cache_dtype={dtype!r}: {boot.engine}'s rate is its own KV pair's (KV memory over KV "
            "tokens); change its cache type on the engine and read its new boot, or leave kv_cache_dtype out"
        )
    pool = Decimal(str(given["pool_mib"])) if given["pool_mib"] is not None else None
    r = engine_capacity.contract(boot, given["seqs"], given["max_model_len"], pool)
    contract = PoolContract(
        pool_mib=r.pool_mib, seqs=r.seqs, max_model_len=r.window, dtype=None,
        rate_bytes_per_token=int(r.rate.value.to_integral_value()), kv_mib=r.required_mib, per_seq_total_mib=0,
        fixed_mib=0, required_mib=r.required_mib, margin_mib=r.margin_mib, ok=r.ok,
        max_seqs_at_window=r.max_seqs_at_window, max_window_at_seqs=r.max_window_at_seqs, refusal=r.refusal,
    )
    inputs_from: dict[str, Line | None] = {
        "pool_mib": None if pool is not None else r.lines["kv_tokens"], "rate_bytes_per_token": r.lines["rate"],
        "max_model_len": r.lines.get("window"), "seqs": r.lines.get("seqs"),
    }
    return ContractReading(contract, f"{boot.engine} ({r.rank})", r.formula, inputs_from, ())


def _contract_formula(contract: PoolContract, model: ModelConstants) -> str:
    """The contract's arithmetic, written out: kv + per-sequence state + fixed against the pool."""
    return (
        f"{contract.seqs} x {contract.max_model_len:,} x {contract.rate_bytes_per_token:,} B = "
        f"{fmt_mib(contract.kv_mib, 2)} MiB + {model.per_seq_mib} x {contract.seqs} + {model.fixed_mib} = "
        f"{fmt_mib(contract.required_mib, 2)} MiB {'<=' if contract.ok else '>'} "
        f"pool {fmt_mib(contract.pool_mib, 2)} MiB"
    )


_LEDGER_FLAGS = {
    "seqs": "max-num-seqs",
    "max_model_len": "max-model-len",
    "kv_cache_dtype": "kv-cache-dtype",
    "pool_mib": "vram-kv-mib",
}


def _from_ledger(boot: Boot, name: str, state: BootState) -> tuple[Any, Line, str | None]:
    """An omitted contract input, read from the boot: the echoed flags, the pool as the engine funded it."""
    if name == "pool_mib":
        return _pool_from_ledger(boot, state)
    hit = boot.flags.get(_LEDGER_FLAGS[name])
    if hit is None:
        raise InputError(
            f"{name} was not given and {boot.where()} does not echo --{_LEDGER_FLAGS[name]}; pass {name}"
        )
    raw = hit.raw("value", boot.where())
    if name == "kv_cache_dtype":
        if raw not in KV_DTYPES:
            raise InputError(f"{boot.where()}:{hit.line.number}: --kv-cache-dtype {raw!r} is not bf16 or fp8")
        return raw, hit.line, None
    return hit.number("value", boot.where()), hit.line, None


def _pool_from_ledger(boot: Boot, state: BootState) -> tuple[Decimal, Line, str | None]:
    """The KV pool the engine funded ('kv cache X ... full-length sessions'), else the stated one.

    A refused boot is read by what it funded, never by the --vram-kv-mib it asked for; a boot that
    settled with the flag's pool (within the printed rounding) keeps the flag's exact figure.
    """
    src = boot.where()
    funded = boot.first("kv_backing")
    flag = boot.flags.get("vram-kv-mib")
    if funded is not None:
        size = funded.size("size", src)
        stated = flag.number("value", src) if flag is not None else None
        if state.status == "refused":
            asked = f" of the {fmt_mib(stated)} MiB --vram-kv-mib asked for" if stated is not None else ""
            refused = f"the refused boot funded a {size.text} KV cache{asked} (line {funded.line.number})"
            return size.mib, funded.line, refused
        if stated is None or not size.agrees_with(stated):
            note = (f"the engine funded a {size.text} KV cache (line {funded.line.number}), not the "
                    f"{fmt_mib(stated)} MiB --vram-kv-mib stated: the pool is what it funded") if stated else None
            return size.mib, funded.line, note
    if flag is not None:
        return flag.number("value", src), flag.line, None
    row = boot.first("vram_kv")
    if row is not None:
        return row.size("size", src).mib, row.line, None
    raise InputError(f"pool_mib was not given and {src} prints no kv cache line and no --vram-kv-mib; pass pool_mib")
