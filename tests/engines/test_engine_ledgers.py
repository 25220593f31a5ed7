"""The three engine dialects on recorded start-up logs (tests/fixtures/ledgers, sources in its README).

Expected figures are the logs' own, with the arithmetic beside each; where a model's
architecture is known the bytes per token is checked against it too (layers x KV heads x
head dim x 2 (K and V) x bytes per element), within the rounding of the printed GiB.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from radiance_mcp.core.boot import Boot
from radiance_mcp.core.engines import detect, read_engine_boot
from radiance_mcp.core.errors import LedgerError

LEDGERS = Path(__file__).parent.parent / "fixtures" / "ledgers"
GIB = Decimal(1024)


def log(name: str) -> str:
    return (LEDGERS / name).read_text()


def boot(name: str, **options: object) -> Boot:
    return read_engine_boot(log(name), source=name, **options)  # type: ignore[arg-type]


def line_text(view: Boot, number: int) -> str:
    return log_lines(view.source)[number - 1]


def log_lines(name: str) -> list[str]:
    return log(name).split("\n")


@pytest.mark.parametrize("path", sorted(p.relative_to(LEDGERS).as_posix() for p in LEDGERS.glob("*/*.log")))
def test_every_recorded_log_is_told_apart(path: str) -> None:
    expected = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp"}[path.split("/")[0]]
    assert detect(log(path), source=path) == expected


# ---------------------------------------------------------------------------------------
# vLLM


def test_vllm_v0_blocks_need_the_block_size_and_say_so() -> None:
    # '# GPU blocks: 10039' with no 'Maximum concurrency' line: nothing decides the block size
    view = boot("vllm/heldout_v0.5_tp_gpu_blocks.log").rank("engine")
    assert view.kv_tokens is None and view.full_length_sequences is None
    with pytest.raises(LedgerError, match=r"--block-size.*block_size_tokens"):
        view.require("kv_tokens")


def test_vllm_v0_blocks_with_the_concurrency_line_decide_the_block_size() -> None:
    # issue 25: '# GPU blocks: 1952' and '1.56x for 20000 tokens': only 16 tokens a block gives 1.56 (8: 0.78, 32: 3.12)
    view = boot("vllm/v0.6_llama3.1-8b_20k.log").rank("engine")
    tokens = view.require("kv_tokens")
    assert tokens.value == 31_232 and [line.number for line in tokens.lines] == [3, 4]
    assert "only 16 gives its 1.56x" in tokens.arithmetic
    assert view.require("full_length_sequences").value == Decimal("1.56")


def test_vllm_v0_with_the_block_size() -> None:
    view = boot("vllm/v0.6_llama3.1-8b_20k.log", block_size_tokens=16).rank("engine")
    assert view.kv_tokens is not None and view.kv_tokens.value == 31_232  # 1,952 blocks x 16
    assert view.kv_tokens.lines[0].number == 3
    assert view.kv_mib is not None and view.kv_mib.value == Decimal("3.81") * GIB  # kv_cache_size=3.81GiB
    rate = view.require("kv_bytes_per_token")
    assert rate.agrees_with(Decimal(131_072))  # Llama 3.1 8B bf16: 32 x 8 x 128 x 2 x 2 B
    assert view.require("window_tokens").value == 20_000
    assert view.require("full_length_sequences").value == Decimal("1.56")  # 31,232 / 20,000, vLLM: 1.56x
    assert view.require("weights_mib").value == Decimal("14.9888") * GIB  # "took 14.9888 GB": vLLM's GB is GiB
    assert view.require("free_mib").value == Decimal("23.58") * GIB * Decimal("0.10")  # total x (1 - 0.90)
    assert view.require("activation_mib").value == (Decimal("17.06") - Decimal("14.9888")) * GIB  # peak - weights
    assert not boot("vllm/v0.6_llama3.1-8b_20k.log", block_size_tokens=16).refused


def test_vllm_v0_window_over_the_cache_is_a_refused_boot() -> None:
    booted = boot("vllm/v0.6_llama3.1-8b_29k_refused.log")
    assert booted.refused
    (refusal,) = booted.refusals
    assert refusal.kind == "window_exceeds_kv" and refusal.line.number == 5
    assert "(23648)" in refusal.line.text and "29,000" in refusal.detail and "--max-model-len" in refusal.detail
    view = booted.rank("engine")
    assert view.require("kv_tokens").value == 23_648 and view.require("kv_tokens").lines[0].number == 5
    assert view.require("window_tokens").value == 29_000
    assert view.require("full_length_sequences").value == Decimal("0.81")  # 23,648 / 29,000
    assert view.require("kv_bytes_per_token").agrees_with(Decimal(131_072))  # 2.89 GiB / 23,648


def test_vllm_0_2_refusal_and_the_config_window() -> None:
    booted = boot("vllm/v0.2.7_alpaca2_refused.log", block_size_tokens=16)
    assert booted.refused and booted.refusals[0].line.number == 3
    view = booted.rank("engine")
    assert view.require("window_tokens").value == 4_096 and view.require("window_tokens").lines[0].number == 1
    assert view.require("kv_tokens").value == 3_664  # the refusal's own figure; 229 blocks x 16 agrees
    with pytest.raises(LedgerError, match="Available KV cache memory"):
        view.require("kv_mib")


def test_vllm_v1_qwen3_14b() -> None:
    view = boot("vllm/v1_qwen3-14b_lmcache.log").rank("engine")
    assert view.require("kv_mib").value == Decimal("6.51") * GIB
    assert view.require("kv_tokens").value == 42_656
    rate = view.require("kv_bytes_per_token")
    assert rate.agrees_with(Decimal(163_840))  # Qwen3-14B bf16: 40 x 8 x 128 x 2 x 2 B
    assert [line.number for line in rate.lines] == [1, 2] and "42,656 tokens" in rate.arithmetic
    assert view.require("full_length_sequences").value == Decimal("1.30")  # 42,656 / 32,768
    missing = {gap.figure for gap in view.missing}
    assert missing == {"weights_mib", "activation_mib", "graph_mib", "free_mib", "floor_mib"}


def test_vllm_v1_fp8_accepted_and_refused_boots_agree_on_the_rate() -> None:
    ok = boot("vllm/v1_fp8_100k.log").rank("engine")
    assert ok.require("kv_tokens").value == 230_528
    assert ok.require("full_length_sequences").value == Decimal("2.30")  # 2.3053 rounded down; vLLM prints 2.31x
    refused = boot("vllm/v1_fp8_221k_refused.log")
    assert refused.refused and refused.refusals[0].kind == "window_exceeds_kv"
    assert "122080" in refused.refusals[0].detail
    view = refused.rank("engine")
    assert view.kv_tokens is None  # a V1 refusal prints no token count: nothing is estimated
    assert view.require("kv_mib").value == Decimal("5.59") * GIB
    rate = view.require("kv_bytes_per_token")  # 10.12 GiB needed for 221,000 tokens: the line's own pair
    assert abs(rate.value - ok.require("kv_bytes_per_token").value) <= (rate.resolution + ok.require(
        "kv_bytes_per_token").resolution) / 2


def test_vllm_per_rank_lines_and_the_utilization_equivalence() -> None:
    booted = boot("vllm/v0.21_tp4_equivalence.log")
    assert [r.rank for r in booted.ranks] == ["TP0", "TP3"]
    assert booted.rank("TP0").require("kv_mib").value == Decimal("15.72") * GIB
    assert booted.rank("TP3").kv_mib is None
    assert booted.settings["gpu_memory_utilization"].value == Decimal("0.9200")
    assert booted.settings["gpu_memory_utilization_without_graph_profiling"].value == Decimal("0.9129")


def test_vllm_graphs_and_a_missing_kv_memory() -> None:
    view = boot("vllm/v1_windows_graphs.log").rank("engine")
    assert view.require("graph_mib").value == Decimal("0.11") * GIB and view.require("graph_mib").lines[0].number == 4
    assert view.require("full_length_sequences").value == Decimal("3.02")  # 396,928 / 131,072
    assert view.kv_bytes_per_token is None
    with pytest.raises(LedgerError, match="Available KV cache memory"):
        view.require("kv_mib")


def test_vllm_newest_boot_counts() -> None:
    refused, accepted = log_lines("vllm/v0.2.7_alpaca2_refused.log"), log("vllm/v1_qwen3-14b_lmcache.log")
    text = "\n".join(refused) + refused[0] + "\n" + accepted  # a second start-up: the marker line, then V1 lines
    newest = read_engine_boot(text, source="two.log")
    assert newest.boots_seen == 2 and newest.index == 2 and not newest.refused
    assert newest.rank("engine").require("kv_tokens").value == 42_656
    oldest = read_engine_boot(text, source="two.log", boot=1)
    assert oldest.refused and oldest.rank("engine").require("kv_tokens").value == 3_664


def test_vllm_two_unmarked_boots_are_refused_not_mixed() -> None:
    text = log("vllm/v0.6_llama3.1-8b_20k.log") + log("vllm/v0.6_llama3.1-8b_29k_refused.log")
    with pytest.raises(LedgerError, match=r"lines \d+ and \d+ both print .*more than one start-up"):
        read_engine_boot(text, source="both.log", engine="vllm")


# ---------------------------------------------------------------------------------------
# SGLang


def test_sglang_pool_per_rank() -> None:
    booted = boot("sglang/dp4_tp4_ep4_pool.log")
    assert [r.rank for r in booted.ranks] == ["DP0 TP0", "DP1 TP1", "DP2 TP2", "DP3 TP3"]
    view = booted.rank("DP2 TP2")
    kv = view.require("kv_mib")
    assert kv.value == Decimal("94.24") * GIB and "K size + V size" in kv.arithmetic  # 47.12 + 47.12 GB (GiB)
    assert view.require("kv_tokens").value == 1_029_389
    assert view.require("kv_bytes_per_token").value == (Decimal("94.24") * GIB * 2**20 / 1_029_389).quantize(
        Decimal("0.01"))
    assert booted.rank("DP3 TP3").free_mib is None  # the pool's avail mem is before the CUDA graphs: not settled
    with pytest.raises(LedgerError, match="context_len"):
        view.require("window_tokens")


def test_sglang_every_rank_named_even_before_the_pool() -> None:
    booted = boot("sglang/tp8_load_begin.log")
    assert [r.rank for r in booted.ranks] == [f"TP{n}" for n in range(8)]
    with pytest.raises(LedgerError, match="Load weight end"):
        booted.rank("TP0").require("weights_mib")


def test_sglang_not_enough_memory_is_a_refused_boot() -> None:
    booted = boot("sglang/v0.4.3_not_enough_memory.log")
    assert booted.refused and booted.refusals[0].kind == "not_enough_memory"
    assert booted.refusals[0].line.number == 1 and "--mem-fraction-static" in booted.refusals[0].detail


def test_sglang_pool_below_the_context_is_named() -> None:
    # Synthetic: no public log with a pool below the context was found. The layout is the
    # scheduler's summary line of heldout_scheduler_summary_256k.log, figures changed.
    text = ("[2026-01-02 03:04:05] max_total_num_tokens=1741, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            "max_running_requests=48, context_len=65536, available_gpu_mem=46.90 GB\n")
    booted = read_engine_boot(text, source="small-pool.log", engine="sglang")
    assert booted.refused and booted.refusals[0].kind == "pool_below_window"
    assert "1,741 tokens" in booted.refusals[0].detail and "65,536" in booted.refusals[0].detail
    assert booted.rank("engine").require("full_length_sequences").value == Decimal("0.02")


# ---------------------------------------------------------------------------------------
# llama.cpp


def test_llamacpp_kv_self_size_without_the_context() -> None:
    booted = boot("llamacpp/b4701_llamasharp_kv_self.log")
    whole = booted.rank("all")
    assert whole.require("kv_mib").value == 144
    assert whole.require("activation_mib").value == Decimal("312.76")  # CUDA0 300.75 + CUDA_Host 12.01
    assert booted.rank("CUDA0").require("activation_mib").value == Decimal("300.75")
    with pytest.raises(LedgerError, match="n_ctx"):
        whole.require("kv_tokens")


def test_llamacpp_start_up_lines_run_together_into_one_boot() -> None:
    text = log("llamacpp/b4701_llama-cli_device_free.log") + log("llamacpp/llama-cpp-python_2025_context.log")
    booted = read_engine_boot(text, source="cli.log", engine="llama.cpp")
    assert booted.boots_seen == 1 and booted.first_line == 5  # build:, using device, model loader: one start-up
    again = text + log("llamacpp/b4701_llama-cli_device_free.log") + log("llamacpp/b45xx_server_8_slots.log")
    newest = read_engine_boot(again, source="cli.log")
    assert newest.boots_seen == 2 and newest.rank("all").require("window_tokens").value == 2_048
    oldest = read_engine_boot(again, source="cli.log", boot=-2)
    assert oldest.rank("all").require("window_tokens").value == 4_096


def test_llamacpp_server_slots() -> None:
    booted = boot("llamacpp/b45xx_server_8_slots.log")
    whole = booted.rank("all")
    assert booted.settings["n_seq_max"].value == 8 and booted.settings["n_ctx"].value == 16_384
    assert whole.require("kv_tokens").value == 16_384 and whole.require("kv_tokens").lines[0].number == 17
    assert whole.require("window_tokens").value == 2_048  # n_ctx_per_seq
    assert whole.require("full_length_sequences").value == 8  # 16,384 / 2,048
    assert whole.kv_mib is None  # the excerpt ends before the KV size line: not summed from a partial list
    cuda0 = booted.rank("CUDA0")
    assert cuda0.require("kv_bytes_per_token").value == 5_824 * 2**20 // 16_384  # 372,736 B per token on CUDA0
    assert booted.rank("CUDA2").require("weights_mib").value == Decimal("25338.47")


def test_llama_cpp_python_context() -> None:
    booted = boot("llamacpp/llama-cpp-python_2025_context.log")
    whole = booted.rank("all")
    assert whole.require("weights_mib").value == Decimal("8300.36")  # CPU_Mapped: host memory
    assert whole.require("window_tokens").value == 4_096 and booted.settings["n_seq_max"].value == 1
    assert whole.require("full_length_sequences").value == 1


@pytest.mark.parametrize(
    ("name", "line", "says"),
    [
        ("llamacpp/ollama_compute_alloc_failed.log", 4, "failed to allocate compute buffers (144.00 MiB on device 4)"),
        ("llamacpp/llama-cpp-python_kv_alloc_failed.log", 1,
         "failed to allocate buffer for kv cache (204800.00 MiB on device 0)"),
        ("llamacpp/b8xxx_weights_alloc_failed.log", 3, "unable to allocate CUDA0 buffer (144817.04 MiB on device 0)"),
    ],
)
def test_llamacpp_allocation_failures_are_refused_boots(name: str, line: int, says: str) -> None:
    booted = boot(name)
    assert booted.refused
    (refusal,) = booted.refusals
    assert refusal.kind == "allocation_failed" and refusal.line.number == line and says in refusal.detail
    assert "-c / --ctx-size" in refusal.detail


def test_llamacpp_a_retried_allocation_is_not_a_refused_boot() -> None:
    booted = boot("llamacpp/2026_retry_without_pipeline.log")
    assert not booted.refused and booted.refusals and not booted.refusals[0].final
    assert booted.settings["slots"].value == 1 and booted.rank("all").require("window_tokens").value == 50_176


def test_llamacpp_ansi_colours_and_a_cache_without_layers() -> None:
    whole = boot("llamacpp/2026_dsv4_iswa_ansi.log").rank("all")
    assert whole.require("kv_tokens").value == 64_000 and whole.require("kv_tokens").lines[0].text.startswith("1.14")
    assert whole.require("window_tokens").value == 64_000  # n_ctx_seq (64000) < n_ctx_train
    with pytest.raises(LedgerError, match="holds no layers"):
        whole.require("kv_bytes_per_token")


def test_llama_cpp_python_recorded_here_with_a_full_size_swa_cache() -> None:
    booted = boot("llamacpp/recorded_llama-cpp-python-0.3.36_gemma3-270m.log")
    whole = booted.rank("all")
    assert whole.require("weights_mib").value == Decimal("247.82")  # CPU_Mapped 235.16 + CPU_REPACK 12.66
    assert whole.require("kv_mib").value == 36  # non-SWA 6.00 + SWA 30.00
    assert whole.require("kv_tokens").value == 2_048 and whole.require("kv_tokens").lines[0].number == 24
    # Both caches hold 2,048 cells, so both grow with the context: 36 MiB / 2,048 = 18,432 B,
    # Gemma 3 270M's 18 layers x 1 KV head x 256 x 2 x 2 B.
    assert whole.require("kv_bytes_per_token").value == 18_432
    assert whole.require("activation_mib").value == Decimal("514.50")
    assert whole.require("full_length_sequences").value == 1 and booted.settings["n_seq_max"].value == 1
