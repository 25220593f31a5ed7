"""The engine dialects against careless and hostile input: clear errors, nothing guessed, no blow-up.

The pathological lines below would take exponential time under a backtracking pattern; they
finish here because every quantifier is possessive or bounded (no timing is asserted: a
regression shows as a test that does not end).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from radiance_mcp.core.engines import detect, read_engine_boot
from radiance_mcp.core.engines.common import MAX_LINE_CHARS
from radiance_mcp.core.errors import LedgerError

LEDGERS = Path(__file__).parent.parent / "fixtures" / "ledgers"
RADIANCE_EXAMPLE = Path(__file__).parent.parent.parent / "radiance_mcp" / "examples" / "frank-archon.log"


@pytest.mark.parametrize(
    ("engine", "line"),
    [
        ("vllm", "GPU KV cache size: " + "1," * 7_000 + " tokens"),
        ("vllm", "Memory profiling results: " + "total_gpu_memory=1GiB " * 600),
        ("vllm", "Maximum concurrency for " + "9" * 5_000 + " 1" * 3_000),
        ("sglang", "max_total_num_tokens=" + "context_len=, " * 1_000),
        ("sglang", "KV Cache is allocated. #tokens: " + "1 " * 6_000),
        ("llama.cpp", "llama_kv_cache: size = 1.00 MiB (" + " " * 12_000 + ")"),
        ("llama.cpp", "CUDA0 KV buffer size = " + "0" * 12_000),
        ("llama.cpp", "using device CUDA0 (" + "(" * 12_000 + " - 1 MiB free"),
        # One long run of word characters before the phrase: a pattern that may start inside the
        # run (an unanchored \S++ device name, a [a-z_]++ key) would rescan it from every position.
        ("llama.cpp", "x" * 15_000 + " KV buffer size = 1.00 MiB"),
        ("llama.cpp", "x" * 15_000 + " compute buffer size = 1.00 MiB"),
        ("vllm", "Memory profiling results: " + "a" * 15_000),
        ("sglang", "max_total_num_tokens=1, " + "a" * 15_000),
        ("vllm", "# " + "A" * 15_000 + " blocks: 1"),
        # issue 25's patterns: nested and repeated device groups, an optional #tokens, a signed KV reservation
        ("llama.cpp", "using device CUDA0 " + "(" * 6_000 + ")" * 6_000 + " - 1 MiB free"),
        ("llama.cpp", "using device CUDA0 " + "(a) " * 3_000 + "- x MiB free"),
        ("llama.cpp", "using device CUDA0 (" + "(a)" * 4_000 + " - 1 MiB free"),
        ("llama.cpp", "x" * 15_000 + " RS buffer size = 1.00 MiB"),
        ("sglang", "KV Cache is allocated. " + "#tokens: 1, " * 1_200),
        ("sglang", "Capture cuda graph " + "begin" * 3_000),
        ("vllm", "the rest of the memory reserved for KV Cache is " + "-" * 15_000 + "1GiB"),
        ("vllm", "No available memory for the cache blocks. " * 350),
        ("vllm", "# GPU blocks: " + "9" * 50 + "\nMaximum concurrency for 1 tokens per request: 1x"),
        # issue 25 item 7's patterns: a refusal's pair with no literal before its number, its window and estimate,
        # the SGLang capture's progress bar, llama.cpp's 2023 KV line
        ("vllm", "9" * 15_000 + "x GiB KV cache is needed, which is larger than the available KV cache memory (1 GiB)"),
        ("vllm", "To serve at least one request with the model's max seq len (" + "9" * 15_000),
        ("vllm", "the estimated maximum model length is " + "1," * 7_000),
        ("vllm", "Available KV cache memory: " + "-" * 15_000 + "1 GiB"),
        ("sglang", "Capturing batches (" * 800),
        ("llama.cpp", "llama_init_from_file: kv self size = " + "9" * 15_000 + " M"),
    ],
)
def test_pathological_lines_end_and_are_named(engine: str, line: str) -> None:
    try:
        booted = read_engine_boot(line + "\n", source="bad.log", engine=engine)  # type: ignore[arg-type]
    except LedgerError as exc:
        assert "bad.log" in str(exc) or "line 1" in str(exc)
    else:
        assert booted.first_line == 1


def test_an_implausible_figure_names_its_line() -> None:
    text = "GPU KV cache size: 1234567890123456789012 tokens\nMaximum concurrency for 4 tokens per request: 1x\n"
    with pytest.raises(LedgerError, match=r"^big.log: line 1: implausible number '1234567890123456789012'"):
        read_engine_boot(text, source="big.log", engine="vllm")


def test_an_overlong_line_is_skipped_and_counted() -> None:
    text = (LEDGERS / "vllm/v1_qwen3-14b_lmcache.log").read_text() + "x" * (MAX_LINE_CHARS + 1) + "\n"
    booted = read_engine_boot(text, source="long.log")
    assert booted.skipped_long_lines == 1 and booted.rank("engine").require("kv_tokens").value == 42_656


def test_journald_prefixes_and_crlf_read_the_same() -> None:
    lines = (LEDGERS / "vllm/v1_qwen3-14b_lmcache.log").read_text().splitlines()
    text = "".join(f"Dec 01 06:00:0{i} gpu-host-7 vllm[4242]: {line}\r\n" for i, line in enumerate(lines))
    view = read_engine_boot(text, source="journal").rank("engine")
    assert view.require("kv_tokens").value == 42_656 and view.require("window_tokens").value == 32_768
    assert view.require("kv_mib").value == Decimal("6.51") * 1024


@pytest.mark.parametrize("boot", [0, 2, -2, 99])
def test_a_boot_out_of_range_says_the_range(boot: int) -> None:
    with pytest.raises(LedgerError, match=r"boot=-?\d+ but the log holds 1 boot\(s\).*; use -1 or 1 \(its one boot\)$"):
        read_engine_boot((LEDGERS / "sglang/dp4_tp4_ep4_pool.log").read_text(), source="s.log", boot=boot)


def test_empty_unrelated_and_ambiguous_text() -> None:
    with pytest.raises(LedgerError, match="empty"):
        read_engine_boot(" \n\n", source="e.log", engine="sglang")
    with pytest.raises(LedgerError, match="no start-up line of vLLM, SGLang or llama.cpp"):
        detect(RADIANCE_EXAMPLE.read_text(), source="radiance.log")  # radiance's own ledger is not theirs
    mixed = "GPU KV cache size: 42,656 tokens\nKV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB\n"
    with pytest.raises(LedgerError, match="name the engine"):
        detect(mixed, source="mixed.log")
    with pytest.raises(LedgerError, match="no line of sglang's start-up ledger"):
        read_engine_boot((LEDGERS / "vllm/v1_fp8_100k.log").read_text(), source="v.log", engine="sglang")


def test_wrong_engine_name_and_block_size() -> None:
    with pytest.raises(LedgerError, match="expected one of vllm, sglang, llama.cpp"):
        read_engine_boot("x\n", source="x.log", engine="tgi")  # type: ignore[arg-type]
    with pytest.raises(LedgerError, match="block_size_tokens=0"):
        read_engine_boot("x\n", source="x.log", engine="vllm", block_size_tokens=0)
