"""The ceiling and the pool contract in vLLM's, SGLang's and llama.cpp's terms (pure: a Boot in).

The procedures' arithmetic is radiance_mcp.core.rules.capacity's; this module feeds it the figures of
another engine's boot, each from that engine's own lines:

- ceiling, per card or rank: (settled free - floor) + weights + KV memory, where the floor is
  what the engine keeps free by design (vLLM: (1 - --gpu-memory-utilization) of the card;
  SGLang: (1 - --mem-fraction-static) of what it found before loading; llama.cpp: the --fit
  margin, and none without --fit, which allocates exactly what it is asked for);
- pool contract: the KV tokens hold seqs full-length sequences (seqs x window tokens), at
  the engine's own bytes per token (its KV memory over its KV tokens).

A figure the engine did not print is never filled in: the error names it, the line the
engine prints it in, and how to get it. A boot the engine refused has no ceiling
(BootNotSettled, naming its lines).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from radiance_mcp.core.boot import Boot, Figure, Line, RankView
from radiance_mcp.core.constants import MIB, LedgerEngine
from radiance_mcp.core.engines.common import quoted
from radiance_mcp.core.errors import BootNotSettled, InputError, LedgerError
from radiance_mcp.core.rules.capacity import CardCeiling, card_ceiling
from radiance_mcp.core.units import fmt_mib

KV_FLAGS: dict[LedgerEngine, str] = {
    "radiance": "--vram-kv-mib (with --vram-weights-mib, the pair)",
    "vllm": "--gpu-memory-utilization (a share of the card), or --kv-cache-memory (bytes)",
    "sglang": "--mem-fraction-static (weights + KV pool as a share of the card), or --max-total-tokens",
    "llama.cpp": "-c / --ctx-size (cells shared by the slots) and -np / --parallel, with -ctk / -ctv (bytes per cell)",
}
"""The flag that moves each engine's KV memory (radiance's too: the dialects' facts, one table)."""
FLOORS: dict[LedgerEngine, str] = {
    "radiance": "--gpu-headroom-mib plus the static region, which the settled line prints",
    "vllm": "the (1 - --gpu-memory-utilization) share of the card vLLM leaves unclaimed",
    "sglang": "the (1 - --mem-fraction-static) share SGLang keeps for activations and CUDA graphs",
    "llama.cpp": "the margin --fit keeps free (none without --fit: llama.cpp allocates what it is asked for)",
}
SEATS = {"sglang": "max_running_requests", "llama.cpp": "slots"}
"""The setting each engine prints for the sequences it serves at once (vLLM prints none at INFO)."""


def refusal_finding(view: Boot) -> str:
    """A refused boot named by its lines, with what changes it."""
    refusals = "; ".join(f"line {r.line.number}: {quoted(r.line)} ({r.detail})" for r in view.refusals if r.final)
    return (f"{view.where()}: this boot refused to start ({refusals}). A refused boot never settles, so it has no "
            "ceiling and its KV cache backs nothing; read the ceiling from a boot that served")


def require_served(view: Boot) -> None:
    """BootNotSettled for a boot the engine refused, naming its lines."""
    if view.refused:
        lines = tuple(r.line.number for r in view.refusals if r.final)
        raise BootNotSettled(refusal_finding(view), "refused", lines)


def ceiling_ranks(view: Boot) -> tuple[RankView, ...]:
    """The views a ceiling is per: llama.cpp's devices where it names them, else every rank."""
    devices = tuple(r for r in view.ranks if r.rank != "all")
    return devices if view.engine == "llama.cpp" and devices else view.ranks


@dataclass(frozen=True)
class RankCeiling:
    rank: str
    card: CardCeiling
    """The arithmetic (capacity.card_ceiling), its card the rank's position."""
    lines: tuple[Line, ...]
    floor_note: str


def ceilings(view: Boot) -> tuple[RankCeiling, ...]:
    """Every rank's ceiling, or a LedgerError naming each figure the log lacks and how to get it."""
    require_served(view)
    out: list[RankCeiling] = []
    gaps: list[str] = []
    for position, rank in enumerate(ceiling_ranks(view)):
        figures: dict[str, Figure] = {}
        lacking: list[str] = []
        for name in ("free_mib", "weights_mib", "kv_mib", "floor_mib"):
            if name == "floor_mib" and view.engine == "llama.cpp" and rank.floor_mib is None:
                continue  # no --fit: llama.cpp keeps no floor of its own
            try:
                figures[name] = rank.require(name)
            except LedgerError as exc:
                lacking.append(str(exc))
        if lacking:
            gaps += lacking
            continue
        floor = figures.get("floor_mib")
        pair = figures["weights_mib"].value + figures["kv_mib"].value
        card = card_ceiling(position, figures["free_mib"].value, floor.value if floor else Decimal(0), pair)
        note = FLOORS[view.engine] if floor else "floor 0: llama.cpp ran without --fit, which keeps no margin"
        lines = tuple(dict.fromkeys(line for f in figures.values() for line in f.lines))
        out.append(RankCeiling(rank.rank, card, lines, note))
    if gaps:
        raise LedgerError(
            f"{view.where()}: no ceiling, since the log lacks a figure it needs (nothing is estimated): "
            + "; ".join(gaps)
        )
    return tuple(out)


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
