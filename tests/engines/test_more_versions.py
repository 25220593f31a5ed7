"""Boot logs of more engine versions (issue 25 item 7), from public threads no other test used.

Each excerpt (tests/fixtures/ledgers, its thread in the README) was read by hand before the dialects
ran on it: the figures below are what its lines print, worked from the log's own numbers with the
arithmetic beside them (vLLM and SGLang print "GB" for GiB, 1,024 MiB; llama.cpp prints MiB). A figure
the excerpt does not print is asserted missing, with the reason the reader is given. The rows marked
"issue 25" read wrong before the fix named beside them.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from radiance_mcp.core.boot import Boot
from radiance_mcp.core.engines import read_engine_boot
from radiance_mcp.core.errors import LedgerError

LEDGERS = Path(__file__).parent.parent / "fixtures" / "ledgers"
GIB = Decimal(1024)


def boot(name: str) -> Boot:
    return read_engine_boot((LEDGERS / name).read_text(encoding="utf-8"), source=name)


PRINTED = [
    # vLLM 0.20.1, TP 2, a hybrid Qwen 3.6: 619,479 / 262,144 = 2.3631 (vLLM: 2.36x)
    ("vllm/v0.20.1_tp2_hybrid_619k.log", "engine", "kv_tokens", Decimal(619_479)),
    ("vllm/v0.20.1_tp2_hybrid_619k.log", "engine", "window_tokens", Decimal(262_144)),
    ("vllm/v0.20.1_tp2_hybrid_619k.log", "engine", "full_length_sequences", Decimal("2.36")),
    # vLLM 0.24.0, one GPU: 6.01 GiB x 1,024 = 6,154.24 MiB over 569,878 tokens
    ("vllm/v0.24.0_one_gpu_6.01gib.log", "engine", "kv_mib", Decimal("6154.24")),
    ("vllm/v0.24.0_one_gpu_6.01gib.log", "engine", "kv_tokens", Decimal(569_878)),
    # 6.01 x 2**30 B / 569,878 tokens = 11,323.81 B/token
    ("vllm/v0.24.0_one_gpu_6.01gib.log", "engine", "kv_bytes_per_token", Decimal("11323.81")),
    ("vllm/v0.24.0_one_gpu_6.01gib.log", "engine", "window_tokens", Decimal(131_072)),
    # 569,878 / 131,072 = 4.3478, rounded down (vLLM prints 4.35x)
    ("vllm/v0.24.0_one_gpu_6.01gib.log", "engine", "full_length_sequences", Decimal("4.34")),
    # Xinference's vLLM of May 2026, refused: the available 6.94 GiB = 7,106.56 MiB; the refusal's own pair,
    # 36.0 GiB for 262,144 tokens = 36 x 2**30 / 262,144 = 147,456 B/token
    ("vllm/2026-05_xinference_262k_refused.log", "engine", "kv_mib", Decimal("7106.56")),
    ("vllm/2026-05_xinference_262k_refused.log", "engine", "kv_bytes_per_token", Decimal(147_456)),
    ("vllm/2026-05_xinference_262k_refused.log", "engine", "window_tokens", Decimal(262_144)),
    # issue 25: 'Available KV cache memory: -2.77 GiB' was no line (its minus sign): -2.77 x 1,024
    ("vllm/2025-12_omni_negative_available_kv_refused.log", "engine", "kv_mib", Decimal("-2836.48")),
    # issue 25: vLLM of June 2026 prints its refusal on three lines, without the '(' before its pair, and none was
    # read: the available 17.39 GiB x 1,024 = 17,807.36 MiB; 22.5 GiB for 1,048,576 tokens = 22.5 x 2**30 / 1,048,576
    # = 23,040 B/token; the window of line 1
    ("vllm/2026-06_kaito_three_line_refusal.log", "engine", "kv_mib", Decimal("17807.36")),
    ("vllm/2026-06_kaito_three_line_refusal.log", "engine", "kv_bytes_per_token", Decimal(23_040)),
    ("vllm/2026-06_kaito_three_line_refusal.log", "engine", "window_tokens", Decimal(1_048_576)),
    # issue 25: '--kv-cache-memory-bytes' skips the profile and prints 'reserved 4.25 GiB memory for KV Cache'
    # instead of 'Available KV cache memory': 4.25 x 1,024 = 4,352 MiB
    ("vllm/2026-08_xpu_kv_cache_memory_bytes_failed.log", "engine", "kv_mib", Decimal(4352)),
    # issue 25: V0 tensor-parallel workers each print their weights under '(VllmWorkerProcess pid=N)', which was
    # refused as two start-ups; 'Loading model weights took 3.7710 GB' x 1,024 = 3,861.504 MiB
    ("vllm/v0.6.2_tp_workers_refused_86k.log", "engine", "weights_mib", Decimal("3861.504")),
    # the refusal's 86,432 tokens (5,402 blocks x 16), its window 131,072: 86,432 / 131,072 = 0.659, rounded down
    ("vllm/v0.6.2_tp_workers_refused_86k.log", "engine", "kv_tokens", Decimal(86_432)),
    ("vllm/v0.6.2_tp_workers_refused_86k.log", "engine", "window_tokens", Decimal(131_072)),
    ("vllm/v0.6.2_tp_workers_refused_86k.log", "engine", "full_length_sequences", Decimal("0.65")),
    # SGLang 0.4.6, one GPU: mem usage 15.35 GB; K 27.80 + V 27.80 = 55.60 GB for 404,890 tokens
    ("sglang/v0.4.6_one_gpu_pool.log", "engine", "weights_mib", Decimal("15718.40")),
    ("sglang/v0.4.6_one_gpu_pool.log", "engine", "kv_mib", Decimal("56934.40")),
    ("sglang/v0.4.6_one_gpu_pool.log", "engine", "kv_tokens", Decimal(404_890)),
    # 55.60 x 2**30 / 404,890 = 147,447.57 B/token (Qwen3-8B: 36 layers x 8 KV heads x 128 x 2 x 2 = 147,456,
    # within 0.01 GiB / 404,890 = 26.5 B)
    ("sglang/v0.4.6_one_gpu_pool.log", "engine", "kv_bytes_per_token", Decimal("147447.57")),
    # the same boot's capture end and summary (no available_gpu_mem= in 0.4.6's summary)
    ("sglang/v0.4.6_one_gpu_graphs_summary.log", "engine", "graph_mib", Decimal("1423.36")),  # 1.39 x 1,024
    ("sglang/v0.4.6_one_gpu_graphs_summary.log", "engine", "free_mib", Decimal("5765.12")),  # avail mem 5.63 GB
    ("sglang/v0.4.6_one_gpu_graphs_summary.log", "engine", "kv_tokens", Decimal(404_890)),
    ("sglang/v0.4.6_one_gpu_graphs_summary.log", "engine", "window_tokens", Decimal(8_096)),
    # 404,890 / 8,096 = 50.011
    ("sglang/v0.4.6_one_gpu_graphs_summary.log", "engine", "full_length_sequences", Decimal("50.01")),
    # SGLang of November 2025 on one B200 (a 'Using KV cache dtype' line before the pool): K + V 119.82 GB
    ("sglang/2025-11_b200_kv_dtype_line.log", "engine", "kv_mib", Decimal("122695.68")),
    ("sglang/2025-11_b200_kv_dtype_line.log", "engine", "kv_tokens", Decimal(2_243_474)),
    # 119.82 x 2**30 / 2,243,474 = 57,346.66 B/token
    ("sglang/2025-11_b200_kv_dtype_line.log", "engine", "kv_bytes_per_token", Decimal("57346.66")),
    # SGLang of December 2025, TP 4 (only TP1 and TP2 print their pool in the excerpt): K + V 47.84 GB
    ("sglang/2025-12_tp4_qwen_omni_pool.log", "TP1", "kv_mib", Decimal("48988.16")),
    ("sglang/2025-12_tp4_qwen_omni_pool.log", "TP2", "kv_tokens", Decimal(2_090_351)),
    # 47.84 x 2**30 / 2,090,351 = 24,573.77 B/token per rank (Qwen3-Omni's thinker: 48 layers x 4 KV heads / TP 4
    # x 128 x 2 x 2 = 24,576, within 0.01 GiB / 2,090,351 = 5.1 B)
    ("sglang/2025-12_tp4_qwen_omni_pool.log", "TP2", "kv_bytes_per_token", Decimal("24573.77")),
    # SGLang of July 2026 on ROCm ('Load weight end. elapsed=19.09 s, type=...'): mem usage 56.98 GB,
    # K + V 152.88 GB for 1,669,816 tokens = 98,306.43 B/token (Qwen3-30B-A3B: 48 x 4 x 128 x 2 x 2 = 98,304)
    ("sglang/2026-07_rocm_load_end_elapsed.log", "engine", "weights_mib", Decimal("58347.52")),
    ("sglang/2026-07_rocm_load_end_elapsed.log", "engine", "kv_mib", Decimal("156549.12")),
    ("sglang/2026-07_rocm_load_end_elapsed.log", "engine", "kv_tokens", Decimal(1_669_816)),
    ("sglang/2026-07_rocm_load_end_elapsed.log", "engine", "kv_bytes_per_token", Decimal("98306.43")),
    # issue 25: llama.cpp of April 2023 (ggjt v1, through llama-cpp-python): 'kv self size = 1560.00 MB' (its MB is
    # a MiB) and 'llama_model_load_internal: n_ctx = 512' were no lines
    ("llamacpp/2023-04_llama-cpp-python_ggjt_kv_self_mb.log", "all", "kv_mib", Decimal(1560)),
    ("llamacpp/2023-04_llama-cpp-python_ggjt_kv_self_mb.log", "all", "kv_tokens", Decimal(512)),
    # 1,560 MiB x 2**20 / 512 = 3,194,880 B/token: LLaMA 30B's 60 layers x 6,656 x 2 x 4 B (an f32 cache)
    ("llamacpp/2023-04_llama-cpp-python_ggjt_kv_self_mb.log", "all", "kv_bytes_per_token", Decimal(3_194_880)),
    # koboldcpp of March 2024: the whole cache on the CPU
    ("llamacpp/koboldcpp_2024-03_cpu_kv_self.log", "all", "kv_mib", Decimal(82_120)),
    # Ollama of March 2025 on Windows, CPU only, its own 'time=... level=DEBUG' lines between llama.cpp's
    ("llamacpp/ollama_2025-03_windows_cpu_kv_self.log", "all", "kv_mib", Decimal(4048)),
    ("llamacpp/ollama_2025-03_windows_cpu_kv_self.log", "all", "activation_mib", Decimal("2119.26")),
    # llama.cpp build 9525 (June 2026): 4 sequences in one stream, a recurrent state beside the cache
    ("llamacpp/b9525_nemotron_4_seqs_one_stream_rs.log", "all", "kv_mib", Decimal(189)),
    ("llamacpp/b9525_nemotron_4_seqs_one_stream_rs.log", "all", "kv_tokens", Decimal(16_128)),
    # 189.00 MiB x 2**20 / 16,128 cells = 12,288 B/token
    ("llamacpp/b9525_nemotron_4_seqs_one_stream_rs.log", "all", "kv_bytes_per_token", Decimal(12_288)),
    # llama-server inside Ollama, August 2026 (`sched_reserve` compute buffers)
    ("llamacpp/ollama_2026-08_llama-server_sched_reserve.log", "all", "kv_mib", Decimal(6576)),
    ("llamacpp/ollama_2026-08_llama-server_sched_reserve.log", "all", "kv_tokens", Decimal(105_216)),
    # 6,576.00 MiB x 2**20 / 105,216 cells = 65,536 B/token
    ("llamacpp/ollama_2026-08_llama-server_sched_reserve.log", "all", "kv_bytes_per_token", Decimal(65_536)),
    ("llamacpp/ollama_2026-08_llama-server_sched_reserve.log", "all", "window_tokens", Decimal(105_216)),  # n_ctx_seq
    ("llamacpp/ollama_2026-08_llama-server_sched_reserve.log", "all", "full_length_sequences", Decimal(1)),
    # CUDA0 224.77 + CUDA_Host 122.77 = 347.54 MiB of compute buffers
    ("llamacpp/ollama_2026-08_llama-server_sched_reserve.log", "all", "activation_mib", Decimal("347.54")),
    ("llamacpp/ollama_2026-08_llama-server_sched_reserve.log", "CUDA0", "kv_mib", Decimal(6576)),
    ("llamacpp/ollama_2026-08_llama-server_sched_reserve.log", "CUDA0", "activation_mib", Decimal("224.77")),
]


@pytest.mark.parametrize(("log", "rank", "figure", "value"), PRINTED)
def test_printed_figures_are_read(log: str, rank: str, figure: str, value: Decimal) -> None:
    assert boot(log).rank(rank).require(figure).value == value


@pytest.mark.parametrize(
    ("log", "rank", "figure", "says"),
    [
        ("vllm/v0.20.1_tp2_hybrid_619k.log", "engine", "kv_mib", "Available KV cache memory"),
        ("vllm/2026-05_xinference_262k_refused.log", "engine", "kv_tokens", "GPU KV cache size"),
        ("vllm/v0.6.2_tp_workers_refused_86k.log", "engine", "kv_mib", r"before 0\.6"),  # in blocks only
        ("sglang/v0.4.6_one_gpu_pool.log", "engine", "free_mib", "available_gpu_mem"),  # its capture is cut
        # issue 25: read as 74.01 GB settled free from 'Memory pool end' while its progress bar shows the CUDA-graph
        # capture under way ('Capturing batches (bs=496 avail_mem=20.14 GB)', line 8)
        ("sglang/2026-07_rocm_load_end_elapsed.log", "engine", "free_mib", "available_gpu_mem"),
        # SGLang 0.4.3: 'Load weight end' without 'mem usage=', capture lines without memory
        ("sglang/v0.4.3_dsv3_tp8_load_end_without_usage.log", "TP0", "weights_mib", "mem usage"),
        ("sglang/v0.4.3_dsv3_tp8_load_end_without_usage.log", "TP5", "free_mib", r"line 10's 'Memory pool end"),
        ("llamacpp/2023-04_llama-cpp-python_ggjt_kv_self_mb.log", "all", "window_tokens", "n_ctx_seq"),
        ("llamacpp/koboldcpp_2024-03_cpu_kv_self.log", "all", "kv_tokens", "n_ctx"),
        ("llamacpp/b9525_nemotron_4_seqs_one_stream_rs.log", "all", "window_tokens", "n_ctx_seq"),
    ],
)
def test_figures_not_printed_are_missing_with_why(log: str, rank: str, figure: str, says: str) -> None:
    view = boot(log).rank(rank)
    assert getattr(view, figure) is None
    with pytest.raises(LedgerError, match=says):
        view.require(figure)


@pytest.mark.parametrize(
    ("log", "kind", "line"),
    [
        ("vllm/2026-05_xinference_262k_refused.log", "window_exceeds_kv", 5),
        ("vllm/2026-06_kaito_three_line_refusal.log", "window_exceeds_kv", 2),  # issue 25
        # issue 25: a V1 profile leaving less than nothing is the V0 one's refusal (line 3's 'EngineCore failed
        # to start.' adds none of its own: line 2 names why)
        ("vllm/2025-12_omni_negative_available_kv_refused.log", "not_enough_memory", 2),
        ("vllm/2026_xpu_no_available_memory_refused.log", "not_enough_memory", 5),
        # issue 25: read as a boot that served; the cause is in the traceback after the excerpt
        ("vllm/2026-08_xpu_kv_cache_memory_bytes_failed.log", "startup_failed", 7),
        ("vllm/v0.6.2_tp_workers_refused_86k.log", "window_exceeds_kv", 6),
    ],
)
def test_refused_boots(log: str, kind: str, line: int) -> None:
    booted = boot(log)
    (refusal,) = booted.refusals
    assert booted.refused and refusal.kind == kind and refusal.line.number == line


@pytest.mark.parametrize(
    "log",
    [
        "vllm/v0.24.0_one_gpu_6.01gib.log", "sglang/v0.4.6_one_gpu_graphs_summary.log",
        "llamacpp/koboldcpp_2024-03_cpu_kv_self.log",  # its pinned-memory warning is no refusal: it falls back
        "llamacpp/ollama_2026-08_llama-server_sched_reserve.log",
    ],
)
def test_boots_that_print_no_refusal(log: str) -> None:
    assert not boot(log).refused


def test_the_ranks_each_excerpt_names() -> None:
    assert [r.rank for r in boot("sglang/v0.4.3_dsv3_tp8_load_end_without_usage.log").ranks] == [
        f"TP{n}" for n in range(8)]
    assert [r.rank for r in boot("sglang/2025-12_tp4_qwen_omni_pool.log").ranks] == ["TP0", "TP1", "TP2", "TP3"]
    # the host's compute buffer is no card: CUDA0 alone beside the total
    assert [r.rank for r in boot("llamacpp/ollama_2026-08_llama-server_sched_reserve.log").ranks] == ["all", "CUDA0"]


def test_a_refusal_on_three_lines_names_its_window_and_estimate() -> None:
    (refusal,) = boot("vllm/2026-06_kaito_three_line_refusal.log").refusals
    # line 1's window, line 2's pair, line 3's estimate: one refusal
    assert "window of 1,048,576 tokens needs 22.5 GiB" in refusal.detail
    assert "estimates a window of 810208 tokens fits" in refusal.detail
