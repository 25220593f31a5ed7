"""Every tool's result within a stated budget (issue 26 item 1), in characters of compact JSON structured
content (or the error's text), on the demo fleet and every recorded ledger: tests/snapshots/ keeps those
answers and tests/test_snapshots.py holds them equal to what the tools answer, so a budget over the
snapshots is a budget over the answers. The whole fleet's plan is bounded by construction for any fleet
(tests/test_fleet_answer_size.py, 206 services)."""

from __future__ import annotations

import json
from pathlib import Path

from radiance_mcp.sim import DEFAULT_SERVICES
from radiance_mcp.sources.config import EXAMPLES_DIR
from radiance_mcp.tools import tool_names
from radiance_mcp.tools.plan_fleet import FLEET_ANSWER_CHARS

SNAPSHOTS = Path(__file__).parent / "snapshots"
LEDGERS = Path(__file__).parent / "fixtures" / "ledgers"
ONE_PLAN_CHARS = 6_000
"""Issue 26: one service's plan (twin, two cards, three options, a shared card, is the largest: 5,608)."""

BUDGET_CHARS = {
    "list_fleet": 2_000,
    "read_budget_table": 31_000,  # llama.cpp's 8-slot server: every slot's figures and its settings (n_ubatch too)
    "compute_ceiling": 13_500,  # SGLang v0.5.10 without graphs: every figure missing, each named
    "check_pool_contract": 15_000,
    "plan_free_vram": ONE_PLAN_CHARS,
    "plan_free_vram (fleet)": FLEET_ANSWER_CHARS,
    "render_gates": 6_000,
    "verify_deploy": 4_000,
    "audit_step_shape": 10_000,
    "check_serve_script": 2_500,
    "boundary_probe": 2_000,
    "compare_arms": 1_000,
}
"""Each tool's largest result on the demo and the recorded ledgers, rounded up: a result past it is a
change to look at (the probes that send, token_count_probe and decode_probe, answer live endpoints only:
their results are kept by tests/probes/)."""


def test_every_tools_result_fits_its_budget() -> None:
    largest: dict[str, int] = {}
    for path in sorted(SNAPSHOTS.glob("*.json")):
        for answer in json.loads(path.read_text(encoding="utf-8")):
            value = answer.get("structured", answer.get("error"))
            size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
            # the recorded ledgers' calls keep no log_text argument (the file is the name): one ledger each
            whole_fleet = answer["tool"] == "plan_free_vram" and not answer["arguments"] and path.name == "demo.json"
            tool = answer["tool"] + (" (fleet)" if whole_fleet else "")
            largest[tool] = max(largest.get(tool, 0), size)
    print("largest result, characters:", json.dumps(largest, indent=1, sort_keys=True))
    assert set(largest) == set(BUDGET_CHARS), "a tool without a budget, or a budget without a tool"
    assert set(tool_names()) - {t.split(" ")[0] for t in BUDGET_CHARS} == {"token_count_probe", "decode_probe",
                                                                           "compare_dry_run"}
    over = {tool: (size, BUDGET_CHARS[tool]) for tool, size in largest.items() if size > BUDGET_CHARS[tool]}
    assert not over, f"over budget (characters, budget): {over}"


def _size(answer: dict[str, object]) -> int:
    return len(json.dumps(answer.get("structured", answer.get("error")), ensure_ascii=False, separators=(",", ":")))


def test_one_services_plan_fits_its_budget_for_every_service_and_every_engines_ledger() -> None:
    """Every service of the demo fleet and every recorded ledger (radiance, vLLM, SGLang, llama.cpp) has its
    one-service plan kept in the snapshots, each within ONE_PLAN_CHARS: none is left out of the budget."""
    sizes: dict[str, int] = {}
    for answer in json.loads((SNAPSHOTS / "demo.json").read_text(encoding="utf-8")):
        if answer["tool"] == "plan_free_vram" and "service" in answer["arguments"]:
            sizes[answer["arguments"]["service"]] = _size(answer)
    assert set(sizes) == {spec.name for spec in DEFAULT_SERVICES}
    logs = [*sorted(EXAMPLES_DIR.glob("*.log")), *sorted(LEDGERS.glob("*/*.log"))]
    assert {log.parent.name for log in logs} >= {"examples", "vllm", "sglang", "llamacpp"}
    for log in logs:
        (plan,) = [a for a in json.loads((SNAPSHOTS / f"ledger-{log.parent.name}-{log.stem}.json").read_text(
            encoding="utf-8")) if a["tool"] == "plan_free_vram"]
        sizes[f"{log.parent.name}/{log.stem}"] = _size(plan)
    print("one service's plan, characters:", json.dumps(dict(sorted(sizes.items(), key=lambda kv: -kv[1])), indent=1))
    over = {name: size for name, size in sizes.items() if size > ONE_PLAN_CHARS}
    assert not over, f"plans over {ONE_PLAN_CHARS:,} characters: {over}"
