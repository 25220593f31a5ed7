"""Hostile and careless calls of the ledger tools on vLLM, SGLang and llama.cpp logs, over the SDK's client."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from mcp import Client
from mcp_call import call

from radiance_mcp.app.server import build_server
from radiance_mcp.core.errors import ConfigError
from radiance_mcp.sources.config import Fleet, Host, ServerSettings, Service, load
from radiance_mcp.sources.runtime import Runtime

LEDGERS = Path(__file__).parent.parent / "fixtures" / "ledgers"
A40 = LEDGERS / "vllm" / "heldout_v1_a40_53k.log"


def client_for(**services: Service) -> Client:
    hosts = {"gpubox": Host(log_roots=("/var/log",))}
    return Client(build_server(Runtime(Fleet(services=services, hosts=hosts, server=ServerSettings()))))


def test_a_misspelt_engine_in_the_config_names_the_key_and_the_choices(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text(f'[services.a]\nlog = "{A40}"\nengine = "vLLM"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"services\.a\.engine: .*'vllm'"):
        load(config)


async def test_twenty_parallel_reads_of_one_engine_log_agree() -> None:
    async with client_for(a40=Service(log=str(A40), engine="vllm")) as client:
        results = await asyncio.gather(*(call(client, "read_budget_table", service="a40") for _ in range(20)))
    assert {r[1]["cards"][0]["kv_tokens"]["value"] for r in results} == {53_136}


async def test_an_engine_log_on_a_host_is_read_over_ssh_and_an_unreachable_host_is_named(tmp_path: Path) -> None:
    """vLLM's log on a host goes over SSH (tests/remote/test_engine_remote*.py read it); here the host is closed."""
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    hosts = {"gpubox": Host(address="127.0.0.1", port=1, known_hosts=str(known_hosts), log_roots=("/var/log",))}
    remote = Service(host="gpubox", log="/var/log/vllm.log", engine="vllm")
    async with Client(build_server(Runtime(Fleet(services={"remote": remote}, hosts=hosts)))) as client:
        error, message = await call(client, "compute_ceiling", service="remote")
    assert error and "gpubox (127.0.0.1:1), to read gpubox:/var/log/vllm.log: cannot connect" in message


async def test_a_dtype_for_an_engine_whose_rate_is_its_own_is_refused() -> None:
    async with client_for(a40=Service(log=str(A40), engine="vllm")) as client:
        error, message = await call(client, "check_pool_contract", service="a40", seqs=1, max_model_len=1024,
                                    kv_cache_dtype="fp8")
    assert error and "kv_cache_dtype='fp8'" in message and "own KV pair" in message


async def test_two_engines_lines_in_equal_measure_are_not_guessed_between() -> None:
    mixed = (A40.read_text(encoding="utf-8").splitlines()[-1] + "\n"
             + (LEDGERS / "sglang" / "heldout_tp4_qwen3-235b-fp8.log").read_text(encoding="utf-8"))
    async with client_for() as client:
        error, message = await call(client, "read_budget_table", log_text=mixed)
    assert error and "as many lines read as" in message and "engine" in message


async def test_an_engine_ledger_buried_in_noise_is_read_with_its_own_line_numbers() -> None:
    noise = "".join(f"INFO 02-12 08:{i % 60:02d}:00 [api_server.py:1] GET /health 200\n" for i in range(15_000))
    text = noise + A40.read_text(encoding="utf-8")
    async with client_for() as client:
        error, out = await call(client, "read_budget_table", log_text=text)
    assert not error, out
    assert out["cards"][0]["kv_tokens"]["lines"] == [15_007]  # line 7 of the log, after the noise


async def test_an_engine_service_with_no_log_says_so_not_that_ssh_is_unsupported() -> None:
    async with client_for(bare=Service(endpoint="http://127.0.0.1:9", engine="sglang")) as client:
        error, message = await call(client, "read_budget_table", service="bare")
    assert error and "names no log" in message and "SSH" not in message
