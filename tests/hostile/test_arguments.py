"""The argument boundary of every tool, driven as a careless or hostile agent would (issues 9, 10).

Misspelled and unknown names, numbers that overflow, texts past their caps: each is refused
with the argument's name, its rule and what to send instead, over the SDK's client in memory,
over stdio and streamable HTTP (a real server process), and on the CLI. Before these fixes the
SDK dropped unknown names (``reserve`` ran with no reserve), 10**100 gave an empty "Error
executing tool", 1e308 an OverflowError, and errors read as pydantic's, with its URLs.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from bounds import HANG_S, until_hung
from mcp import Client
from shared_server import empty_fleet_server

from radiance_mcp.app import cli
from radiance_mcp.app.published import request_body_limit_bytes
from radiance_mcp.core.constants import (
    DRY_RUN_OUTPUT_CAP_BYTES,
    MAX_LEDGER_TEXT_CHARS,
    MAX_NAME_CHARS,
    MAX_PATH_CHARS,
    MAX_PROBE_TEXT_CHARS,
    SCRIPT_CAP_BYTES,
)
from radiance_mcp.sources.config import EXAMPLES_DIR
from radiance_mcp.tools import TOOLS

LOG = str(EXAMPLES_DIR / "frank-archon.log")
SERVER_ARGV = [sys.executable, "-m", "radiance_mcp", "serve"]


def _text(result: Any) -> str:
    assert result.is_error, result.structured_content
    return " ".join(getattr(block, "text", "") for block in result.content)


def _clean(text: str, tool: str) -> None:
    """One sentence per problem: no pydantic wording or links, no SDK prefix, no tool name twice."""
    for noise in ("Error executing tool", "validation error", "Arguments", "https://", "Traceback", "For further"):
        assert noise not in text, text
    assert text.count(tool) <= 1, text


# ---------------------------------------------------------------------------------------
# 1. Names: an unknown or misspelled name is refused with the closest valid one

MISSPELLED = [
    ("compute_ceiling", {"log": LOG, "reserve": [{"mib": 300, "label": "spare", "personal": True}]}, "reserves"),
    ("compute_ceiling", {"logtext": "card 0 settled at 2.01 GiB free"}, "log_text"),
    ("read_budget_table", {"log": LOG, "bootz": -1}, "boot"),
    ("check_pool_contract", {"pool_mb": 5120, "seqs": 2, "max_model_len": 200_000, "kv_cache_dtype": "fp8"},
     "pool_mib"),
    ("audit_step_shape", {"log": LOG, "candidate_bot": -1}, "candidate_boot"),
    ("check_serve_script", {"scripttext": "#!/bin/sh\n"}, "script_text"),
    ("compare_dry_run", {"proven_argvs": "a\n", "candidate_argv": "a\n"}, "proven_argv"),
    ("token_count_probe", {"service": "sim", "txt": "hello"}, "text"),
    ("boundary_probe", {"service": "sim", "n": 2, "gen_token": 64}, "gen_tokens"),
    ("decode_probe", {"service": "sim", "context_token": 4096}, "context_tokens"),
]


@pytest.mark.parametrize(("tool", "arguments", "meant"), MISSPELLED, ids=[m[2] for m in MISSPELLED])
async def test_a_misspelled_argument_is_refused_with_the_name_meant(
    tool: str, arguments: dict[str, Any], meant: str
) -> None:
    typo = next(name for name in arguments if name not in {"log", "service", "n", "candidate_argv"})
    async with Client(empty_fleet_server()) as client:
        text = _text(await client.call_tool(tool, arguments))
    assert f"no argument {typo!r}" in text and f"did you mean {meant!r}?" in text, text
    assert "Nothing was run" in text
    _clean(text, tool)


async def test_every_tool_refuses_an_unknown_name_and_lists_its_arguments() -> None:
    async with Client(empty_fleet_server()) as client:
        for spec in TOOLS:
            text = _text(await client.call_tool(spec.name, {"qqzzxx": 1}))
            assert "no argument 'qqzzxx'" in text and "did you mean" not in text, (spec.name, text)
            assert all(name in text for name in spec.input_model.model_fields), (spec.name, text)


async def test_the_misspelled_reserve_never_turns_the_gate_into_a_pass() -> None:
    """Before: compute_ceiling with `reserve` returned max_pair_mib 30,969, as if no reserve were asked."""
    async with Client(empty_fleet_server()) as client:
        gate = await client.call_tool("compute_ceiling", {"log": LOG, "reserve": [{"mib": 330, "label": "mine",
                                                                                   "personal": True}]})
        right = await client.call_tool("compute_ceiling", {"log": LOG, "reserves": [{"mib": 330, "label": "mine",
                                                                                    "personal": True}]})
    assert gate.is_error and gate.structured_content is None
    assert right.structured_content is not None and right.structured_content["max_pair_mib"] == 30_969 - 330


async def test_a_misspelled_field_inside_a_reserve_is_named_too() -> None:
    async with Client(empty_fleet_server()) as client:
        text = _text(await client.call_tool(
            "compute_ceiling", {"log": LOG, "reserves": [{"mib": 96, "lable": "headroom", "line": 26}]}
        ))
    assert "reserves[0].lable is not a field here (did you mean 'label'?)" in text, text
    assert "reserves[0].label is required (what the reserve is for" in text, text


async def test_a_megabyte_name_gets_a_short_answer() -> None:
    async with Client(empty_fleet_server()) as client:
        text = _text(await client.call_tool("compute_ceiling", {"log": LOG, "b" * 1_000_000: 1}))
    assert "no argument 'bbbb" in text and len(text) < 1_000, text


async def test_the_schema_says_no_other_names_and_bounds_every_value() -> None:
    """Every tool publishes additionalProperties: false; every string has a maxLength, every number a range."""

    def check(schema: dict[str, Any], where: str) -> None:
        arms = schema.get("anyOf", [schema])
        for arm in arms:
            kind = arm.get("type")
            if kind == "string" and "enum" not in arm:
                assert "maxLength" in arm, where
            if kind in ("integer", "number"):
                assert "maximum" in arm and ("minimum" in arm or "exclusiveMinimum" in arm), where
            if kind == "array":
                assert "maxItems" in arm, where

    async with Client(empty_fleet_server()) as client:
        listed = (await client.list_tools()).tools
    assert {tool.name for tool in listed} == {spec.name for spec in TOOLS}
    for tool in listed:
        schema = tool.input_schema
        assert schema["additionalProperties"] is False, tool.name
        for name, prop in schema["properties"].items():
            check(prop, f"{tool.name}.{name}")
        for model, definition in schema.get("$defs", {}).items():
            assert definition.get("additionalProperties") is False, model
            for name, prop in definition["properties"].items():
                check(prop, f"{tool.name}.{model}.{name}")


# ---------------------------------------------------------------------------------------
# 2. Numbers that overflow, in memory (the SDK's client sends Infinity and NaN as null: see stdio below)

HUGE = 10**100
OVERFLOW = [
    ("check_pool_contract", {"pool_mib": 5120, "seqs": HUGE, "max_model_len": 200_000, "kv_cache_dtype": "fp8"},
     "seqs=(a 101-digit number) is out of range: send a whole number from 1 to 65,536"),
    ("check_pool_contract", {"pool_mib": 5120, "seqs": 2, "max_model_len": HUGE, "kv_cache_dtype": "fp8"},
     "max_model_len=(a 101-digit number) is out of range: send a whole number from 1 to 16,777,216"),
    ("check_pool_contract", {"pool_mib": 1e308, "seqs": 2, "max_model_len": 200_000, "kv_cache_dtype": "bf16"},
     "pool_mib=1e+308 is out of range: send a finite number above 0 and at most 1,073,741,824"),
    ("check_pool_contract", {"pool_mib": 5120, "seqs": 1e100, "max_model_len": 200_000, "kv_cache_dtype": "fp8"},
     "seqs=1e+100: a number with a point or exponent is not read as a JSON integer here; send a whole number from 1"),
    ("compute_ceiling", {"log": LOG, "reserves": [{"mib": 1e308, "label": "spare", "personal": True}]},
     "reserves[0].mib=1e+308 is out of range: send a finite number from 0 to 1,073,741,824"),
    ("compute_ceiling", {"log": LOG, "reserves": [{"mib": 96, "label": "headroom", "line": HUGE}]},
     "reserves[0].line=(a 101-digit number) is out of range: send a whole number from 1 to 1,099,511,627,776"),
    ("compute_ceiling", {"log": LOG, "reserves": '[{"mib": 1e999, "label": "spare", "personal": true}]'},
     "reserves[0].mib=inf is out of range"),
    ("compute_ceiling", {"log": LOG, "reserves": "[" * 70_000},
     "reserves is a 70,000-character string: pass at most 64 reserves"),
    ("compute_ceiling", {"log": LOG, "reserves": "[" * 5_000},
     "reserves is a string of JSON too deep or with a number too long to read"),
    ("read_budget_table", {"log": LOG, "boot": -(10**5000)},
     "boot=(a negative 5,001-digit number) is out of range: send a whole number from -1,000,000 to 1,000,000"),
    ("read_budget_table", {"log": LOG, "boot": 10**100 - 1}, "boot=(a 100-digit number) is out of range"),
    ("audit_step_shape", {"log": LOG, "proven_boot": HUGE}, "proven_boot=(a 101-digit number) is out of range"),
    ("compare_dry_run", {"proven_argv": "a\n", "candidate_argv": "b\n", "timeout_s": 1e308},
     "timeout_s=1e+308 is out of range: send a finite number above 0 and at most 120"),
    ("decode_probe", {"service": "sim", "context_tokens": HUGE},
     "context_tokens=(a 101-digit number) is out of range: send a whole number from 16 to 16,777,216"),
    ("token_count_probe", {"service": "sim", "text": "hello", "window_tokens": HUGE},
     "window_tokens=(a 101-digit number) is out of range: send a whole number from 16 to 16,777,216"),
    ("boundary_probe", {"service": "sim", "n": 2, "max_model_len": HUGE, "chars_per_token": 1e308},
     "max_model_len=(a 101-digit number) is out of range"),
]


@pytest.mark.parametrize(("tool", "arguments", "says"), OVERFLOW, ids=[f"{o[0]}-{i}" for i, o in enumerate(OVERFLOW)])
async def test_a_number_out_of_its_range_is_refused_by_name(tool: str, arguments: dict[str, Any], says: str) -> None:
    async with Client(empty_fleet_server()) as client:
        text = _text(await client.call_tool(tool, arguments))
    assert says in text, text
    assert "Traceback" not in text and "OverflowError" not in text
    _clean(text, tool)


WORDING = [
    ("check_pool_contract", {"seqs": "two"},
     "seqs='two': a string is not read as a JSON integer here; send a whole number from 1 to 65,536"),
    ("check_pool_contract", {"kv_cache_dtype": "fp16"}, "kv_cache_dtype='fp16': input should be 'fp8' or 'bf16'; "
     "send one of 'fp8', 'bf16'"),
    ("boundary_probe", {"service": "sim"},
     "n is required (concurrent requests: at most the sequences the ledger backs"),
    ("compute_ceiling", {"log": LOG, "reserves": [{"mib": -1, "label": "x", "personal": True}]},
     "reserves[0].mib=-1 is out of range: send a finite number from 0 to 1,073,741,824"),
    ("compute_ceiling", {"log": LOG, "log_text": "x"},
     "give exactly one ledger source of service, log, log_text or container (found: log, log_text)"),
    ("compare_dry_run", {"service": "x", "proven_mode": "-x", "candidate_mode": "b"},
     "proven_mode='-x' is not a mode name"),
]


@pytest.mark.parametrize(("tool", "arguments", "says"), WORDING, ids=[f"{w[0]}-{i}" for i, w in enumerate(WORDING)])
async def test_validation_errors_name_the_argument_the_rule_and_the_remedy_once(
    tool: str, arguments: dict[str, Any], says: str
) -> None:
    async with Client(empty_fleet_server()) as client:
        text = _text(await client.call_tool(tool, arguments))
    assert text.startswith(says), text
    _clean(text, tool)


async def test_an_error_of_the_tool_itself_carries_no_prefix() -> None:
    """Before: 'Error executing tool read_budget_table: read_budget_table: ...'."""
    async with Client(empty_fleet_server()) as client:
        text = _text(await client.call_tool("read_budget_table", {"log": "/etc/passwd"}))
    assert text.startswith("log='/etc/passwd' resolves to /etc/passwd, outside the allowed log roots"), text
    _clean(text, "read_budget_table")


# ---------------------------------------------------------------------------------------
# 3. Caps on caller text: at the cap the tool runs (and answers about the text); past it, refused by name

CAPS = [
    ("compute_ceiling", "log_text", MAX_LEDGER_TEXT_CHARS, {}, "x"),
    ("check_pool_contract", "log_text", MAX_LEDGER_TEXT_CHARS, {}, "x"),
    ("audit_step_shape", "proven_log_text", MAX_LEDGER_TEXT_CHARS, {"candidate_log_text": "x"}, "x"),
    ("check_serve_script", "script_text", SCRIPT_CAP_BYTES, {}, "#"),
    ("check_serve_script", "env_text", SCRIPT_CAP_BYTES, {"script_text": "#!/bin/sh\n"}, "#"),
    ("compare_dry_run", "candidate_argv", DRY_RUN_OUTPUT_CAP_BYTES, {"proven_argv": "a\n"}, "a"),
    ("token_count_probe", "text", MAX_PROBE_TEXT_CHARS, {"service": "nowhere"}, "fox "),
    ("read_budget_table", "log", MAX_PATH_CHARS, {}, "/"),
    ("read_budget_table", "service", MAX_NAME_CHARS, {}, "s"),
]


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type", [])
    return kind if isinstance(kind, list) else [kind]


@pytest.mark.slow
@pytest.mark.parametrize(("tool", "field", "cap", "others", "unit"), CAPS, ids=[f"{c[0]}.{c[1]}" for c in CAPS])
async def test_caller_text_is_capped_in_the_schema_and_refused_past_it(
    tool: str, field: str, cap: int, others: dict[str, Any], unit: str
) -> None:
    at_cap = (unit * cap)[:cap]
    async with Client(empty_fleet_server()) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        prop = listed[tool].input_schema["properties"][field]
        arms = prop.get("anyOf", [prop])
        # A nullable string is published as {"type": ["string", "null"], "maxLength": ...} (schemas.compact).
        assert [arm["maxLength"] for arm in arms if "string" in _types(arm)] == [cap]
        over = await client.call_tool(tool, {**others, field: at_cap + unit[0]})
        fits = await client.call_tool(tool, {**others, field: at_cap})
    text = _text(over)
    assert f"{field} is {cap + 1:,} characters, over its limit of {cap:,} characters" in text, text[:300]
    _clean(text, tool)
    # At the cap the tool reads the text (and may refuse what it says), but never for its size.
    answer = " ".join(getattr(b, "text", "") for b in fits.content)
    assert "over its limit" not in answer, answer[:300]


def test_the_probe_text_cap_holds_a_text_counted_in_one_refusal_at_the_seed_window() -> None:
    """A 200,000-token window is about 514,280 characters of filler and 552,340 of corpus text; one refusal
    counts a text exactly only past 16 characters a token: 3,200,000 characters."""
    from radiance_mcp.core.constants import SEED_MAX_MODEL_LEN
    from radiance_mcp.probes.prompts import text_certainly_above

    assert text_certainly_above(MAX_PROBE_TEXT_CHARS, SEED_MAX_MODEL_LEN)


def test_the_readme_limits_table_states_the_caps_the_schemas_hold() -> None:
    from pathlib import Path

    from radiance_mcp.core.constants import MAX_BOOT, MAX_POOL_MIB, MAX_RESERVES, MAX_SEQS, MAX_WINDOW_TOKENS

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    table = readme[readme.index("### Limits"):]
    for cap in (MAX_LEDGER_TEXT_CHARS, SCRIPT_CAP_BYTES, DRY_RUN_OUTPUT_CAP_BYTES, MAX_PROBE_TEXT_CHARS,
                MAX_PATH_CHARS, MAX_NAME_CHARS, MAX_RESERVES, MAX_BOOT, MAX_SEQS, MAX_WINDOW_TOKENS, MAX_POOL_MIB):
        assert f"{cap:,}" in table, cap
    assert f"about {request_body_limit_bytes(TOOLS) / 2**20:.0f} MiB" in table


# ---------------------------------------------------------------------------------------
# Real transports: stdio (the SDK's client, and raw JSON numbers no client library writes) and HTTP


def _stdio_exchange(calls: list[str]) -> dict[int, dict[str, Any]]:
    """Raw JSON-RPC lines to `radiance-mcp serve`, the answers by id (read before stdin closes)."""
    hello = [
        json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
    proc = subprocess.Popen(SERVER_ARGV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    assert proc.stdin and proc.stdout
    answers: dict[int, dict[str, Any]] = {}
    try:
        proc.stdin.write("\n".join(hello + calls) + "\n")
        proc.stdin.flush()
        while len(answers) < len(calls) + 1:
            line = proc.stdout.readline()
            assert line, f"the server stopped answering after {sorted(answers)}"
            message = json.loads(line)
            answers[message["id"]] = message
    finally:
        proc.stdin.close()
        proc.wait(timeout=HANG_S)
        proc.stdout.close()
    return answers


def _call_line(request_id: int, tool: str, arguments: str) -> str:
    """A tools/call line with the arguments' JSON as written (literals no encoder would write)."""
    params = f'{{"name":"{tool}","arguments":{arguments}}}'
    return f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call","params":{params}}}'


