"""step_shape.audit: the seed's pair row by row, the diagnosis, the seat check, the two-point slope."""

from __future__ import annotations

from decimal import Decimal

import pytest

from radiance_mcp.core.audit.step_shape import STEP_FLAGS, StepShapeAudit, audit, read_shape
from radiance_mcp.core.constants import ARENA_POINTS_MIB, DEFAULT_MODEL
from radiance_mcp.core.errors import LedgerError
from radiance_mcp.core.ledger import read_text
from radiance_mcp.core.rules.capacity import pool_contract
from radiance_mcp.sim import EngineModel, Shape


def _audit(proven: str, candidate: str) -> StepShapeAudit:
    return audit(read_text(proven, source="proven"), read_text(candidate, source="candidate"), DEFAULT_MODEL)


def _row(result: StepShapeAudit, label: str) -> tuple[str | None, str | None, Decimal | None, bool]:
    row = next(r for r in result.rows if r.spec.label == label)
    return (
        row.proven.printed if row.proven else None,
        row.candidate.printed if row.candidate else None,
        row.delta,
        row.differs,
    )


# (row, proven as printed, candidate as printed, delta in the row's unit, differs)
SEED_ROWS = [
    ("--max-model-len", "32768", "32768", Decimal(0), False),
    ("--max-num-seqs", "8", "8", Decimal(0), False),
    ("--max-num-batched-tokens", "1024", "65536", Decimal(64_512), True),  # 65,536 - 1,024
    ("--host-pool-mib", "7580", "7580", Decimal(0), False),
    ("--tp", "1", "1", Decimal(0), False),
    ("--kv-cache-dtype", "fp8", "fp8", None, False),
    ("--placement", "slab", "slab", None, False),
    ("activation arena", "504.00 MiB", "10.65 GiB", Decimal("10401.60"), True),  # 10.65*1024 = 10,905.60 - 504
    ("claimable", "30.87 GiB", "16.85 GiB", Decimal("-14356.48"), True),  # 17,254.40 - 31,610.88
    ("vram_kv", "5.00 GiB", None, None, True),  # the refused boot prints no budget table
    ("weights by tier: VRAM", "23.44 GiB", "10.98 GiB", Decimal("-12759.04"), True),  # 11,243.52 - 24,002.56
    ("weights by tier: host pool", "10.21 GiB", "10.21 GiB", Decimal(0), False),
    ("weights by tier: container-on-disk", "0 B", "56.00 GiB", Decimal(57_344), True),  # 56 * 1024
    ("kv cache", "5.00 GiB", "271.25 MiB", Decimal("-4848.75"), True),  # 271.25 - 5,120
    ("kv backing of the worst case", "100%", "0%", Decimal(-100), True),
    ("full-length sessions", "13.5", "0.0", Decimal("-13.5"), True),
    ("expert prefetch", "1.75 GiB", "0 B", Decimal(-1792), True),  # the no-lender line prints 0 B
    ("lender", "lender: the KV cache", "no lender", None, True),
    ("startup stopped", None, "out of memory", None, True),
]


@pytest.mark.parametrize(("label", "proven", "candidate", "delta", "differs"), SEED_ROWS)
def test_seed_pair_rows(
    proven_text: str, refused_text: str, label: str, proven: str | None, candidate: str | None,
    delta: Decimal | None, differs: bool,
) -> None:
    result = _audit(proven_text, refused_text)
    got = _row(result, label)
    assert got[:2] == (proven, candidate)
    assert (got[2] is None) == (delta is None)
    if delta is not None:
        assert got[2] is not None and got[2].quantize(Decimal("0.01")) == delta
    assert got[3] is differs


def test_seed_pair_verdict_flags_and_remedy(proven_text: str, refused_text: str) -> None:
    result = _audit(proven_text, refused_text)
    assert result.verdict == "refused"
    assert result.proven.status == "booted" and result.candidate.status == "refused"
    assert [r.spec.label for r in result.flag_changes] == ["--max-num-batched-tokens"]
    assert result.inherit == {"--max-num-batched-tokens": "1024"}
    assert "inherit the proven numbers (--max-num-batched-tokens 1024)" in result.remedy[0]
    assert any("--dry-run" in step for step in result.remedy)
    assert "--max-num-batched-tokens 1024 (line 4) -> 65536 (line 4)" in result.diagnosis[0]


def test_seed_pair_diagnosis_prices_the_arena(proven_text: str, refused_text: str) -> None:
    text = "\n".join(_audit(proven_text, refused_text).diagnosis)
    assert "the activation arena grew by 10.16 GiB (504.00 MiB -> 10.65 GiB" in text  # 10,401.60 MiB
    assert "claimable fell by 14.02 GiB (30.87 GiB -> 16.85 GiB)" in text  # 14,356.48 MiB
    assert "the experts' VRAM tier fell by 12.46 GiB (23.44 GiB -> 10.98 GiB)" in text  # 12,759.04 MiB
    assert "56.00 GiB of weights stranded on the disk tier" in text
    assert "the KV cache fell by 4.74 GiB (5.00 GiB -> 271.25 MiB)" in text  # 4,848.75 MiB
    assert "expert prefetch 0 B / no lender" in text


