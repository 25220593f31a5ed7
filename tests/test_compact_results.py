"""Results an agent can afford: the text content is compact JSON (one copy), alike items counted once."""

from __future__ import annotations

import json

import pytest
from mcp import Client
from shared_server import empty_fleet_server

from radiance_mcp.app.server import build_server
from radiance_mcp.core.rules.probe_verdicts import collapse_alike
from radiance_mcp.models.probes import BoundaryProbeInput
from radiance_mcp.sim import Shape, SimEndpoint
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet, Service
from radiance_mcp.sources.runtime import Runtime

MAX_BOUNDARY_TEXT_BYTES = 8 * 1024
# The over-shape guard (issue 11's sibling work) asks for its flag when n is above the shape's seats.
OVER_SHAPE = {"over_shape": True} if "over_shape" in BoundaryProbeInput.model_fields else {}


def _text(result: object) -> str:
    content = result.content  # type: ignore[attr-defined]
    assert len(content) == 1
    return str(content[0].text)


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        (["prompt: 2,446,738 prompt tokens does not fit the 200000 token context",
          "prompt: 666,679 prompt tokens does not fit the 200000 token context",
          "prompt: 514 prompt tokens does not fit the 200000 token context"],
         [("prompt: 2,446,738 prompt tokens does not fit the 200000 token context", 3)]),
        (["input has 9000 tokens, at least 8192", "HTTP 500: oops", "input has 12,001 tokens, at least 8192"],
         [("input has 9000 tokens, at least 8192", 2), ("HTTP 500: oops", 1)]),
        (["same", "same", "Same"], [("same", 2), ("Same", 1)]),  # only figures are masked, not wording
        ([], []),
    ],
)
def test_texts_alike_but_for_their_figures_collapse_with_a_count(
    texts: list[str], expected: list[tuple[str, int]]
) -> None:
    assert collapse_alike(texts) == expected


async def test_a_ledger_result_is_one_compact_copy() -> None:
    async with Client(empty_fleet_server()) as client:
        result = await client.call_tool("compute_ceiling", {"log": str(EXAMPLES_DIR / "frank-archon.log")})
    text = _text(result)
    assert json.loads(text) == result.structured_content
    assert "\n" not in text  # no indentation: the SDK's default is an indented second copy
    assert text == json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))


@pytest.mark.slow
async def test_a_boundary_probe_of_64_answers_in_8_kb_with_alike_items_counted() -> None:
    # A 16,384-token window: the count of alike answers is the point, not their size (at 200,000
    # tokens the simulator tokenized ~40 MB of prompts for this one test).
    async with SimEndpoint(Shape(max_model_len=16_384), time_scale=0.001) as ep:
        runtime = Runtime(Fleet(services={"sim": Service(endpoint=ep.url)}))
        async with Client(build_server(runtime)) as client:
            result = await client.call_tool(
                "boundary_probe", {"service": "sim", "n": 64, "max_model_len": 16_384, "execute": True, **OVER_SHAPE}
            )
        text = _text(result)
        out = result.structured_content
        assert not result.is_error and out is not None, text
        counting_refusals = sum(r.status == 400 for r in ep.requests)
    assert len(text.encode()) <= MAX_BOUNDARY_TEXT_BYTES, f"{len(text.encode()):,} bytes"
    assert json.loads(text) == out
    assert out["verdict"] == "64/64 retrieved"
    (request,) = out["requests"]  # 64 alike requests: one entry with its count
    assert request["count"] == 64 and request["indices"] == list(range(64)) and request["verdict"] == "retrieved"
    assert request["latency_s_max"] >= request["latency_s"]
    # Every counting refusal reads 'prompt: N prompt tokens does not fit the 16384 token context'.
    assert [r["count"] for r in out["refusals"]] == [counting_refusals] and counting_refusals > 64
    assert out["refusals"][0]["text"].endswith("prompt tokens does not fit the 16384 token context")


async def test_requests_with_different_outcomes_stay_apart() -> None:
    # A pool below its contract refuses every long request with its own wording: one entry, counted.
    async with SimEndpoint(Shape(vram_kv_mib=3_000), time_scale=0.001) as ep:
        runtime = Runtime(Fleet(services={"low": Service(endpoint=ep.url)}))
        async with Client(build_server(runtime)) as client:
            result = await client.call_tool(
                "boundary_probe", {"service": "low", "n": 3, "max_model_len": 200_000, "execute": True, **OVER_SHAPE}
            )
    out = result.structured_content
    assert out is not None and out["verdict"] == "0/3 retrieved"
    assert [(r["verdict"], r["count"], r["indices"]) for r in out["requests"]] == [("pool_contract", 3, [0, 1, 2])]
    assert "which leaves nothing to generate into" in out["requests"][0]["refusal"]
