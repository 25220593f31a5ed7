"""compare_arms: measured arms of one knob against the noise band (core/planning.py judges the claim)."""

from __future__ import annotations

from radiance_mcp.core import planning
from radiance_mcp.core.constants import MIN_ARMS_FOR_THRESHOLD
from radiance_mcp.models.plan import ArmStepOutput, ClaimOutput, CompareArmsInput, CompareArmsOutput
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools.registry import ToolFamily

FAMILY = ToolFamily()


@FAMILY.tool("Compare measured arms against the noise")
async def compare_arms(runtime: Runtime, args: CompareArmsInput) -> CompareArmsOutput:
    """Compare measured arms of one knob against the noise band.

    When: before a law or prediction from a campaign. Rule: a change inside the band (default 3 %)
    is noise; a plateau or threshold needs three arms.
    """
    comparison = planning.compare_arms(
        [planning.Arm(a.value, a.rate) for a in args.arms], args.noise_band_pct, args.claim, args.claim_arms
    )
    band = f"+-{args.noise_band_pct:g} %"
    steps = []
    for s in comparison.steps:
        pair = f"{planning.fmt_value(s.low.value)} -> {planning.fmt_value(s.high.value)}"
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
        inside_noise=[f"{planning.fmt_value(s.low.value)} and {planning.fmt_value(s.high.value)}"
                      for s in comparison.steps if s.inside_noise],
        span_pct=round(comparison.span_pct, 2),
        claim=None if claim is None else ClaimOutput(
            claim=claim.claim, arms=list(claim.arms), verdict=claim.verdict, reason=claim.reason, rule=claim.rule,
            remedy=claim.remedy, measure_next=claim.measure_next,
        ),
        ok=claim is None or claim.verdict == "supported",
        notes=notes,
    )
