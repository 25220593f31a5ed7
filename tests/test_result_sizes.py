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


def _size(answer: dict[str, object]) -> int:
    """An answer's characters: its structured content as compact JSON, or its error's text."""
    return len(json.dumps(answer.get("structured", answer.get("error")), ensure_ascii=False, separators=(",", ":")))


ONE_PLAN_CHARS = 6_000
"""Issue 26: one service's plan (twin, two cards, three options, a shared card, is the largest: 5,608)."""

MULTI_RANK = {"sglang/tp8_pool_80_layers", "sglang/tp8_load_begin", "sglang/v0.4.3_dsv3_tp8_load_end_without_usage",
              "sglang/dp4_tp4_ep4_pool", "sglang/npu_grok2_tp16_dtype_kv", "sglang/2025-12_tp4_qwen_omni_pool",
              "llamacpp/b45xx_server_8_slots"}
"""Recorded ledgers of 4 ranks or more (SGLang's tp8, tp4, dp4 and tp16, llama.cpp's 8 devices): read_budget_table's
answer on them is budgeted apart, since it grows with the ranks (what they say alike is said once)."""
ISSUE_BUDGETS = {"plan_free_vram", "plan_free_vram (fleet)"}
"""Budgets issue 26 sets; each other is its tool's worst case rounded up, within TIGHT of it."""
TIGHT = 1.2

BUDGET_CHARS = {
    "list_fleet": 2_000,
    # SGLang v0.5.10's one GPU: its 10,893-character server_args line, quoted once (26,274 when each figure quoted it)
    "read_budget_table": 15_000,
    # llama.cpp's 8 devices and 'all': 11,658 (30,207 when each device said its own missing figures, settings and
    # lines); SGLang's tp8 7,756 (20,262)
    "read_budget_table (multi-rank)": 12_500,
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


def _budgeted(path: Path, answer: dict[str, object]) -> str:
    """The budget an answer is held to: its tool's, the whole fleet's plan or a multi-rank ledger's table apart."""
    # the recorded ledgers' calls keep no log_text argument (the file is the name): one ledger each
    if answer["tool"] == "plan_free_vram" and not answer["arguments"] and path.name == "demo.json":
        return "plan_free_vram (fleet)"
    ledger = path.stem.removeprefix("ledger-").replace("-", "/", 1)
    if answer["tool"] == "read_budget_table" and ledger in MULTI_RANK:
        return "read_budget_table (multi-rank)"
    return str(answer["tool"])


def test_every_tools_result_fits_its_budget_and_each_budget_is_its_worst_case() -> None:
    largest: dict[str, tuple[int, str]] = {}
    ranks: dict[str, int] = {}
    for path in sorted(SNAPSHOTS.glob("*.json")):
        for answer in json.loads(path.read_text(encoding="utf-8")):
            tool = _budgeted(path, answer)
            largest[tool] = max(largest.get(tool, (0, "")), (_size(answer), path.stem))
            if answer["tool"] == "read_budget_table" and "structured" in answer:
                ranks[path.stem.removeprefix("ledger-").replace("-", "/", 1)] = len(answer["structured"]["cards"])
    print("largest result, characters:", json.dumps(largest, indent=1, sort_keys=True))
    assert set(largest) == set(BUDGET_CHARS), "a tool without a budget, or a budget without a tool"
    assert set(tool_names()) - {t.split(" ")[0] for t in BUDGET_CHARS} == {"token_count_probe", "decode_probe",
                                                                           "compare_dry_run"}
    # every recorded ledger of 4 ranks or more is in the multi-rank budget, and only those
    assert {name for name, count in ranks.items() if count >= 4} == MULTI_RANK, ranks
    over = {tool: (size, BUDGET_CHARS[tool]) for tool, (size, _) in largest.items() if size > BUDGET_CHARS[tool]}
    assert not over, f"over budget (characters, budget): {over}"
    # a budget far above its tool's largest result keeps nothing: each is the worst case, rounded up
    loose = {tool: (size, BUDGET_CHARS[tool], at) for tool, (size, at) in largest.items()
             if tool not in ISSUE_BUDGETS and BUDGET_CHARS[tool] > size * TIGHT}
    assert not loose, f"budgets past {TIGHT:.0%} of their worst case (characters, budget, where): {loose}"


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
