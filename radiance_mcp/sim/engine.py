"""The simulated radiance's engine model, pure: a serving shape in, the boot it prints out.

``Shape`` is what an operator states (flags and the card); ``boot_figures(shape)`` applies the
seed's laws and returns every figure the engine would print, and ``EngineModel`` writes them as a
boot ledger, every line through ``radiance_mcp.core.ledger.render`` so the reader and this writer
share one phrase table. ``Shape()`` is the PHRASEBOOK section 8 boot: the 24,000 + 5,120 =
29,120 MiB pair that settles at 2.01 GiB free against a 209.19 MiB floor (ceiling 30,969).

The laws, per card, in MiB:

- activation arena: linear in --max-num-batched-tokens (MNBT) through constants.ARENA_POINTS_MIB
  (1,024 -> 504 MiB, 65,536 -> 10.65 GiB), extended beyond them on the same line.
- claimable = card total - arena - step buffers; the step buffers are linear in MNBT too, fitted
  so that the 31.86 GiB card claims 30.87 GiB at 1,024 and 16.85 GiB at 65,536 (the seed's
  points): a wider step is charged to the card before weights and the KV cache are funded.
- fundable = claimable - the runtime's committed memory - the engine floor (--gpu-headroom-mib
  + the static region). The weights are funded first, up to --vram-weights-mib, and the KV
  cache gets what is left, up to --vram-kv-mib, in 256 KiB blocks: so a wider step squeezes the
  KV cache, then the experts; weights that do not fit move to the host pool, then to the disk
  tier. (The seed says the step comes out of "the weight tiers and the KV cache"; the order is
  the simulator's assumption.)
- full-length sessions = (kv - fixed) / (max_model_len * rate + per_seq), floored to 0.1; the
  boot is refused (`E startup stopped: out of memory`) when that is below one: the KV cache
  cannot hold one full-length sequence. The pool contract itself (capacity.pool_contract) is
  enforced per request by the endpoint, not here: a pool that fails it still boots.
- settled free = fundable - what was funded + the floor, less the driver's lazy 120.81 MiB where
  the card has twice that above the floor; so the reference settles at 2.01 GiB free and a pair
  at its ceiling (30,969 MiB) settles at about 330 MiB free (constants.AT_CEILING_WORST_FREE_MIB).
- slab: resident expert slots = weights in VRAM x SLAB_SLOTS_PER_STEP / SLAB_MIB_PER_STEP; the
  host pool holds the next --host-pool-mib of weights, the rest is stranded on the disk tier.
- the ledger mover lends the KV memory the worst case never uses (kv - contract) to the experts;
  with nothing to lend it prints `expert prefetch 0 B, no lender`.
- sampler rows = seqs x (1 + spec); over constants.SAMPLER_ROW_BOUND the boot is refused.

What the laws do not reproduce: the seed's 65,536-token boot also reports "experts squeezed to
10.98 GiB, 56 GiB of weights stranded on the disk tier" without the pair it ran; with the 271.25
MiB KV cache on the 31.86 GiB card those cannot hold in one boot under these laws, so the
simulator's campaign rig (fleet.DEFAULT_SERVICES) reproduces the arena, claimable and refusal
figures, and the squeeze and stranding only in direction (tests/sim/test_sim_engine.py).

With several cards (--tp N) each card has its table and settled line; ``Shape.card_extra_mib``
charges extra memory to chosen cards (a display, a second context) so their ceilings differ.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal
from functools import cached_property

from radiance_mcp.core.constants import (
    ARENA_POINTS_MIB,
    CLAIMABLE_POINTS_MIB,
    DEFAULT_MODEL,
    KV_DTYPES,
    MIB,
    SAMPLER_ROW_BOUND,
    SEED_CARD_TOTAL_MIB,
    SEED_HEADROOM_MIB,
    SEED_HOST_POOL_MIB,
    SEED_KV_MIB,
    SEED_MAX_MODEL_LEN,
    SEED_MNBT,
    SEED_SEQS,
    SEED_SETTLED_FREE_MIB,
    SEED_SPEC,
    SEED_STATIC_REGION_MIB,
    SEED_UNCLAIMED_MIB,
    SEED_WEIGHTS_MIB,
    SLAB_MIB_PER_STEP,
    SLAB_SLOTS_PER_STEP,
    KVDtype,
    ModelConstants,
)
from radiance_mcp.core.errors import InputError
from radiance_mcp.core.ledger import render
from radiance_mcp.core.rules.capacity import PoolContract, pool_contract
from radiance_mcp.core.units import round_down
from radiance_mcp.sim.calibration import KV_BLOCK_MIB, LAZY_DRIVER_MIB

# ---------------------------------------------------------------------------------------
# Figures derived from the seed's (one derivation each, so the reference boot reproduces them)


def _line(points: tuple[tuple[int, Decimal], ...], x: int) -> Decimal:
    """The straight line through two measured points, at x (extended beyond them)."""
    (x0, y0), (x1, y1) = points
    return y0 + (y1 - y0) * Decimal(x - x0) / Decimal(x1 - x0)


_ARENA_POINTS = tuple((mnbt, Decimal(str(mib))) for mnbt, mib in ARENA_POINTS_MIB)
_STEP_BUFFER_POINTS = tuple(
    (mnbt, SEED_CARD_TOTAL_MIB - claimable - arena)
    for (mnbt, claimable), (_, arena) in zip(CLAIMABLE_POINTS_MIB, _ARENA_POINTS, strict=True)
)
"""509.76 MiB at MNBT 1,024 and 4,464.64 MiB at 65,536: what claimable loses beyond the arena."""
SEED_FLOOR_MIB = SEED_HEADROOM_MIB + SEED_STATIC_REGION_MIB
RUNTIME_COMMITTED_MIB = (
    CLAIMABLE_POINTS_MIB[0][1] - (SEED_WEIGHTS_MIB + SEED_KV_MIB) - SEED_SETTLED_FREE_MIB - LAZY_DRIVER_MIB
)
"""311.83 MiB: what the reference boot's claimable, pair and settled free leave for the runtime."""
UNUSABLE_MIB = SEED_UNCLAIMED_MIB - SEED_FLOOR_MIB
"""268.11 MiB: the `unclaimed` row less the floor (the row is headroom + static + unusable)."""
SLOT_MIB = Decimal(SLAB_MIB_PER_STEP) / Decimal(SLAB_SLOTS_PER_STEP)


