"""Issue 22, item 5: engine figures that cannot be, over the SDK's client.

- A vLLM 0.8 boot keeps exactly its (1 - utilization) share free, so its ceiling is its pair: the
  headroom is 0, never the -1 the ceiling's rounding down (against a pair measured in GiB) once made.
- A `gpu_memory_utilization` above 1 (or 0) is no share of a card: vLLM refuses it at start-up, so
  a line that prints one is not vLLM's, and the free memory it implies (the card less 1.90 of it)
  is refused with the line, as a radiance card that settles above its total is.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp_call import call

from radiance_mcp.app.server import build_server
from radiance_mcp.sources.config import Fleet, ServerSettings
from radiance_mcp.sources.runtime import Runtime

V08 = Path(__file__).parent.parent / "fixtures" / "ledgers" / "vllm" / "heldout_v0.8_16gib_47x.log"


def client() -> Client:
    return Client(build_server(Runtime(Fleet(services={}, server=ServerSettings()))))


async def test_a_vllm_08_boot_at_its_floor_has_headroom_0_not_minus_1() -> None:
    async with client() as mcp:
        error, out = await call(mcp, "compute_ceiling", log_text=V08.read_text())
        plan_error, plan = await call(mcp, "plan_free_vram", log_text=V08.read_text())
    assert not error, out
    # free = floor = 15.99 GiB - 14.39 GiB = 1,638.40 MiB; pair 5.2045 GB + 7.73 GiB = 5,329.41 + 7,915.52
    # = 13,244.93 MiB; ceiling 13,244.93 + (1,638.40 - 1,638.40) = 13,244 MiB rounded down; headroom 0
    assert out["ceiling_mib"] == 13_244 and out["headroom_mib"] == 0
    assert not out["warnings"], out["warnings"]  # the pair's 0.93 MiB fraction is the ceiling's rounding
    assert not plan_error, plan
    assert plan["services"][0]["usable_mib"] == 0


@pytest.mark.parametrize("util", ["1.90", "0.00", "2"])
async def test_a_utilization_that_is_no_share_of_the_card_is_refused_naming_its_line(util: str) -> None:
    text = V08.read_text().replace("gpu_memory_utilization (0.90) = 14.39GiB",
                                   f"gpu_memory_utilization ({util}) = 30.38GiB")
    async with client() as mcp:
        for tool in ("read_budget_table", "compute_ceiling", "plan_free_vram"):
            error, message = await call(mcp, tool, log_text=text)
            assert error, (tool, message)
            assert f"line 3: gpu_memory_utilization {util} is no share of the card" in message, (tool, message)
            assert "0 < --gpu-memory-utilization <= 1" in message and "total_gpu_memory (15.99GiB)" in message


async def test_a_v06_profile_line_with_a_utilization_above_1_is_refused() -> None:
    line = ("INFO 09-10 12:00:00 gpu_executor.py:122] Memory profiling results: total_gpu_memory=79.15GiB "
            "initial_memory_usage=15.60GiB peak_torch_memory=16.90GiB memory_usage_post_profile=15.70GiB "
            "non_torch_memory=0.40GiB kv_cache_size=55.00GiB gpu_memory_utilization=1.90")
    text = ("INFO 09-10 11:59:00 llm_engine.py:232] Initializing an LLM engine (v0.6.1) with config: model='m'\n"
            "INFO 09-10 11:59:50 model_runner.py:1014] Loading model weights took 14.9888 GB\n" + line + "\n")
    async with client() as mcp:
        error, message = await call(mcp, "compute_ceiling", log_text=text)
    assert error and "line 3: gpu_memory_utilization 1.90 is no share of the card" in message, message


async def test_an_sglang_static_fraction_above_1_is_refused_as_vllm_s_utilization_is() -> None:
    log = Path(__file__).parent.parent / "fixtures" / "ledgers" / "sglang" / "heldout_v0.5.10_one_gpu_no_graphs.log"
    text = log.read_text()
    assert "mem_fraction_static=0.86" in text
    async with client() as mcp:
        error, message = await call(mcp, "compute_ceiling", log_text=text.replace("mem_fraction_static=0.86",
                                                                                  "mem_fraction_static=1.86"))
    assert error and "line 2: mem_fraction_static 1.86 is no share of the card" in message, message
    assert "0 < --mem-fraction-static <= 1" in message
