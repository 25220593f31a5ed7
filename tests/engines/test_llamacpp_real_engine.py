"""The llama.cpp dialect on a real boot: llama-cpp-python's OpenAI server with Gemma 3 270M.

Reads the session's server (tests/support/llama_server.py: 127.0.0.1, n_ctx 2048; the
server logs llama.cpp's start-up to stderr, verbose by default), captures that boot log,
reads it with the llama.cpp dialect and checks it against what the server reports of itself:
the context window its refusal names, and its single sequence (llama-cpp-python serves one
context with one sequence; its settings offer no slots). Skipped when llama-cpp-python or
the model package is not installed (.ci/run installs both). Run: `pytest -m real_engine tests/engines`.
"""

from __future__ import annotations

import re

import httpx
import pytest
from llama_server import N_CTX, REAL_ENGINE, LlamaServer

from radiance_mcp.core.boot import Boot
from radiance_mcp.core.engines import detect, read_engine_boot

pytestmark = REAL_ENGINE


@pytest.fixture(scope="module")
def booted(llama_server: LlamaServer) -> Boot:
    return read_engine_boot(llama_server.boot_log, source="llama-cpp-python stderr")


def window_the_server_names(url: str) -> int:
    """The context window llama-cpp-python names when it refuses a prompt longer than it."""
    prompt = "The quick brown fox jumps over the lazy dog. " * 600  # about 6,000 tokens: over 2,048
    response = httpx.post(f"{url}/v1/completions", json={"prompt": prompt, "max_tokens": 1}, timeout=120)
    assert response.status_code == 400, response.text[:500]
    found = re.search(r"maximum context length is (\d+) tokens|context window of (\d+)", response.text)
    assert found, response.text[:500]
    return int(found[1] or found[2])


def test_the_boot_log_is_read_as_llama_cpp(llama_server: LlamaServer, booted: Boot) -> None:
    assert detect(llama_server.boot_log) == "llama.cpp"
    assert booted.boots_seen == 1 and not booted.refused, booted.refusals


def test_n_ctx_is_the_window_the_server_names(llama_server: LlamaServer, booted: Boot) -> None:
    window = window_the_server_names(llama_server.url)
    assert window == N_CTX
    assert booted.settings["n_ctx"].value == window
    whole = booted.rank("all")
    assert whole.require("window_tokens").value == window
    assert whole.require("kv_tokens").value == window  # the full cache has n_ctx cells
    assert whole.require("full_length_sequences").value == 1


def test_one_slot_as_the_server_serves_one_sequence(booted: Boot) -> None:
    from llama_cpp.server.settings import ModelSettings  # type: ignore[import-not-found, unused-ignore]

    assert booted.settings["n_seq_max"].value == 1
    fields = set(ModelSettings.model_fields)
    assert "n_ctx" in fields and not {f for f in fields if "parallel" in f or "seq_max" in f or "slot" in f}


def test_the_kv_rate_is_the_cache_lines_own_pair(booted: Boot) -> None:
    # Gemma 3 270M: 1 KV head of 256 dims, f16: each layer costs 256 x 2 (K, V) x 2 B = 1,024 B a token.
    # Its global layers sit in the non-SWA cache, the sliding ones in the SWA cache; every cache of
    # n_ctx cells grows with the context (llama-cpp-python asks for a full-size SWA cache).
    caches = [h for h in booted.hits if h.key == "kv_size"]
    growing = [h for h in caches if int(h.raw("cells")) == N_CTX]
    assert growing and all(h.raw("k_type") == "f16" for h in caches)
    rate = booted.rank("all").require("kv_bytes_per_token")
    assert rate.value == sum(int(h.raw("layers")) for h in growing) * 1_024
    assert booted.rank("all").require("weights_mib").value > 100  # the Q4_K_M GGUF is about 240 MiB
