"""Perturbed scenarios, generated from the simulator: each one's expected facts come from its own parameters.

A variant is a demo service (sim.DEFAULT_SERVICES) with some of its sim.Shape fields changed (weights,
pool, seats, window, headroom, the card, a card's extra memory, a later boot). Its facts are worked out
here, from the shape and the cards the simulator's engine model prints (``sim.boot_figures``: the settled
free memory and the engine floor, as the ledger line prints them), with the arithmetic the skills give:

- ceiling = (settled free - engine floor) + the pair, per card, rounded down; the smallest card binds;
- headroom = ceiling - pair; the pool the ceiling buys = ceiling - reserves - weights;
- the pool contract = seats x window x rate + per-seat MiB x seats + fixed MiB (the model's constants),
  and the seats it backs: the most whose contract fits the pool;
- the trap: pair + settled free (free memory read as spare capacity, no floor).

Never by calling the tools the eval puts to the test. The variants are the held-out split
(``split = "held-out"``): the scripted agents were not written against them.

    python -m radiance_mcp.evals.variants            # write evals/scenarios/variant-*.toml
    python -m radiance_mcp.evals.variants --check    # exit 1 when a file differs from what this writes

Pure but for ``main``: ``render_all()`` returns {file name: TOML text}.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from radiance_mcp.core.constants import MIB
from radiance_mcp.core.units import UNIT_MIB
from radiance_mcp.sim import DEFAULT_SERVICES, Shape, boot_figures
from radiance_mcp.sim.engine import fmt_size

PREFIX = "variant-"
"""Every generated scenario's name starts so (the generator owns those files and no other)."""


@dataclass(frozen=True)
class Variant:
    """One perturbation: a demo service, its first boot's changed fields, later boots, a reserve."""

    name: str
    like: str
    shape: Mapping[str, Any] = field(default_factory=dict)
    boots: Sequence[Mapping[str, Any]] = ()
    reserve_mib: int | None = None
    why: str = ""


VARIANTS: tuple[Variant, ...] = (
    Variant("variant-ceiling-lighter-weights", "frank-archon", {"vram_weights_mib": 22_000, "vram_kv_mib": 6_000},
            why="lighter weights, a bigger pool"),
    Variant("variant-ceiling-more-headroom", "frank-archon", {"gpu_headroom_mib": 512},
            why="a larger --gpu-headroom-mib: a larger engine floor"),
    Variant("variant-ceiling-shorter-window", "frank-archon", {"max_model_len": 131_072, "vram_kv_mib": 4_096},
            why="a 131,072-token window on a smaller pool"),
    Variant("variant-ceiling-bf16", "frank-archon", {"kv_cache_dtype": "bf16", "vram_kv_mib": 6_144, "seqs": 2},
            why="bf16 KV: twice the bytes a token"),
    Variant("variant-ceiling-wider-step", "frank-archon", {"max_num_batched_tokens": 2_048},
            why="a 2,048-token step: a larger arena"),
    Variant("variant-reserve-personal", "frank-archon", {"vram_weights_mib": 23_000}, reserve_mib=768,
            why="a 768 MiB personal reserve on lighter weights"),
    Variant("variant-reserve-lowpool", "lowpool", {"vram_kv_mib": 4_096}, reserve_mib=256,
            why="a 256 MiB personal reserve on lowpool's card"),
    Variant("variant-newest-boot-smaller-pool", "frank-archon", boots=({"vram_kv_mib": 4_608, "seqs": 3},),
            why="redeployed with a smaller pool"),
    Variant("variant-newest-boot-more-headroom", "frank-archon", boots=({"gpu_headroom_mib": 384},),
            why="redeployed with a larger --gpu-headroom-mib"),
    Variant("variant-tp2-card-one-heavier", "twin", {"card_extra_mib": [0, 256]},
            why="--tp 2, card 1 carries 256 MiB more"),
    Variant("variant-tp2-frank-archon-card-one", "frank-archon", {"tp": 2, "card_extra_mib": [0, 128]},
            why="frank-archon split over two cards, card 1 carries 128 MiB more"),
    Variant("variant-tp2-card-zero-binds", "twin", {"card_extra_mib": [160, 0]},
            why="--tp 2, card 0 carries 160 MiB more: card 0 binds"),
)