def arena_mib(max_num_batched_tokens: int) -> Decimal:
    """The activation arena for a step width: 1,024 -> 504 MiB, 65,536 -> 10.65 GiB (seed)."""
    return max(Decimal(0), _line(_ARENA_POINTS, max_num_batched_tokens))


def step_buffers_mib(max_num_batched_tokens: int) -> Decimal:
    """What the step costs the card beyond the arena, fitted to the seed's claimable points."""
    return max(Decimal(0), _line(_STEP_BUFFER_POINTS, max_num_batched_tokens))


def slots(mib: Decimal) -> int:
    """Expert slots held by so many MiB: SLAB_SLOTS_PER_STEP per SLAB_MIB_PER_STEP, floored."""
    return round_down(mib / SLOT_MIB)


def fmt_size(mib: Decimal) -> str:
    """A size as radiance prints it: '31.86 GiB', '504.00 MiB', '0 B' (two decimals, GiB from 1 GiB)."""
    if mib == 0:
        return "0 B"
    if mib >= 1024:
        return f"{mib / 1024:.2f} GiB"
    if mib >= 1:
        return f"{mib:.2f} MiB"
    return f"{mib * 1024:.2f} KiB"


def _floor_to(value: Decimal, step: Decimal) -> Decimal:
    return (value / step).to_integral_value(rounding=ROUND_FLOOR) * step


# ---------------------------------------------------------------------------------------
# The shape


