"""The boot a verification may read: the plan's own (pure).

A deploy is verified on the boot the env file started: its pair is the env file's (the echoed
--vram-weights-mib and --vram-kv-mib exactly, else the budget table's pair within its rows'
rounding), and it booted after the boot the plan was rendered from, where the env file says which
(render_gates writes it). On any other boot no prediction is judged: the boot still running before
the deploy, or one the env file never reached, kills nothing and keeps nothing.
"""

from __future__ import annotations

from radiance_mcp.core.boot import Boot, Line, RankView
from radiance_mcp.core.rules.book import Check
from radiance_mcp.core.units import fmt_mib


def plan_boot(boot: Boot, card: RankView, weights_mib: int, pool_mib: int,
              planned_from: tuple[str, int] | None) -> Check:
    """Whether boot is the plan's: card (the first) holds the env file's pair, and the boot is newer than
    the (source, boot) the plan was rendered from when it is of the same source."""
    want = weights_mib + pool_mib
    src, flags = boot.where(), boot.flags
    weights, pool = flags.get("vram-weights-mib"), flags.get("vram-kv-mib")
    lines: tuple[Line, ...]
    if weights is not None and pool is not None:
        w, k = int(weights.number("value", src)), int(pool.number("value", src))
        same = (w, k) == (weights_mib, pool_mib)
        shown = f"--vram-weights-mib {w:,} + --vram-kv-mib {k:,} = {w + k:,} MiB"
        lines = (weights.line, pool.line)
    else:
        pair = card.require("pair")
        same = abs(pair.value - want) <= pair.resolution / 2
        shown = f"pair {fmt_mib(pair.value, 2)} MiB ({card.pair_source}, to {fmt_mib(pair.resolution, 2)} MiB)"
        lines = pair.lines
    reasons = [] if same else [f"its {shown} is not the env file's {weights_mib:,} + {pool_mib:,} = {want:,} MiB"]
    if planned_from is not None and planned_from[0] == boot.source and boot.index <= planned_from[1]:
        reasons.append(f"it is boot {boot.index} and the plan was rendered from boot {planned_from[1]}: "
                       "the deploy has not booted yet")
    found = f"boot {boot.index}: {shown}"
    if not reasons:
        return Check("plan_boot", "pass", f"{found}, the env file's pair", lines)
    return Check("plan_boot", "fail", f"{found}; not the plan's boot: {'; '.join(reasons)}", lines,
                 "deploy the env file, wait for its boot to settle, then verify that boot; no prediction is "
                 "judged on this one")
