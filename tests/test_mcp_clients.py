"""The server as MCP clients see it: the SDK's client in memory, over stdio, raw stdio, and streamable HTTP.

Tool behaviour is checked over the SDK's in-memory client on the server `radiance-mcp serve`
builds (no fleet file: an empty fleet); a few tests keep the real transports (a server process
over stdio and streamable HTTP), since their framing and logging are what they check.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from bounds import HANG_S
from cli_run import CliRunner
from http_process import free_port, serve_http
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from shared_server import empty_fleet_server

from radiance_mcp.app.cli import TOKEN_ENV
from radiance_mcp.core.constants import DEFAULT_MODEL, WORKED_CEILING_MIB
from radiance_mcp.sources.config import CONFIG_ENV, EXAMPLES_DIR
from radiance_mcp.tools import TOOLS

EXAMPLE_LOG = str(EXAMPLES_DIR / "frank-archon.log")
LEDGER_TOOLS = {"read_budget_table", "compute_ceiling", "check_pool_contract"}


def _server(*extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "radiance_mcp", "serve", *extra])


def _in_memory() -> Client:
    """The server `radiance-mcp serve` builds without a fleet file, on the SDK's in-memory transport."""
    return Client(empty_fleet_server())


async def test_tools_list_has_schemas_and_annotations() -> None:
    async with _in_memory() as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert LEDGER_TOOLS <= set(listed)
    for name in LEDGER_TOOLS:
        tool = listed[name]
        assert tool.output_schema is not None and tool.output_schema["type"] == "object", name
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is True, name
        assert tool.annotations.idempotent_hint is True, name
        assert tool.annotations.destructive_hint is False, name
        assert tool.description and "\n" in tool.description, name
    # Flat arguments: every ledger source is a top-level property.
    assert {"service", "log", "log_text", "boot"} <= set(listed["compute_ceiling"].input_schema["properties"])
    assert {"pool_mib", "seqs", "max_model_len", "kv_cache_dtype"} <= set(
        listed["check_pool_contract"].input_schema["properties"]
    )


@pytest.mark.slow
async def test_stdio_compute_ceiling_reproduces_the_worked_example() -> None:
    async with Client(_server()) as client:
        result = await client.call_tool("compute_ceiling", {"log": EXAMPLE_LOG})
    assert not result.is_error
    out = result.structured_content
    assert out is not None
    assert out["ceiling_mib"] == WORKED_CEILING_MIB == 30_969
    assert out["derivation"] == "29,120 + (2,058 - 209) = 30,969 MiB/card"
    assert out["headroom_mib"] == 1_849  # 30,969 - 29,120
    assert out["cards"][0]["card"] == 0 and out["cards"][0]["ceiling_mib"] == 30_969
    # The text content is the same structure, for clients that read only text.
    assert json.loads(result.content[0].text)["ceiling_mib"] == 30_969  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"pool_mib": 5120, "seqs": 1, "max_model_len": 200_000, "kv_cache_dtype": "fp8"}, 1_986.22),
        ({"pool_mib": 5120, "seqs": 2, "max_model_len": 200_000, "kv_cache_dtype": "fp8"}, 3_524.45),
        ({"pool_mib": 5120, "seqs": 2, "max_model_len": 200_000, "kv_cache_dtype": "bf16"}, 6_063.51),
        ({"pool_mib": 5120, "seqs": 8, "max_model_len": 32_768, "kv_cache_dtype": "fp8"}, 3_200.00),
    ],
)
async def test_pool_contract(arguments: dict[str, object], expected: float) -> None:
    async with _in_memory() as client:
        result = await client.call_tool("check_pool_contract", arguments)
    out = result.structured_content
    assert out is not None and out["required_mib"] == expected
    assert out["contract_ok"] is (expected <= 5120)
    assert out["ok"] is (None if expected <= 5120 else False)  # no ledger: the ceiling was not checked
    assert out["model"] == DEFAULT_MODEL.name
    if not out["contract_ok"]:
        assert out["refusal"] == (
            "does not fit the 200000 token context, which leaves nothing to generate into"
        )


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"log": "/etc/passwd"}, "outside the allowed log roots"),
        ({"log": EXAMPLE_LOG, "reserves": [{"mib": 300, "label": "spare"}]}, "neither traced nor labelled"),
        ({}, "give exactly one ledger source"),
        ({"log_text": "\x00\x01 binary junk"}, "no radiance ledger phrase"),
        ({"service": "nope"}, "service 'nope' is not in the fleet"),
        ({"log": EXAMPLE_LOG, "reserve": [{"mib": 330, "label": "x", "personal": True}]},
         "no argument 'reserve' (did you mean 'reserves'?)"),
        ({"log": EXAMPLE_LOG, "boot": 10**100}, "boot=(a 101-digit number) is out of range"),
    ],
)
async def test_errors_are_tool_errors_with_remedies(arguments: dict[str, object], says: str) -> None:
    async with _in_memory() as client:
        result = await client.call_tool("compute_ceiling", arguments)
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert says in text
    assert "Traceback" not in text


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        # The pool is pool_mib to check_pool_contract, vram_kv_mib (the engine's flag) to render_gates.
        ("check_pool_contract", {"log": EXAMPLE_LOG, "vram_kv_mib": 6969, "seqs": 4},
         "check_pool_contract has no argument 'vram_kv_mib' (did you mean 'pool_mib'?)"),
        ("render_gates", {"log": EXAMPLE_LOG, "pool_mib": 6969, "seqs": 4},
         "render_gates has no argument 'pool_mib' (did you mean 'vram_kv_mib'?)"),
        ("check_pool_contract", {"log": EXAMPLE_LOG, "pool_mib": 6969, "max_num_seqs": 4},
         "check_pool_contract has no argument 'max_num_seqs' (did you mean 'seqs'?)"),
        ("render_gates", {"log": EXAMPLE_LOG, "vram_kv_mib": 6969, "weights_mib": 24000},
         "render_gates has no argument 'weights_mib' (did you mean 'vram_weights_mib'?)"),
    ],
)
async def test_a_figure_named_as_another_tool_names_it_is_refused_with_this_tools_name(
    tool: str, arguments: dict[str, object], says: str
) -> None:
    async with _in_memory() as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error
    assert says in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.slow