@dataclass(frozen=True)
class Card:
    number: int
    free_mib: Decimal
    floor_mib: Decimal
    """As the settled line prints them (two decimals, GiB from 1 GiB)."""
    ceiling_mib: int


def _printed(mib: Decimal) -> Decimal:
    """A size as the simulated ledger prints it, read back in MiB (what the settled line says)."""
    number, unit = fmt_size(mib).split()
    return Decimal(number) * UNIT_MIB[unit]


def cards(shape: Shape) -> list[Card]:
    """Each card's settled free memory and floor as printed, and its ceiling: (free - floor) + pair, down."""
    boot = boot_figures(shape)
    if boot.refused:
        raise ValueError(f"{shape.name}: the simulated boot is refused ({boot.refusal}); a variant must boot")
    out = []
    for card in boot.cards:
        free, floor = _printed(card.free_mib), _printed(card.floor_mib)
        out.append(Card(card.card, free, floor, math.floor(free - floor + shape.pair_mib)))
    return out


def contract_mib(shape: Shape, seats: int) -> Decimal:
    """seats x window x rate + per-seat MiB x seats + fixed MiB: the pool's contract at the shape's window."""
    model = shape.model
    rate = model.rate_bytes_per_token[shape.kv_cache_dtype]
    return Decimal(seats * shape.max_model_len * rate) / MIB + model.per_seq_mib * seats + model.fixed_mib


def seats_backed(shape: Shape, pool_mib: int) -> int:
    """The most seats whose contract fits the pool, at the shape's window."""
    seats = 0
    while contract_mib(shape, seats + 1) <= pool_mib:
        seats += 1
    return seats


def _shape(variant: Variant) -> tuple[Shape, list[Shape]]:
    base = next(s for s in DEFAULT_SERVICES if s.name == variant.like).shape

    def changed(shape: Shape, fields: Mapping[str, Any]) -> Shape:
        values = dict(fields)
        if "card_extra_mib" in values:
            values["card_extra_mib"] = tuple(Decimal(v) for v in values["card_extra_mib"])
        return replace(shape, **values)

    first = changed(base, variant.shape)
    boots = [first]
    for later in variant.boots:
        boots.append(changed(boots[-1], later))
    return first, boots


def _fact(name: str, value: float, tolerance: float, why: str) -> list[str]:
    return ["", "[[facts]]", f'name = "{name}"', f"value = {value:g}" if value == int(value) else f"value = {value}",
            f"tolerance = {tolerance:g}", f"why = {json.dumps(why)}"]


def _trap(rule: str, value: float, why: str) -> list[str]:
    return ["", "[[traps]]", f'rule = "{rule}"', f"value = {value:g}", "tolerance = 1", f"why = {json.dumps(why)}"]


def _inline(fields: Mapping[str, Any]) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in fields.items()) + " }"


