"""A free figure the engine does not print, given by the caller and labelled (issue 25, item 3), and what the engine
costs that its log does not print (item 4: llama-cpp-python's logits), through MCP on a recorded CPU boot of
llama-cpp-python's own server (tests/fixtures/ledgers/README.md names it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_call import call
from shared_server import empty_fleet_server

from radiance_mcp.app.server import build_server
from radiance_mcp.sources.config import Fleet, ServerSettings, Service
from radiance_mcp.sources.runtime import Runtime

LEDGERS = Path(__file__).parents[1] / "fixtures" / "ledgers"
SERVER_NAME = "recorded_llama-cpp-python-0.3.36_gemma3-270m_server.log"
SERVER = (LEDGERS / "llamacpp" / SERVER_NAME).read_text()
EXAMPLE = (Path(__file__).parents[2] / "radiance_mcp" / "examples" / "frank-archon.log").read_text()
HOST_FREE = {"mib": 4_096, "label": "free -m on the CI host, 10:02"}


async def _plan(**arguments: Any) -> tuple[bool, Any]:
    async with Client(empty_fleet_server()) as client:
        return await call(client, "plan_free_vram", **arguments)


async def test_a_cpu_build_prints_no_free_memory_and_the_plan_says_what_would_decide_it() -> None:
    error, text = await _plan(log_text=SERVER)
    assert error and "free_mib: not printed" in text


async def test_a_labelled_outside_free_figure_prices_the_plan_and_is_never_a_ledger_figure() -> None:
    error, out = await _plan(log_text=SERVER, outside_free=[HOST_FREE])
    assert not error, out
    service = out["services"][0]
    card = service["cards"][0]
    # weights 235.16 + 12.66, KV 6.00 + 30.00 = 283.82 MiB; no --fit: no floor; free 4,096 from outside
    assert card["ceiling_mib"] == 4_379 and card["derivation"] == "all: 283.82 + (4,096 - 0) = 4,379 MiB/card"
    # published as arithmetic (no source: the default) and without a line: no ledger line holds it
    assert "source" not in card["settled_free"] and "line" not in card["settled_free"]
    assert "given outside the ledger, unverified: free -m on the CI host, 10:02" in card["settled_free"]["text"]
    assert any("is given outside the ledger, unverified: free -m on the CI host" in n for n in out["notes"])
    # 4,096 MiB more KV at the boot's own 18,432 B per cell (36.00 MiB over 2,048 cells)
    kv = service["options"][0]
    assert kv["gains"][0]["value"] == 2_048 + 4_096 * 1_048_576 // 18_432


async def test_llama_cpp_pythons_logits_are_said_with_their_arithmetic() -> None:
    _, out = await _plan(log_text=SERVER, outside_free=[HOST_FREE])
    service = out["services"][0]
    logits = "n_ctx x n_vocab x 4 B of float32 logits in host memory (logits_all, its default), which no line prints"
    now = next(n for n in service["notes"] if logits in n)
    assert "2,048 x 262,144 x 4 B = 2,048 MiB (lines 8, 3)" in now  # n_ctx line 8, n_vocab line 3
    option = service["options"][0]["notes"][0]
    # the KV option's 235,064 cells would hold 235,064 MiB of logits: the memory the plan does not see
    assert "at n_ctx 235,064: 235,064 MiB (+233,016 MiB of host memory beside the KV growth)" in option


async def test_a_llama_server_boot_has_no_logits_note() -> None:
    text = SERVER.replace("INFO:     Uvicorn running on http://127.0.0.1:18777 (Press CTRL+C to quit)\n", "")
    _, out = await _plan(log_text=text, outside_free=[HOST_FREE])
    assert not any("logits" in n for n in out["services"][0]["notes"])


@pytest.mark.parametrize(("arguments", "message"), [
    ({"log_text": EXAMPLE, "outside_free": [HOST_FREE]}, "the ledger prints its free memory (2,058.24 MiB, line 26)"),
    ({"log_text": SERVER, "outside_free": [{**HOST_FREE, "card": 3}]}, "outside_free card 3: "),
    ({"outside_free": [HOST_FREE]}, "outside_free is read off one service's cards"),
    ({"log_text": SERVER, "outside_free": [{"mib": 4_096}]}, "label"),
])
async def test_an_outside_figure_is_refused_where_it_would_stand_for_the_engines_own(
    arguments: dict[str, Any], message: str
) -> None:
    error, text = await _plan(**arguments)
    assert error and message in text, text


async def test_a_services_outside_free_figure_is_taken_as_a_log_texts_is() -> None:
    """The same figure for a fleet service (its ledger named by the config) prices the same plan: the later steps
    read the ceilings the plan computed with it, never the boot again without it."""
    fleet = Fleet(services={"cpu": Service(log=str(LEDGERS / "llamacpp" / SERVER_NAME), engine="llama.cpp")},
                  server=ServerSettings())
    async with Client(build_server(Runtime(fleet))) as client:
        error, out = await call(client, "plan_free_vram", service="cpu", outside_free=[HOST_FREE])
    assert not error, out
    assert out["services"][0]["cards"][0]["ceiling_mib"] == 4_379


async def test_compute_ceiling_takes_the_labelled_figure_as_plan_free_vram_does() -> None:
    async with Client(empty_fleet_server()) as client:
        error, text = await call(client, "compute_ceiling", log_text=SERVER)
        assert error and "free_mib: not printed" in text
        error, out = await call(client, "compute_ceiling", log_text=SERVER, outside_free=[HOST_FREE])
        _, planned = await call(client, "plan_free_vram", log_text=SERVER, outside_free=[HOST_FREE])
    assert not error, out
    # 283.82 + (4,096.00 - 0.00): the ceiling plan_free_vram's card shows
    assert out["ceiling_mib"] == planned["services"][0]["cards"][0]["ceiling_mib"] == 4_379
    assert any("is given outside the ledger, unverified: free -m on the CI host" in n for n in out["notes"])
    async with Client(empty_fleet_server()) as client:
        error, text = await call(client, "compute_ceiling", log_text=EXAMPLE, outside_free=[HOST_FREE])
    assert error and "the ledger prints its free memory (2,058.24 MiB, line 26)" in text
