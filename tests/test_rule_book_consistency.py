"""The tools cannot contradict each other (issue 24): over generated boots and fleets, every plan plan_free_vram
offers passes render_gates, check_pool_contract and compute_ceiling; one MiB more is refused by the rule that
binds; verify_deploy keeps every ledger prediction on the plan's own boot (rendered by the simulator) and
judges none on the boot planned from. All through the SDK's MCP client, in memory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from bats_run import needs_bats, run_bats
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from mcp import Client

from radiance_mcp.app.server import build_server
from radiance_mcp.core.constants import SAMPLER_ROW_BOUND
from radiance_mcp.core.errors import REFUSAL_META
from radiance_mcp.sim.engine import EngineModel, Shape
from radiance_mcp.sources.config import load
from radiance_mcp.sources.runtime import Runtime

LEDGER_PREDICTIONS = {"referee", "ceiling", "settled", "contract", "sampler", "slab"}
"""The predictions a boot's ledger judges (the boundary waits for its probe)."""


@st.composite
def shapes(draw: st.DrawFn) -> Shape:
    """A radiance boot with room to spare or none: other seats, windows, drafts, pools, weights, cards."""
    spec = draw(st.integers(0, 4))
    seqs = draw(st.integers(1, SAMPLER_ROW_BOUND // (1 + spec)))
    tp = draw(st.sampled_from([1, 2]))
    shape = Shape(
        name="svc", tp=tp, seqs=seqs, spec=spec,
        max_model_len=draw(st.sampled_from([16_384, 32_768, 65_536, 131_072, 200_000])),
        kv_cache_dtype=draw(st.sampled_from(["fp8", "bf16"])),
        vram_weights_mib=draw(st.integers(18_000, 25_000)),
        vram_kv_mib=draw(st.integers(2_000, 8_000)),
        card_extra_mib=tuple(draw(st.sampled_from([0, 64, 700])) for _ in range(tp)),
    )
    return shape


def _shape(**kwargs: Any) -> Shape | None:
    try:
        return Shape(**kwargs)
    except ValueError:
        return None


async def _calls(runtime: Runtime, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    async with Client(build_server(runtime)) as client:
        return [await client.call_tool(tool, arguments) for tool, arguments in calls]


def _rule(result: Any) -> str | None:
    return (result.meta or {}).get(REFUSAL_META, {}).get("rule") if result.is_error else None


def _plans(plan: Any) -> list[dict[str, Any]]:
    assert not plan.is_error, plan.content[0].text
    service = plan.structured_content["services"][0]
    plans = [p for o in service["options"] for p in o["plans"]]
    # the rule book's rules judge each plan offered: every one of plan_rules passed on it but its unchecked
    assert not plans or {"pair_within_ceiling", "pool_contract", "sampler_rows"} <= set(service["plan_rules"])
    for p in plans:
        assert set(p.get("unchecked", [])) <= set(service["plan_rules"]), p
    return [{k: v for k, v in p.items() if k not in ("unchecked", "idle_kv_mib", "mover_slots")} for p in plans]


SETTINGS = settings(max_examples=20, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(shape=shapes())
async def test_every_plan_offered_passes_every_tool_and_one_mib_more_is_refused(shape: Shape) -> None:
    model = EngineModel(shape)
    assume(not model.refused)
    log = model.ledger_text()
    runtime = Runtime(load(None))
    (plan,) = await _calls(runtime, ("plan_free_vram", {"log_text": log}))
    for offered in _plans(plan):
        pair = offered["vram_weights_mib"] + offered["vram_kv_mib"]
        rendered, contract, ceiling, over = await _calls(
            runtime,
            ("render_gates", {"log_text": log, **offered}),
            ("check_pool_contract", {"log_text": log, "pool_mib": offered["vram_kv_mib"], "seqs": offered["seqs"],
                                     "max_model_len": offered["max_model_len"],
                                     "kv_cache_dtype": offered["kv_cache_dtype"]}),
            ("compute_ceiling", {"log_text": log}),
            ("render_gates", {"log_text": log, **offered, "vram_kv_mib": offered["vram_kv_mib"] + 1}),
        )
        assert not rendered.is_error, (offered, rendered.content[0].text)
        assert contract.structured_content["ok"] is True, offered
        max_pair = ceiling.structured_content["max_pair_mib"]
        assert pair <= max_pair
        # The plan spends the whole headroom: one MiB more is over the ceiling, and render_gates says so.
        assert pair < max_pair or _rule(over) == "pair_within_ceiling", (offered, max_pair)


@SETTINGS
@given(shape=shapes(), pick=st.integers(0, 5))
async def test_verify_deploy_keeps_every_ledger_prediction_on_the_plans_boot_and_none_on_another(
    shape: Shape, pick: int
) -> None:
    model = EngineModel(shape)
    assume(not model.refused)
    old = model.ledger_text()
    runtime = Runtime(load(None))
    (plan,) = await _calls(runtime, ("plan_free_vram", {"log_text": old}))
    plans = _plans(plan)
    assume(plans)
    offered = plans[pick % len(plans)]
    new_shape = _shape(**{**shape.__dict__, "vram_weights_mib": offered["vram_weights_mib"],
                          "vram_kv_mib": offered["vram_kv_mib"], "seqs": offered["seqs"],
                          "max_model_len": offered["max_model_len"], "kv_cache_dtype": offered["kv_cache_dtype"]})
    assert new_shape is not None
    deployed = EngineModel(new_shape)
    assert not deployed.refused, offered
    (rendered,) = await _calls(runtime, ("render_gates", {"log_text": old, **offered}))
    env = rendered.structured_content["env_text"]
    both = old + deployed.ledger_text()
    mine, before = await _calls(runtime, ("verify_deploy", {"log_text": both, "env_text": env}),
                                ("verify_deploy", {"log_text": old, "env_text": env}))
    verdicts = {v["key"]: v["verdict"] for v in mine.structured_content["verdicts"]}
    assert {k for k, v in verdicts.items() if k in LEDGER_PREDICTIONS and v != "kept"} == set(), \
        (offered, mine.structured_content["verdicts"])
    assert all(c["ok"] is not False for c in mine.structured_content["checks"]), mine.structured_content["checks"]
    assert {v["verdict"] for v in before.structured_content["verdicts"]} == {"pending"}
    assert before.structured_content["ok"] is False


# ---------------------------------------------------------------------------------------
# A physical card two services share


def _fleet(tmp_path: Path, a: Shape, b: Shape, b_growth: int) -> Runtime:
    """Services a (one card, box:1) and b (--tp 2: box:0 and box:1), each with its log; b's env file plans its
    pool b_growth MiB bigger."""
    lines = []
    for name, shape, cards in (("a", a, '["box:1"]'), ("b", b, '["box:0", "box:1"]')):
        log = tmp_path / f"{name}.log"
        log.write_text(EngineModel(shape).ledger_text(), encoding="utf-8")
        lines += [f"[services.{name}]", f'log = "{log}"', f"cards = {cards}"]
    env = tmp_path / "b.env"
    env.write_text(f"B_VRAM_WEIGHTS_MIB={b.vram_weights_mib}\nB_VRAM_KV_MIB={b.vram_kv_mib + b_growth}\n"
                   f"B_MAX_SEQS={b.seqs}\nB_MAX_MODEL_LEN={b.max_model_len}\nB_KV_CACHE_DTYPE={b.kv_cache_dtype}\n",
                   encoding="utf-8")
    lines.append(f'env_file = "{env}"')
    (tmp_path / "fleet.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Runtime(load(tmp_path / "fleet.toml"))


@pytest.mark.parametrize("b_growth", [0, 300, 900])
async def test_a_shared_card_is_spent_once_by_every_tool(tmp_path: Path, b_growth: int) -> None:
    a = Shape(name="a", vram_kv_mib=5_120, seqs=2, card_extra_mib=(0,))
    b = Shape(name="b", tp=2, vram_kv_mib=5_120, card_extra_mib=(0, 200))
    runtime = _fleet(tmp_path, a, b, b_growth)
    (plan,) = await _calls(runtime, ("plan_free_vram", {"service": "a"}))
    whole = plan.structured_content
    once = {c["card"]: c for c in whole["physical_cards"]}["box:1"]["headroom_mib"]
    service = whole["services"][0]
    assert service["usable_mib"] == once - b_growth  # b's planned growth is spent first
    for offered in _plans(plan):
        ok, over = await _calls(runtime, ("render_gates", {"service": "a", **offered}),
                                ("render_gates", {"service": "a", **offered,
                                                  "vram_kv_mib": offered["vram_kv_mib"] + 1}))
        assert not ok.is_error, ok.content[0].text
        growth = offered["vram_weights_mib"] + offered["vram_kv_mib"] - (a.vram_weights_mib + a.vram_kv_mib)
        if growth + b_growth == once:
            assert _rule(over) == "shared_card", over.content[0].text


@pytest.mark.slow
@needs_bats
async def test_the_bats_gates_hold_the_shared_card_with_the_cotenants_env_files(tmp_path: Path) -> None:
    a = Shape(name="a", vram_kv_mib=5_120, seqs=2, card_extra_mib=(0,))
    b = Shape(name="b", tp=2, vram_kv_mib=5_120, card_extra_mib=(0, 200))
    runtime = _fleet(tmp_path, a, b, 300)
    (plan,) = await _calls(runtime, ("plan_free_vram", {"service": "a"}))
    offered = _plans(plan)[0]
    (rendered,) = await _calls(runtime, ("render_gates", {"service": "a", **offered}))
    out = rendered.structured_content
    env, bats = tmp_path / "a.env", tmp_path / "a.bats"
    env.write_text(out["env_text"], encoding="utf-8")
    bats.write_text(out["bats_text"], encoding="utf-8")
    passed = run_bats(bats, env=env)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "ok 2 shared card box:1 (a, b): the pairs grow by at most" in passed.stdout
    # b's operator grows its pool by one MiB more after a's plan: the card no longer holds both
    b_env = tmp_path / "b.env"
    b_env.write_text(b_env.read_text().replace(f"B_VRAM_KV_MIB={5_120 + 300}", f"B_VRAM_KV_MIB={5_120 + 301}"))
    over = run_bats(bats, env=env)
    assert over.returncode != 0 and "not ok 2 shared card box:1" in over.stdout, over.stdout


async def test_a_cotenants_env_file_that_is_a_fifo_is_said_and_never_waited_on(tmp_path: Path) -> None:
    """Security: opening a FIFO waits for a writer for ever; a co-tenant's env file is read by every plan and
    render of its card's other services, so one put there must not hold them."""
    a = Shape(name="a", vram_kv_mib=5_120, seqs=2, card_extra_mib=(0,))
    b = Shape(name="b", tp=2, vram_kv_mib=5_120, card_extra_mib=(0, 200))
    runtime = _fleet(tmp_path, a, b, 0)
    (tmp_path / "b.env").unlink()
    os.mkfifo(tmp_path / "b.env")
    with anyio.fail_after(60):  # the old reader's open() of the FIFO never returned
        plan, rendered = await _calls(runtime, ("plan_free_vram", {"service": "a"}),
                                      ("render_gates", {"service": "a", "vram_kv_mib": 5_200}))
    said = "b's env_file cannot be read ("
    assert any(said in n and "its pair is counted as its boot's" in n for n in plan.structured_content["notes"])
    assert not rendered.is_error, rendered.content[0].text
    assert any(said in n for n in rendered.structured_content["notes"])