def render(variant: Variant) -> str:
    """The variant's scenario, as TOML: its facts from the simulator's parameters (module docstring)."""
    _, boots = _shape(variant)
    newest = boots[-1]
    now = cards(newest)
    binding = min(now, key=lambda c: (c.ceiling_mib, c.number))
    pair = newest.pair_mib
    reserve = variant.reserve_mib or 0
    pool = binding.ceiling_mib - reserve - newest.vram_weights_mib
    seats = seats_backed(newest, pool)
    if not 1 <= seats <= 6:
        raise ValueError(f"{variant.name}: the pool {pool:,} MiB backs {seats} seats; keep 1 to 6 (the sampler bound "
                         "at spec 3)")
    service = variant.like
    rules = ["ledger_first", "engine_ceiling", "pair_within_ceiling", "pool_contract", "sampler_rows"]
    if reserve:
        rules[2:2] = ["reserve_traced", "reserve_not_counted", "argument_names"]
    if len(boots) > 1:
        rules.insert(2, "newest_boot")
    if len(now) > 1:
        rules.insert(2, "binding_card")
    question = (f"{service} runs a {newest.vram_weights_mib:,} + {newest.vram_kv_mib:,} MiB KV / VRAM pair "
                f"({newest.kv_cache_dtype}, {newest.max_model_len:,}-token window)"
                + (f"; its log holds {len(boots)} boots, the last deployed last night" if len(boots) > 1 else "")
                + (f"; we keep {reserve} MiB of the card for a tool of our own that no log line mentions" if reserve
                   else "")
                + ". How far can the pair grow, and how many sequences would the KV cache back at the window "
                  "if we spent the headroom on it?")
    arithmetic = " ".join(f"card {c.number}: {pair:,} + ({c.free_mib} - {c.floor_mib}) = {c.ceiling_mib:,};"
                          for c in now)
    lines = [f"# Generated by radiance_mcp/evals/variants.py ({variant.why}); do not edit: run "
             "`python -m radiance_mcp.evals.variants`.",
             f'name = "{variant.name}"', 'procedure = "radiance-kv-cache-resize"', 'split = "held-out"',
             f"question = {json.dumps(question)}", f"rules = {json.dumps(rules)}"]
    lines += _fact("ceiling_mib", binding.ceiling_mib, 1, f"{arithmetic} card {binding.number} binds")
    lines += _fact("headroom_mib", binding.ceiling_mib - pair, 1, f"{binding.ceiling_mib:,} - {pair:,}")
    if reserve:
        lines += _fact("max_pair_mib", binding.ceiling_mib - reserve, 1,
                       f"{binding.ceiling_mib:,} less the {reserve} MiB personal reserve")
    lines += _fact("new_pool_mib", pool, 1, f"{binding.ceiling_mib - reserve:,} less {newest.vram_weights_mib:,} "
                                              "MiB of weights")
    contract = round(float(contract_mib(newest, seats)), 2)
    lines += _fact(f"contract_mib_at_{seats}_seqs", contract, 0.01,
                   f"{seats} x {newest.max_model_len:,} x {newest.model.rate_bytes_per_token[newest.kv_cache_dtype]:,}"
                   f" B + {newest.model.per_seq_mib} x {seats} + {newest.model.fixed_mib} <= {pool:,}; "
                   f"{seats + 1} seats do not fit")
    for card in now:
        lines += _trap("engine_ceiling", round(float(pair + card.free_mib)),
                       f"card {card.number}'s pair plus its settled free memory, without the engine floor")
    if len(boots) > 1:
        old = min(cards(boots[0]), key=lambda c: (c.ceiling_mib, c.number))
        if abs(old.ceiling_mib - binding.ceiling_mib) > 2:
            lines += _trap("newest_boot", old.ceiling_mib, "the first boot's ceiling, not the newest")
        old_headroom = old.ceiling_mib - boots[0].pair_mib
        if abs(old_headroom - (binding.ceiling_mib - pair)) > 2:
            lines += _trap("newest_boot", old_headroom, "the first boot's headroom, not the newest")
    if len(now) > 1:
        for card in now:
            if card is not binding and card.ceiling_mib - binding.ceiling_mib > 2:
                lines += _trap("binding_card", card.ceiling_mib, f"card {card.number}'s ceiling, which does not bind")
    lines += ["", "[[fleet.services]]", f'like = "{variant.like}"']
    if variant.shape:
        lines.append(f"shape = {_inline(variant.shape)}")
    if variant.boots:
        lines.append("boots = [" + ", ".join(_inline(b) for b in variant.boots) + "]")
    lines += ["", "[agent]", 'task = "ceiling"', f'service = "{service}"']
    if reserve:
        lines += [f"reserve_mib = {reserve}", 'reserve_label = "a tool of our own on the card"']
    return "\n".join(lines) + "\n"


def render_all() -> dict[str, str]:
    """{file name: TOML text} of every variant."""
    return {f"{v.name}.toml": render(v) for v in VARIANTS}


def main(argv: Sequence[str] = ()) -> int:
    from radiance_mcp.evals.scenario import SCENARIOS_DIR

    check = "--check" in argv
    stale = []
    for name, text in render_all().items():
        path = SCENARIOS_DIR / name
        if check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            Path(path).write_text(text, encoding="utf-8")
    if stale:
        print(f"stale variants: {', '.join(stale)}; run python -m radiance_mcp.evals.variants", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
