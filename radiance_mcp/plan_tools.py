"""The resize-planning tools: compare_arms, and plan_free_vram (what the free VRAM can buy).

Each tool reads its sources, calls the pure core (planning.py, capacity.py) and shapes the
output model; PLAN_TOOLS joins tools.TOOLS.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from radiance_mcp import planning
from radiance_mcp.constants import MIN_ARMS_FOR_THRESHOLD, NOISE_BAND
from radiance_mcp.runtime import Runtime, ToolSpec


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Output(BaseModel):
    model_config = ConfigDict(frozen=True)


def _json_list(name: str, value: Any) -> Any:
    """Clients sometimes send a list of objects as a JSON string."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{name} is a string but not JSON ({exc.msg}); pass a list") from exc
    return value


# ---------------------------------------------------------------------------------------
# compare_arms


class ArmInput(_Input):
    value: float = Field(description="The knob's setting in this arm, e.g. the slab in MiB.")
    rate: float = Field(gt=0, description="The rate measured in this arm, e.g. prefill tokens/s.")


class CompareArmsInput(_Input):
    arms: list[ArmInput] = Field(
        min_length=2, max_length=planning.MAX_ARMS,
        description="The arms: [{value, rate}, ...], one per knob value, measured with the same workload.",
    )
    knob: str = Field("value", max_length=80, description="What the value is, e.g. 'slab MiB'.")
    rate_unit: str = Field("t/s", max_length=40, description="What the rate is measured in.")
    noise_band_pct: float = Field(
        NOISE_BAND * 100, gt=0, lt=100, description="The run-to-run noise, +- percent (default 3)."
    )
    claim: Literal["plateau", "threshold"] | None = Field(
        None, description="A reading to check: 'plateau' (the rate stops moving) or 'threshold' (it steps once)."
    )
    claim_arms: list[float] = Field(
        default_factory=list, max_length=planning.MAX_ARMS,
        description="The knob values of the arms the claim rests on (default: every arm).",
    )

    @field_validator("arms", "claim_arms", mode="before")
    @classmethod
    def _json_string(cls, value: Any, info: Any) -> Any:
        return _json_list(info.field_name, value)


class ArmStepOutput(_Output):
    low_value: float
    high_value: float
    low_rate: float
    high_rate: float
    change_pct: float = Field(description="(high_rate - low_rate) / low_rate, percent: the lower value is baseline.")
    inside_noise: bool = Field(description="|change_pct| <= the band: these two arms cannot be told apart.")
    intervals_overlap: bool = Field(description="The two rates' +-band intervals overlap.")
    reading: str


class ClaimOutput(_Output):
    claim: Literal["plateau", "threshold"]
    arms: list[float]
    verdict: Literal["refused", "supported", "contradicted"]
    reason: str
    rule: str
    remedy: str | None
    measure_next: float | None = Field(description="The knob value to measure next, where one more arm helps.")


class CompareArmsOutput(_Output):
    knob: str
    rate_unit: str
    noise_band_pct: float
    steps: list[ArmStepOutput] = Field(description="Neighbouring arms, by knob value.")
    inside_noise: list[str] = Field(description="The pairs of arms that differ by no more than the band.")
    span_pct: float = Field(description="Lowest to highest rate, relative to the lowest.")
    claim: ClaimOutput | None
    ok: bool = Field(description="False when the claim is refused or contradicted.")
    notes: list[str]


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,.6g}"


async def compare_arms(runtime: Runtime, args: CompareArmsInput) -> CompareArmsOutput:
    """Compare measured arms of one knob against the noise band; refuse a plateau or threshold read off two arms.

    Give each arm's knob value and measured rate (e.g. slab MiB and prefill t/s, same
    workload). Neighbouring arms are compared, the lower value as baseline: a change within
    the band (default +-3 %) is noise, and such arms cannot be told apart. A claim
    ('plateau' or 'threshold', on claim_arms or on every arm) needs at least 3 arms: two
    arms inside the noise are not a plateau, and no threshold is read off two arms; such a
    claim is refused with the knob value to measure next. Use it before writing a law or a
    prediction from a throughput campaign.
    """
    comparison = planning.compare_arms(
        [planning.Arm(a.value, a.rate) for a in args.arms], args.noise_band_pct, args.claim, args.claim_arms
    )
    band = f"+-{args.noise_band_pct:g} %"
    steps = []
    for s in comparison.steps:
        pair = f"{_fmt(s.low.value)} -> {_fmt(s.high.value)}"
        if s.inside_noise:
            reading = f"{pair}: {s.change_pct:+.2f} %, inside the {band} band: noise"
        elif s.intervals_overlap:
            reading = (f"{pair}: {s.change_pct:+.2f} %, outside the {band} band, but the two arms' own {band} "
                       "intervals overlap: a repeat run could close it")
        else:
            reading = f"{pair}: {s.change_pct:+.2f} %, outside the {band} band"
        steps.append(ArmStepOutput(
            low_value=s.low.value, high_value=s.high.value, low_rate=s.low.rate, high_rate=s.high.rate,
            change_pct=round(s.change_pct, 2), inside_noise=s.inside_noise, intervals_overlap=s.intervals_overlap,
            reading=reading,
        ))
    claim = comparison.claim
    notes = []
    if len(comparison.arms) < MIN_ARMS_FOR_THRESHOLD:
        notes.append(f"{len(comparison.arms)} arms: enough to compare, not to read a plateau or threshold")
    return CompareArmsOutput(
        knob=args.knob,
        rate_unit=args.rate_unit,
        noise_band_pct=args.noise_band_pct,
        steps=steps,
        inside_noise=[f"{_fmt(s.low.value)} and {_fmt(s.high.value)}" for s in comparison.steps if s.inside_noise],
        span_pct=round(comparison.span_pct, 2),
        claim=None if claim is None else ClaimOutput(
            claim=claim.claim, arms=list(claim.arms), verdict=claim.verdict, reason=claim.reason, rule=claim.rule,
            remedy=claim.remedy, measure_next=claim.measure_next,
        ),
        ok=claim is None or claim.verdict == "supported",
        notes=notes,
    )


PLAN_TOOLS: list[ToolSpec] = [
    ToolSpec("compare_arms", "Compare measured arms against the noise", CompareArmsInput, CompareArmsOutput,
             compare_arms),
]
