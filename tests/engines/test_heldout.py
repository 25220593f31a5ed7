"""Logs the dialects were not written against (tests/fixtures/ledgers/*/heldout_*.log).

The expected figures were worked out by hand from each log (the arithmetic beside them) and,
where the model is known, from its architecture; the tests were run only afterwards.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from radiance_mcp.engines import BootView, read_engine_boot
from radiance_mcp.errors import LedgerError

LEDGERS = Path(__file__).parent.parent / "fixtures" / "ledgers"
GIB = Decimal(1024)


def boot(name: str, **options: object) -> BootView:
    return read_engine_boot((LEDGERS / name).read_text(), source=name, **options)  # type: ignore[arg-type]


def test_vllm_0_8_cuda_blocks() -> None:
    name = "vllm/heldout_v0.8_windows_cuda_blocks.log"
    assert boot(name).rank("engine").kv_tokens is None  # blocks without a block size: not guessed
    booted = boot(name, block_size_tokens=16)
    assert not booted.refused
    view = booted.rank("engine")
    assert view.require("kv_tokens").value == 195_200  # "# cuda blocks: 12200" x 16
    assert view.require("kv_tokens").lines[0].number == 6
    assert view.require("kv_mib").value == Decimal("13721.60")  # "reserved for KV Cache is 13.40GiB"
    # 13.40 GiB / 195,200 tokens = 73,709.7 B/token, +- 0.005 GiB / 195,200 = 27.5 B; 18 layers x 1,024 x 2 x 2 B
    assert view.require("kv_bytes_per_token").agrees_with(Decimal(73_728))
    assert view.require("window_tokens").value == 2_048
    assert view.require("full_length_sequences").value == Decimal("95.31")  # vLLM: "95.31x"
    assert view.require("weights_mib").value == Decimal("0.4678") * GIB  # "Model loading took 0.4678 GB"
    assert view.require("activation_mib").value == 512  # "activation peak memory takes 0.50GiB"
    assert view.require("free_mib").value == Decimal("1638.40")  # 16.00 GiB - 14.40 GiB


def test_vllm_v1_qwen3_1_7b() -> None:
    view = boot("vllm/heldout_v1_qwen3-1.7b_1024.log").rank("engine")
    assert view.require("kv_tokens").value == 175_856
    assert view.require("kv_mib").value == Decimal("18.78") * GIB
    # Qwen3-1.7B bf16: 28 layers x 8 KV heads x 128 x 2 x 2 B = 114,688 B/token;
    # 18.78 GiB / 175,856 = 114,667 B, +- 0.005 GiB / 175,856 = 30.5 B
    assert view.require("kv_bytes_per_token").agrees_with(Decimal(114_688))
    with pytest.raises(LedgerError, match="Maximum concurrency for L tokens per request"):
        view.require("window_tokens")  # the excerpt stops before it: no sequences computed
    assert view.full_length_sequences is None


def test_sglang_qwen3_235b_tp4() -> None:
    view = boot("sglang/heldout_tp4_qwen3-235b-fp8.log").rank("engine")
    assert view.require("kv_tokens").value == 367_404
    assert view.require("kv_mib").value == Decimal("16.46") * GIB  # K 8.23 + V 8.23 GB (GiB)
    # Qwen3-235B-A22B: 94 layers x (4 KV heads / TP 4) x 128 x 2 x 2 B (bf16 cache) = 48,128 B/token per rank;
    # 16.46 GiB / 367,404 = 48,104.5 B, +- 0.01 GiB / 367,404 = 29.2 B
    assert view.require("kv_bytes_per_token").agrees_with(Decimal(48_128))


def test_sglang_scheduler_summary() -> None:
    booted = boot("sglang/heldout_scheduler_summary_256k.log")
    view = booted.rank("engine")
    assert view.require("kv_tokens").value == 2_086_558
    assert view.require("window_tokens").value == 256_000
    assert view.require("full_length_sequences").value == Decimal("8.15")  # 2,086,558 / 256,000 = 8.1506
    assert view.require("free_mib").value == Decimal("17.22") * GIB
    assert booted.settings["max_running_requests"].value == 33
    assert not booted.refused  # the pool holds the context 8 times over
    with pytest.raises(LedgerError, match="K size"):
        view.require("kv_mib")


def test_ik_llama_mla_allocation_failure() -> None:
    booted = boot("llamacpp/heldout_ik_llama_mla_alloc_failed.log")
    assert booted.refused
    (refusal,) = booted.refusals
    assert refusal.kind == "allocation_failed" and refusal.line.number == 15  # allocating 279356.51 MiB on device 0
    assert "279356.51 MiB on device 0" in refusal.detail
    assert booted.rank("all").require("kv_mib").value == Decimal("1005.79")  # KV self size, MLA c^KV
    assert booted.rank("CUDA0").require("kv_mib").value == Decimal("379.23")
    assert [r.rank for r in booted.ranks][1:4] == ["CUDA0", "CUDA1", "CUDA2"]
    assert booted.rank("all").kv_tokens is None  # no n_ctx in the excerpt


def test_llamacpp_393k_four_sequences_one_stream() -> None:
    whole = boot("llamacpp/heldout_2026_dsv4_393k_4seqs.log").rank("all")
    assert whole.require("kv_tokens").value == 393_216  # "393216 cells"
    assert whole.require("window_tokens").value == 393_216  # n_ctx_seq (393216): a unified cache
    assert whole.require("full_length_sequences").value == 1  # 393,216 / 393,216
    assert whole.kv_bytes_per_token is None  # "0 layers": the rate is not this cache's to give