NUMBER_LITERALS = ["1e999", "Infinity", "-Infinity", "NaN", "1e308"]
"""1e999, Infinity and NaN as JSON literals (no client library writes them), ids 1-5; a 100-digit
integer, id 9."""


@pytest.fixture(scope="module")
def stdio_answers() -> dict[int, dict[str, Any]]:
    """One `radiance-mcp serve` over stdio for the module's stdio tests: their calls, and the answers by id."""
    reserve = '{{"log":"' + LOG + '","reserves":[{{"mib":{mib},"label":"spare","personal":true}}]}}'
    calls = [_call_line(i, "compute_ceiling", reserve.format(mib=mib)) for i, mib in enumerate(NUMBER_LITERALS, 1)]
    calls.append(_call_line(9, "check_pool_contract", '{"pool_mib":5120,"seqs":1' + "0" * 100
                            + ',"max_model_len":200000,"kv_cache_dtype":"fp8"}'))
    calls.append('{"jsonrpc":"2.0","id":20,"method":"tools/list"}')
    calls.append(_call_line(21, "compute_ceiling", json.dumps({"log": LOG, "reserve": [
        {"mib": 300, "label": "x", "personal": True}]})))
    calls.append(_call_line(22, "read_budget_table", json.dumps({"log": LOG, "bootz": 2})))
    return _stdio_exchange(calls)


