"""Logs as their users print them (issue 25): the kinds of miss recorded public logs showed, each pinned.

Every row names a recorded excerpt (tests/fixtures/ledgers, sources in its README), the figure a
user reads off the boot and the value it must have, with the arithmetic beside it. A figure the
log cannot decide is asserted missing, with the reason the user is given.
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
    return read_engine_boot((LEDGERS / name).read_text(), source=name)


# ---------------------------------------------------------------------------------------
# vLLM V0: '# GPU blocks: B' beside 'Maximum concurrency for L tokens per request: Cx' decide the block size


@pytest.mark.parametrize(
    ("log", "rank", "figure", "value"),
    [
        # 1,381 blocks x 16 = 22,096 tokens: 22,096 / 2,048 = 10.79 (8: 5.39, 32: 21.58)
        ("vllm/v1_2025-01_gpu_blocks_10.79x.log", "engine", "kv_tokens", Decimal(22_096)),
        # 22,096 / 2,048 = 10.789, rounded down to 0.01
        ("vllm/v1_2025-01_gpu_blocks_10.79x.log", "engine", "full_length_sequences", Decimal("10.78")),
        ("vllm/v1_2025-01_gpu_blocks_10.79x.log", "engine", "weights_mib", Decimal("67.7229") * GIB),
        # 1,952 x 16 = 31,232: 31,232 / 20,000 = 1.56 (8: 0.78, 32: 3.12)
        ("vllm/v0.6_llama3.1-8b_20k.log", "engine", "kv_tokens", Decimal(31_232)),
        # 3.81 GiB / 31,232 tokens = 130,986.05 B (Llama 3.1 8B: 32 x 8 x 128 x 2 x 2 = 131,072, within 0.005 GiB)
        ("vllm/v0.6_llama3.1-8b_20k.log", "engine", "kv_bytes_per_token", Decimal("130986.05")),
        # 9,048 x 16 = 144,768: 144,768 / 3,072 = 47.125, printed 47.12 (8: 23.56, 32: 94.25)
        ("vllm/heldout_v0.8_16gib_47x.log", "engine", "kv_tokens", Decimal(144_768)),
        # 29,547 x 16 = 472,752: / 131,072 = 3.607, printed 3.61 (8: 1.80, 32: 7.21)
        ("vllm/v0.8_tp_workers_least_kv.log", "engine", "kv_tokens", Decimal(472_752)),
    ],
)
def test_vllm_block_size_from_the_concurrency_line(log: str, rank: str, figure: str, value: Decimal) -> None:
    assert boot(log).rank(rank).require(figure).value == value


def test_vllm_derived_tokens_show_their_arithmetic() -> None:
    tokens = boot("vllm/v1_2025-01_gpu_blocks_10.79x.log").rank("engine").require("kv_tokens")
    assert [line.number for line in tokens.lines] == [7, 8]  # the blocks line and the concurrency line
    assert tokens.arithmetic == (
        "1,381 blocks x 16 tokens = 22,096 tokens: of the block sizes vLLM takes (1, 8, 16, 32, 64, 128), only 16 "
        "gives its 10.79x for 2,048 tokens (1,381 x 16 / 2,048 = 10.79; 8 gives 5.39x; 32 gives 21.58x)")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        # 1 block over 2,000 tokens: 1 and 8 tokens a block both print 0.00x (0.0005, 0.004); 16 prints 0.01x (0.008)
        ("# GPU blocks: 1\nMaximum concurrency for 2000 tokens per request: 0.00x\n",
         r"not decided: block sizes 1 and 8 both give 0\.00x for 2,000 tokens from 1 blocks.*--block-size"),
        # 1 block over 32,768 tokens: every size up to 128 prints 0.00x (128 / 32,768 = 0.0039)
        ("# GPU blocks: 1\nMaximum concurrency for 32768 tokens per request: 0.00x\n",
         r"not decided: block sizes 1, 8, 16, 32, 64 and 128 all give 0\.00x"),
        # 100 blocks over 1,000 tokens: 1 -> 0.10x, 8 -> 0.80x, 16 -> 1.60x; no size gives 0.50x
        ("# GPU blocks: 100\nMaximum concurrency for 1000 tokens per request: 0.50x\n",
         r"not decided: no block size vLLM takes \(1, 8, 16, 32, 64, 128\) gives the 0\.50x.*--block-size"),
    ],
)
def test_vllm_block_size_not_decided_is_said(text: str, says: str) -> None:
    view = read_engine_boot(text, source="v0.log", engine="vllm").rank("engine")
    assert view.kv_tokens is None and view.full_length_sequences is None
    with pytest.raises(LedgerError, match=says):
        view.require("kv_tokens")


# ---------------------------------------------------------------------------------------
# vLLM: a boot with no memory for its KV cache refused


@pytest.mark.parametrize(
    ("log", "line"),
    [
        ("vllm/v0.4_gpu_blocks_0_refused.log", 2),  # '# GPU blocks: 0, # CPU blocks: 256'
        ("vllm/v0.6.4_no_available_cache_memory.log", 3),  # 'ValueError: No available memory for the cache blocks.'
    ],
)
def test_vllm_no_cache_memory_is_a_refused_boot(log: str, line: int) -> None:
    booted = boot(log)
    (refusal,) = booted.refusals
    assert booted.refused and refusal.kind == "not_enough_memory" and refusal.line.number == line
    assert "--gpu-memory-utilization" in refusal.detail


def test_vllm_zero_blocks_hold_zero_tokens() -> None:
    view = boot("vllm/v0.4_gpu_blocks_0_refused.log").rank("engine")
    assert view.require("kv_tokens").value == 0  # 0 blocks x any block size
    assert view.require("window_tokens").value == 4_096  # max_seq_len=4096
    assert view.require("full_length_sequences").value == 0  # 0 / 4,096
    assert view.kv_bytes_per_token is None


def test_vllm_negative_kv_reservation_is_a_refusal() -> None:
    # the 0.7-0.8 profile line, its KV figure below 0 (the line's phrasing as vllm/heldout_v0.8_16gib_47x.log prints it)
    text = ("INFO 04-12 08:21:19 [worker.py:267] model weights take 21.21GiB; non_torch_memory takes 0.20GiB; PyTorch "
            "activation peak memory takes 2.37GiB; the rest of the memory reserved for KV Cache is -0.43GiB.\n")
    booted = read_engine_boot(text, source="neg.log", engine="vllm")
    (refusal,) = booted.refusals
    assert refusal.kind == "not_enough_memory" and "-0.43 GiB" in refusal.detail
    assert booted.rank("engine").require("kv_mib").value == Decimal("-0.43") * GIB


# ---------------------------------------------------------------------------------------
# SGLang before 2025: K and V sizes without #tokens; CUDA graphs captured without a free figure after them


@pytest.mark.parametrize(
    ("figure", "value"),
    [
        ("kv_mib", Decimal("5.64") * GIB),  # K size 2.82 GB + V size 2.82 GB (SGLang's GB is GiB)
        ("kv_tokens", Decimal(105_531)),  # max_total_num_tokens=105531 of the scheduler's line
        # 5.64 GiB x 2**30 / 105,531 = 57,385.07 B; Qwen2.5-7B (R1-Distill-Qwen-7B): 28 x 4 x 128 x 2 x 2 = 57,344,
        # within 0.01 GiB / 105,531 = 101.7 B of the printed sizes' rounding
        ("kv_bytes_per_token", Decimal("57385.07")),
        ("window_tokens", Decimal(131_072)),  # context_len=131072
        ("floor_mib", Decimal("22.76") * GIB * Decimal("0.12")),  # (1 - mem_fraction_static 0.88) x 22.76 GB
    ],
)
def test_sglang_k_and_v_sizes_without_tokens(figure: str, value: Decimal) -> None:
    view = boot("sglang/v0.4.2_k_v_sizes_graphs_without_free.log").rank("TP0")
    assert view.require(figure).value == value


def test_sglang_pool_end_before_graphs_is_no_free_figure() -> None:
    view = boot("sglang/v0.4.2_k_v_sizes_graphs_without_free.log").rank("TP0")
    # 'Memory pool end. avail mem=1.68 GB' (line 15) precedes 'Capture cuda graph begin.' (line 16), which prints no
    # figure in this version, nor does its 'Capture cuda graph end. Time elapsed: 1.79 s' or its summary
    assert view.free_mib is None
    with pytest.raises(LedgerError, match=r"line 15's 'Memory pool end. avail mem' is read before the CUDA graphs"):
        view.require("free_mib")


# ---------------------------------------------------------------------------------------
# llama.cpp from late 2025: the device line's description holds parentheses and its id follows


def test_llamacpp_device_line_with_its_id_and_a_recurrent_state() -> None:
    booted = boot("llamacpp/b9849_vulkan_device_id_rs_buffer.log")
    device = booted.rank("Vulkan0")
    free = device.require("free_mib")
    # 'using device Vulkan0 (NVIDIA GeForce RTX 3090) (0000:c1:00.0) - 23733 MiB free' less the device's model
    # 18,163.06 + KV 512.00 + recurrent state 448.88 + compute 568.18 = 19,692.12 MiB (the --fit pass's own
    # 'projected to use 19692 MiB'): 23,733 - 19,692.12 = 4,040.88
    assert free.value == Decimal("4040.88") and free.lines[0].number == 6
    assert device.require("kv_mib").value == 512 and device.require("window_tokens").value == 8_192


def test_llamacpp_device_descriptions_with_parentheses() -> None:
    booted = boot("llamacpp/2026_turboquant_two_vulkan_devices_ids.log")
    assert [r.rank for r in booted.ranks] == ["all", "Vulkan0", "Vulkan2"]
    # the excerpt holds the devices' KV buffers but not their model buffers: the free figures start from the
    # device lines (9,812 and 16,359 MiB free at load) and subtract only what the excerpt shows
    for name, line, at_load in (("Vulkan0", 6, "9,812"), ("Vulkan2", 5, "16,359")):
        free = booted.rank(name).require("free_mib")
        assert free.lines[0].number == line and free.arithmetic.startswith(f"free at load - buffers: {at_load} - ")
    assert booted.rank("all").require("kv_bytes_per_token").value == Decimal("3999.99")  # 488.28 MiB / 128,000 cells


# ---------------------------------------------------------------------------------------
# Held out: expected figures worked out by hand before the log was read by the dialect


@pytest.mark.parametrize(
    ("figure", "value"),
    [
        # '# cuda blocks: 36184' beside '70.67x for 8192 tokens': 36,184 x 16 / 8,192 = 70.67 (8: 35.34, 32: 141.34)
        ("kv_tokens", Decimal(578_944)),
        ("kv_mib", Decimal("61.84") * GIB),  # 'reserved for KV Cache is 61.84GiB'
        ("full_length_sequences", Decimal("70.67")),  # 578,944 / 8,192 = 70.6719, rounded down
        ("window_tokens", Decimal(8_192)),
        ("free_mib", Decimal("15.84") * GIB),  # 79.19 GiB - 63.35 GiB the instance may use
        ("activation_mib", Decimal("0.23") * GIB),
        ("graph_mib", Decimal("0.13") * GIB),  # 'Graph capturing finished in 2 secs, took 0.13 GiB'
    ],
)
def test_heldout_vllm_v0_cuda_blocks(figure: str, value: Decimal) -> None:
    assert boot("vllm/heldout_v0_cuda_blocks_70.67x.log").rank("engine").require(figure).value == value


def test_heldout_vllm_v0_cuda_blocks_rate() -> None:
    view = boot("vllm/heldout_v0_cuda_blocks_70.67x.log").rank("engine")
    # 61.84 GiB x 2**30 / 578,944 = 114,691.91 B, +- 0.005 GiB / 578,944 = 9.3 B: 28 layers x 8 KV heads x 128 x 2 x 2
    # = 114,688 (a Qwen3-0.6B-shaped model; 'model weights take 1.12GiB')
    assert view.require("kv_bytes_per_token").agrees_with(Decimal(114_688))
