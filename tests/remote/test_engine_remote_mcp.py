"""The ledger tools and boundary_probe on vLLM, SGLang and llama.cpp services whose log is on a host,
over the SDK's in-memory MCP client, against both real SSH servers.

Each remote service has a twin reading the same recorded log on this machine: every tool's
answer must be the twin's, the log's name and origin aside (every figure, line and verdict).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client
from mcp_call import call
from ssh_hosts import LoopbackHost

from radiance_mcp.app.server import build_server
from radiance_mcp.sim import Shape, SimEndpoint
from radiance_mcp.sources.config import Fleet
from radiance_mcp.sources.remote import SSHPool
from radiance_mcp.sources.runtime import Runtime

LEDGERS = Path(__file__).parent.parent / "fixtures" / "ledgers"
NOWHERE = "http://127.0.0.1:9"
SERVICES = {  # service: (engine, recorded log)
    "a40": ("vllm", "vllm/heldout_v1_a40_53k.log"),
    "v06": ("vllm", "vllm/v0.6_llama3.1-8b_20k.log"),
    "sgl": ("sglang", "sglang/heldout_tp4_qwen3-235b-fp8.log"),
    "sgl-summary": ("sglang", "sglang/heldout_scheduler_summary_256k.log"),
    "slots8": ("llama.cpp", "llamacpp/b45xx_server_8_slots.log"),
}
TOOLS = ("read_budget_table", "compute_ceiling", "check_pool_contract", "plan_free_vram")


def fleet_of(host: LoopbackHost, endpoint: str = NOWHERE) -> tuple[Fleet, dict[str, str]]:
    """Each service twice: '<name>-remote' (its log copied to the host) and '<name>-local'; and the sources."""
    services: dict[str, dict[str, Any]] = {}
    names = {}
    for name, (engine, log) in SERVICES.items():
        remote = host.logs / f"{name}-{engine}.log"
        shutil.copyfile(LEDGERS / log, remote)
        services[f"{name}-remote"] = {"host": "testhost", "log": str(remote), "engine": engine, "endpoint": endpoint}
        services[f"{name}-local"] = {"log": str(LEDGERS / log), "engine": engine, "endpoint": endpoint}
        names[f"testhost:{remote}"] = str(LEDGERS / log)
    return Fleet.model_validate({"hosts": {"testhost": host.host_entry()}, "services": services}), names


@asynccontextmanager
async def served(fleet: Fleet, pool: SSHPool) -> AsyncIterator[Client]:
    async with Client(build_server(Runtime(fleet, ssh_pool=pool))) as client:
        yield client


def as_local(answer: Any, names: dict[str, str]) -> str:
    """The remote answer with its log named as the twin's and read where the twin's was. A host sends the boot's
    lines, not their byte offsets: its first_byte is null where the local read's is the offset (a property of the
    read, as its origin is)."""
    text = json.dumps(answer, sort_keys=True)
    # The paths go through a placeholder each: a checkout whose path holds "-remote" keeps it.
    for n, remote in enumerate(names):
        text = text.replace(remote, f"\x00{n}\x00")
    text = text.replace('"origin": "host"', '"origin": "local file"').replace("-remote", "-local")
    for n, local in enumerate(names.values()):
        text = text.replace(f"\x00{n}\x00", local)
    return text


def without_offset(answer: Any) -> str:
    """The local answer with its boot's byte offset set aside, as a host's read has none (as_local)."""
    return re.sub(r'"first_byte": \d+', '"first_byte": null', json.dumps(answer, sort_keys=True))


async def test_every_tool_answers_on_a_host_as_on_this_machine(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    fleet, names = fleet_of(ssh_host)
    async with served(fleet, pool) as client:
        calls = [(tool, name, where) for tool in TOOLS for name in SERVICES for where in ("remote", "local")]
        # All at once, as an agent's parallel calls arrive.
        answers = await asyncio.gather(*(call(client, tool, service=f"{name}-{where}") for tool, name, where in calls))
    got = {(tool, name, where): answer for (tool, name, where), answer in zip(calls, answers, strict=True)}
    for tool in TOOLS:
        for name in SERVICES:
            remote, local = got[tool, name, "remote"], got[tool, name, "local"]
            assert as_local(remote, names) == without_offset(local), (tool, name)
    # The figures themselves, with their lines (worked by hand from each log):
    error, a40 = got["read_budget_table", "a40", "remote"]
    assert not error and a40["ledger"]["origin"] == "host" and a40["ledger"]["source"].startswith("testhost:")
    (rank,) = a40["cards"]
    assert rank["kv_tokens"]["value"] == 53_136 and rank["kv_tokens"]["lines"] == [7]
    error, slots = got["read_budget_table", "slots8", "remote"]
    assert not error, slots
    # kv_size = 16,384 cells / n_ctx_per_seq = 2,048: 8 full-length sequences
    assert slots["cards"][0]["full_length_sequences"]["value"] == 8
    error, sgl = got["check_pool_contract", "sgl", "remote"]
    # The KV line holds no window: the contract says which figure is missing and what to pass.
    assert error and "window_tokens: not printed" in sgl and "pass max_model_len" in sgl


async def test_the_contract_on_a_remote_sglang_pool_with_the_window_given(ssh_host: LoopbackHost,
                                                                          pool: SSHPool) -> None:
    fleet, names = fleet_of(ssh_host)
    async with served(fleet, pool) as client:
        arguments = {"seqs": 11, "max_model_len": 32_768}
        error, remote = await call(client, "check_pool_contract", service="sgl-remote", **arguments)
        _, local = await call(client, "check_pool_contract", service="sgl-local", **arguments)
    assert not error, remote
    assert as_local(remote, names) == without_offset(local)
    # K + V = 8.23 + 8.23 GiB = 16,855.04 MiB for 367,404 tokens: 48,104.51 B/token;
    # 11 x 32,768 = 360,448 tokens x 48,104.51 B = 16,535.93 MiB <= 16,855.04 MiB
    assert (remote["pool_mib"], remote["required_mib"], remote["contract_ok"]) == (16_855.04, 16_535.93, True)
    # the excerpt prints no free memory, so the ceiling is not checked: ok is not true
    pair = next(check for check in remote["checks"] if check["rule"] == "pair_within_ceiling")
    assert remote["ok"] is None and pair["verdict"] == "unchecked" and pair["remedy"], pair
    assert remote["inputs_from"]["pool_mib"]["line"] == 1 and remote["ledger"]["origin"] == "host"


async def test_boundary_probe_plans_from_a_remote_engine_ledger(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    """Plans only (nothing sent): n above what the host's ledger backs is refused, with its line."""
    fleet, names = fleet_of(ssh_host)
    async with served(fleet, pool) as client:
        error, out = await call(client, "boundary_probe", service="slots8-remote", n=8)
        over, message = await call(client, "boundary_probe", service="slots8-remote", n=9)
        _, local = await call(client, "boundary_probe", service="slots8-local", n=8)
    assert not error, out
    plan = out["plan"]
    # kv_size = 16,384 cells / n_ctx_per_seq = 2,048: 8 full-length sequences at once, 8 slots served
    assert plan["backed_seqs"] == 8 and plan["max_num_seqs"] == 8 and plan["max_model_len"] == 2_048
    assert plan["window_source"].startswith("ledger testhost:") and plan["window_source"].endswith(
        ":10: 'llama_init_from_model: n_ctx_per_seq = 2048'")
    assert plan["dialect"] == "llama.cpp" and out["requests_sent"] == 0
    assert as_local(out, names) == without_offset(local)
    assert over and "8 sequence(s)" in message and "over_shape=true" in message