@dataclass(frozen=True)
class Shape:
    """A serving shape: the flags an operator states and the card they run on.

    Every default is the PHRASEBOOK section 8 boot (frank-archon). The budgets are per card;
    weights_total_mib is the model's weights per card (its shard with --tp), which the VRAM
    tier, the host pool and the disk tier share.
    """

    name: str = "frank-archon"
    card_total_mib: Decimal = SEED_CARD_TOTAL_MIB
    tp: int = 1
    vram_weights_mib: int = SEED_WEIGHTS_MIB
    vram_kv_mib: int = SEED_KV_MIB
    seqs: int = SEED_SEQS
    max_model_len: int = SEED_MAX_MODEL_LEN
    max_num_batched_tokens: int = SEED_MNBT
    kv_cache_dtype: KVDtype = "fp8"
    spec: int = SEED_SPEC
    gpu_headroom_mib: int = SEED_HEADROOM_MIB
    host_pool_mib: int = SEED_HOST_POOL_MIB
    placement: str = "slab"
    weights_total_mib: int = SEED_WEIGHTS_MIB + SEED_HOST_POOL_MIB
    """Default: the reference's VRAM tier plus its host pool, so nothing is stranded on disk."""
    card_extra_mib: tuple[Decimal, ...] = ()
    """Extra memory charged to card 0, 1, ... (missing entries: none)."""
    model: ModelConstants = field(default=DEFAULT_MODEL, compare=False)

    def __post_init__(self) -> None:
        problems = []
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", self.name):
            problems.append("name must be letters, digits, '.', '_' or '-' (it is echoed in 'radiance boot: NAME')")
        for name in ("tp", "seqs", "max_model_len", "max_num_batched_tokens"):
            if getattr(self, name) < 1:
                problems.append(f"{name}={getattr(self, name)} must be at least 1")
        for name in ("vram_weights_mib", "vram_kv_mib", "spec", "gpu_headroom_mib", "host_pool_mib",
                     "weights_total_mib"):
            if getattr(self, name) < 0:
                problems.append(f"{name}={getattr(self, name)} must not be negative")
        if self.kv_cache_dtype not in KV_DTYPES:
            problems.append(f"kv_cache_dtype={self.kv_cache_dtype!r}: radiance takes only bf16 or fp8")
        if self.vram_weights_mib + self.vram_kv_mib > self.card_total_mib:
            problems.append(
                f"the pair {self.vram_weights_mib} + {self.vram_kv_mib} MiB is more than the card's "
                f"{self.card_total_mib} MiB"
            )
        if len(self.card_extra_mib) > self.tp:
            problems.append(f"card_extra_mib names {len(self.card_extra_mib)} cards but tp={self.tp}")
        if any(Decimal(extra) < 0 for extra in self.card_extra_mib):
            problems.append("card_extra_mib entries must not be negative")
        if problems:
            raise InputError(f"Shape {self.name!r}: " + "; ".join(problems))

    @property
    def pair_mib(self) -> int:
        return self.vram_weights_mib + self.vram_kv_mib

    @property
    def floor_mib(self) -> Decimal:
        """The engine floor: --gpu-headroom-mib plus the static region."""
        return self.gpu_headroom_mib + SEED_STATIC_REGION_MIB

    def flags(self) -> dict[str, str]:
        """The flags the boot echoes, in the order radiance echoes them."""
        return {
            "max-model-len": str(self.max_model_len),
            "max-num-seqs": str(self.seqs),
            "max-num-batched-tokens": str(self.max_num_batched_tokens),
            "host-pool-mib": str(self.host_pool_mib),
            "tp": str(self.tp),
            "kv-cache-dtype": self.kv_cache_dtype,
            "placement": self.placement,
            "vram-weights-mib": str(self.vram_weights_mib),
            "vram-kv-mib": str(self.vram_kv_mib),
            "gpu-headroom-mib": str(self.gpu_headroom_mib),
        }


# ---------------------------------------------------------------------------------------
# The figures of one boot


@dataclass(frozen=True)
class CardFigures:
    card: int
    total_mib: Decimal
    extra_mib: Decimal
    fundable_mib: Decimal
    """Claimable less the runtime, this card's extra and the floor: what weights and KV may take."""
    weights_mib: Decimal
    """Weights funded in VRAM (at most --vram-weights-mib)."""
    kv_mib: Decimal
    """KV cache funded (at most --vram-kv-mib)."""
    unclaimed_mib: Decimal
    headroom_mib: Decimal
    static_mib: Decimal
    floor_mib: Decimal
    free_mib: Decimal
    """Free memory once the boot settled (printed only when the boot was not refused)."""
    lazy_mapped: bool
    """Whether the driver mapped its lazy part on this card."""
    ceiling_mib: int
    """(free - floor) + the stated pair, rounded down: the model's own ceiling for this card."""


