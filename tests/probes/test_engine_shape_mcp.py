"""boundary_probe plans its n from a vLLM, SGLang or llama.cpp service's own ledger, over the SDK's client.

Plans only (execute=false): nothing is sent, so the endpoints are unreachable on purpose.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client

from radiance_mcp.app.server import build_server
from radiance_mcp.sources.config import Fleet, ServerSettings, Service
from radiance_mcp.sources.runtime import Runtime

LEDGERS = Path(__file__).parent.parent / "fixtures" / "ledgers"
NOWHERE = "http://127.0.0.1:9"


@asynccontextmanager
async def served(**more: Service) -> AsyncIterator[Client]:
    def service(log: str, engine: Any = None) -> Service:
        return Service(log=str(LEDGERS / log), endpoint=NOWHERE, engine=engine)

    services = {
        "slots8": service("llamacpp/b45xx_server_8_slots.log", "llama.cpp"),
        "one-seq": service("llamacpp/recorded_llama-cpp-python-0.3.36_gemma3-270m.log", "llama.cpp"),
        "python-server": service("llamacpp/recorded_llama-cpp-python-0.3.36_gemma3-270m_server.log", "llama.cpp"),
        "one-slot": service("llamacpp/2026_alpaca_vulkan_n_seq_max_1.log", "llama.cpp"),
        "oom": service("llamacpp/llama-cpp-python_kv_alloc_failed.log", "llama.cpp"),
        "sgl": service("sglang/heldout_scheduler_summary_256k.log"),  # engine told from the log
        **more,
    }
    async with Client(build_server(Runtime(Fleet(services=services, server=ServerSettings())))) as client:
        yield client


async def probe(client: Client, **arguments: Any) -> tuple[bool, Any]:
    result = await client.call_tool("boundary_probe", arguments)
    if result.is_error:
        return True, result.content[0].text  # type: ignore[union-attr]
    return False, result.structured_content


async def test_llama_server_plan_takes_its_slots_and_window_from_the_ledger() -> None:
    async with served() as client:
        error, out = await probe(client, service="slots8", n=8)
        over, message = await probe(client, service="slots8", n=9)
    assert not error, out
    plan = out["plan"]
    # kv_size = 16,384 cells / n_ctx_per_seq = 2,048: 8 full-length sequences at once, 8 sequences served
    assert plan["backed_seqs"] == 8 and plan["max_num_seqs"] == 8 and plan["max_model_len"] == 2_048
    assert plan["window_source"].endswith(":10: 'llama_init_from_model: n_ctx_per_seq = 2048'")
    assert plan["dialect"] == "llama.cpp" and out["executed"] is False and out["requests_sent"] == 0
    assert "8/8 retrieved" in plan["predicted"]
    assert over and "8 sequence(s)" in message and "over_shape=true" in message


async def test_one_sequence_llama_cpp_python_boot_backs_one() -> None:
    async with served() as client:
        error, out = await probe(client, service="one-seq", n=1, gen_tokens=64)
        over, message = await probe(client, service="one-seq", n=2)
    assert not error, out
    # 2,048 cells / n_ctx_seq 2,048 = 1 sequence; n_seq_max = 1
    assert out["plan"]["backed_seqs"] == 1 and out["plan"]["max_model_len"] == 2_048
    assert out["plan"]["dialect"] == "unknown"  # one sequence: llama-server or llama-cpp-python, told by a refusal
    assert over and "1 sequence(s)" in message


async def test_a_refused_llama_cpp_boot_plans_nothing() -> None:
    async with served() as client:
        error, message = await probe(client, service="oom", n=1)
    assert error and "refused to start" in message and ":1:" in message


async def test_sglang_plan_from_the_scheduler_summary() -> None:
    async with served() as client:
        error, out = await probe(client, service="sgl", n=8, max_model_len=256_000)
        wrong, message = await probe(client, service="sgl", n=8, max_model_len=200_000)
    assert not error, out
    # max_total_num_tokens 2,086,558 / context_len 256,000 = 8.15: 8 full-length sequences; 33 running requests
    assert out["plan"]["backed_seqs"] == 8 and out["plan"]["max_num_seqs"] == 33
    assert out["plan"]["dialect"] == "unknown"  # no engine in the config: the first refusal tells it
    assert wrong and "256,000" in message


async def test_a_boot_that_shows_its_server_tells_the_dialect_before_anything_is_sent(tmp_path: Path) -> None:
    """llama-cpp-python's server starts as a uvicorn app, llama-server listens: the boot says which refusal
    dialect to read (issue 25, item 5); a boot of one sequence trimmed before that line leaves it to the first
    refusal."""
    # llama-server's ready line as containers/ramalama#1486 quotes it
    listening = tmp_path / "listening.log"
    listening.write_text((LEDGERS / "llamacpp/2026_alpaca_vulkan_n_seq_max_1.log").read_text()
                         + "main: server is listening on http://0.0.0.0:8080 - starting the main loop\n")
    async with served(listens=Service(log=str(listening), endpoint=NOWHERE, engine="llama.cpp")) as client:
        error, out = await probe(client, service="python-server", n=1, gen_tokens=64)
        _, trimmed = await probe(client, service="one-slot", n=1, gen_tokens=64)
        _, listens = await probe(client, service="listens", n=1, gen_tokens=64)
    assert not error, out
    assert out["plan"]["dialect"] == "llama-cpp-python" and out["requests_sent"] == 0
    assert trimmed["plan"]["dialect"] == "unknown"
    assert listens["plan"]["dialect"] == "llama.cpp", listens