async def test_boundary_probe_runs_the_shape_a_remote_engine_ledger_states(asyncssh_host: LoopbackHost,
                                                                           pool: SSHPool) -> None:
    """A service with no engine named, its llama-server log on a host: radiance's reader finds no ledger, the
    engine's lines tell llama.cpp, and its shape (8 x 2,048) is run against a simulator serving it
    (8 x (1 + 2 spec) = 24 sampler rows, within the simulated engine's bound)."""
    ssh_host = asyncssh_host
    remote = ssh_host.logs / "unnamed-llama-server.log"
    shutil.copyfile(LEDGERS / "llamacpp/b45xx_server_8_slots.log", remote)
    async with SimEndpoint(Shape(seqs=8, max_model_len=2_048, spec=2), time_scale=0.001) as endpoint:
        fleet = Fleet.model_validate({"hosts": {"testhost": ssh_host.host_entry()}, "services": {
            "llama": {"host": "testhost", "log": str(remote), "endpoint": endpoint.url}}})
        async with served(fleet, pool) as client:
            error, out = await call(client, "boundary_probe", service="llama", n=8, gen_tokens=64, execute=True)
        assert not error, out
        assert out["plan"]["backed_seqs"] == 8 and out["plan"]["max_model_len"] == 2_048
        assert out["verdict"] == "8/8 retrieved" and out["requests_sent"] >= 8
        assert sum(r.status == 200 for r in endpoint.requests) == 8


async def test_every_tool_tells_the_engine_of_a_remote_log_the_config_does_not_name(ssh_host: LoopbackHost,
                                                                                    pool: SSHPool) -> None:
    """No `engine` in the config: each of the four ledger tools reads a vLLM, an SGLang and a llama.cpp log on
    the host as it reads the same service with its engine named (radiance's reader finds no ledger first)."""
    fleet, _ = fleet_of(ssh_host)
    unnamed = {f"{name}-unnamed": {k: v for k, v in fleet.services[f"{name}-remote"].model_dump().items()
                                   if k != "engine" and v not in (None, [], ())}
               for name in ("a40", "sgl-summary", "slots8")}
    config = {"hosts": {"testhost": ssh_host.host_entry()},
              "services": {**unnamed, **{f"{n}-remote": fleet.services[f"{n}-remote"].model_dump(exclude_none=True)
                                         for n in ("a40", "sgl-summary", "slots8")}}}
    fleet = Fleet.model_validate(config)
    assert all(fleet.services[name].engine is None for name in unnamed)
    async with served(fleet, pool) as client:
        calls = [(tool, name) for tool in TOOLS for name in ("a40", "sgl-summary", "slots8")]
        unnamed_answers = await asyncio.gather(*(call(client, t, service=f"{n}-unnamed") for t, n in calls))
        named_answers = await asyncio.gather(*(call(client, t, service=f"{n}-remote") for t, n in calls))
    for (tool, name), got, want in zip(calls, unnamed_answers, named_answers, strict=True):
        assert json.dumps(got, sort_keys=True).replace("-unnamed", "-remote") == json.dumps(want, sort_keys=True), (
            tool, name)
    # Neither fell back to radiance's error: the vLLM boot's KV tokens come with their line.
    error, a40 = unnamed_answers[0]
    assert not error and a40["cards"][0]["kv_tokens"]["value"] == 53_136
