"""The ceiling, the floor and the more-KV plan on recorded SGLang and llama.cpp start-ups, over the SDK's MCP client.

Until these logs, SGLang's floor and llama.cpp's ceiling were checked on composed text only.
Both logs are held out (tests/fixtures/ledgers/README.md gives each one's source); every
expected figure below was worked out by hand from the log's lines, the arithmetic beside it.
SGLang and vLLM print "GB" for GiB: 1 GB in their lines is 1,024 MiB.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client
from mcp_call import call, lines, reasons

from radiance_mcp.app.server import build_server
from radiance_mcp.sources.config import Fleet, ServerSettings, Service
from radiance_mcp.sources.runtime import Runtime

LEDGERS = Path(__file__).parent.parent / "fixtures" / "ledgers"
SGLANG = "sglang/heldout_v0.5.10_one_gpu_no_graphs.log"
LLAMA = "llamacpp/heldout_b4641_ci_v100_pythia-2.8b.log"


@asynccontextmanager
async def served() -> AsyncIterator[Client]:
    services = {
        "qwen-sgl": Service(log=str(LEDGERS / SGLANG)),  # engine told from the log's lines
        "pythia": Service(log=str(LEDGERS / LLAMA), engine="llama.cpp"),
        "old-vllm": Service(log=str(LEDGERS / "vllm/heldout_v0.5_tp_gpu_blocks.log"), engine="vllm"),
        "xinference": Service(log=str(LEDGERS / "sglang/heldout_xinference_qwen3-14b_one_gpu.log")),
        "pipeline": Service(log=str(LEDGERS / "llamacpp/heldout_2024_command-r_2gpu_pipeline.log")),
    }
    fleet = Fleet(services=services, server=ServerSettings(log_roots=(str(LEDGERS),)))
    async with Client(build_server(Runtime(fleet))) as client:
        yield client


# ---------------------------------------------------------------------------------------
# SGLang 0.5.10, one GPU, --disable-cuda-graph, mem_fraction_static=0.86 (line 2)


async def test_sglang_floor_and_figures_from_a_real_boot() -> None:
    async with served() as client:
        error, out = await call(client, "read_budget_table", service="qwen-sgl")
    assert not error, out
    (rank,) = out["cards"]
    assert out["engine"] == "sglang" and rank["rank"] == "engine"
    # floor: 'Load weight begin. avail mem=36.54 GB' (line 6) x (1 - 0.86) = 37,416.96 x 0.14 = 5,238.3744 MiB
    assert rank["floor_mib"]["value"] == pytest.approx(5_238.3744) and lines(rank["floor_mib"]) == [6, 2]
    # settled free: available_gpu_mem=4.46 GB of the scheduler's summary = 4,567.04 MiB
    assert rank["free_mib"]["value"] == pytest.approx(4_567.04) and lines(rank["free_mib"]) == [15]
    # weights: mem usage=0.98 GB = 1,003.52 MiB; KV: K 15.21 + V 15.21 GB = 31,150.08 MiB for 2,658,165 tokens
    assert rank["weights_mib"]["value"] == pytest.approx(1_003.52) and lines(rank["weights_mib"]) == [10]
    assert rank["kv_mib"]["value"] == pytest.approx(31_150.08) and rank["kv_tokens"]["value"] == 2_658_165
    # 31,150.08 MiB x 2**20 / 2,658,165 = 12,287.89 B/token; Qwen2.5-0.5B: 24 layers x 2 KV heads x 64 x 2 x 2 B
    # = 12,288, within the +-0.01 GB of the two sizes (+-8.08 B / 2)
    assert abs(rank["kv_bytes_per_token"]["value"] - 12_288) <= 4.04
    # context_len=32768: 2,658,165 / 32,768 = 81.12 full-length sequences
    assert rank["full_length_sequences"]["value"] == pytest.approx(81.12)
    assert out["settings"]["mem_fraction_static"]["value"] == pytest.approx(0.86)
    assert out["settings"]["max_running_requests"]["value"] == 4_096
    missing = {entry["figure"]: entry["why"] for entry in out["missing"]}
    assert all(entry["ranks"] == ["engine"] for entry in out["missing"])
    assert set(missing) == {"activation_mib", "graph_mib"}  # everything else is on a line
    assert "--disable-cuda-graph" in missing["graph_mib"] and "nvidia-smi" in missing["activation_mib"]


async def test_sglang_ceiling_where_the_engine_ate_into_its_own_floor() -> None:
    async with served() as client:
        error, out = await call(client, "compute_ceiling", service="qwen-sgl")
    assert not error, out
    # ceiling = (free - floor) + weights + KV = (4,567.04 - 5,238.3744) + 1,003.52 + 31,150.08 = 31,482.27 -> 31,482:
    # SGLang left 671.33 MiB less free than its --mem-fraction-static floor (its request slots and buffers sit in
    # the floor), so the pair that runs is above the ceiling and nothing is left to spend
    assert out["ceiling_mib"] == 31_482 and out["pair_mib"] == pytest.approx(32_153.60)
    assert out["headroom_mib"] == -672
    (card,) = out["cards"]
    assert card["settled_free_mib"] == pytest.approx(4_567.04) and card["engine_floor_mib"] == pytest.approx(5_238.37)
    # 31,482 - 32,153.60 = -671.60: the card's headroom rounds down as the call's does, never up to -671
    assert card["headroom_mib"] == -672
    assert any("below card 0's current pair" in w for w in out["warnings"])
    assert {ref["line"] for ref in out["sources"]} == {2, 6, 10, 12, 15}
    assert any("--mem-fraction-static" in note for note in out["notes"])


async def test_sglang_plan_offers_no_more_kv_when_the_floor_is_already_spent() -> None:
    async with served() as client:
        error, out = await call(client, "plan_free_vram", service="qwen-sgl")
    assert not error, out
    (plan,) = out["services"]
    assert plan["model"] == "sglang" and plan["usable_mib"] == -672 and plan["options"] == []
    assert any("no headroom to spend" in note for note in plan["notes"])
    (card,) = plan["cards"]
    floor, free = card["engine_floor"], card["settled_free"]
    assert floor["value"] == pytest.approx(5_238.37) and "0.14" in floor["text"] and "lines 6, 2" in floor["text"]
    assert free["line"] == 15 and free["value"] == pytest.approx(4_567.04)
    shape = {s["name"]: (s["value"], s["line"]) for s in plan["shape"]}
    assert shape == {"window": (32_768, 15), "sequences served at once": (4_096, 15)}


async def test_sglang_contract_fits_the_pool_but_not_the_ceiling() -> None:
    async with served() as client:
        error, out = await call(client, "check_pool_contract", service="qwen-sgl", seqs=64)
        _, default = await call(client, "check_pool_contract", service="qwen-sgl")
    assert not error, out
    # 64 x 32,768 = 2,097,152 tokens <= 2,658,165: the pool holds them; 2,658,165 // 32,768 = 81 at the window
    assert out["contract_ok"] is True and out["max_seqs_at_window"] == 81
    # but weights 1,003.52 + pool 31,150.09 = 32,153.61 MiB > the ceiling of 31,482: the boot overruns its floor
    assert out["ceiling"]["ok"] is False and out["ceiling"]["margin_mib"] == pytest.approx(-671.61)
    assert out["ok"] is False and out["inputs_from"]["max_model_len"]["line"] == 15
    # unasked, the seats are max_running_requests=4096 (line 15): 4,096 x 32,768 tokens are far beyond the pool
    assert default["seqs"] == 4_096 and default["inputs_from"]["seqs"]["line"] == 15
    assert default["contract_ok"] is False and "at most 81 run at once" in default["refusal"]


# ---------------------------------------------------------------------------------------
# llama.cpp build 4641 (its CI), Tesla V100, Pythia 2.8B q8_0, -c 2048, one sequence


async def test_llama_cpp_ceiling_from_the_free_memory_it_found_at_load() -> None:
    async with served() as client:
        error, out = await call(client, "compute_ceiling", service="pythia")
    assert not error, out
    # CUDA0 free at load 15,841 MiB (line 1) - model 2,684.57 - KV 640.00 - compute 162.00 = 12,354.43 MiB settled
    # ceiling = (12,354.43 - 0) + 2,684.57 + 640.00 = 15,679.00 MiB: what the card had, less the compute buffer
    (card,) = out["cards"]
    assert card["settled_free_mib"] == pytest.approx(12_354.43) and card["engine_floor_mib"] == 0
    assert out["ceiling_mib"] == 15_679 and out["pair_mib"] == pytest.approx(3_324.57)
    assert out["headroom_mib"] == 12_354 and out["warnings"] == []
    assert {ref["line"] for ref in out["sources"]} == {1, 85, 96, 99}
    assert any("without --fit" in note for note in out["notes"]) and "0=CUDA0" in out["notes"][-1]


async def test_llama_cpp_more_kv_priced_at_its_own_cells() -> None:
    async with served() as client:
        error, out = await call(client, "plan_free_vram", service="pythia")
        held_error, held = await call(client, "plan_free_vram", service="pythia",
                                      reserves=[{"mib": 2_048, "label": "desktop session", "personal": True}])
    assert not error, out
    (option,) = out["services"][0]["options"]
    gains = {g["name"]: g["value"] for g in option["gains"]}
    # 640.00 MiB / 2,048 cells = 327,680 B/token (32 layers x 2,560 x 2 x 2 B); 12,354 MiB x 2**20 / 327,680 B
    # = 39,532.8 -> 39,532 more cells: 41,580 tokens, / 2,048 (n_ctx_per_seq) = 20.30 full-length sequences
    assert option["adds_mib"] == 12_354 and gains == {"KV tokens": 41_580, "full-length sequences": 20.30}
    assert "-c / --ctx-size" in option["flags"][0]
    assert not held_error, held
    # 12,354 - 2,048 = 10,306 MiB: x 3.2 = 32,979.2 -> 2,048 + 32,979 = 35,027 tokens, / 2,048 = 17.10
    service = held["services"][0]
    assert service["usable_mib"] == 10_306 and service["personal_reserves"] == ["desktop session"]
    held_gains = {g["name"]: g["value"] for g in service["options"][0]["gains"]}
    assert held_gains == {"KV tokens": 35_027, "full-length sequences": 17.10}


async def test_llama_cpp_contract_reads_the_sequences_from_n_seq_max() -> None:
    async with served() as client:
        read_error, read = await call(client, "check_pool_contract", service="pythia")
        error, out = await call(client, "check_pool_contract", service="pythia", seqs=2)
    # llama-perplexity prints no n_slots, but its context line does: 'n_seq_max = 1' (line 87)
    assert not read_error, read
    assert read["seqs"] == 1 and read["inputs_from"]["seqs"]["line"] == 87 and read["contract_ok"] is True
    assert not error, out
    # 2 x 2,048 = 4,096 tokens > the 2,048 cells: one sequence at the window at a time
    assert out["contract_ok"] is False and out["max_seqs_at_window"] == 1 and out["max_window_at_seqs"] == 1_024
    assert out["rate_bytes_per_token"] == 327_680 and out["inputs_from"]["max_model_len"]["line"] == 89


# ---------------------------------------------------------------------------------------
# What the real logs do not print is named, with how to get it, and nothing is computed


@pytest.mark.parametrize(
    ("service", "names", "remedy"),
    [
        # vLLM 0.5 prints weights and '# GPU blocks' only: no KV memory, no card total
        ("old-vllm", ("kv_mib", "free_mib", "floor_mib"), "before 0.6"),
        # SGLang's excerpt stops at the capture: no summary, no server_args, no 'Load weight begin'
        ("xinference", ("free_mib", "floor_mib"), "server_args line"),
        # llama.cpp of 2024 prints no device free memory at load
        ("pipeline", ("free_mib",), "MiB free"),
    ],
)
async def test_a_ceiling_the_log_cannot_back_names_what_is_missing(service: str, names: tuple[str, ...],
                                                                  remedy: str) -> None:
    async with served() as client:
        error, message = await call(client, "compute_ceiling", service=service)
        plan_error, plan = await call(client, "plan_free_vram", service=service)
    assert error and "nothing is estimated" in message and remedy in message
    assert all(f"{name}: not printed" in message for name in names)
    assert plan_error and plan == message  # the plan stands on the same ceiling: the same finding


async def test_the_fleet_plan_spends_what_the_real_logs_back_and_lists_the_rest() -> None:
    async with served() as client:
        error, out = await call(client, "plan_free_vram")
    assert not error, out
    planned = {s["service"]: s["usable_mib"] for s in out["rows"]}
    assert planned == {"qwen-sgl": -672, "pythia": 12_354}
    unreadable = reasons(out)
    assert set(unreadable) == {"old-vllm", "xinference", "pipeline"}
    assert all("free_mib: not printed" in why for why in unreadable.values())
    assert out["fleet_headroom_mib"] == 12_354  # a service with no headroom adds none
