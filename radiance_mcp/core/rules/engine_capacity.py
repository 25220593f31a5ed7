"""The pool contract in vLLM's, SGLang's and llama.cpp's terms (pure: a Boot in).

The procedures' arithmetic is radiance_mcp.core.rules.capacity's (the ceiling is one rule for every
engine there, with each engine's floor: vLLM (1 - --gpu-memory-utilization) of the card; SGLang
(1 - --mem-fraction-static) of what it found before loading; llama.cpp the --fit margin, and none without
--fit). This module holds what differs in kind: the pool contract, where the KV tokens hold seqs
full-length sequences (seqs x window tokens) at the engine's own bytes per token (its KV memory over its
KV tokens), and the rank that binds it.

A figure the engine did not print is never filled in: the error names it, the line the
engine prints it in, and how to get it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from radiance_mcp.core.boot import Boot, Figure, Line, RankView
from radiance_mcp.core.constants import MIB
from radiance_mcp.core.engine_facts import SEATS
from radiance_mcp.core.errors import InputError, LedgerError
from radiance_mcp.core.units import fmt_mib


@dataclass(frozen=True)
class EngineContract:
    rank: str
    kv_tokens: int
    """The KV tokens the pool holds: the engine's own, or pool_mib over its rate."""
    rate: Figure
    window: int
    seqs: int
    pool_mib: Decimal
    required_mib: Decimal
    margin_mib: Decimal
    ok: bool
    max_seqs_at_window: int
    max_window_at_seqs: int
    formula: str
    refusal: str | None
    lines: dict[str, Line]
    """Where each ledger input came from: kv_tokens, rate, window, seqs, pool_mib."""


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


def _given_or_read(given: int | None, figure: Figure | None, name: str, remedy: str) -> tuple[int, Line | None]:
    if given is not None:
        return given, None
    if figure is None:
        raise InputError(f"{name} was not given and {remedy}; pass {name}")
    return int(figure.value), figure.lines[0]


def contract(view: Boot, seqs: int | None, window: int | None, pool_mib: Decimal | None) -> EngineContract:
    """seqs x window tokens against the KV tokens the engine holds (or a pool of pool_mib at its rate)."""
    rank = binding_rank(view)
    try:
        rate = rank.require("kv_bytes_per_token")
    except LedgerError as exc:
        raise InputError(f"{view.where()}: {exc}") from exc
    memory = rank.kv_mib
    if rank.kv_tokens is None and memory is not None:  # a refused vLLM boot: its memory at its own line's rate
        held = int(memory.value * MIB / rate.value)
        tokens_figure = Figure(Decimal(held), "tokens", memory.lines,
                               arithmetic=f"{memory.value:,.2f} MiB / {rate.value:,} B = {held:,} tokens")
    else:
        tokens_figure = rank.require("kv_tokens")
    window_gap = next((str(g) for g in rank.missing if g.figure == "window_tokens"), "the log prints no window")
    window, window_line = _given_or_read(window, rank.window_tokens, "max_model_len", f"{view.where()}: {window_gap}")
    seats = view.settings.get(SEATS.get(view.engine, ""))
    seats_remedy = (f"{view.where()} prints no {SEATS[view.engine]}" if view.engine in SEATS else
                    "vLLM prints no --max-num-seqs at INFO (it is the server's --max-num-seqs, 256 unless set)")
    seqs, seqs_line = _given_or_read(seqs, seats, "seqs", seats_remedy)
    if seqs < 1 or window < 1:
        raise InputError(f"seqs={seqs}, max_model_len={window}: both must be at least 1")
    lines = {"kv_tokens": tokens_figure.lines[0], "rate": rate.lines[0]}
    lines |= {k: v for k, v in (("window", window_line), ("seqs", seqs_line)) if v is not None}
    if pool_mib is None:
        pool, tokens = rate.value * tokens_figure.value / MIB, int(tokens_figure.value)
    else:
        pool, tokens = pool_mib, int(pool_mib * MIB / rate.value)
    required_tokens = seqs * window
    required = rate.value * required_tokens / MIB
    ok = tokens >= required_tokens
    formula = (f"{seqs} x {window:,} tokens = {required_tokens:,} tokens x {rate.value:,} B = {fmt_mib(required, 2)} "
               f"MiB {'<=' if ok else '>'} the {tokens:,} KV tokens ({fmt_mib(pool, 2)} MiB) of {rank.rank}")
    refusal = None if ok else (
        f"the KV cache holds {tokens:,} tokens, fewer than {seqs} full-length sequences of {window:,}: "
        + ("not one full-length sequence fits" if tokens < window else
           f"at most {tokens // window} run at once at the window, the rest wait or are preempted"))
    return EngineContract(rank.rank, tokens, rate, window, seqs, pool, required, pool - required, ok,
                          tokens // window, tokens // seqs, formula, refusal, lines)
