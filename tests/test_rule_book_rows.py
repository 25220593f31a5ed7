"""Issue 24's table, row by row, through MCP on the simulated fleet: each tool asks the rule book, so what one
tool offers another accepts, and what one refuses no other offers; a refusal names its rule as data."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from radiance_mcp.app.demo import background_fleet
from radiance_mcp.app.server import build_server
from radiance_mcp.core.errors import REFUSAL_META
from radiance_mcp.sim import SimFleet
from radiance_mcp.sources.config import EXAMPLES_DIR, load
from radiance_mcp.sources.runtime import Runtime


@pytest.fixture(scope="module")
def fleet() -> Iterator[SimFleet]:
    with background_fleet(time_scale=0.0001) as sim:
        yield sim


async def _call(sim: SimFleet, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    async with Client(build_server(Runtime(load(sim.config_path)))) as client:
        return [await client.call_tool(tool, arguments) for tool, arguments in calls]


def _refusal(result: Any) -> tuple[str, str]:
    """(the rule the refusal names as data, its message)."""
    assert result.is_error, result.structured_content
    return (result.meta or {}).get(REFUSAL_META, {}).get("rule"), result.content[0].text


# ---------------------------------------------------------------------------------------
# Row 1: a physical card two services share is spent once, by render_gates as by plan_free_vram


async def test_render_gates_spends_a_shared_card_once_as_plan_free_vram_prices_it(fleet: SimFleet) -> None:
    plan, low, twin = await _call(fleet, ("plan_free_vram", {"service": "lowpool"}),
                                  ("render_gates", {"service": "lowpool", "vram_kv_mib": 6_900}),
                                  ("render_gates", {"service": "twin", "vram_kv_mib": 6_900}))
    out = plan.structured_content
    shared = {c["card"]: c for c in out["physical_cards"]}["gpubox:1"]
    assert shared["headroom_mib"] == 1_577  # twin's card 1 reads 1,787 less lowpool's 209.19 floor
    rule, text = _refusal(low)
    # lowpool 24,000 + 3,000 -> 24,000 + 6,900: 3,900 MiB more on gpubox:1, which has 1,577 to give once
    assert rule == "shared_card"
    assert "3,900 (lowpool) = 3,900 MiB > its headroom counted once 1,577 MiB" in text
    rule, text = _refusal(twin)  # twin 29,120 -> 30,900 under its own ceiling 30,907, over the card's once
    assert rule == "shared_card" and "1,780 (twin) = 1,780 MiB > its headroom counted once 1,577 MiB" in text
    # What plan_free_vram offers lowpool, render_gates accepts: the pool grown by the usable MiB.
    service = out["services"][0]
    assert service["usable_mib"] == 1_577
    grown = 3_000 + service["usable_mib"]
    ok, over = await _call(fleet, ("render_gates", {"service": "lowpool", "vram_kv_mib": grown, "seqs": 1}),
                           ("render_gates", {"service": "lowpool", "vram_kv_mib": grown + 1, "seqs": 1}))
    assert not ok.is_error, ok.content[0].text
    assert any("gpubox:1, shared by lowpool, twin: the pairs grow by 1,577 (lowpool)" in n
               for n in ok.structured_content["notes"])
    assert _refusal(over)[0] == "shared_card"


# ---------------------------------------------------------------------------------------
# Row 2: plan_free_vram offers no seats the sampler bound forbids


def _short_window_boot() -> str:
    """The example ledger served at 65,536 tokens: its pool would hold 11 seats, the bound (spec 3) allows 6."""
    text = (EXAMPLES_DIR / "frank-archon.log").read_text(encoding="utf-8")
    return (text.replace("--max-model-len           200000", "--max-model-len           65536")
            .replace("2 x 200000 worst case", "2 x 65536 worst case")
            .replace("backs 2 sequences all at 200000 tokens", "backs 2 sequences all at 65536 tokens"))


async def test_plan_free_vram_offers_only_the_seats_the_sampler_bound_allows(fleet: SimFleet) -> None:
    log = _short_window_boot()
    plan, six, seven = await _call(fleet, ("plan_free_vram", {"log_text": log}),
                                   ("render_gates", {"log_text": log, "vram_kv_mib": 6_969, "seqs": 6}),
                                   ("render_gates", {"log_text": log, "vram_kv_mib": 6_969, "seqs": 7}))
    option = next(o for o in plan.structured_content["services"][0]["options"] if o["name"] == "more KV, fp8")
    seats = next(g for g in option["gains"] if g["name"] == "seats at 65,536 tokens")
    # (6,969 - 448) / (65,536 x 7,488 B + 110 MiB) = 6,521 / 578.00 -> 11; 6 x (1 + 3) = 24 <= 25 < 7 x 4
    assert seats["value"] == 6
    assert "-> 11; the sampler bound allows 6: 6 x (1 + 3) = 24 rows <= the 25-row bound, line 25" in seats["text"]
    assert not six.is_error, six.content[0].text  # what plan_free_vram offers, render_gates accepts
    rule, text = _refusal(seven)
    assert rule == "sampler_rows" and "7 x (1 + 3) = 28 exceed the 25-row" in text


# ---------------------------------------------------------------------------------------
# Row 3: a plan of a service that fails its contract today says so first


async def test_plan_free_vram_says_the_service_fails_its_contract_today(fleet: SimFleet) -> None:
    (plan,) = await _call(fleet, ("plan_free_vram", {"service": "lowpool"}))
    service = plan.structured_content["services"][0]
    contract = next(c for c in service["checks"] if c["rule"] == "pool_contract")
    assert contract["verdict"] == "fail"
    assert contract["arithmetic"] == ("2 x 200,000 x 7,488 B = 2,856.45 MiB + 110 x 2 + 448 = 3,524.45 MiB > pool "
                                      "3,000 MiB (fp8)")
    assert contract["remedy"].startswith("at 3,000 MiB the contract allows 1 seat at 200,000 tokens")
    assert any(n.startswith("lowpool fails pool_contract as it runs") for n in service["notes"])


# ---------------------------------------------------------------------------------------
# Row 4: verify_deploy judges the plan's own boot only


async def test_verify_deploy_keeps_no_prediction_on_a_boot_that_is_not_the_plans(fleet: SimFleet) -> None:
    (rendered,) = await _call(fleet, ("render_gates", {"service": "frank-archon", "vram_kv_mib": 6_969, "seqs": 4}))
    env = rendered.structured_content["env_text"]
    assert "# Planned from: boot 1 of " in env
    # The plan never deployed: the boot still running is the one it was planned from.
    (verified,) = await _call(fleet, ("verify_deploy", {"service": "frank-archon", "env_text": env,
                                                        "boundary_found": 4}))
    out = verified.structured_content
    assert out["ok"] is False and [c["check"] for c in out["checks"]] == ["plan's boot"]
    found = out["checks"][0]["found"]
    assert "--vram-weights-mib 24,000 + --vram-kv-mib 5,120 = 29,120 MiB is not the env file's 24,000 + 6,969" \
        in found
    assert "it is boot 1 and the plan was rendered from boot 1" in found
    assert {v["verdict"] for v in out["verdicts"]} == {"pending"}  # none kept, none killed
    assert out["env_text"] == env  # no verdict written
