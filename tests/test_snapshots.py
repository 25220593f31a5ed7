"""Snapshots of every tool's answer on the demo fleet and on every recorded ledger (issue 23, step a).

The package is about to be restructured (one boot model, folders by layer). What a user sees must
stay as it is, so every tool that answers from files is called here through the SDK's client, in
memory, and its whole answer (structured content, or the error's text) is compared with the copy
kept in tests/snapshots/. A change of concept changes these files in the same commit, where a
reviewer reads the difference; a move of code must leave them as they are.

- the demo fleet (radiance_mcp.sim's five services, as `serve --demo` serves them): each ledger tool,
  the plan, the gates and their verification, the audit and the serve-script check, the plan of a
  boundary probe (execute=false: nothing is sent); the live probes' rates are timings and are
  not kept here (tests/probes/ checks them);
- every ledger under tests/fixtures/ledgers (vLLM, SGLang, llama.cpp, of many versions) and the
  shipped examples: read_budget_table, compute_ceiling, check_pool_contract and plan_free_vram.

Paths under the test's directory and the checkout's, and loopback ports, are written as <root>, <checkout>
and <port>.
`RADIANCE_MCP_UPDATE_SNAPSHOTS=1 pytest tests/test_snapshots.py` writes the copies anew.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

import radiance_mcp
from radiance_mcp.app.server import build_server
from radiance_mcp.sim import SimFleet
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet, ServerSettings, load
from radiance_mcp.sources.runtime import Runtime

SNAPSHOTS = Path(__file__).parent / "snapshots"
LEDGERS = Path(__file__).parent / "fixtures" / "ledgers"
UPDATE = os.environ.get("RADIANCE_MCP_UPDATE_SNAPSHOTS") == "1"
PORT = re.compile(r"(127\.0\.0\.1|localhost):\d+")

LEDGER_TOOLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("read_budget_table", {}),
    ("compute_ceiling", {}),
    ("check_pool_contract", {"seqs": 1}),
    ("plan_free_vram", {}),
)


async def answer(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        return {"tool": tool, "arguments": arguments, "error": result.content[0].text}  # type: ignore[union-attr]
    return {"tool": tool, "arguments": arguments, "structured": result.structured_content}


CHECKOUT = str(Path(radiance_mcp.__file__).parent.parent)
"""Where the package runs from (a clone's path: the shipped examples' paths hold it)."""


def normalised(value: Any, root: str) -> Any:
    text = json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False)
    for path, name in ((root, "<root>"), (CHECKOUT, "<checkout>")):
        if path:
            text = text.replace(json.dumps(path)[1:-1], name)
    return json.loads(PORT.sub(r"\1:<port>", text))


def check(name: str, answers: list[dict[str, Any]], root: str = "") -> None:
    """The answers against tests/snapshots/<name>.json (written anew under RADIANCE_MCP_UPDATE_SNAPSHOTS=1)."""
    got = normalised(answers, root)
    path = SNAPSHOTS / f"{name}.json"
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, sort_keys=True, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return
    assert path.exists(), f"no snapshot {path}: run RADIANCE_MCP_UPDATE_SNAPSHOTS=1 pytest {__file__}"
    kept = json.loads(path.read_text(encoding="utf-8"))
    for was, now in zip(kept, got, strict=False):
        assert now == was, f"{name}: {now['tool']}({now['arguments']}) answers otherwise than tests/snapshots keeps"
    assert len(got) == len(kept), f"{name}: {len(got)} answers where the snapshot keeps {len(kept)}"


def recorded_ledgers() -> Iterator[Path]:
    yield from sorted(EXAMPLES_DIR.glob("*.log"))
    yield from sorted(LEDGERS.glob("*/*.log"))


@pytest.mark.parametrize("log", list(recorded_ledgers()), ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_the_ledger_tools_answer_every_recorded_ledger_as_before(log: Path) -> None:
    text = log.read_text(encoding="utf-8", errors="replace")
    async with Client(build_server(Runtime(Fleet(server=ServerSettings())))) as client:
        answers = [await answer(client, tool, {**extra, "log_text": text}) for tool, extra in LEDGER_TOOLS]
    for kept in answers:
        kept["arguments"] = {k: v for k, v in kept["arguments"].items() if k != "log_text"}  # the file is the name
    check(f"ledger-{log.parent.name}-{log.stem}", answers)


DEMO_CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("list_fleet", {}),
    ("plan_free_vram", {}),
    *((tool, {"service": service, **extra}) for service in ("frank-archon", "qwen38-proven", "qwen38-wide",
                                                             "twin", "lowpool") for tool, extra in LEDGER_TOOLS),
    ("compute_ceiling", {"service": "frank-archon", "reserves": [{"mib": 96, "label": "gpu headroom", "line": 11}]}),
    ("compute_ceiling", {"service": "frank-archon", "reserves": [{"mib": 256, "label": "safety"}]}),
    ("compute_ceiling", {"service": "frank-archon",
                         "reserves": [{"mib": 256, "label": "a second context", "personal": True}]}),
    ("check_pool_contract", {"service": "frank-archon", "seqs": 4, "max_model_len": 200_000}),
    ("check_pool_contract", {"service": "frank-archon", "seqs": 5, "max_model_len": 200_000}),
    ("render_gates", {"service": "frank-archon", "vram_kv_mib": 6_900}),
    ("render_gates", {"service": "lowpool", "vram_kv_mib": 6_900}),
    ("render_gates", {"service": "frank-archon", "vram_kv_mib": 99_999}),
    ("verify_deploy", {"service": "frank-archon"}),
    ("audit_step_shape", {"proven_service": "qwen38-proven", "candidate_service": "qwen38-wide"}),
    ("check_serve_script", {"service": "qwen38-wide"}),
    ("check_serve_script", {"service": "qwen38-proven"}),
    ("boundary_probe", {"service": "frank-archon", "n": 2}),
    ("compare_arms", {"arms": [{"value": 256, "rate": 31.2}, {"value": 512, "rate": 31.4}], "knob": "slab MiB",
                      "claim": "plateau"}),
    ("compare_arms", {"arms": [{"value": 256, "rate": 31.2}, {"value": 512, "rate": 35.0},
                               {"value": 1024, "rate": 35.1}], "knob": "slab MiB", "claim": "threshold"}),
)


async def test_every_tool_answers_the_demo_fleet_as_before(tmp_path: Path) -> None:
    async with SimFleet.start(tmp_path) as fleet:
        async with Client(build_server(Runtime(load(fleet.config_path)))) as client:
            answers = [await answer(client, tool, dict(arguments)) for tool, arguments in DEMO_CALLS]
            # The plan's env file verified against the boot still running (the plan never deployed).
            (rendered,) = [a for a in answers if a["arguments"] == {"service": "frank-archon", "vram_kv_mib": 6_900}]
            answers.append(await answer(client, "verify_deploy", {"service": "frank-archon",
                                                                  "env_text": rendered["structured"]["env_text"]}))
    check("demo", answers, str(tmp_path))
