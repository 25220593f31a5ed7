"""The pool contract of a boot of any engine, its inputs read from the boot where the caller left them out.

Two arithmetic rules, chosen by how the engine states its KV rate (core.engine_facts.RATE_FROM): radiance's
rate is the model's constant per --kv-cache-dtype, priced in MiB with per-sequence and fixed overheads
(capacity.pool_contract), the inputs from its echoed flags and the pool it funded; another engine's rate is
its own KV pair's, counted in tokens against the KV tokens it holds (the rank whose cache holds the fewest
tokens binds), the inputs from that rank. Both come back as one ContractReading.

The rule book's rules check_pool_contract answers by (``contract_checks``: the contract, the pair within the
ceiling, the sampler rows) and the one verdict over them (``verdict``): true only if every rule was checked and
passed.
The seats another engine serves at once are read here once (``served_seats``), for the contract and the
probes alike.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from radiance_mcp.core.boot import Boot, Figure, Line, RankView
from radiance_mcp.core.constants import MIB, KVDtype, ModelConstants
from radiance_mcp.core.engine_facts import RATE_FROM, SEATS
from radiance_mcp.core.errors import InputError, LedgerError
from radiance_mcp.core.rules.book import Check
from radiance_mcp.core.rules.capacity import PoolContract, contract_check, kv_dtype, pool_contract
from radiance_mcp.core.rules.sampler import boot_spec, sampler_rows
from radiance_mcp.core.units import fmt_mib

CONTRACT_INPUTS = ("pool_mib", "seqs", "max_model_len", "kv_cache_dtype")


@dataclass(frozen=True)
class ContractReading:
    contract: PoolContract | None
    """None: a refused boot of another engine that printed no KV rate, so its pool cannot be priced (it backs
    nothing: the boot never served); formula says so, with its refusal's lines."""
    model: str
    """What the rate is of: the model whose constants priced it, or the engine and rank whose pair it is."""
    formula: str
    inputs_from: dict[str, Line | None]
    """Where each input came from: a line of the boot, or None for the caller's argument."""
    notes: tuple[str, ...]
    shape: tuple[int | None, int | None] = (None, None)
    """(seqs, window) of a contract left unpriced (contract None), None where neither given nor printed; a priced
    contract holds its own."""


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
        value, line, note = from_ledger(boot, name)
        values[name], inputs_from[name] = value, line
        notes += [note] if note else []
    contract = pool_contract(Decimal(str(values["pool_mib"])), int(values["seqs"]), int(values["max_model_len"]),
                             values["kv_cache_dtype"], model)
    return ContractReading(contract, model.name, _contract_formula(contract, model), inputs_from, tuple(notes))


def _engine_contract(boot: Boot, given: dict[str, Any]) -> ContractReading:
    """seqs x window tokens against the KV tokens the engine holds (or a pool of pool_mib at its rate), at the
    binding rank's own bytes per token; seqs and the window from the boot where the caller left them out."""
    dtype: KVDtype | None = given["kv_cache_dtype"]
    if dtype is not None:
        raise InputError(
            f"kv_cache_dtype={dtype!r}: {boot.engine}'s rate is its own KV pair's (KV memory over KV "
            "tokens); change its cache type on the engine and read its new boot, or leave kv_cache_dtype out"
        )
    rank = binding_rank(boot)
    try:
        rate = rank.require("kv_bytes_per_token")
    except LedgerError as exc:
        if boot.refused:  # its pool needs no price: it backs nothing
            return _refused_unpriced(boot, rank, exc, given)
        raise InputError(f"{boot.where()}: {exc}") from exc
    memory = rank.kv_mib
    if rank.kv_tokens is None and memory is not None:  # a refused vLLM boot: its memory at its own line's rate
        held = int(memory.value * MIB / rate.value)
        tokens_figure = Figure(Decimal(held), "tokens", memory.lines,
                               arithmetic=f"{fmt_mib(memory.value, 2)} MiB / {fmt_mib(rate.value, 2)} B = "
                               f"{held:,} tokens")
    else:
        tokens_figure = rank.require("kv_tokens")
    window_gap = next((str(g) for g in rank.missing if g.figure == "window_tokens"), "the log prints no window")
    window, window_line = given_or_read(given["max_model_len"], rank.window_tokens, "max_model_len",
                                         f"{boot.where()}: {window_gap}")
    printed = seats_printed_as(boot.engine)
    seats_remedy = (f"{boot.where()} prints no {printed}" if printed else
                    "vLLM prints no --max-num-seqs at INFO (it is the server's --max-num-seqs, 256 unless set)")
    seqs, seqs_line = given_or_read(given["seqs"], served_seats(boot), "seqs", seats_remedy)
    if seqs < 1 or window < 1:
        raise InputError(f"seqs={seqs}, max_model_len={window}: both must be at least 1")
    if given["pool_mib"] is None:
        pool, tokens = rate.value * tokens_figure.value / MIB, int(tokens_figure.value)
    else:
        pool = Decimal(str(given["pool_mib"]))
        tokens = int(pool * MIB / rate.value)
    contract = token_contract(pool, seqs, window, rate.value, tokens)
    required_tokens = seqs * window
    formula = (f"{seqs} x {window:,} tokens = {required_tokens:,} tokens x {fmt_mib(rate.value, 2)} B = "
               f"{fmt_mib(contract.required_mib, 2)} MiB {'<=' if contract.ok else '>'} the {tokens:,} KV tokens "
               f"({fmt_mib(pool, 2)} MiB) of {rank.rank}")
    inputs_from: dict[str, Line | None] = {
        "pool_mib": None if given["pool_mib"] is not None else tokens_figure.lines[0],
        "rate_bytes_per_token": rate.lines[0], "max_model_len": window_line, "seqs": seqs_line,
    }
    return ContractReading(contract, f"{boot.engine} ({rank.rank})", formula, inputs_from, ())