def _error_text(answer: dict[str, Any]) -> str:
    result = answer["result"]
    assert result["isError"] is True, result
    return " ".join(block.get("text", "") for block in result["content"])


@pytest.mark.slow
def test_stdio_refuses_misspelled_names(stdio_answers: dict[int, dict[str, Any]]) -> None:
    listed = {t["name"]: t for t in stdio_answers[20]["result"]["tools"]}
    typo, unknown = _error_text(stdio_answers[21]), _error_text(stdio_answers[22])
    assert listed["compute_ceiling"]["inputSchema"]["additionalProperties"] is False
    assert "no argument 'reserve' (did you mean 'reserves'?)" in typo
    assert "no argument 'bootz' (did you mean 'boot'?)" in unknown
    _clean(typo, "compute_ceiling")


def test_stdio_numbers_no_client_library_sends_are_refused_by_name(stdio_answers: dict[int, dict[str, Any]]) -> None:
    """1e999, Infinity and NaN as JSON literals, and a 100-digit integer."""
    for i, literal in enumerate(NUMBER_LITERALS, start=1):
        result = stdio_answers[i]["result"]
        assert result["isError"] is True, literal
        text = result["content"][0]["text"]
        assert text.startswith("reserves[0].mib=") and "is out of range: send a finite number from 0 to" in text, text
        _clean(text, "compute_ceiling")
    seqs = stdio_answers[9]["result"]["content"][0]["text"]
    assert seqs == "seqs=(a 101-digit number) is out of range: send a whole number from 1 to 65,536"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """One HTTP server for the module's HTTP tests (stateless: no call leaves anything behind)."""
    port = _free_port()
    proc = subprocess.Popen([*SERVER_ARGV, "--http", "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in until_hung():
            assert proc.poll() is None, "the server exited"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.slow
async def test_http_refuses_misspelled_names(http_url: str) -> None:
    async with Client(http_url) as client:
        typo = await client.call_tool("compute_ceiling", {"log": LOG, "reserve": []})
        unknown = await client.call_tool("check_serve_script", {"script_text": "#!/bin/sh\n", "bootz": 1})
    assert "no argument 'reserve' (did you mean 'reserves'?)" in _text(typo)
    assert "no argument 'bootz'" in _text(unknown)


def _rpc(client: httpx.Client, url: str, body: bytes, session: str | None) -> httpx.Response:
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "mcp-protocol-version": "2025-06-18"}
    if session:
        headers["mcp-session-id"] = session
    return client.post(url, content=body, headers=headers, timeout=120)


def _answer(response: httpx.Response) -> dict[str, Any]:
    if response.headers["content-type"].startswith("application/json"):
        return dict(response.json())
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
    return dict(json.loads(data[-1]))


def test_http_body_limit_agrees_with_the_schema_caps(http_url: str) -> None:
    """The largest log_text the schema allows, escaped as Python's json.dumps writes it (12 bytes a character),
    reaches the tool; only a body past every schema's worst case meets the transport's 413."""
    limit = request_body_limit_bytes(TOOLS)
    with httpx.Client() as client:
        initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        hello = _rpc(client, http_url, json.dumps(initialize).encode(), None)
        session = hello.headers.get("mcp-session-id")
        _rpc(client, http_url, b'{"jsonrpc":"2.0","method":"notifications/initialized"}', session)
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "compute_ceiling", "arguments": {"log_text": "\U0001f600" * MAX_LEDGER_TEXT_CHARS}}}
        body = json.dumps(call).encode()  # ensure_ascii: each emoji is \ud83d\ude00
        assert 4 * 1024 * 1024 < len(body) <= limit  # over the SDK's default 4 MiB, inside ours
        answer = _rpc(client, http_url, body, session)
        assert answer.status_code == 200, answer.text[:200]
        result = _answer(answer)["result"]
        text = result["content"][0]["text"]  # the tool read it: one line, far over a ledger line's length
        assert result["isError"] is True and text.startswith("log_text: the log is empty"), text
        too_big = _rpc(client, http_url, b" " * (limit + 1), session)
        assert too_big.status_code == 413