def test_stdio_stdout_carries_only_protocol() -> None:
    """Every line the server writes to stdout is a JSON-RPC message; logs go to stderr."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "compute_ceiling", "arguments": {"log": "/etc/shadow"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "compute_ceiling", "arguments": {"log": EXAMPLE_LOG}}},
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "radiance_mcp", "serve"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdin and proc.stdout
    try:
        for message in messages:
            proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        parsed = []
        while not any(m.get("id") == 3 for m in parsed):
            line = proc.stdout.readline()  # the stdio transport answers line by line
            assert line, "server closed stdout before answering"
            parsed.append(json.loads(line))  # a non-JSON line (a stray print) fails here
    finally:
        proc.stdin.close()
        proc.wait(timeout=HANG_S)
        proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    assert all(m.get("jsonrpc") == "2.0" for m in parsed)
    by_id = {m["id"]: m for m in parsed if "id" in m}
    assert by_id[2]["result"]["isError"] is True
    assert by_id[3]["result"]["structuredContent"]["ceiling_mib"] == 30_969


@pytest.fixture
def http_server(request: pytest.FixtureRequest) -> Iterator[str]:
    token = getattr(request, "param", None)
    with serve_http(*(["--token", token] if token else [])) as url:
        yield url


@pytest.mark.slow
async def test_http_transport_serves_the_tools(http_server: str) -> None:
    async with Client(http_server) as client:
        result = await client.call_tool("compute_ceiling", {"log": EXAMPLE_LOG})
    assert result.structured_content is not None
    assert result.structured_content["ceiling_mib"] == 30_969


@pytest.mark.slow
@pytest.mark.parametrize("http_server", ["s3cret-token"], indirect=True)
def test_http_token_is_required_when_set(http_server: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    assert httpx.post(http_server, json=body, headers=headers).status_code == 401
    wrong = httpx.post(http_server, json=body, headers={**headers, "authorization": "Bearer nope"})
    assert wrong.status_code == 401
    right = httpx.post(http_server, json=body, headers={**headers, "authorization": "Bearer s3cret-token"})
    assert right.status_code != 401
    # The scheme's name is case-insensitive (RFC 9110); the token is compared exactly.
    lower = httpx.post(http_server, json=body, headers={**headers, "authorization": "bearer s3cret-token"})
    assert lower.status_code != 401
    for other in ("Basic s3cret-token", "Bearer S3CRET-TOKEN", "Bearer", "s3cret-token"):
        assert httpx.post(http_server, json=body, headers={**headers, "authorization": other}).status_code == 401


def test_http_refuses_a_public_bind_without_token(cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (TOKEN_ENV, CONFIG_ENV):  # the environment the process had: PATH alone
        monkeypatch.delenv(name, raising=False)
    proc = cli("serve", "--http", "--host", "0.0.0.0", "--port", str(free_port()))
    assert proc.returncode == 1
    assert "not a loopback address" in proc.stderr and "--token" in proc.stderr


def test_every_registered_tool_is_listed_once() -> None:
    names = [spec.name for spec in TOOLS]
    assert len(names) == len(set(names))
    assert LEDGER_TOOLS <= set(names)


async def test_a_misspelled_tool_name_gets_the_closest_tool_and_the_list() -> None:
    async with Client(empty_fleet_server()) as client:
        typo = await client.call_tool("compute_cieling", {"log": EXAMPLE_LOG})
        huge = await client.call_tool("x" * 100_000, {})
    text = typo.content[0].text  # type: ignore[union-attr]
    assert typo.is_error and "no tool 'compute_cieling' (did you mean 'compute_ceiling'?)" in text, text
    assert "list_fleet" in text and "plan_free_vram" in text
    assert huge.is_error and len(huge.content[0].text) < 1_000  # type: ignore[union-attr]
