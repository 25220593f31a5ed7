"""The planning tools driven as a careless or hostile agent would: huge, absurd and parallel inputs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from shared_server import empty_fleet_server


async def _call(tool: str, arguments: dict[str, Any]) -> tuple[bool, str, dict[str, Any] | None]:
    async with Client(empty_fleet_server()) as client:
        result = await client.call_tool(tool, arguments)
    text = getattr(result.content[0], "text", "") if result.content else ""
    return bool(result.is_error), text, result.structured_content


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"arms": [{"value": 1e308, "rate": 1}, {"value": 1.7e308, "rate": 2}], "claim": "plateau"}, "value"),
        ({"arms": [{"value": 1, "rate": 1e-320}, {"value": 2, "rate": 1e308}]}, "rate"),
        ({"arms": [{"value": i, "rate": 100 + i} for i in range(1_001)]}, "arms"),  # past 1,000 arms
        ({"arms": [{"value": 1, "rate": 1}, {"value": 2, "rate": 1}], "noise_band_pct": 100}, "noise_band_pct"),
    ],
)
async def test_compare_arms_refuses_figures_past_any_measurement(arguments: dict[str, Any], message: str) -> None:
    is_error, text, _ = await _call("compare_arms", arguments)
    assert is_error and message in text


async def test_a_thousand_arms_compare_in_one_call() -> None:
    # a slope of +1 % a step: every step inside +-3 %, though the rate grows 1.01^999 = 20,677-fold over the range
    arms = [{"value": i, "rate": round(1000 * 1.01**i, 6)} for i in range(1_000)]
    is_error, _, out = await _call("compare_arms", {"arms": arms, "claim": "plateau"})
    assert not is_error and out is not None and len(out["steps"]) == 999
    # every step inside the band, yet no plateau: the whole span is 2,067,600 % (a slow slope)
    assert out["claim"]["verdict"] == "contradicted" and "slow slope" in out["claim"]["reason"]
    assert out["span_pct"] > 2_000_000


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        # a pool in bytes where MiB belong: the contract refuses the figure, naming it
        (lambda t: t.replace("--vram-kv-mib             5120", "--vram-kv-mib             5368709120000000"),
         "implausible number '5368709120000000'"),
        (lambda t: t.replace("--max-num-seqs            2", "--max-num-seqs            0"), "at least 1"),
        (lambda t: t.replace("settled at 2.01 GiB", "settled at 999999999999 GiB"), "more than the card total"),
        # without a card total to hold it against, the figure is planned as read, and no pool past 1 PiB is priced
        (lambda t: "\n".join(x for x in t.replace("settled at 2.01 GiB", "settled at 999999999999 GiB").splitlines()
                             if "card total" not in x), ""),
    ],
)
async def test_plan_free_vram_on_an_absurd_boot_answers_or_names_the_figure(
    example_text: str, edit: Any, message: str
) -> None:
    is_error, text, out = await _call("plan_free_vram", {"log_text": edit(example_text)})
    if message:
        assert is_error and message in text
    else:  # an absurd but well-formed figure is planned as read, with its line, and no pool is priced past 1 PiB
        assert not is_error and out is not None
        plan = out["services"][0]
        assert "999999999999 GiB" in plan["lines"][str(plan["cards"][0]["settled_free"]["line"])]  # quoted once
        assert [o["name"] for o in plan["options"]] == ["more slab"]
        assert any("past any card's memory" in n for n in plan["notes"])


async def test_parallel_plans_of_one_ledger_agree(example_path: Path) -> None:
    async with Client(empty_fleet_server()) as client:
        results = await asyncio.gather(*(client.call_tool("plan_free_vram", {"log": str(example_path)})
                                         for _ in range(8)))
    outs = [r.structured_content for r in results]
    assert all(not r.is_error for r in results) and all(o == outs[0] for o in outs)


async def test_render_gates_refuses_a_path_or_prefix_that_would_be_code(example_path: Path) -> None:
    base = {"log": str(example_path), "vram_kv_mib": 5_120}
    for bad in ('x.env"; touch /tmp/owned; "', "a b.env", "$HOME/x.env", "`id`.env", "x\n.env"):
        is_error, text, _ = await _call("render_gates", {**base, "env_file": bad})
        assert is_error and "env_file" in text, bad
    is_error, text, _ = await _call("render_gates", {**base, "env_prefix": "X; rm -rf /"})
    assert is_error and "env_prefix" in text


async def test_verify_deploy_on_an_env_file_of_absurd_figures(example_path: Path) -> None:
    env = ("A_VRAM_WEIGHTS_MIB=24000\nA_VRAM_KV_MIB=5120\nA_MAX_SEQS=3\nA_MAX_MODEL_LEN=200000\n"
           "A_KV_CACHE_DTYPE=fp8\n# prediction referee = 2x200000: the boot prints it\n# verdict referee:\n")
    is_error, _, out = await _call("verify_deploy", {"log": str(example_path), "env_text": env})
    assert not is_error and out is not None
    checks = {c["check"]: c for c in out["checks"]}
    assert checks["referee"]["ok"] is False and out["verdicts"][0]["verdict"] == "kept"  # the boot backs 2 x 200,000
    is_error, text, _ = await _call("verify_deploy", {"log": str(example_path), "env_text": env.replace(
        "A_MAX_SEQS=3", "A_MAX_SEQS=99999999999999999999")})
    assert is_error and "A_MAX_SEQS='99999999999999999999': a whole number from 1 to 1,073,741,824" in text
    is_error, text, _ = await _call("verify_deploy", {"log": str(example_path),
                                                      "env_text": env.replace("A_MAX_MODEL_LEN=200000",
                                                                              "A_MAX_MODEL_LEN=0")})
    assert is_error and "A_MAX_MODEL_LEN='0': a whole number from 1" in text