def token_contract(pool_mib: Decimal, seqs: int, window: int, rate: Decimal, tokens: int | None = None) -> PoolContract:
    """Another engine's contract: seqs x window tokens against the KV tokens its pool holds at its own bytes per
    token (tokens: as the boot counts them; else pool_mib at the rate, whole tokens down)."""
    held = int(pool_mib * MIB / rate) if tokens is None else tokens
    required_tokens = seqs * window
    required = rate * required_tokens / MIB
    ok = held >= required_tokens
    refusal = None if ok else (
        f"the KV cache holds {held:,} tokens, fewer than {seqs} full-length sequences of {window:,}: "
        + ("not one full-length sequence fits" if held < window else
           f"at most {held // window} run at once at the window, the rest wait or are preempted"))
    return PoolContract(
        pool_mib=pool_mib, seqs=seqs, max_model_len=window, dtype=None,
        rate_bytes_per_token=int(rate.to_integral_value()), kv_mib=required, per_seq_total_mib=0,
        fixed_mib=0, required_mib=required, margin_mib=pool_mib - required, ok=ok,
        max_seqs_at_window=held // window, max_window_at_seqs=held // seqs, refusal=refusal,
    )


def _refused_unpriced(boot: Boot, rank: RankView, gap: LedgerError, given: dict[str, Any]) -> ContractReading:
    """A refused boot whose KV rate was never printed (vLLM's 0 blocks or 'No available memory for the cache
    blocks', a llama.cpp allocation failure before its KV size line): its pool backs nothing, so the contract
    fails at any seqs and window, without a price; the gap is named, not filled. The seqs and window are the
    caller's or the boot's where either gives them, else None (they change nothing)."""
    shape = {name: _given_or_printed(given[name], figure) for name, figure in
             (("seqs", served_seats(boot)), ("max_model_len", rank.window_tokens))}
    seqs, window = (value for value, _ in shape.values())
    lines = "; ".join(f"line {line.number}" for line in boot.state.lines)
    asked = f"{seqs} x {window:,} tokens" if seqs and window else "any seqs x window"
    formula = f"{asked} > the 0 tokens a boot that refused to start ({lines}) serves; its pool is not priced ({gap})"
    inputs_from = {name: line for name, (value, line) in shape.items() if value is not None}
    return ContractReading(None, f"{boot.engine} ({rank.rank})", formula, inputs_from, (), (seqs, window))


def _given_or_printed(given: int | None, figure: Figure | None) -> tuple[int | None, Line | None]:
    if given is not None:
        return given, None
    return (int(figure.value), figure.lines[0]) if figure is not None else (None, None)


def unpriced_check(reading: ContractReading, boot: Boot) -> Check:
    """The contract of a refused boot whose pool was never priced (reading.contract None): failed, on the
    refusal's lines, with the refusal's own remedy."""
    remedy = "; ".join(r.detail for r in boot.refusals if r.final)
    return Check("pool_contract", "fail", reading.formula, boot.state.lines, remedy)


def binding_rank(view: Boot) -> RankView:
    """The rank whose KV cache holds the fewest tokens (or, where no rank prints tokens, the least memory;
    where none prints either, the first)."""
    with_tokens = [r for r in view.ranks if r.kv_tokens is not None]
    if with_tokens:
        return min(with_tokens, key=lambda r: r.kv_tokens.value if r.kv_tokens else 0)
    with_memory = [r for r in view.ranks if r.kv_mib is not None and r.kv_bytes_per_token is not None]
    if not with_memory:
        return view.ranks[0]  # no rank prints its cache: the figures it lacks are in its missing
    return min(with_memory, key=lambda r: r.kv_mib.value if r.kv_mib else 0)


