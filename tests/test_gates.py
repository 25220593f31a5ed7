"""render_gates: the env-file pair with its predictions, and bats gates that real bats runs, passing and failing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from bats_run import needs_bats, run_bats
from mcp import Client
from shared_server import empty_fleet_server

from radiance_mcp.app.demo import background_fleet
from radiance_mcp.app.server import build_server
from radiance_mcp.core import gates
from radiance_mcp.core.errors import InputError
from radiance_mcp.sim import SimFleet
from radiance_mcp.sources.config import load
from radiance_mcp.sources.runtime import Runtime

# 3 seats at 200,000 fp8: 3 x 200,000 x 7,488 B = 4,284.67 MiB + 330 + 448 = 5,062.67 MiB <= 6,391 (margin 1,328.33);
# pair 24,000 + 6,391 = 30,391 <= 30,969 - 100 (personal) - 268.11 (unclaimed 477.30 less the 209.19 floor, line 18)
# = 30,600.89 -> 30,600
PLAN: dict[str, Any] = {
    "vram_kv_mib": 6_391, "seqs": 3,
    "reserves": [{"mib": 100, "label": "room for a profiler", "personal": True},
                 {"mib": 268.11, "label": "unclaimed rounding", "line": 18}],
}


async def render(example_path: Path, tmp_path: Path, **arguments: Any) -> tuple[dict[str, Any], Path, Path]:
    env = tmp_path / "svc" / "frank-archon.env"
    async with Client(empty_fleet_server()) as client:
        result = await client.call_tool("render_gates", {"log": str(example_path), "env_file": str(env),
                                                         **PLAN, **arguments})
    assert not result.is_error, result.content
    out = result.structured_content
    assert out is not None
    env.parent.mkdir(exist_ok=True)
    env.write_text(out["env_text"], encoding="utf-8")
    bats = Path(out["bats_file"])
    bats.write_text(out["bats_text"], encoding="utf-8")
    return out, env, bats


@pytest.mark.slow
@needs_bats
async def test_the_gates_pass_on_the_plan_and_fail_when_the_env_file_drifts(
    example_path: Path, tmp_path: Path
) -> None:
    out, env, bats = await render(example_path, tmp_path)
    assert out["pair_mib"] == 30_391 and out["max_pair_mib"] == 30_600 and out["contract_margin_mib"] == 1_328.33
    assert out["personal_reserves"] == ["room for a profiler"] and out["sampler_rows"] == 12  # 3 x (1 + 3)
    assert bats == env.with_suffix(".bats")
    passed = run_bats(bats)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "1..5" in passed.stdout and "not ok" not in passed.stdout
    assert "ok 2 PERSONAL reserve, no ledger line: room for a profiler (100 MiB): pair <= 30,869" in passed.stdout
    assert "ok 3 traced reserve, ledger line 18: unclaimed rounding (268.11 MiB): pair <= 30,700" in passed.stdout

    # someone bumps the pool past the ceiling: 24,000 + 7,000 = 31,000 > 30,969
    env.write_text(env.read_text().replace("FRANK_ARCHON_VRAM_KV_MIB=6391", "FRANK_ARCHON_VRAM_KV_MIB=7000"))
    over = run_bats(bats)
    assert over.returncode != 0
    assert "not ok 1 pair <= ceiling (30,969 MiB/card, from the boot ledger)" in over.stdout
    assert "pair 31000 MiB against the ceiling 30969" in over.stdout
    assert "ok 5 pool >= contract" in over.stdout and "not ok 5" not in over.stdout

    # a second copy with the seats raised to 5: 5 x 1,428.22 + 550 + 448 = 8,139.11 MiB > the 6,391 pool
    other = tmp_path / "other.env"
    other.write_text(out["env_text"].replace("FRANK_ARCHON_MAX_SEQS=3", "FRANK_ARCHON_MAX_SEQS=5"))
    short = run_bats(bats, env=other)
    assert short.returncode != 0 and "not ok 5 pool >= contract" in short.stdout
    assert "ok 1 pair <= ceiling" in short.stdout and "not ok 1" not in short.stdout


@pytest.mark.slow
@needs_bats
async def test_the_gates_read_an_env_file_in_another_style(example_path: Path, tmp_path: Path) -> None:
    _, env, bats = await render(example_path, tmp_path, kv_cache_dtype="fp8")
    # the operator's own layout: exports, quotes, comments after values, other lines between
    env.write_text(
        "#!/bin/sh\nset -a\nexport FRANK_ARCHON_VRAM_WEIGHTS_MIB='24000'   # weights\nUNRELATED=1\n"
        'export FRANK_ARCHON_VRAM_KV_MIB="6391"\nFRANK_ARCHON_MAX_SEQS=3\nFRANK_ARCHON_MAX_MODEL_LEN=200000\n'
        "FRANK_ARCHON_KV_CACHE_DTYPE=bf16\n"
    )
    # bf16: 3 x 200,000 x 14,144 B = 8,093.26 + 330 + 448 = 8,871.26 MiB > 6,391: the dtype alone fails the pool
    result = run_bats(bats)
    assert result.returncode != 0 and "not ok 5 pool >= contract" in result.stdout
    env.write_text(env.read_text().replace("DTYPE=bf16", "DTYPE=fp16"))
    typo = run_bats(bats)
    assert "--kv-cache-dtype fp16: radiance takes only bf16 or fp8" in typo.stdout
    assert gates.read_env(env.read_text()) == ("FRANK_ARCHON", {
        "VRAM_WEIGHTS_MIB": "24000", "VRAM_KV_MIB": "6391", "MAX_SEQS": "3", "MAX_MODEL_LEN": "200000",
        "KV_CACHE_DTYPE": "fp16"})


async def test_the_env_file_records_each_prediction_with_an_empty_verdict(example_path: Path, tmp_path: Path) -> None:
    out, env, _ = await render(example_path, tmp_path)
    text = env.read_text()
    assert "FRANK_ARCHON_VRAM_KV_MIB=6391" in text and "# Ceiling: 29,120 + (2,058 - 209) = 30,969 MiB/card" in text
    assert "# Reserve: room for a profiler, 100 MiB (PERSONAL reserve: no ledger line backs it)." in text
    predictions = {p.key: p.value for p in gates.read_predictions(text)}
    # settled: the floor, 209.19 MiB; contract margin 6,391 - 5,062.67 = 1,328.33; slab: the weights do not move
    assert predictions == {"referee": "3x200000", "ceiling": "30969", "settled": "209.19", "contract": "1328.33",
                           "sampler": "12", "slab": "17548", "boundary": "3/3"}
    assert [p["key"] for p in out["predictions"]] == list(predictions)
    assert text.count("# verdict ") == 7 and all(f"# verdict {k}:\n" in text for k in predictions)
    filled = gates.fill_verdicts(text, {"referee": "kept: line 24"})
    assert "# verdict referee: kept: line 24\n" in filled and "# verdict boundary:\n" in filled


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        # 24,000 + 7,000 = 31,000 > 30,969
        ({"vram_kv_mib": 7_000, "reserves": []}, "over the ceiling 30,969 MiB/card"),
        # 24,000 + 6,700 = 30,700 <= 30,969 but > 30,969 - 368.11 of reserves
        ({"vram_kv_mib": 6_700}, "less 368.11 MiB of reserves"),
        # 4 seats need 6,600.89 MiB
        ({"seqs": 4}, "the pool fails its contract: 4 x 200,000 x 7,488 B"),
        # 7 x (1 + 3) = 28 rows > 25: at spec 3 at most 6 seats (7 x 32,768 fp8 = 1,638.4 + 770 + 448 fits)
        ({"seqs": 7, "max_model_len": 32_768}, "sampler rows 7 x (1 + 3) = 28 exceed the 25-row"),
        ({"env_file": "/tmp/$(reboot).env"}, "env_file '/tmp/$(reboot).env': a path of letters"),
        ({"reserves": [{"mib": 250, "label": "gut feeling"}]}, "neither traced nor labelled"),
        ({"kv_cache_dtype": "fp16"}, "kv_cache_dtype"),
        ({"env_prefix": "lower-case"}, "env_prefix"),
    ],
)
async def test_a_plan_that_would_fail_its_gates_is_refused(
    example_path: Path, arguments: dict[str, Any], message: str
) -> None:
    async with Client(empty_fleet_server()) as client:
        result = await client.call_tool("render_gates", {"log": str(example_path), **PLAN, **arguments})
    assert result.is_error and message in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.slow
@needs_bats
async def test_a_hostile_label_stays_one_comment_line_and_one_test_name(example_path: Path, tmp_path: Path) -> None:
    label = 'x\nFRANK_ARCHON_VRAM_KV_MIB=99999\n@test "owned" { touch $HOME/owned ; }\n`touch owned`'
    out, env, bats = await render(example_path, tmp_path, reserves=[{"mib": 10, "label": label, "personal": True}])
    assert gates.read_env(env.read_text())[1]["VRAM_KV_MIB"] == "6391"
    assert "99999" not in "".join(line for line in out["env_text"].splitlines() if not line.startswith("#"))
    result = run_bats(bats)
    # four gates (the pair, the reserve, every reserve, the pool), all passing, and nothing run from the label
    assert result.returncode == 0 and "1..4" in result.stdout, result.stdout + result.stderr
    assert "PERSONAL reserve, no ledger line: x FRANK_ARCHON_VRAM_KV_MIB=99999 @test owned { touch HOME/owned" \
        in result.stdout
    assert not list(tmp_path.rglob("owned")) and not Path("owned").exists()


def test_env_prefix_and_a_file_without_the_variables() -> None:
    assert gates.env_prefix("frank-archon") == "FRANK_ARCHON" and gates.env_prefix("9-lives") == "SVC_9_LIVES"
    with pytest.raises(InputError, match="found SVC_\\* \\(2 of 5\\)"):
        gates.read_env("SVC_VRAM_KV_MIB=1\nSVC_MAX_SEQS=2\n")


# ---------------------------------------------------------------------------------------
# verify_deploy: the new boot against the plan, and each prediction kept or killed


@pytest.fixture(scope="module")
def booted_fleet() -> Iterator[SimFleet]:
    """The simulated fleet as it boots, in a thread of its own, for the tests that only read it
    (the tests that deploy start their own)."""
    with background_fleet(time_scale=0.0001) as fleet:
        yield fleet


async def _plan_and_deploy(fleet: SimFleet, client: Client, seats_deployed: int) -> tuple[dict[str, Any], int]:
    """Plan frank-archon at the ceiling with 4 seats, deploy it with seats_deployed."""
    planned = await client.call_tool("render_gates", {"service": "frank-archon", "vram_kv_mib": 6_969, "seqs": 4})
    assert not planned.is_error and planned.structured_content is not None
    service = fleet.services["frank-archon"]
    await fleet.redeploy("frank-archon", replace(service.shape, vram_kv_mib=6_969, seqs=seats_deployed))
    return planned.structured_content, 4


async def test_a_deploy_as_planned_keeps_every_prediction(tmp_path: Path) -> None:
    async with SimFleet.start(tmp_path, time_scale=0.0001) as fleet:
        async with Client(build_server(Runtime(load(fleet.config_path)))) as client:
            plan, seats = await _plan_and_deploy(fleet, client, 4)
            first = await client.call_tool("verify_deploy", {"service": "frank-archon", "env_text": plan["env_text"]})
            second = await client.call_tool("verify_deploy", {"service": "frank-archon", "env_text": plan["env_text"],
                                                              "boundary_found": seats})
    out = first.structured_content
    assert out is not None and out["ledger"]["boot"] == 2  # the new boot, not the one planned from
    checks = {c["check"]: c for c in out["checks"]}
    assert all(c["ok"] for c in out["checks"]), out["checks"]
    assert checks["referee"]["found"] == "4 sequences at 200,000 tokens"
    assert checks["referee"]["line"]["text"].endswith("backs 4 sequences all at 200000 tokens at once")
    assert checks["sampler"]["expected"] == "4 x (1 + 3) = 16 rows, <= 25"
    # the pair at the ceiling settles at 330.05 MiB, 120.86 above the 209.19 floor: the seed's ~330 MiB worst case
    assert "330.05 MiB free, 120.86 MiB above the floor" in checks["settled, card 0"]["found"]
    assert "margin 368.11 MiB" in checks["pool >= contract"]["found"]  # 6,969 - 6,600.89
    verdicts = {v["key"]: v["verdict"] for v in out["verdicts"]}
    assert verdicts == {"referee": "kept", "ceiling": "kept", "settled": "kept", "contract": "kept",
                        "sampler": "kept", "slab": "kept", "boundary": "pending"}
    assert out["ok"] is True  # a pending probe is not a failed check
    final = second.structured_content
    assert final is not None and all(v["verdict"] == "kept" for v in final["verdicts"])
    assert "# verdict boundary: kept: boundary probe retrieved 4/4 markers (predicted 4/4)" in final["env_text"]
    assert "# verdict referee: kept: 4x200000" in final["env_text"]


async def test_a_deploy_that_kept_the_old_seats_kills_its_predictions(tmp_path: Path) -> None:
    async with SimFleet.start(tmp_path, time_scale=0.0001) as fleet:
        async with Client(build_server(Runtime(load(fleet.config_path)))) as client:
            plan, _ = await _plan_and_deploy(fleet, client, 2)
            result = await client.call_tool("verify_deploy", {"service": "frank-archon", "env_text": plan["env_text"],
                                                              "boundary_found": 2})
    out = result.structured_content
    assert out is not None and out["ok"] is False
    verdicts = {v["key"]: v for v in out["verdicts"]}
    # the boot backs 2 x 200,000: 8 sampler rows, not 16; the contract margin is 6,969 - 3,524.45 = 3,444.55, not 368.11
    assert {k for k, v in verdicts.items() if v["verdict"] == "killed"} == {"referee", "sampler", "contract",
                                                                            "boundary"}
    assert verdicts["referee"]["text"].startswith("2x200000 (predicted 4x200000; boot 2, line ")
    assert "contract margin 3444.55 MiB (predicted 368.11" in verdicts["contract"]["text"]
    assert "# verdict sampler: killed: 8 (predicted 16" in out["env_text"]
    assert any("did not take the planned shape" in n for n in out["notes"])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"service": "frank-archon"}, "records no predictions"),  # the sim's own env file has none
        ({"service": "frank-archon", "env_text": "X_MAX_SEQS=2\n"}, "expected one prefix assigning every one"),
        ({"log_text": "I radiance boot: x\n"}, "env_text is needed"),
    ],
)
async def test_verify_deploy_says_what_it_needs(booted_fleet: SimFleet, arguments: dict[str, Any], message: str
                                               ) -> None:
    async with Client(build_server(Runtime(load(booted_fleet.config_path)))) as client:
        result = await client.call_tool("verify_deploy", arguments)
    assert result.is_error and message in result.content[0].text  # type: ignore[union-attr]


async def test_more_slab_predicts_the_resident_slots_and_the_new_boot_keeps_it(tmp_path: Path) -> None:
    async with SimFleet.start(tmp_path, time_scale=0.0001) as fleet:
        async with Client(build_server(Runtime(load(fleet.config_path)))) as client:
            before = fleet.services["frank-archon"].shape
            planned = await client.call_tool("render_gates", {"service": "frank-archon", "vram_weights_mib": 25_000,
                                                              "vram_kv_mib": 5_120})
            plan = planned.structured_content
            assert plan is not None
            await fleet.redeploy("frank-archon", replace(before, vram_weights_mib=25_000))
            result = await client.call_tool("verify_deploy", {"service": "frank-archon", "env_text": plan["env_text"]})
    slab = next(p for p in plan["predictions"] if p["key"] == "slab")
    now = int(slab["text"].split("(")[1].split(" now")[0].replace(",", ""))
    # +1,000 MiB of weights at the boot's own mover ratio (about 1,300 slots per 1,792 MiB): about +725 slots
    assert 715 <= int(slab["value"]) - now <= 735 and "+1,000 MiB" not in slab["text"]
    assert "for 1,000 MiB of weights" in slab["text"]
    out = result.structured_content
    assert out is not None
    verdicts = {v["key"]: v["verdict"] for v in out["verdicts"]}
    assert verdicts["slab"] == "kept" and verdicts["referee"] == "kept"


async def test_verify_reads_the_pair_from_table_rows_within_their_rounding(example_text: str) -> None:
    # the boot echoes no --vram-*-mib flags: the table's 23.44 + 5.00 GiB = 24,002.56 + 5,120 = 29,122.56 MiB
    # stands for the env file's 24,000 + 5,120 = 29,120 within the rows' rounding (+-5.12 MiB each): 2.56 apart
    text = "\n".join(x for x in example_text.splitlines() if not x.startswith("I   --vram-"))
    env = ("R_VRAM_WEIGHTS_MIB=24000\nR_VRAM_KV_MIB=5120\nR_MAX_SEQS=2\nR_MAX_MODEL_LEN=200000\nR_KV_CACHE_DTYPE=fp8\n"
           "# prediction referee = 2x200000: the boot prints it\n# verdict referee:\n")
    async with Client(empty_fleet_server()) as client:
        kept = await client.call_tool("verify_deploy", {"log_text": text, "env_text": env})
        moved = await client.call_tool("verify_deploy", {"log_text": text,
                                                         "env_text": env.replace("KV_MIB=5120", "KV_MIB=5100")})
    checks = {c["check"]: c for c in (kept.structured_content or {})["checks"]}
    assert checks["pair <= ceiling"]["ok"] is True and "(table rows)" in checks["pair <= ceiling"]["found"]
    # 29,100 against 29,122.56: 22.56 MiB apart, past the rows' rounding: the env file never reached this boot
    moved_checks = {c["check"]: c for c in (moved.structured_content or {})["checks"]}
    assert moved_checks["plan's boot"]["ok"] is False and "(table rows" in moved_checks["plan's boot"]["found"]
