"""The scenario set (issue 27, item 5): 40 or more scenarios over every step of both skills and other engines,
perturbed variants whose facts come from the simulator's own parameters (radiance_mcp.evals.variants), and a
held-out split the scripted agents do not name. The runs themselves are test_eval_agents.py's (slow)."""

from __future__ import annotations

import tomllib
from decimal import Decimal
from pathlib import Path

import pytest

from radiance_mcp.core.errors import EvalError
from radiance_mcp.evals import variants
from radiance_mcp.evals.fleet import running_fleet
from radiance_mcp.evals.scenario import SCENARIOS_DIR, load_scenarios, parse_scenario
from radiance_mcp.sim import Shape
from radiance_mcp.sources.config import load

SCENARIOS = load_scenarios()
AGENT_MODULES = [Path(variants.__file__).with_name(name) for name in ("agents.py", "reference.py", "faulty.py")]


def test_the_variant_files_are_what_the_generator_writes() -> None:
    written = variants.render_all()
    on_disk = {p.name for p in SCENARIOS_DIR.glob(f"{variants.PREFIX}*.toml")}
    assert on_disk == set(written)  # none hand-made, none left behind
    for name, text in written.items():
        assert (SCENARIOS_DIR / name).read_text(encoding="utf-8") == text, f"{name}: run the generator"
    assert variants.main(["--check"]) == 0


def test_the_generators_arithmetic_gives_the_seeds_figures_on_the_reference_boot() -> None:
    (card,) = variants.cards(Shape())
    # the settled line: 2.01 GiB free against 209.19 MiB; 29,120 + (2,058.24 - 209.19) = 30,969 MiB (seed)
    assert (card.free_mib, card.floor_mib, card.ceiling_mib) == (Decimal("2058.24"), Decimal("209.19"), 30_969)
    assert variants.seats_backed(Shape(), 6_969) == 4  # 4 seats fit 6,969 MiB, 5 do not
    assert round(variants.contract_mib(Shape(), 4), 2) == Decimal("6600.89")
    assert round(variants.contract_mib(Shape(), 2), 2) == Decimal("3524.45")


def test_the_variants_state_the_figures_of_their_own_perturbed_shape() -> None:
    text = variants.render(variants.Variant("variant-x", "frank-archon", {"gpu_headroom_mib": 512}))
    data = tomllib.loads(text)
    facts = {f["name"]: f["value"] for f in data["facts"]}
    shape = Shape(gpu_headroom_mib=512)
    (card,) = variants.cards(shape)
    assert card.floor_mib == shape.floor_mib  # the engine floor grows with --gpu-headroom-mib
    assert facts["ceiling_mib"] == card.ceiling_mib < 30_969
    assert facts["new_pool_mib"] == card.ceiling_mib - 24_000
    assert data["split"] == "held-out" and data["traps"][0]["value"] == round(29_120 + card.free_mib)


def test_a_variant_that_would_not_boot_is_refused() -> None:
    with pytest.raises(ValueError, match="refused"):
        variants.render(variants.Variant("variant-x", "frank-archon", {"max_num_batched_tokens": 65_536}))


def test_the_set_covers_both_skills_other_engines_and_two_splits() -> None:
    assert len(SCENARIOS) >= 40
    tasks = {s.agent.task for s in SCENARIOS}
    assert tasks >= {"ceiling", "free_vram", "pool", "audit", "serve_script", "rate", "arms", "count", "boundary",
                     "verify", "engine"}
    assert {log.engine for s in SCENARIOS for log in s.fleet.logs} == {"vllm", "sglang", "llama.cpp"}
    assert all(log.source for s in SCENARIOS for log in s.fleet.logs)  # test data from public logs names its source
    held_out = load_scenarios(split="held-out")
    dev = load_scenarios(split="dev")
    assert len(held_out) >= 10 and len(dev) >= 20 and len(held_out) + len(dev) == len(SCENARIOS)
    assert {s.procedure for s in held_out} == {"radiance-kv-cache-resize", "radiance-step-shape-ledger-audit"}
    assert all(s.split == "held-out" for s in SCENARIOS if s.name.startswith(variants.PREFIX))


def test_every_held_out_plan_is_one_a_dev_scenario_gives_the_agents_too() -> None:
    """The agents' code was written against the dev split: each held-out scenario asks them for a task, with plan
    keys, that some dev scenario asks for as well, so no agent code exists for a held-out scenario alone."""
    def plan(scenario) -> tuple[str, frozenset[str]]:
        return scenario.agent.task, frozenset(scenario.agent.model_dump(exclude_defaults=True))

    dev = {plan(s) for s in SCENARIOS if s.split == "dev"}
    alone = [s.name for s in SCENARIOS if s.split == "held-out" and plan(s) not in dev]
    assert not alone, alone


def test_no_scripted_agent_names_a_scenario() -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in AGENT_MODULES)
    named = [s.name for s in SCENARIOS if s.name in source]
    assert not named, f"the scripted agents name scenarios: {named}"


def test_a_split_that_does_not_exist_is_refused_naming_the_splits() -> None:
    with pytest.raises(EvalError, match="split"):
        parse_scenario((SCENARIOS_DIR / "thinking-trap.toml").read_text() + '\nsplit = "train"\n', "t")
    with pytest.raises(EvalError, match="the splits are dev, held-out"):
        load_scenarios(split="train")  # type: ignore[arg-type]


def test_a_fleet_needs_a_service_or_an_engine_log() -> None:
    text = (SCENARIOS_DIR / "thinking-trap.toml").read_text().replace('[[fleet.services]]\nlike = "frank-archon"\n',
                                                                       "[fleet]\n")
    with pytest.raises(EvalError, match="at least one service"):
        parse_scenario(text, "t")


async def test_an_engine_log_is_a_service_of_the_fleet_config_with_its_engine() -> None:
    scenario = next(s for s in SCENARIOS if s.name == "vllm-16gib-plan")
    async with running_fleet(scenario) as fleet:
        service = load(fleet.config_path).services["vllm-16g"]
        assert service.engine == "vllm" and service.endpoint is None
        assert Path(str(service.log)).read_text(encoding="utf-8") == scenario.fleet.logs[0].text
