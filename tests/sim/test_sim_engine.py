"""The engine model against every seed figure, and its ledger read back by the real reader."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from radiance_mcp.core import ledger
from radiance_mcp.core.boot import Boot
from radiance_mcp.core.constants import (
    AT_CEILING_WORST_FREE_MIB,
    SAMPLER_ROW_BOUND,
    SEED_POOL_SLOTS,
    SEED_SLAB_SLOTS,
    SLAB_MIB_PER_STEP,
    SLAB_SLOTS_PER_STEP,
    WORKED_CEILING_MIB,
    WORKED_PAIR_MIB,
)
from radiance_mcp.core.errors import InputError
from radiance_mcp.core.rules import capacity
from radiance_mcp.core.units import parse_size
from radiance_mcp.sim import EngineModel, Shape
from radiance_mcp.sim.engine import RUNTIME_COMMITTED_MIB, arena_mib, fmt_size
from radiance_mcp.sim.fleet import CAMPAIGN_WEIGHTS_MIB, DEFAULT_SERVICES
from radiance_mcp.sources.config import EXAMPLES_DIR

REFERENCE = EngineModel(Shape())
CAMPAIGN = {spec.name: spec.shape for spec in DEFAULT_SERVICES}


def _read(model: EngineModel) -> Boot:
    return ledger.read_text(model.ledger_text(), source=model.shape.name)


def _printed(model: EngineModel, key: str, name: str = "size") -> str:
    hit = _read(model).require(key)
    return hit.raw(name, "sim")


# ---------------------------------------------------------------------------------------
# The reference boot (PHRASEBOOK sections 1, 2 and 8)


@pytest.mark.parametrize(
    ("key", "name", "seed"),
    [
        ("card_total", "size", "31.86 GiB"),
        ("vram_weights", "size", "23.44 GiB"),  # 24,000 MiB
        ("vram_kv", "size", "5.00 GiB"),  # 5,120 MiB
        ("unclaimed", "size", "477.30 MiB"),
        ("budgets_total", "budgets", "28.44 GiB"),  # 29,120 MiB
        ("budgets_total", "unaccounted", "3.42 GiB"),  # 31.86 GiB - 28.44 GiB
        ("activation_arena", "size", "504.00 MiB"),  # MNBT 1,024
        ("claimable", "size", "30.87 GiB"),
        ("settled", "free", "2.01 GiB"),
        ("settled", "floor", "209.19 MiB"),  # 96 + 113.19
        ("settled", "headroom", "96.00 MiB"),
        ("settled", "static", "113.19 MiB"),
        ("kv_backing", "percent", "100"),  # 5,120 >= 3,524.45 (fp8, 2 x 200,000)
        ("kv_backing", "sessions", "3.0"),  # (5,120 - 448) / (1,428.22 + 110) = 3.04
        ("backs", "seqs", "2"),
        ("backs", "tokens", "200000"),
        ("sampler", "rows", "8"),  # 2 x (1 + 3)
    ],
)
def test_reference_boot_prints_the_seed_figures(key: str, name: str, seed: str) -> None:
    assert _printed(REFERENCE, key, name) == seed


def test_reference_boot_echoes_the_example_flags_and_phrases() -> None:
    example = ledger.read_text((EXAMPLES_DIR / "frank-archon.log").read_text(), source="example")
    simulated = _read(REFERENCE)
    assert {k: h.fields["value"] for k, h in simulated.flags.items()} == {
        k: h.fields["value"] for k, h in example.flags.items()
    }
    # Every phrase the example prints, the simulator prints too.
    assert {h.key for h in example.hits} <= {h.key for h in simulated.hits}


def test_reference_ceiling_is_the_worked_example() -> None:
    reading = capacity.read_budget(_read(REFERENCE))
    ceiling = capacity.compute_ceiling(reading)
    assert reading.cards[0].require("pair").value == WORKED_PAIR_MIB == 29_120
    assert ceiling.ceiling_mib == WORKED_CEILING_MIB == 30_969
    assert ceiling.cards[0].derivation == "29,120 + (2,058 - 209) = 30,969 MiB/card"
    assert REFERENCE.boots.ceiling_mib == 30_969  # the model's own, from unrounded figures


def test_a_pair_at_the_ceiling_settles_about_330_mib_free() -> None:
    # Grow the KV cache by the headroom: 24,000 + 6,969 = 30,969 MiB, the ceiling.
    at_ceiling = EngineModel(replace(Shape(), vram_kv_mib=5_120 + 1_849))
    assert at_ceiling.shape.pair_mib == WORKED_CEILING_MIB
    card = at_ceiling.boots.cards[0]
    assert not at_ceiling.refused
    assert card.free_mib >= card.floor_mib
    assert round(card.free_mib) == AT_CEILING_WORST_FREE_MIB  # 330.05 MiB: the driver's lazy part unmapped
    assert _printed(at_ceiling, "settled", "free") == "330.05 MiB"


def test_a_pair_past_the_ceiling_still_settles_at_or_above_the_floor() -> None:
    for kv in (7_000, 7_089, 7_200):  # past 30,969 the KV cache is squeezed, free never below the floor
        card = EngineModel(replace(Shape(), vram_kv_mib=kv)).boots.cards[0]
        assert card.free_mib >= card.floor_mib


# ---------------------------------------------------------------------------------------
# The step-shape ledger (PHRASEBOOK section 6)


@pytest.mark.parametrize(
    ("mnbt", "arena", "claimable"),
    [
        (1_024, "504.00 MiB", "30.87 GiB"),  # seed
        (65_536, "10.65 GiB", "16.85 GiB"),  # seed
    ],
)
def test_step_law_points(mnbt: int, arena: str, claimable: str) -> None:
    model = EngineModel(replace(Shape(), max_num_batched_tokens=mnbt))
    assert _printed(model, "activation_arena") == arena
    assert _printed(model, "claimable") == claimable
    assert _printed(model, "activation_arena", "mnbt") == str(mnbt)


def test_arena_grows_and_claimable_shrinks_with_the_step() -> None:
    steps = [256, 1_024, 2_048, 8_192, 32_768, 65_536, 131_072]
    boots = [EngineModel(replace(Shape(), max_num_batched_tokens=s)).boots for s in steps]
    arenas = [b.arena_mib for b in boots]
    claimables = [b.claimable_mib for b in boots]
    assert arenas == sorted(arenas) and len(set(arenas)) == len(arenas)
    assert claimables == sorted(claimables, reverse=True) and len(set(claimables)) == len(claimables)
    # Linear between the seed's points: halfway in MNBT is halfway in MiB.
    assert arena_mib((1_024 + 65_536) // 2) == (Decimal(504) + Decimal("10.65") * 1024) / 2


def test_the_wide_mode_refuses_where_the_proven_mode_boots() -> None:
    proven, wide = EngineModel(CAMPAIGN["qwen38-proven"]), EngineModel(CAMPAIGN["qwen38-wide"])
    assert proven.shape.max_model_len == wide.shape.max_model_len == 32_768  # same window
    assert not proven.refused
    assert _printed(proven, "backs", "seqs") == "8"
    assert wide.refused
    text = wide.ledger_text()
    backing = _read(wide).require("kv_backing")
    # seed: 'kv cache 271.25 MiB ... 0% backing of the 8 x 32768 worst case: 0.0 full-length sessions'
    assert backing.raw("size", "sim") == "271.25 MiB"
    assert "0% backing of the 8 x 32768 worst case: 0.0 full-length sessions" in backing.line.text
    assert "E startup stopped: out of memory" in text
    assert "expert prefetch 0 B, no lender" in text
    assert "lower --max-num-batched-tokens (the arena 10.65 GiB leaves 271.25 MiB" in text
    assert _read(wide).first("settled") is None and _read(wide).first("serving") is None
    assert wide.shape.vram_weights_mib == CAMPAIGN_WEIGHTS_MIB


def test_a_wide_step_squeezes_the_experts_and_strands_weights_on_disk() -> None:
    # The reference shape with a model too big for its host pool, at the wide step.
    big = replace(Shape(), weights_total_mib=90_000)
    narrow, wide = EngineModel(big).boots, EngineModel(replace(big, max_num_batched_tokens=65_536)).boots
    assert narrow.weights_vram_mib == 24_000 and not narrow.weights_squeezed
    assert wide.kv_mib < narrow.kv_mib  # the KV cache goes first
    squeezed = EngineModel(replace(big, max_num_batched_tokens=65_536, vram_weights_mib=20_000)).boots
    assert squeezed.weights_squeezed and squeezed.weights_vram_mib < 20_000
    assert squeezed.weights_disk_mib > narrow.weights_disk_mib
    assert squeezed.slab_slots < narrow.slab_slots


def test_vram_kv_below_one_full_length_sequence_refuses() -> None:
    # fp8, 200,000 tokens: one session is 1,428.22 + 110 MiB on top of 448 fixed = 1,986.22 MiB.
    assert not EngineModel(replace(Shape(), vram_kv_mib=1_987)).refused
    refused = EngineModel(replace(Shape(), vram_kv_mib=1_986))
    assert refused.refused and refused.boots.refusal == "out of memory"
    assert "lower --max-num-batched-tokens" not in refused.ledger_text()  # the step did not cause it


def test_a_pool_below_its_contract_boots_and_backs_fewer_sequences() -> None:
    lowpool = EngineModel(CAMPAIGN["lowpool"])  # 3,000 MiB < 3,524.45 required
    assert not lowpool.refused
    assert not lowpool.boots.contract.ok
    boot = _read(lowpool)
    assert boot.require("backs").raw("seqs", "sim") == "1"
    assert boot.require("kv_backing").raw("percent", "sim") == "82"  # (3,000 - 448) / 1,538.22 = 1.65 of 2
    assert boot.require("kv_backing").line.text.startswith("W ")


# ---------------------------------------------------------------------------------------
# Slab, experts and the KV cache (PHRASEBOOK section 4)


def test_slab_slope_and_the_host_pool_hands_back_the_same_slots() -> None:
    # Weights enough for the slab and a pool that holds the rest: the seed's 25,128 slots in all.
    total_mib = round(sum((SEED_SLAB_SLOTS[0], SEED_POOL_SLOTS[0])) * SLAB_MIB_PER_STEP / SLAB_SLOTS_PER_STEP)
    base = replace(Shape(), vram_weights_mib=22_208, vram_kv_mib=5_120, weights_total_mib=total_mib,
                   host_pool_mib=20_000)
    small, large = EngineModel(base).boots, EngineModel(replace(base, vram_weights_mib=22_208 + 1_792)).boots
    assert abs(large.slab_slots - small.slab_slots - SLAB_SLOTS_PER_STEP) <= 1  # 1,300 slots per 1,792 MiB
    assert abs(small.host_pool_slots - large.host_pool_slots - SLAB_SLOTS_PER_STEP) <= 1  # handed back
    assert abs(small.slab_slots + small.host_pool_slots - sum((SEED_SLAB_SLOTS[0], SEED_POOL_SLOTS[0]))) <= 1


def test_ledger_mover_lends_what_the_worst_case_never_uses() -> None:
    figures = REFERENCE.boots
    assert figures.lend_mib == Decimal(5_120) - figures.contract.required_mib  # 5,120 - 3,524.45
    assert _read(REFERENCE).require("ledger_mover").raw("slots", "sim") == str(figures.lend_slots)


def test_sampler_rows_past_the_bound_refuse() -> None:
    model = EngineModel(replace(Shape(), seqs=8, max_model_len=32_768, spec=3))  # 8 x 4 = 32 rows
    assert model.refused
    boot = _read(model)
    assert boot.require("sampler").raw("rows", "sim") == "32"
    assert f"outside the {SAMPLER_ROW_BOUND}-row" in boot.require("startup_stopped").line.text


# ---------------------------------------------------------------------------------------
# Several cards


def test_two_cards_print_two_tables_and_the_card_with_more_charged_binds() -> None:
    twin = EngineModel(CAMPAIGN["twin"])  # --tp 2, card 1 carries 64 MiB more
    reading = capacity.read_budget(_read(twin))
    assert [c.card for c in reading.cards] == [0, 1]
    ceiling = capacity.compute_ceiling(reading)
    assert [c.ceiling_mib for c in twin.boots.cards] == [30_969, 30_969 - 64]  # the model's own
    # Read from the ledger: card 1's free prints as 1.95 GiB (1,994.24 MiB exact), so within +-5.12 MiB.
    assert ceiling.cards[0].ceiling_mib == 30_969
    assert abs(ceiling.cards[1].ceiling_mib - 30_905) <= 6
    assert ceiling.binding_card == 1 and twin.boots.binding_card == 1


# ---------------------------------------------------------------------------------------
# Shapes that are not shapes


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"seqs": 0}, "seqs=0"),
        ({"vram_kv_mib": -1}, "vram_kv_mib=-1"),
        ({"kv_cache_dtype": "int8"}, "bf16 or fp8"),
        ({"vram_weights_mib": 30_000, "vram_kv_mib": 5_000}, "more than the card"),
        ({"card_extra_mib": (Decimal(1), Decimal(2))}, "tp=1"),
        ({"name": "two words"}, "name must be"),
    ],
)
def test_shape_validation(change: dict[str, object], words: str) -> None:
    with pytest.raises(InputError, match=words):
        replace(Shape(), **change)  # type: ignore[arg-type]


def test_runtime_and_sizes() -> None:
    assert RUNTIME_COMMITTED_MIB == Decimal("311.83")  # 31,610.88 - 29,120 - 2,058.24 - 120.81
    assert [fmt_size(Decimal(v)) for v in ("0", "0.5", "504", "1024", "32624.64")] == [
        "0 B", "512.00 KiB", "504.00 MiB", "1.00 GiB", "31.86 GiB",
    ]


# ---------------------------------------------------------------------------------------
# Property: the ledger, read back by the parser, gives the model's own figures


@st.composite
def shapes(draw: st.DrawFn) -> Shape:
    card = Decimal(draw(st.integers(8_192, 81_920)))
    weights = draw(st.integers(0, int(card) - 1))
    kv = draw(st.integers(0, int(card) - weights))
    tp = draw(st.integers(1, 3))
    extras = tuple(Decimal(draw(st.integers(0, 512))) for _ in range(draw(st.integers(0, tp))))
    return Shape(
        name=draw(st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True)),
        card_total_mib=card,
        tp=tp,
        vram_weights_mib=weights,
        vram_kv_mib=kv,
        seqs=draw(st.integers(1, 16)),
        max_model_len=draw(st.integers(512, 400_000)),
        max_num_batched_tokens=draw(st.integers(128, 131_072)),
        kv_cache_dtype=draw(st.sampled_from(["fp8", "bf16"])),
        spec=draw(st.integers(0, 4)),
        gpu_headroom_mib=draw(st.integers(0, 2_048)),
        host_pool_mib=draw(st.integers(0, 40_000)),
        weights_total_mib=draw(st.integers(0, 120_000)),
        card_extra_mib=extras,
    )


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes())
def test_ledger_round_trip(shape: Shape) -> None:
    model = EngineModel(shape)
    figures = model.boots
    boot = ledger.read_text(model.ledger_text(), source="sim")
    src = boot.where()

    assert {name: hit.fields["value"] for name, hit in boot.flags.items()} == shape.flags()
    assert boot.require("boot_start").fields["name"] == shape.name
    for key, expected in (("activation_arena", figures.arena_mib), ("claimable", figures.claimable_mib)):
        assert boot.require(key).size("size", src).agrees_with(expected), key
    tiers = boot.require("weights_by_tier")
    for name, expected in (("vram", figures.weights_vram_mib), ("host", figures.weights_host_mib),
                           ("disk", figures.weights_disk_mib)):
        assert tiers.size(name, src).agrees_with(expected), name
    slab = boot.require("slab_slots")
    assert (slab.number("slots", src), slab.number("host", src)) == (figures.slab_slots, figures.host_pool_slots)
    backing = boot.require("kv_backing")
    assert backing.size("size", src).agrees_with(figures.kv_mib)
    assert backing.number("percent", src) == figures.backing_percent
    assert backing.number("sessions", src) == figures.sessions
    assert (backing.number("seqs", src), backing.number("tokens", src)) == (shape.seqs, shape.max_model_len)
    assert len(boot.all("budget_header")) == shape.tp

    if model.refused:
        assert boot.first("startup_stopped") is not None
        assert boot.first("settled") is None
        return
    assert boot.first("startup_stopped") is None
    assert boot.require("backs").number("seqs", src) == figures.backs_seqs
    assert boot.require("sampler").number("rows", src) == figures.sampler_rows
    reading = capacity.read_budget(boot)
    assert len(reading.cards) == shape.tp
    ceiling = capacity.compute_ceiling(reading)
    for card, read, computed in zip(figures.cards, reading.cards, ceiling.cards, strict=True):
        assert read.require("pair").value == shape.pair_mib and not read.disagreements
        assert read.require("free_mib").agrees_with(card.free_mib)
        assert read.require("floor_mib").agrees_with(card.floor_mib)
        assert card.free_mib >= card.floor_mib
        # The ceiling from printed figures is the model's own within the print rounding of free and floor.
        slack = (read.require("free_mib").resolution + read.require("floor_mib").resolution) / 2 + 1
        assert abs(computed.ceiling_mib - card.ceiling_mib) <= slack
    assert parse_size(fmt_size(figures.claimable_mib)).agrees_with(figures.claimable_mib)
