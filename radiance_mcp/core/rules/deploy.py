"""The boot a verification may read: the plan's own (pure).

A deploy is verified on the boot the env file started: its pair is the env file's (the echoed
--vram-weights-mib and --vram-kv-mib exactly, else the budget table's pair within its rows'
rounding; another engine's KV cache holds what the env file's kv knob funds), and it booted after
the boot the plan was rendered from, where the env file says which (render_gates writes it). On the
boot still running before the deploy, or any boot when the env file does not say which it was
planned from, no prediction is judged. A later boot at another shape is the deploy that did not take
the plan: its predictions are judged, and killed (booted_after).
"""

from __future__ import annotations

from decimal import Decimal

from radiance_mcp.core.boot import Boot, Line, RankView
from radiance_mcp.core.constants import MIB
from radiance_mcp.core.rules.book import Check
from radiance_mcp.core.units import fmt_mib


def plan_boot(boot: Boot, card: RankView, weights_mib: int, pool_mib: int,
              planned_from: tuple[str, int] | None, engine_kv: tuple[str, int] | None = None) -> Check:
    """Whether boot is the plan's: card (the first) holds the env file's pair (another engine's: its KV cache
    holds what the env file's kv knob funds, engine_kv = (its unit, its value)), and the boot is newer than the
    (source, boot) the plan was rendered from when it is of the same source."""
    want = weights_mib + pool_mib
    if engine_kv is not None:
        same, shown, lines = _engine_kv(card, *engine_kv)
        wanted = f"{engine_kv[1]:,} {engine_kv[0]} of KV"
    else:
        same, shown, lines = _pair(boot, card, weights_mib, pool_mib)
        wanted = f"{weights_mib:,} + {pool_mib:,} = {want:,} MiB"
    reasons = [] if same else [f"its {shown} is not the env file's {wanted}"]
    if planned_from is not None and planned_from[0] == boot.source and boot.index <= planned_from[1]:
        reasons.append(f"it is boot {boot.index} and the plan was rendered from boot {planned_from[1]}: "
                       "the deploy has not booted yet")
    found = f"boot {boot.index}: {shown}"
    if not reasons:
        return Check("plan_boot", "pass", f"{found}, the env file's {'KV' if engine_kv else 'pair'}", lines)
    return Check("plan_boot", "fail", f"{found}; not the plan's boot: {'; '.join(reasons)}", lines,
                 "deploy the env file, wait for its boot to settle, then verify that boot; no prediction is "
                 "judged on this one")


def booted_after(boot: Boot, planned_from: tuple[str, int] | None) -> bool:
    """Whether boot came after the one the plan was rendered from (the env file says which): a boot at another
    shape then is the deploy that did not take the plan, and its predictions are judged (killed), not left."""
    return planned_from is not None and planned_from[0] == boot.source and boot.index > planned_from[1]


def _pair(boot: Boot, card: RankView, weights_mib: int, pool_mib: int) -> tuple[bool, str, tuple[Line, ...]]:
    src, flags = boot.where(), boot.flags
    weights, pool = flags.get("vram-weights-mib"), flags.get("vram-kv-mib")
    if weights is not None and pool is not None:
        w, k = int(weights.number("value", src)), int(pool.number("value", src))
        return ((w, k) == (weights_mib, pool_mib), f"--vram-weights-mib {w:,} + --vram-kv-mib {k:,} = {w + k:,} MiB",
                (weights.line, pool.line))
    pair = card.require("pair")
    return (abs(pair.value - (weights_mib + pool_mib)) <= pair.resolution / 2,
            f"pair {fmt_mib(pair.value, 2)} MiB ({card.pair_source}, to {fmt_mib(pair.resolution, 2)} MiB)",
            pair.lines)


def _engine_kv(card: RankView, unit: str, kv: int) -> tuple[bool, str, tuple[Line, ...]]:
    """Another engine's KV cache against the env file's kv knob: its tokens (SGLang's tokens, llama.cpp's
    cells) exactly, its memory (vLLM's bytes) within the figure's printed resolution."""
    if unit in ("tokens", "cells"):
        tokens = card.require("kv_tokens")
        return int(tokens.value) == kv, f"{int(tokens.value):,} {unit} of KV", tokens.lines
    memory = card.require("kv_mib")
    want = Decimal(kv) / MIB
    return (abs(memory.value - want) <= max(memory.resolution, Decimal("0.01")) / 2,
            f"{fmt_mib(memory.value, 2)} MiB of KV ({int(memory.value * MIB):,} {unit})", memory.lines)