# ---------------------------------------------------------------------------------------
# The CLI: the same refusals, exit 2, no traceback


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("compute-ceiling", "--log", LOG, "--reserve", "[]"), "no argument '--reserve' (did you mean '--reserves'?)"),
        (("read-budget-table", "--log", LOG, "--bootz", "2"), "no argument '--bootz' (did you mean '--boot'?)"),
        (("read-budget-table", "--log", LOG, "--bo", "2"), "no argument '--bo' (did you mean '--boot'?)"),
        (("check-pool-contract", "--pool-mib", "5120", "--seqs", str(HUGE), "--max-model-len", "200000",
          "--kv-cache-dtype", "fp8"), "--seqs=(a 101-digit number) is out of range: send a whole number from 1 to"),
        (("check-pool-contract", "--pool-mib", "1e999", "--seqs", "2", "--max-model-len", "200000",
          "--kv-cache-dtype", "fp8"), "--pool-mib=inf is out of range: send a finite number above 0"),
        (("compute-ceiling", "--log", LOG, "--reserves", '[{"mib": 1e308, "label": "x", "personal": true}]'),
         "--reserves[0].mib=1e+308 is out of range"),
        (("compute-ceiling", "--log", LOG, "--reserves", '[{"mib": 1' + "0" * 5000 + ', "label": "x"}]'),
         "--reserves takes plain JSON"),
        (("compute-ceiling", "--log", LOG, "--reserves", "[" * 100_000), "--reserves takes"),
        (("compute-ceiling", "--log-text", "x" * (MAX_LEDGER_TEXT_CHARS + 1)),
         f"--log-text is {MAX_LEDGER_TEXT_CHARS + 1:,} characters, over its limit of {MAX_LEDGER_TEXT_CHARS:,}"),
    ],
)
def test_cli_refuses_names_and_numbers_without_a_traceback(
    argv: tuple[str, ...], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert code == 2 and not out, err
    assert says in err, err
    assert "Traceback" not in err and "https://" not in err
