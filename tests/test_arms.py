"""compare_arms: which arms differ beyond the noise, and no plateau or threshold off two arms."""

from __future__ import annotations

import asyncio
import json

import pytest
from mcp import Client
from shared_server import empty_fleet_server

from radiance_mcp.app.cli import main
from radiance_mcp.core.constants import MIN_ARMS_FOR_THRESHOLD, NOISE_BAND
from radiance_mcp.core.errors import InputError
from radiance_mcp.core.planning import Arm, compare_arms

# The seed's slab law (fp8, 43.5k single stream): slab MiB -> prefill t/s.
SLAB_LAW = [Arm(22_208, 3_397), Arm(24_000, 3_290), Arm(25_600, 3_584), Arm(26_071, 4_379)]


@pytest.mark.parametrize(
    ("low", "high", "change_pct", "inside", "overlap"),
    [
        # (3,290 - 3,397) / 3,397 = -107 / 3,397 = -3.15 %: just outside +-3 %; 3,397 x 0.97 = 3,295.09 <= 3,290 x 1.03
        # = 3,388.70, so the two arms' own intervals still overlap
        (22_208, 24_000, -3.15, False, True),
        # (3,584 - 3,290) / 3,290 = 294 / 3,290 = +8.94 %; 3,290 x 1.03 = 3,388.70 < 3,584 x 0.97 = 3,476.48: apart
        (24_000, 25_600, 8.94, False, False),
        # (4,379 - 3,584) / 3,584 = 795 / 3,584 = +22.18 %
        (25_600, 26_071, 22.18, False, False),
    ],
)
def test_the_slab_law_steps(low: int, high: int, change_pct: float, inside: bool, overlap: bool) -> None:
    steps = {(s.low.value, s.high.value): s for s in compare_arms(SLAB_LAW, NOISE_BAND * 100).steps}
    step = steps[(low, high)]
    assert round(step.change_pct, 2) == change_pct
    assert (step.inside_noise, step.intervals_overlap) == (inside, overlap)


def test_order_of_the_arms_does_not_matter_and_the_span_is_from_the_lowest_rate() -> None:
    shuffled = [SLAB_LAW[2], SLAB_LAW[0], SLAB_LAW[3], SLAB_LAW[1]]
    result = compare_arms(shuffled, 3.0)
    assert [a.value for a in result.arms] == [22_208, 24_000, 25_600, 26_071]
    assert round(result.span_pct, 2) == 33.10  # (4,379 - 3,290) / 3,290 = 1,089 / 3,290


@pytest.mark.parametrize(
    ("band_pct", "inside"),
    [
        (3.0, False),  # 3.15 % > 3 %
        (3.2, True),  # 3.15 % <= 3.2 %: a wider band swallows the dip
    ],
)
def test_the_band_decides(band_pct: float, inside: bool) -> None:
    assert compare_arms(SLAB_LAW[:2], band_pct).steps[0].inside_noise is inside


def test_two_arms_inside_the_noise_are_not_a_plateau() -> None:
    # 10,000 -> 10,200 t/s at knob 4 and 8: +2 %, inside +-3 %; still two arms only
    verdict = compare_arms([Arm(4, 10_000), Arm(8, 10_200)], 3.0, "plateau").claim
    assert verdict is not None and verdict.verdict == "refused"
    assert f"at least {MIN_ARMS_FOR_THRESHOLD} arms" in verdict.rule
    assert verdict.measure_next == 6  # the midpoint of 4 and 8
    assert "measure a third arm at 6" in (verdict.remedy or "")


def test_a_threshold_on_two_of_four_arms_points_at_an_arm_already_measured() -> None:
    verdict = compare_arms(SLAB_LAW, 3.0, "threshold", [25_600, 26_071]).claim
    assert verdict is not None and verdict.verdict == "refused"
    assert "already measured at 24,000" in (verdict.remedy or "")  # the nearest other arm to the pair
    assert verdict.measure_next == 25_836  # (25,600 + 26,071) / 2 = 25,835.5, rounded to even


def test_the_seed_law_is_a_slope_not_a_threshold_nor_a_plateau() -> None:
    threshold = compare_arms(SLAB_LAW, 3.0, "threshold").claim
    plateau = compare_arms(SLAB_LAW, 3.0, "plateau").claim
    assert threshold is not None and threshold.verdict == "contradicted" and "slope" in threshold.reason
    assert plateau is not None and plateau.verdict == "contradicted"
    assert "+22.18 %" in plateau.reason  # the largest step, 25,600 -> 26,071


@pytest.mark.parametrize(
    ("rates", "verdict"),
    [
        ((1_000, 1_010, 995), "supported"),  # +1.00 %, -1.49 %; span (1,010 - 995) / 995 = 1.51 %
        ((1_000, 1_025, 1_050), "contradicted"),  # +2.50 %, +2.44 %: each inside, but the span is 5.00 %
    ],
)
def test_a_plateau_needs_its_whole_span_inside_the_band(rates: tuple[int, ...], verdict: str) -> None:
    claim = compare_arms([Arm(v, r) for v, r in zip((8, 16, 32), rates, strict=True)], 3.0, "plateau").claim
    assert claim is not None and claim.verdict == verdict