def test_seed_pair_seat_check_names_the_oom_cause(proven_text: str, refused_text: str) -> None:
    result = _audit(proven_text, refused_text)
    check = result.candidate_seats
    assert check is not None
    assert (check.seats, check.window_tokens, check.dtype) == (8, 32_768, "fp8")
    assert check.kv.printed == "271.25 MiB"
    # one sequence: 32,768 x 7,488 B = 234.00 MiB + 110 + 448 = 792.00 MiB
    assert check.one_sequence_mib == Decimal(792)
    # eight seats: 8 x 234.00 + 110 x 8 + 448 = 3,200.00 MiB (PHRASEBOOK: fp8, 8 x 32,768 -> 3,200.00)
    assert check.seats_mib == pool_contract(Decimal(0), 8, 32_768, "fp8", DEFAULT_MODEL).required_mib == 3200
    assert check.below_one_sequence and check.below_seats
    proven = result.proven_seats
    assert proven is not None and proven.kv.quantity == 5120 and not proven.below_seats
    line = next(d for d in result.diagnosis if "below one full-length sequence" in d)
    assert "271.25 MiB funded against 792 MiB for one sequence of 32,768 tokens" in line  # whole: no '.00' (units)
    assert "3,200 MiB for the 8 seats asked" in line
    assert "the out-of-memory cause, even though the proven shape booted at the same window" in line


def test_seed_pair_quotes_refusal_and_fix_text(proven_text: str, refused_text: str) -> None:
    result = _audit(proven_text, refused_text)
    text = "\n".join(result.diagnosis)
    assert "0% backing of the 8 x 32768 worst case: 0.0 full-length sessions" in text
    assert "'startup stopped: out of memory'" in text
    assert result.fix_text is not None
    assert result.fix_text.printed == (
        "lower --max-num-batched-tokens (the arena 10.65 GiB leaves 271.25 MiB for the KV cache)"
    )
    assert "vram_budget.cpp:117" in text


def test_arena_cost_is_a_two_point_estimate(proven_text: str, refused_text: str) -> None:
    slope = _audit(proven_text, refused_text).arena_slope
    assert slope is not None
    (mnbt_a, arena_a), (mnbt_b, arena_b) = ARENA_POINTS_MIB  # 1,024 -> 504; 65,536 -> 10.65 GiB
    assert (slope.proven_mnbt, slope.candidate_mnbt) == (mnbt_a, mnbt_b)
    assert float(slope.proven_arena_mib) == arena_a and float(slope.candidate_arena_mib) == pytest.approx(arena_b)
    # (10,905.60 - 504.00) / (65,536 - 1,024) = 0.16124 MiB = 165.1 KiB per token; 504 - 0.16124*1024 = 338.9
    assert round(slope.mib_per_token, 4) == Decimal("0.1612")
    assert round(slope.mib_per_token * 1024, 1) == Decimal("165.1")
    assert round(slope.intercept_mib, 1) == Decimal("338.9")
    assert slope.label == "two-point estimate" and "two-point estimate" in slope.derivation


def test_same_shape_twice() -> None:
    from radiance_mcp.core.ledger import render

    text = "\n".join([render("flag", flag=f, value="1") for f in STEP_FLAGS] + [render("claimable", size="1 GiB")])
    result = _audit(text, text)
    assert result.verdict == "same shape" and not result.flag_changes and result.arena_slope is None
    assert "no echoed step flag differs" in result.diagnosis[0]


def test_one_log_two_boots(proven_text: str, refused_text: str) -> None:
    log = proven_text + refused_text
    result = audit(read_text(log, source="log", boot=-2), read_text(log, source="log", boot=-1), DEFAULT_MODEL)
    assert result.verdict == "refused" and result.inherit == {"--max-num-batched-tokens": "1024"}
    assert result.candidate.boot.index == 2 and result.proven.boot.index == 1


def test_a_log_without_step_lines_is_refused() -> None:
    with pytest.raises(LedgerError, match="none of the step-shape lines"):
        read_shape(read_text("I serving on 0.0.0.0:8000\n", source="x"))


# ---------------------------------------------------------------------------------------
# Boots from the simulator: the seed's pair at 8 x 32,768 (spec 2: 8 x 3 = 24 sampler rows, inside 25)

SIM_PROVEN = Shape(seqs=8, max_model_len=32_768, spec=2)
SIM_WIDE = Shape(seqs=8, max_model_len=32_768, spec=2, max_num_batched_tokens=65_536)


def test_simulated_pair() -> None:
    proven, wide = EngineModel(SIM_PROVEN), EngineModel(SIM_WIDE)
    assert not proven.refused and wide.refused
    result = _audit(proven.ledger_text(), wide.ledger_text())
    assert result.verdict == "refused"
    assert _row(result, "activation arena")[:2] == ("504.00 MiB", "10.65 GiB")
    assert _row(result, "claimable")[:2] == ("30.87 GiB", "16.85 GiB")
    assert _row(result, "startup stopped")[1] == "out of memory"
    assert result.inherit == {"--max-num-batched-tokens": "1024"}
    check = result.candidate_seats
    assert check is not None and check.below_one_sequence
    # The funded KV is the kv cache line's (the vram_kv row still states --vram-kv-mib).
    assert check.kv.quantity == wide.boots.kv_mib
    assert result.fix_text is not None
    assert result.arena_slope is not None and round(result.arena_slope.mib_per_token, 4) == Decimal("0.1612")


@pytest.mark.parametrize("mnbt", [2_048, 8_192, 16_384])
def test_simulated_narrower_steps_still_boot_and_cost_arena(mnbt: int) -> None:
    candidate = EngineModel(Shape(seqs=8, max_model_len=32_768, spec=2, max_num_batched_tokens=mnbt))
    result = _audit(EngineModel(SIM_PROVEN).ledger_text(), candidate.ledger_text())
    assert result.verdict == ("refused" if candidate.refused else "shape differs")
    arena = next(r for r in result.rows if r.spec.label == "activation arena")
    assert arena.delta is not None and arena.delta > 0
    claimable = next(r for r in result.rows if r.spec.label == "claimable")
    assert claimable.delta is not None and claimable.delta < 0
    lender = result.candidate.get("lender")
    starved = lender is not None and lender.printed == "no lender"
    assert any("no lender" in d for d in result.diagnosis) is starved