@dataclass(frozen=True)
class BootFigures:
    """Every figure one boot of a shape prints, in MiB unless named otherwise."""

    shape: Shape
    arena_mib: Decimal
    step_buffers_mib: Decimal
    claimable_mib: Decimal
    cards: tuple[CardFigures, ...]
    binding_card: int
    """The card with the least to fund: its weights, KV and sessions are the ones printed."""
    weights_vram_mib: Decimal
    weights_host_mib: Decimal
    weights_disk_mib: Decimal
    slab_slots: int
    host_pool_slots: int
    kv_mib: Decimal
    sessions: Decimal
    """Full-length sessions the KV cache holds, floored to 0.1."""
    backing_percent: int
    backs_seqs: int
    """Sequences backed all at max_model_len at once: min(seqs, whole sessions)."""
    lend_mib: Decimal
    lend_slots: int
    sampler_rows: int
    contract: PoolContract
    """The pool contract of the funded KV cache at the shape (enforced by the endpoint, per request)."""
    weights_squeezed: bool
    kv_squeezed: bool
    refused: bool
    refusal: str | None
    """Why the boot stopped: 'out of memory' or the sampler's row bound; None when it serves."""

    @property
    def ceiling_mib(self) -> int:
        """The smallest card ceiling: it binds every card."""
        return min(card.ceiling_mib for card in self.cards)

    @property
    def rate_bytes_per_token(self) -> int:
        return self.shape.model.rate_bytes_per_token[self.shape.kv_cache_dtype]


def boot_figures(shape: Shape) -> BootFigures:
    """Apply the engine's laws (module docstring) to a shape."""
    model = shape.model
    arena = arena_mib(shape.max_num_batched_tokens)
    step = step_buffers_mib(shape.max_num_batched_tokens)
    claimable = max(Decimal(0), shape.card_total_mib - arena - step)
    rate = model.rate_bytes_per_token[shape.kv_cache_dtype]
    session_mib = Decimal(shape.max_model_len * rate) / MIB + model.per_seq_mib

    cards = [_card_figures(shape, number, claimable) for number in range(shape.tp)]
    binding = min(cards, key=lambda c: (c.fundable_mib, c.card))
    weights, kv = binding.weights_mib, binding.kv_mib

    rest = max(Decimal(0), Decimal(shape.weights_total_mib) - weights)
    host = min(Decimal(shape.host_pool_mib), rest)
    disk = rest - host

    whole_sessions = max(Decimal(0), (kv - model.fixed_mib) / session_mib)
    sessions = _floor_to(whole_sessions, Decimal("0.1"))
    percent = min(100, round_down(100 * whole_sessions / shape.seqs))
    contract = pool_contract(kv, shape.seqs, shape.max_model_len, shape.kv_cache_dtype, model)
    lend = max(Decimal(0), contract.margin_mib)
    rows = shape.seqs * (1 + shape.spec)
    refusal = _refusal(shape, sessions, rows)
    return BootFigures(
        shape=shape,
        arena_mib=arena,
        step_buffers_mib=step,
        claimable_mib=claimable,
        cards=tuple(cards),
        binding_card=binding.card,
        weights_vram_mib=weights,
        weights_host_mib=host,
        weights_disk_mib=disk,
        slab_slots=slots(weights),
        host_pool_slots=slots(host),
        kv_mib=kv,
        sessions=sessions,
        backing_percent=percent,
        backs_seqs=min(shape.seqs, int(sessions)),
        lend_mib=lend,
        lend_slots=slots(lend),
        sampler_rows=rows,
        contract=contract,
        weights_squeezed=weights < shape.vram_weights_mib,
        kv_squeezed=kv < shape.vram_kv_mib,
        refused=refusal is not None,
        refusal=refusal,
    )



def _card_figures(shape: Shape, number: int, claimable: Decimal) -> CardFigures:
    """One card of the tensor-parallel group: what it funds, weights first, then the KV pool in
    whole blocks; what stays free (less the lazily mapped driver pages when there is room)."""
    floor = shape.floor_mib
    extra = Decimal(shape.card_extra_mib[number]) if number < len(shape.card_extra_mib) else Decimal(0)
    fundable = max(Decimal(0), claimable - RUNTIME_COMMITTED_MIB - extra - floor)
    weights = min(Decimal(shape.vram_weights_mib), fundable)
    kv = _floor_to(min(Decimal(shape.vram_kv_mib), fundable - weights), KV_BLOCK_MIB)
    raw_free = fundable - weights - kv + floor
    lazy = raw_free >= floor + 2 * LAZY_DRIVER_MIB
    free = raw_free - LAZY_DRIVER_MIB if lazy else raw_free
    return CardFigures(
        card=number,
        total_mib=shape.card_total_mib,
        extra_mib=extra,
        fundable_mib=fundable,
        weights_mib=weights,
        kv_mib=kv,
        unclaimed_mib=floor + UNUSABLE_MIB,
        headroom_mib=Decimal(shape.gpu_headroom_mib),
        static_mib=SEED_STATIC_REGION_MIB,
        floor_mib=floor,
        free_mib=free,
        lazy_mapped=lazy,
        ceiling_mib=round_down(free - floor + shape.pair_mib),
    )