def test_a_threshold_with_a_flat_side_is_supported_and_placed() -> None:
    # batch 16 -> 512 t/s, 32 -> 520 (+1.56 %), 64 -> 700 (+34.6 %): flat, then one step
    verdict = compare_arms([Arm(16, 512), Arm(32, 520), Arm(64, 700)], 3.0, "threshold").claim
    assert verdict is not None and verdict.verdict == "supported"
    assert "32 -> 64" in verdict.reason and verdict.measure_next == 48


@pytest.mark.parametrize(
    ("arms", "band", "claim_arms", "message"),
    [
        ([Arm(1, 10)], 3.0, (), "1 given"),
        ([Arm(1, 10), Arm(1, 11)], 3.0, (), "value 1 is given twice"),
        ([Arm(1, 10), Arm(2, 0)], 3.0, (), "rate above 0"),
        ([Arm(1e308, 10), Arm(1.7e308, 11)], 3.0, (), "within"),  # a midpoint past float range
        ([Arm(1, 1e-320), Arm(2, 1e308)], 3.0, (), "from 1e-06"),  # a change of 1e628 %
        ([Arm(1, 10), Arm(float("nan"), 5)], 3.0, (), "within"),
        ([Arm(1, 10), Arm(2, float("inf"))], 3.0, (), "finite measured rate"),
        ([Arm(1, 10), Arm(2, 11)], 0.0, (), "noise_band_pct=0.0"),
        ([Arm(1, 10), Arm(2, 11), Arm(3, 12)], 3.0, (2, 7), "claim_arms: 7 is not the value of any arm"),
    ],
)
def test_bad_arms_name_the_input_and_the_remedy(
    arms: list[Arm], band: float, claim_arms: tuple[float, ...], message: str
) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        compare_arms(arms, band, "plateau" if claim_arms else None, claim_arms)


# ---------------------------------------------------------------------------------------
# At the MCP boundary


def _law() -> list[dict[str, float]]:
    return [{"value": a.value, "rate": a.rate} for a in SLAB_LAW]


async def test_an_agent_is_refused_a_plateau_off_two_arms_and_told_what_to_measure() -> None:
    async with Client(empty_fleet_server()) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("compare_arms", {
            "arms": _law()[:2], "knob": "slab MiB", "claim": "plateau",
        })
    assert listed["compare_arms"].annotations is not None and listed["compare_arms"].annotations.read_only_hint
    out = result.structured_content
    assert not result.is_error and out is not None
    assert out["ok"] is False and out["claim"]["verdict"] == "refused"
    assert out["claim"]["measure_next"] == 23_104  # (22,208 + 24,000) / 2
    assert out["steps"][0]["change_pct"] == -3.15 and out["inside_noise"] == []


async def test_arms_sent_as_a_json_string_and_in_parallel_calls() -> None:
    async with Client(empty_fleet_server()) as client:
        calls = [
            client.call_tool("compare_arms", {"arms": json.dumps(_law()), "noise_band_pct": band})
            for band in (3, 3.2, 10, 25)
        ]
        results = await asyncio.gather(*calls)
    inside = [r.structured_content["inside_noise"] for r in results if r.structured_content]
    # +-3: none; +-3.2: the -3.15 % dip; +-10: also +8.94 %; +-25: also +22.18 %
    assert inside == [
        [], ["22,208 and 24,000"], ["22,208 and 24,000", "24,000 and 25,600"],
        ["22,208 and 24,000", "24,000 and 25,600", "25,600 and 26,071"],
    ]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"arms": [{"value": 1, "rate": 5}]}, "arms"),
        ({"arms": [{"value": 1, "rate": 5}, {"value": 2, "rate": -1}]}, "rate"),
        ({"arms": "[{value: 1}]"}, "arms"),  # not JSON: the SDK refuses it before the tool, naming arms
        ({"arms": [{"value": 1, "rate": 5}, {"value": 2, "rate": 6}], "claim": "knee"}, "claim"),
        ({"arms": [{"value": 1, "rate": 5}, {"value": 1, "rate": 6}]}, "given twice"),
        ({"arms": [{"value": 1, "rate": 5, "rpm": 3}, {"value": 2, "rate": 6}]}, "rpm"),
    ],
)
async def test_careless_arguments_get_a_clear_error(arguments: dict[str, object], message: str) -> None:
    async with Client(empty_fleet_server()) as client:
        result = await client.call_tool("compare_arms", arguments)
    assert result.is_error and message in result.content[0].text  # type: ignore[union-attr]


def test_the_cli_exits_3_on_a_refused_claim(capsys: pytest.CaptureFixture[str]) -> None:
    arms = json.dumps(_law())
    assert main(["compare-arms", "--arms", arms, "--claim", "plateau", "--claim-arms", "[22208, 24000]"]) == 3
    table = capsys.readouterr().out
    assert "refused" in table and "already measured at 25,600" in table and "third arm at 23,104" in table
    assert main(["compare-arms", "--arms", arms]) == 0  # a comparison without a claim is not a failed check
