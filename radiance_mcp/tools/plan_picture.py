"""plan_free_vram's picture: each planned card as a stacked bar (core.svg), from the output's own figures."""

from __future__ import annotations

from pathlib import Path

from radiance_mcp.core.units import fmt_mib
from radiance_mcp.models.plan import PlanFreeVramOutput, Traced


def picture(out: PlanFreeVramOutput) -> str:
    """Each planned card as a stacked bar, from the output's own figures; the options as ghosts."""
    from radiance_mcp.core import svg  # on first picture: tools/list does not draw

    bars = []
    for plan in out.services or out._pictured:
        for card in plan.cards:
            held = sum(r.mib for r in plan.reserves if r.card in (None, card.card))
            weights, kv, free_figure, floor_figure, arena_figure, total_figure = (card.figure(name) for name in (
                "vram_weights", "vram_kv", "settled_free", "engine_floor", "activation_arena", "card_total"))
            assert weights is not None and kv is not None and free_figure is not None and floor_figure is not None
            free, floor = free_figure.value, floor_figure.value
            arena = arena_figure.value if arena_figure else 0.0
            headroom = max(0.0, free - floor - held)
            used = weights.value + kv.value + arena + free
            total = total_figure.value if total_figure else used
            segments = (
                svg.Segment("weights", "vram_weights", weights.value, source_of(weights)),
                svg.Segment("kv", "vram_kv (the KV pool)", kv.value, source_of(kv)),
                svg.Segment("arena", "activation arena", arena, source_of(arena_figure) or "not printed"),
                svg.Segment("other", "not attributed (driver context, the rest)", max(0.0, total - used),
                            "card total less the rest"),
                svg.Segment("headroom", "headroom to spend", headroom, "settled free - floor - reserves"),
                svg.Segment("reserves", "reserves", held, ", ".join(r.label for r in plan.reserves)),
                svg.Segment("floor", "engine floor", floor, source_of(floor_figure)),
            )
            start = total - free if total >= used else used - free
            ghosts = tuple(
                svg.Ghost("kv" if option.name.startswith("more KV") else "weights",
                          f"{option.name}: +{option.adds_mib:,} MiB -> "
                          + "; ".join(f"{g.name}: {_value(g)}" for g in option.gains),
                          start, option.adds_mib)
                for option in plan.options
            )
            who = plan.service or Path(plan.ledger.source).name
            where = f" ({card.physical})" if card.physical else ""
            if card.shared_with:
                where = (f" ({card.physical}, shared with {', '.join(card.shared_with)}: "
                         f"{card.headroom_once_mib:,} MiB of headroom counted once)")
            bars.append(svg.Bar(f"{who} card {card.card}{where}", total, segments, free, ghosts))
    return svg.render(bars)


def _value(figure: Traced) -> str:
    if figure.unit == "seats":
        return f"{int(figure.value):,} seat{'' if figure.value == 1 else 's'}"
    return f"{fmt_mib(figure.value, 2)} {figure.unit}"


def source_of(figure: Traced | None) -> str:
    return "" if figure is None else f"line {figure.line}" if figure.line else figure.source