def _refusal(shape: Shape, sessions: Decimal, rows: int) -> str | None:
    """Why the engine refuses to boot the shape: no whole session fits, or too many sampler rows."""
    if sessions < 1:
        return "out of memory"
    if rows > SAMPLER_ROW_BOUND:
        return (
            f"sampler: {shape.seqs} seqs x (1 + {shape.spec} spec) = {rows} rows, outside the "
            f"{SAMPLER_ROW_BOUND}-row wht6 exactness bound"
        )
    return None

# ---------------------------------------------------------------------------------------
# The ledger


@dataclass(frozen=True)
class EngineModel:
    """One shape's boot: its figures (``boots``) and the ledger it prints (``ledger_text()``)."""

    shape: Shape = field(default_factory=Shape)

    @cached_property
    def boots(self) -> BootFigures:
        """The figures of this shape's boot (the name the sim interface promises)."""
        return boot_figures(self.shape)

    @property
    def figures(self) -> BootFigures:
        """Alias of ``boots``."""
        return self.boots

    @property
    def refused(self) -> bool:
        """True when the boot stops (`E startup stopped: ...`) and nothing is served."""
        return self.boots.refused

    def ledger_lines(self, address: str = "0.0.0.0:8000") -> list[str]:
        """The boot's lines, each written by ledger.render() from the PHRASES table."""
        shape, f = self.shape, self.boots
        lines = [render("boot_start", name=shape.name)]
        lines += [render("flag", flag=flag, value=value) for flag, value in shape.flags().items()]
        lines += [
            render("activation_arena", size=fmt_size(f.arena_mib), mnbt=shape.max_num_batched_tokens),
            render("claimable", size=fmt_size(f.claimable_mib)),
        ]
        for card in f.cards:
            lines += [
                render("budget_header", card=card.card),
                render("card_total", size=fmt_size(card.total_mib)),
                render("vram_weights", size=fmt_size(Decimal(shape.vram_weights_mib))),
                render("vram_kv", size=fmt_size(Decimal(shape.vram_kv_mib))),
                render("unclaimed", size=fmt_size(card.unclaimed_mib)),
                render(
                    "budgets_total",
                    budgets=fmt_size(Decimal(shape.pair_mib)),
                    total=fmt_size(card.total_mib),
                    unaccounted=fmt_size(card.total_mib - shape.pair_mib),
                ),
            ]
        lines += [
            render("weights_by_tier", vram=fmt_size(f.weights_vram_mib), host=fmt_size(f.weights_host_mib),
                   disk=fmt_size(f.weights_disk_mib)),
            render("slab_slots", slots=f.slab_slots, host=f.host_pool_slots),
            render("ledger_mover", slots=f.lend_slots, size=fmt_size(f.lend_mib)),
        ]
        if f.lend_slots == 0:
            lines.append(render("no_lender"))
        else:
            lines.append(render("expert_prefetch", size=fmt_size(f.lend_mib), lender=", lender: the KV cache"))
        lines.append(
            render(
                "kv_backing",
                level="E" if f.refused else ("W" if f.backing_percent < 100 else "I"),
                size=fmt_size(f.kv_mib),
                dtype=shape.kv_cache_dtype,
                rate=f.rate_bytes_per_token,
                percent=f.backing_percent,
                seqs=shape.seqs,
                tokens=shape.max_model_len,
                sessions=f"{f.sessions:.1f}",
            )
        )
        if f.refused:
            if f.refusal == "out of memory" and f.kv_squeezed:
                lines.append(render("fix_text", arena=fmt_size(f.arena_mib), kv=fmt_size(f.kv_mib)))
            lines.append(render("startup_stopped", reason=f.refusal))
            return lines
        lines += [
            render("backs", seqs=f.backs_seqs, tokens=shape.max_model_len),
            render("sampler", seqs=shape.seqs, spec=shape.spec, rows=f.sampler_rows),
        ]
        lines += [
            render(
                "settled",
                card=card.card,
                free=fmt_size(card.free_mib),
                floor=fmt_size(card.floor_mib),
                headroom=fmt_size(card.headroom_mib),
                static=fmt_size(card.static_mib),
            )
            for card in f.cards
        ]
        lines.append(render("serving", address=address))
        return lines

    def ledger_text(self, address: str = "0.0.0.0:8000") -> str:
        """The boot as radiance writes it to its log file, ending with a newline."""
        return "\n".join(self.ledger_lines(address)) + "\n"
