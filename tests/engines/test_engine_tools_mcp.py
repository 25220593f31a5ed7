"""The ledger tools on vLLM, SGLang and llama.cpp boots, over the SDK's MCP client.

The logs named heldout_* were recorded after the dialects were written and were not used to
shape them or these tools (tests/fixtures/ledgers/README.md gives each one's thread); every
expected figure was worked out by hand from the log, the arithmetic beside it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client
from mcp_call import call, lines, reasons

from radiance_mcp.app.server import build_server
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet, ServerSettings, Service
from radiance_mcp.sources.runtime import Runtime

LEDGERS = Path(__file__).parent.parent / "fixtures" / "ledgers"
GIB = 1024.0


def text(name: str) -> str:
    return (LEDGERS / name).read_text(encoding="utf-8")


@asynccontextmanager
async def served() -> AsyncIterator[Client]:
    services = {
        "a40": Service(log=str(LEDGERS / "vllm/heldout_v1_a40_53k.log"), engine="vllm"),
        "told": Service(log=str(LEDGERS / "vllm/heldout_v0.8_tp_workers_marlin.log")),  # engine told from the log
        "mislabelled": Service(log=str(LEDGERS / "vllm/heldout_v1_a40_53k.log"), engine="radiance"),
        "example": Service(log=str(EXAMPLES_DIR / "frank-archon.log")),
    }
    fleet = Fleet(services=services, server=ServerSettings(log_roots=(str(LEDGERS),)))
    async with Client(build_server(Runtime(fleet))) as client:
        yield client


async def test_vllm_service_from_the_config_reads_its_own_pair() -> None:
    async with served() as client:
        error, out = await call(client, "read_budget_table", service="a40")
    assert not error, out
    (rank,) = out["cards"]
    assert out["engine"] == "vllm" and out["pair_source"] is None and out["ledger"]["origin"] == "local file"
    assert rank["kv_tokens"]["value"] == 53_136 and lines(rank["kv_tokens"]) == [7]
    assert rank["kv_mib"]["value"] == pytest.approx(12.57 * GIB)  # "Available KV cache memory: 12.57 GiB"
    # 12.57 GiB x 2**30 B / 53,136 tokens = 254,007.35 B/token, from lines 6 and 7
    assert rank["kv_bytes_per_token"]["value"] == pytest.approx(254_007.35)
    assert lines(rank["kv_bytes_per_token"]) == [6, 7]
    assert rank["weights_mib"]["value"] == pytest.approx(11.55 * GIB) and lines(rank["weights_mib"]) == [1]
    missing = " ".join(entry["why"] for entry in out["missing"] if entry["ranks"] == [rank["rank"]])
    assert rank["window_tokens"] is None and "Maximum concurrency for L tokens per request" in missing
    assert rank["full_length_sequences"] is None and "--gpu-memory-utilization" in out["kv_flag"]


async def test_vllm_ceiling_names_what_a_v1_log_lacks_and_computes_nothing() -> None:
    async with served() as client:
        error, message = await call(client, "compute_ceiling", service="a40")
    assert error
    assert "free_mib" in message and "floor_mib" in message and "nvidia-smi" in message
    assert "nothing is estimated" in message


async def test_vllm_pool_contract_from_the_config_service() -> None:
    async with served() as client:
        error, out = await call(client, "check_pool_contract", service="a40", seqs=2, max_model_len=32_768)
        refused, message = await call(client, "check_pool_contract", service="a40", max_model_len=32_768)
    assert not error, out
    # 2 x 32,768 = 65,536 tokens > the 53,136 the cache holds: one full-length sequence at a time
    assert out["contract_ok"] is False and out["ok"] is False
    assert out["max_seqs_at_window"] == 1 and out["max_window_at_seqs"] == 26_568  # 53,136 // 2
    assert out["inputs_from"]["pool_mib"]["line"] == 7 and out["inputs_from"]["seqs"] == "argument"
    assert out["kv_cache_dtype"] is None and out["rate_bytes_per_token"] == 254_007
    assert out["boot_status"] == "settled" and any("ceiling was not checked" in n for n in out["notes"])
    assert refused and "seqs" in message and "--max-num-seqs" in message


async def test_vllm_ceiling_of_a_v0_8_boot_told_from_its_text() -> None:
    async with served() as client:
        error, out = await call(client, "compute_ceiling", service="told",
                                reserves=[{"mib": 512, "label": "driver headroom", "personal": True}])
        traced, message = await call(client, "compute_ceiling", service="told", reserves=[{"mib": 100, "label": "x",
                                                                                           "line": 2}])
    assert not error, out
    # weights 21.21 GiB + KV 1.57 GiB = 23,326.72 MiB; free = floor = 23.58 - 23.35 GiB = 235.52 MiB
    (card,) = out["cards"]
    assert card["pair_mib"] == pytest.approx(23_326.72)
    assert card["settled_free_mib"] == pytest.approx(235.52) and card["engine_floor_mib"] == pytest.approx(235.52)
    assert out["ceiling_mib"] == 23_326 and out["max_pair_mib"] == 23_326 - 512
    assert {ref["line"] for ref in out["sources"]} == {2, 3}
    assert out["personal_reserves"] == ["driver headroom"]
    assert traced and "personal=true" in message


async def test_vllm_full_length_sequences_are_rounded_down_not_as_vllm_prints_them() -> None:
    async with served() as client:
        error, out = await call(client, "read_budget_table", log_text=text("vllm/heldout_v1_token_count_2k.log"))
        contract_error, message = await call(client, "check_pool_contract",
                                             log_text=text("vllm/heldout_v1_token_count_2k.log"), seqs=4)
    assert not error, out
    rank = out["cards"][0]
    # 2,042,016 / 2,048 = 997.078: vLLM prints 997.08x; 997.07 sequences fit at once, not 997.08
    assert rank["full_length_sequences"]["value"] == pytest.approx(997.07)
    assert lines(rank["full_length_sequences"]) == [1, 2]
    assert out["ledger"]["origin"] == "caller text" and out["ledger"]["verified"] is False
    assert contract_error and "kv_bytes_per_token" in message  # no KV memory printed: no rate made up


async def test_sglang_gemma3_rate_and_what_its_excerpt_lacks() -> None:
    async with served() as client:
        error, out = await call(client, "read_budget_table", log_text=text("sglang/heldout_gemma3_tp0_pool.log"))
        no_ceiling, message = await call(client, "compute_ceiling", log_text=text("sglang/heldout_gemma3_tp0_pool.log"))
    assert not error, out
    (rank,) = out["cards"]
    assert rank["rank"] == "TP0" and rank["kv_tokens"]["value"] == 834_615
    assert rank["kv_mib"]["value"] == pytest.approx(108.24 * GIB)  # K 54.12 + V 54.12 GB (GiB)
    # Gemma 3 4B: 34 layers x 4 KV heads x 256 x 2 x 2 B = 139,264 B/token; 108.24 GiB / 834,615 = 139,252.0,
    # +- 0.02 GiB / 834,615 / 2 = 12.9 B
    assert abs(rank["kv_bytes_per_token"]["value"] - 139_264) <= 12.9
    assert rank["weights_mib"]["value"] == pytest.approx(8.13 * GIB) and lines(rank["weights_mib"]) == [1]
    assert no_ceiling and "free_mib" in message and "mem_fraction_static" in message


@pytest.mark.parametrize(
    ("name", "tool", "line", "words"),
    [
        ("vllm/v1_fp8_221k_refused.log", "compute_ceiling", 1, "--max-model-len"),  # 10.12 GiB needed > 5.59
        ("sglang/v0.4.3_not_enough_memory.log", "read_budget_table", 1, "--mem-fraction-static"),
        ("sglang/2026_weights_leave_no_kv.log", "plan_free_vram", 1, "--mem-fraction-static"),
        # eight ranks print a profiled pool of -561,981 tokens; the first names the refusal
        ("sglang/v0.4.8_rocm_negative_profiled_pool.log", "compute_ceiling", 2, "-561,981 tokens"),
        ("llamacpp/llama-cpp-python_kv_alloc_failed.log", "read_budget_table", 1, "-c / --ctx-size"),
    ],
)
async def test_refused_boots_are_findings_naming_their_lines(name: str, tool: str, line: int, words: str) -> None:
    async with served() as client:
        error, message = await call(client, tool, log_text=text(name))
    assert error and "refused to start" in message and f"line {line}:" in message and words in message


async def test_a_refused_vllm_boot_fails_the_contract_with_its_lines() -> None:
    async with served() as client:
        error, out = await call(client, "check_pool_contract", log_text=text("vllm/v1_fp8_221k_refused.log"), seqs=1)
    assert not error, out
    # the refusal's own pair: 10.12 GiB for 221,000 tokens; the window is the one it refused
    assert out["boot_status"] == "refused" and out["ok"] is False and out["max_model_len"] == 221_000
    assert [ref["line"] for ref in out["refusal_lines"]] == [1]
    # 10.12 GiB / 221,000 = 49,168.63 B/token; the 5.59 GiB available hold 122,074 tokens at it (vLLM's own
    # estimate on the line: 122,080): not one sequence of 221,000 fits
    assert out["rate_bytes_per_token"] == 49_169 and out["max_window_at_seqs"] == 122_074
    assert out["max_seqs_at_window"] == 0 and "not one full-length sequence fits" in out["refusal"]


async def test_llama_cpp_fit_margin_is_its_floor() -> None:
    async with served() as client:
        _, kept = await call(client, "read_budget_table", log_text=text("llamacpp/fit_mmproj_no_changes.log"))
        _, reduced = await call(client, "read_budget_table", log_text=text("llamacpp/fit_context_reduced.log"))
    (rank,) = kept["cards"]
    assert rank["floor_mib"]["value"] == 3_471 and lines(rank["floor_mib"]) == [4]  # "will leave 106812 >= 3471 MiB"
    assert reduced["cards"][0]["floor_mib"]["value"] == 1_024  # "cannot fulfill margin of 1024 MiB"
    assert reduced["settings"]["fit_n_ctx"]["value"] == 4_096  # "context size reduced from 65536 to 4096"


async def test_config_engine_wins_over_detection_and_radiance_still_reads() -> None:
    async with served() as client:
        error, message = await call(client, "read_budget_table", service="mislabelled")
        ok, example = await call(client, "compute_ceiling", service="example")
    assert error and "radiance ledger phrase" in message  # engine = "radiance": read as radiance, which it is not
    assert not ok and example["ceiling_mib"] > 0 and example["cards"][0]["derivation"]


async def test_plan_free_vram_plans_engine_services_beside_radiance() -> None:
    async with served() as client:
        error, one = await call(client, "plan_free_vram", service="told")
        fleet_error, fleet = await call(client, "plan_free_vram")
        refused, message = await call(client, "plan_free_vram", log_text=text("vllm/v0.2.7_alpaca2_refused.log"))
    assert not error, one
    (plan,) = one["services"]
    # vLLM keeps exactly its (1 - 0.99) share free: 235.52 MiB free against a 235.52 MiB floor, nothing to spend;
    # the headroom is free - floor = 0 (issue 22: the ceiling rounded down to 23,326 against the pair of
    # 23,326.72 MiB once made it -1, "-1 MiB to spend")
    assert plan["model"] == "vllm" and plan["usable_mib"] == 0 and plan["options"] == [] and plan["slope"] is None
    assert plan["cards"][0]["vram_kv"]["value"] == pytest.approx(1_607.68) and plan["cards"][0]["vram_kv"]["line"] == 3
    assert any("no headroom to spend" in note for note in plan["notes"])
    assert not fleet_error, fleet
    assert {r["service"] for r in fleet["rows"]} == {"told", "example"}  # the fleet's answer: a row each
    unreadable = reasons(fleet)
    assert "free_mib" in unreadable["a40"] and "radiance ledger phrase" in unreadable["mislabelled"]
    assert refused and "refused to start" in message and "line 3:" in message


# A composed SGLang start-up (not a recorded log): the recorded boots with the whole chain
# (test_engine_recorded_ceiling.py) keep less free than their floor, as SGLang's own buffers sit in it, so
# they leave no more KV to price; its lines are in SGLang's layout, at figures of our own, so the priced
# more-KV option is checked by hand. One GPU, --mem-fraction-static 0.8.
SGLANG_ONE_GPU = """\
[2026-03-02 10:00:00] server_args=ServerArgs(model_path='m', mem_fraction_static=0.8, context_length=32768)
[2026-03-02 10:00:05] Load weight begin. avail mem=78.50 GB
[2026-03-02 10:00:40] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=63.50 GB, mem usage=15.00 GB.
[2026-03-02 10:00:41] KV Cache is allocated. #tokens: 327680, K size: 24.00 GB, V size: 24.00 GB
[2026-03-02 10:00:41] Memory pool end. avail mem=15.30 GB
[2026-03-02 10:00:42] Capture cuda graph begin. This can take up to several minutes. avail mem=15.20 GB
[2026-03-02 10:00:55] Capture cuda graph end. Time elapsed: 13.00 s. mem usage=0.70 GB. avail mem=14.50 GB.
[2026-03-02 10:00:56] max_total_num_tokens=327680, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=64, context_len=32768, available_gpu_mem=18.70 GB
"""  # noqa: E501 (SGLang's lines as it prints them)


async def test_sglang_floor_ceiling_and_more_kv_option() -> None:
    async with served() as client:
        _, table = await call(client, "read_budget_table", log_text=SGLANG_ONE_GPU)
        _, ceiling = await call(client, "compute_ceiling", log_text=SGLANG_ONE_GPU)
        _, plan = await call(client, "plan_free_vram", log_text=SGLANG_ONE_GPU)
    (rank,) = table["cards"]
    # floor: 78.50 GiB before the weights x (1 - 0.8) = 15.70 GiB = 16,076.8 MiB, from lines 2 and 1
    assert rank["floor_mib"]["value"] == pytest.approx(16_076.8) and lines(rank["floor_mib"]) == [2, 1]
    assert rank["free_mib"]["value"] == pytest.approx(18.70 * GIB) and lines(rank["free_mib"]) == [8]
    assert rank["full_length_sequences"]["value"] == 10  # 327,680 / 32,768
    assert table["settings"]["max_running_requests"]["value"] == 64
    # ceiling: weights 15 GiB + KV 48 GiB = 64,512 MiB; + (19,148.8 free - 16,076.8 floor) = 67,584 MiB
    assert ceiling["ceiling_mib"] == 67_584 and ceiling["headroom_mib"] == 3_072
    (service,) = plan["services"]
    (option,) = service["options"]
    gains = {g["name"]: g["value"] for g in option["gains"]}
    # 48 GiB / 327,680 tokens = 157,286.4 B/token; 3,072 MiB more hold 20,480 tokens: 348,160 / 32,768 = 10.62
    assert option["adds_mib"] == 3_072 and gains == {"KV tokens": 348_160, "full-length sequences": 10.62}
    assert "--mem-fraction-static" in option["flags"][0]


async def test_a_hybrid_models_contract_is_refused_rather_than_priced_from_the_wrong_pair() -> None:
    async with served() as client:
        _, table = await call(client, "read_budget_table", log_text=text("vllm/v0.18_hybrid_qwen3.5_gguf_262k.log"))
        error, message = await call(client, "check_pool_contract",
                                    log_text=text("vllm/v0.18_hybrid_qwen3.5_gguf_262k.log"), seqs=1)
    (rank,) = table["cards"]
    # vLLM's own 'Maximum concurrency for 262,144 tokens per request: 1.36x' (line 7), not 89,760 / 262,144 = 0.34
    assert rank["full_length_sequences"]["value"] == pytest.approx(1.36) and lines(rank["full_length_sequences"]) == [7]
    assert rank["kv_bytes_per_token"] is None
    # priced at 7,065.6 MiB / 89,760 tokens, one sequence of 262,144 would "not fit": the contract names the gap
    assert error and "kv_bytes_per_token: not printed" in message and "Maximum concurrency" in message


async def test_a_refused_tpu_boot_prices_the_window_it_would_hold() -> None:
    async with served() as client:
        error, out = await call(client, "check_pool_contract", log_text=text("vllm/heldout_v0.9_tpu_131k_refused.log"),
                                seqs=1)
    assert not error, out
    # 16.00 GiB / 131,072 = 131,072 B/token; the 0.71 GiB available hold 0.71 x 2**30 / 131,072 = 5,816 tokens
    # (vLLM's own estimate on the line: 5,632, at its block size): not one sequence of 131,072
    assert out["boot_status"] == "refused" and out["rate_bytes_per_token"] == 131_072
    assert out["max_window_at_seqs"] == 5_816 and out["max_seqs_at_window"] == 0 and out["ok"] is False
    assert [ref["line"] for ref in out["refusal_lines"]] == [1]


@pytest.mark.parametrize(
    ("log", "refused_at"),
    [
        ("vllm/v0.4_gpu_blocks_0_refused.log", [2]),  # '# GPU blocks: 0': no KV memory printed (before 0.6)
        ("vllm/v0.6.4_no_available_cache_memory.log", [3]),  # 'ValueError: No available memory for the cache blocks'
        ("vllm/v0.2.7_alpaca2_refused.log", [3]),  # its window over its 3,664 tokens, in blocks: no KV memory
        ("llamacpp/b8xxx_weights_alloc_failed.log", [3]),  # the weights' buffer failed: no KV cache at all
        ("llamacpp/ollama_compute_alloc_failed.log", [4]),  # 'KV self size' but no cells: no rate of its own
    ],
)
async def test_a_refused_boot_that_printed_no_kv_rate_is_refused_not_an_error(log: str, refused_at: list[int]) -> None:
    async with served() as client:
        error, out = await call(client, "check_pool_contract", log_text=text(log), seqs=1, max_model_len=4_096)
    # issue 25: check_pool_contract answered "kv_bytes_per_token: not printed" where the README promises
    # boot_status refused; the pool of a refused boot backs nothing at any shape, so no rate is needed to fail it
    assert not error, out
    assert out["boot_status"] == "refused" and out["ok"] is False and out["contract_ok"] is False
    assert [ref["line"] for ref in out["refusal_lines"]] == refused_at
    contract = next(c for c in out["checks"] if c["rule"] == "pool_contract")
    assert contract["verdict"] == "fail" and [ref["line"] for ref in contract["lines"]] == refused_at
    assert "kv_bytes_per_token: not printed" in contract["arithmetic"]  # the gap named, not filled
    assert contract["arithmetic"].startswith("1 x 4,096 tokens > the 0 tokens a boot that refused to start")
    assert out["rate_bytes_per_token"] is None and out["pool_mib"] is None and out["max_seqs_at_window"] == 0
    assert out["seqs"] == 1 and out["max_model_len"] == 4_096


async def test_a_refused_boot_needs_no_window_to_fail_its_contract() -> None:
    async with served() as client:
        error, out = await call(client, "check_pool_contract",
                                log_text=text("vllm/v0.6.4_no_available_cache_memory.log"))
    # the traceback's three lines print no window and no seats: the pool backs nothing at any shape
    assert not error, out
    assert out["boot_status"] == "refused" and out["seqs"] is None and out["max_model_len"] is None
    (contract,) = (c for c in out["checks"] if c["rule"] == "pool_contract")
    assert contract["verdict"] == "fail" and contract["arithmetic"].startswith("any seqs x window > the 0 tokens")
    assert out["inputs_from"] == {}