def served_seats(boot: Boot) -> Figure | None:
    """The sequences another engine serves at once, as its boot prints them (with the line): its own setting
    (core.engine_facts.SEATS: SGLang's max_running_requests, llama-server's slots), else llama.cpp's context line
    `n_seq_max = S` (the sequences its context holds: llama-server's -np, llama-cpp-python's one); None where
    the log prints neither (vLLM prints no --max-num-seqs at INFO)."""
    return boot.settings.get(SEATS.get(boot.engine, "")) or boot.settings.get("n_seq_max")


def seats_printed_as(engine: str) -> str | None:
    """The settings served_seats reads for this engine, in words (for a remedy when the log prints none); None
    for vLLM, which prints none at INFO."""
    if engine == "llama.cpp":
        return f"{SEATS[engine]} or n_seq_max"
    return SEATS.get(engine)


def given_or_read(given: int | None, figure: Figure | None, name: str, remedy: str) -> tuple[int, Line | None]:
    """The caller's value, else the boot's printed figure (with its line); InputError naming it where neither."""
    if given is not None:
        return given, None
    if figure is None:
        raise InputError(f"{name} was not given and {remedy}; pass {name}")
    return int(figure.value), figure.lines[0]


def _contract_formula(contract: PoolContract, model: ModelConstants) -> str:
    """The contract's arithmetic, written out: kv + per-sequence state + fixed against the pool."""
    return (
        f"{contract.seqs} x {contract.max_model_len:,} x {contract.rate_bytes_per_token:,} B = "
        f"{fmt_mib(contract.kv_mib, 2)} MiB + {model.per_seq_mib} x {contract.seqs} + {model.fixed_mib} = "
        f"{fmt_mib(contract.required_mib, 2)} MiB {'<=' if contract.ok else '>'} "
        f"pool {fmt_mib(contract.pool_mib, 2)} MiB"
    )


_LEDGER_FLAGS = {
    "vram_weights_mib": "vram-weights-mib",
    "seqs": "max-num-seqs",
    "max_model_len": "max-model-len",
    "kv_cache_dtype": "kv-cache-dtype",
    "pool_mib": "vram-kv-mib",
}


def from_ledger(boot: Boot, name: str) -> tuple[Any, Line, str | None]:
    """An omitted input of radiance's shape, read from the boot (InputError naming it where the boot does not
    echo it): the echoed flags (the weights, seats and window as whole numbers, the dtype by the dtype rule),
    the pool as the engine funded it; with the line, and a note where the pool is not the flag's."""
    if name == "pool_mib":
        return _pool_from_ledger(boot)
    hit = boot.flags.get(_LEDGER_FLAGS[name])
    if hit is None:
        raise InputError(
            f"{name} was not given and {boot.where()} does not echo --{_LEDGER_FLAGS[name]}; pass {name}"
        )
    raw = hit.raw("value", boot.where())
    if name == "kv_cache_dtype":
        return kv_dtype(raw, f"{boot.where()}:{hit.line.number}: --kv-cache-dtype"), hit.line, None
    return int(hit.number("value", boot.where())), hit.line, None


def _pool_from_ledger(boot: Boot) -> tuple[Decimal, Line, str | None]:
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
        if boot.refused:
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


# ---------------------------------------------------------------------------------------
# The rules a pool is answered by, and the one verdict over them

NO_LEDGER_REMEDY = "name the service (one with a ledger in the fleet config), or pass log / log_text"


def contract_checks(reading: ContractReading, boot: Boot | None, pair: Check) -> tuple[Check, ...]:
    """The rules a pool is checked by: its contract (on the ledger lines its inputs came from), the pair within
    the ceiling (the caller's, from the ceiling rule) and the sampler rows where the boot prints a spec (unchecked
    without a boot: the spec is its sampler line; none for a boot without one, as the gates check none there, nor
    for a refused boot whose pool was never priced: it failed, on its refusal's lines)."""
    contract = reading.contract
    if contract is None:  # a refused boot's pool, never priced: it backs nothing (and no sampler serves)
        assert boot is not None
        return unpriced_check(reading, boot), pair
    lines = tuple(dict.fromkeys(line for line in reading.inputs_from.values() if line is not None))
    checks = [replace(contract_check(contract), lines=lines), pair]
    if boot is None:
        checks.append(replace(sampler_rows(contract.seqs, None),
                              remedy=f"{NO_LEDGER_REMEDY}: the spec is the boot's 'sampler:' line"))
    else:
        spec, line = boot_spec(boot)
        if spec is not None:
            checks.append(sampler_rows(contract.seqs, spec, line))
    return tuple(checks)
