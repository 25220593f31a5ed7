"""The attack on issues 9 and 10 replayed at the MCP boundary (the SDK's client, in memory) and the CLI.

Each test failed before its fix: a second settled line or budget row for one card was taken
silently (the first won); a settled floor that contradicts the echoed --gpu-headroom-mib was
accepted; Unicode digits read as ASCII figures; JSON booleans passed as ints and strings as
booleans; a boundary probe was planned against a service whose newest boot refused; a serve
script that sources an unreadable file refused the whole check.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from bounds import HANG_S, until_hung
from guard_ledgers import SETTLED_LINES, TWO_BOOTS, TWO_BOOTS_REFUSAL_LINES
from mcp import Client
from shared_server import empty_fleet_server

from radiance_mcp.app import cli
from radiance_mcp.app.server import build_server
from radiance_mcp.sources.config import Fleet, ServerSettings, Service
from radiance_mcp.sources.runtime import Runtime

SETTLED_AT = next(n for n, line in enumerate(SETTLED_LINES) if "settled at" in line)


def ledger(lines: list[str]) -> str:
    """Lines in a style of their own: a syslog-ish prefix and a trailing blank."""
    return "".join(f"<6>gpu7 radiance: {line} \n" for line in lines)


async def ceiling(lines: list[str]) -> tuple[bool, Any]:
    async with Client(empty_fleet_server()) as client:
        result = await client.call_tool("compute_ceiling", {"log_text": ledger(lines)})
    if result.is_error:
        return True, " ".join(getattr(block, "text", "") for block in result.content)
    return False, result.structured_content


async def test_the_unaltered_ledger_reads_30969() -> None:
    error, out = await ceiling(SETTLED_LINES)
    assert not error and out["ceiling_mib"] == 30969, out


# ---------------------------------------------------------------------------------------
# 1. One figure printed twice in one boot is ambiguous: refused naming both lines

SPOOF = "W card 0 settled at 2.20 GiB free against 209.19 MiB"


@pytest.mark.parametrize("before", [True, False], ids=["spoof-first", "spoof-after"])
async def test_a_second_settled_line_for_one_card_is_refused_naming_both(before: bool) -> None:
    at = SETTLED_AT if before else SETTLED_AT + 1
    lines = SETTLED_LINES[:at] + [SPOOF] + SETTLED_LINES[at:]
    error, text = await ceiling(lines)
    real, spoof = (SETTLED_AT + 2, SETTLED_AT + 1) if before else (SETTLED_AT + 1, SETTLED_AT + 2)
    assert error, text
    assert "printed twice" in text and f"line {min(real, spoof)}" in text and f"line {max(real, spoof)}" in text
    assert "2.20 GiB" in text and "2.01 GiB" in text


@pytest.mark.parametrize(("row", "extra"), [
    ("unclaimed", "I   unclaimed   3.90 GiB   the headroom, the unusable above, rounding"),
    ("vram_kv", "I   vram_kv   4.00 GiB   stated by --vram-kv-mib"),
    ("vram_weights", "I   vram_weights   20.00 GiB   stated by --vram-weights-mib"),
])
async def test_a_budget_row_printed_twice_for_one_card_is_refused(row: str, extra: str) -> None:
    at = next(n for n, line in enumerate(SETTLED_LINES) if row in line and "stated by" not in line.split(row)[0])
    lines = SETTLED_LINES[: at + 1] + [extra] + SETTLED_LINES[at + 1:]
    error, text = await ceiling(lines)
    assert error and "printed twice" in text and f"line {at + 1}" in text and f"line {at + 2}" in text, text


async def test_a_card_total_printed_twice_under_one_header_is_refused() -> None:
    at = next(n for n, line in enumerate(SETTLED_LINES) if "card total" in line)
    lines = SETTLED_LINES[:at] + ["I VRAM budget, card 0", SETTLED_LINES[at], "I   card total   40.00 GiB"] + \
        SETTLED_LINES[at + 1:]
    error, text = await ceiling(lines)
    assert error and "'card total' row is printed twice" in text, text


async def test_a_pair_flag_echoed_twice_with_two_values_is_refused() -> None:
    at = next(n for n, line in enumerate(SETTLED_LINES) if "--vram-kv-mib" in line)
    lines = SETTLED_LINES[: at + 1] + ["I   --vram-kv-mib    9000"] + SETTLED_LINES[at + 1:]
    error, text = await ceiling(lines)
    assert error and "--vram-kv-mib with two values" in text and f"line {at + 2}" in text, text


async def test_a_flag_echoed_twice_with_one_value_still_reads() -> None:
    at = next(n for n, line in enumerate(SETTLED_LINES) if "--vram-kv-mib" in line)
    lines = SETTLED_LINES[: at + 1] + ["I   --vram-kv-mib    5,120"] + SETTLED_LINES[at + 1:]
    error, out = await ceiling(lines)
    assert not error and out["ceiling_mib"] == 30969, out


# ---------------------------------------------------------------------------------------
# 2. The settled floor cannot contradict the echoed --gpu-headroom-mib

HEADROOM_LINE = next(n for n, line in enumerate(SETTLED_LINES) if "--gpu-headroom-mib" in line) + 1


@pytest.mark.parametrize("settled", [
    "W card 0 settled at 2.01 GiB free against 1.00 MiB (the 0.50 MiB --gpu-headroom-mib and 0.50 MiB kept for "
    "the static region)",
    "W card 0 settled at 2.01 GiB free against 1.00 MiB",
], ids=["parts", "no-parts"])
async def test_a_floor_that_contradicts_the_echoed_headroom_is_refused(settled: str) -> None:
    lines = SETTLED_LINES[:SETTLED_AT] + [settled] + SETTLED_LINES[SETTLED_AT + 1:]
    error, text = await ceiling(lines)
    assert error, text
    assert f"line {HEADROOM_LINE}" in text and f":{SETTLED_AT + 1}:" in text and "--gpu-headroom-mib" in text


async def test_a_floor_without_parts_above_the_headroom_still_reads() -> None:
    lines = SETTLED_LINES[:SETTLED_AT] + ["W card 0 settled at 2.01 GiB free against 209.19 MiB"] + \
        SETTLED_LINES[SETTLED_AT + 1:]
    error, out = await ceiling(lines)
    assert not error and out["ceiling_mib"] == 30969, out


# ---------------------------------------------------------------------------------------
# 3. Unicode digits are no figures the engine prints


@pytest.mark.parametrize(("needle", "replacement", "refusal"), [
    # fullwidth digits in the settled free memory: the line is no settled line
    ("2.01 GiB free", "２.０１ GiB free", "line 17 holds 'settled at' but not as"),
    # Arabic-Indic digits in an echoed pair flag: named, not read as 5,120
    ("--vram-kv-mib    5120", "--vram-kv-mib    ٥١٢٠", ":8: malformed number '٥١٢٠': expected ASCII digits"),
])
async def test_unicode_digits_in_the_ledger_do_not_read_as_figures(needle: str, replacement: str, refusal: str) -> None:
    lines = [line.replace(needle, replacement) for line in SETTLED_LINES]
    assert lines != SETTLED_LINES
    error, text = await ceiling(lines)
    assert error and refusal in text, text


@pytest.mark.parametrize(("flag", "value"), [
    ("--pool-mib", "５１２０"), ("--seqs", "٢"), ("--seqs", "2_0"), ("--max-model-len", "200_000"),
])
def test_the_cli_refuses_numbers_that_are_not_plain_ascii(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = {"--pool-mib": "5120", "--seqs": "2", "--max-model-len": "200000", "--kv-cache-dtype": "fp8"}
    argv[flag] = value
    with pytest.raises(SystemExit) as exited:
        cli.main(["check-pool-contract", *[part for pair in argv.items() for part in pair]])
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert flag in err and "plain ASCII digits" in err and repr(value) in err, err


def test_the_cli_still_takes_plain_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["check-pool-contract", "--pool-mib", "5120.0", "--seqs", "2", "--max-model-len", "200000",
                     "--kv-cache-dtype", "fp8", "--json"])
    out = capsys.readouterr().out
    assert code in (0, 3) and '"pool_mib"' in out, out


async def call_raw(tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    async with Client(empty_fleet_server()) as client:
        result = await client.call_tool(tool, arguments)
    return bool(result.is_error), " ".join(getattr(block, "text", "") for block in result.content)


POOL = {"pool_mib": 5120, "max_model_len": 200000, "kv_cache_dtype": "fp8"}


@pytest.mark.parametrize("seqs", ["٢", "2_0", "２", "2.0", " 2", "two"])
async def test_mcp_number_strings_that_are_not_plain_ascii_are_refused(seqs: str) -> None:
    error, text = await call_raw("check_pool_contract", {**POOL, "seqs": seqs})
    assert error and f"seqs={seqs!r}" in text and "a string is not read as a JSON integer" in text, text
    assert "send a whole number from 1 to 65,536" in text, text


@pytest.mark.parametrize(("seqs", "pool_mib"), [("2", "5120"), ("2", "5.12e3")])
async def test_mcp_plain_ascii_number_strings_read_as_numbers(seqs: str, pool_mib: str) -> None:
    # The MCP Inspector's CLI sends a nullable number as a string: plain ASCII figures read.
    error, text = await call_raw("check_pool_contract", {**POOL, "seqs": seqs, "pool_mib": pool_mib})
    assert not error and '"required_mib":3524.45' in text, text


async def test_mcp_plain_numbers_still_read() -> None:
    error, text = await call_raw("check_pool_contract", {"pool_mib": 5120, "seqs": 2, "max_model_len": 200000,
                                                         "kv_cache_dtype": "fp8"})
    assert not error, text  # a JSON integer for the float pool_mib


# ---------------------------------------------------------------------------------------
# 4. A JSON boolean is no int, a string no boolean


async def test_boot_true_is_refused_not_read_as_the_oldest_boot() -> None:
    error, text = await call_raw("compute_ceiling", {"log_text": ledger(SETTLED_LINES), "boot": True})
    assert error and "boot=true" in text and "a JSON boolean is not read as a JSON integer" in text, text
    assert "send a whole number from -1,000,000 to 1,000,000" in text, text


@pytest.mark.parametrize(("tool", "arguments", "name"), [
    ("boundary_probe", {"service": "s", "n": 2, "over_shape": "yes"}, "over_shape"),
    ("boundary_probe", {"service": "s", "n": 2, "execute": "True"}, "execute"),
    ("boundary_probe", {"service": "s", "n": 2, "execute": "1"}, "execute"),
    ("boundary_probe", {"service": "s", "n": 2, "execute": 1}, "execute"),
    ("compute_ceiling", {"log_text": "x", "reserves": [{"mib": 10, "label": "mine", "personal": "yes"}]},
     "reserves[0].personal"),
    ("compute_ceiling", {"log_text": "x", "reserves": '[{"mib": 10, "label": "mine", "personal": "yes"}]'},
     "reserves[0].personal"),
])
async def test_a_string_or_number_for_a_boolean_is_refused(tool: str, arguments: dict[str, Any], name: str) -> None:
    error, text = await call_raw(tool, arguments)
    assert error and f"{name}=" in text and "is not read as a JSON boolean" in text, text
    assert "send true or false" in text, text


async def test_a_json_boolean_for_a_float_is_refused_and_reserves_as_a_json_string_still_read() -> None:
    error, text = await call_raw("check_pool_contract", {**POOL, "pool_mib": True, "seqs": 2})
    assert error and "pool_mib=true: a JSON boolean is not read as a JSON number" in text, text
    reserves = '[{"mib": 100, "label": "mine", "personal": true}]'
    error, text = await call_raw("compute_ceiling", {"log_text": ledger(SETTLED_LINES), "reserves": reserves})
    assert not error, text


# ---------------------------------------------------------------------------------------
# 5. No boundary probe is planned against a service whose newest boot refused to start


@pytest.mark.parametrize("over_shape", [False, True])
async def test_boundary_probe_on_a_service_whose_newest_boot_refused_is_refused(
    over_shape: bool, tmp_path: Path
) -> None:
    (tmp_path / "wide.log").write_text(TWO_BOOTS, encoding="utf-8")  # boot 2 (newest) refused: 8 seats at 32,768
    fleet = Fleet(services={"wide": Service(endpoint="http://127.0.0.1:9", log=str(tmp_path / "wide.log"))},
                  server=ServerSettings(log_roots=(str(tmp_path),)))
    async with Client(build_server(Runtime(fleet))) as client:
        result = await client.call_tool("boundary_probe", {"service": "wide", "n": 64, "over_shape": over_shape})
    text = " ".join(getattr(block, "text", "") for block in result.content)
    assert result.is_error and "newest boot refused to start" in text and "call audit_step_shape" in text, text
    for number in TWO_BOOTS_REFUSAL_LINES:
        assert f"wide.log:{number}:" in text, text
    assert "startup stopped: out of memory" in text and "nothing was planned or sent" in text, text


# ---------------------------------------------------------------------------------------
# 6. A sourced file the server may not read is a note, not a refusal of the whole check

SOURCING = """#!/usr/bin/env bash
set -eu
. {sourced}
mode="${{1:?mode}}"
case "$mode" in
  steady) exec radiance serve --max-num-seqs 4 --max-model-len "$WINDOW" ;;
  burst) exec radiance serve --max-num-seqs 8 --max-model-len "$WINDOW" ;;
esac
"""


@pytest.mark.parametrize("where", ["missing", "outside the roots"])
async def test_a_script_sourcing_an_unreadable_file_reports_its_literals_and_notes_the_file(
    where: str, tmp_path: Path
) -> None:
    roots, elsewhere = tmp_path / "roots", tmp_path / "elsewhere"
    roots.mkdir()
    elsewhere.mkdir()
    sourced = elsewhere / "shape.conf"
    if where == "missing":
        sourced = tmp_path / "gone" / "shape.conf"  # outside the roots, as /nonexistent/shape.conf
    else:
        sourced.write_text("WINDOW=65536\n", encoding="utf-8")
    script = roots / "serve.sh"
    script.write_text(SOURCING.format(sourced=sourced), encoding="utf-8")
    fleet = Fleet(server=ServerSettings(log_roots=(str(roots),)))
    async with Client(build_server(Runtime(fleet))) as client:
        result = await client.call_tool("check_serve_script", {"script": str(script)})
    assert not result.is_error, result.content
    out = result.structured_content
    assert out is not None
    literals = sorted((f["mode"], f["value"]) for f in out["findings"] if f["flag"] == "max-num-seqs")
    assert literals == [("burst", "8"), ("steady", "4")], out["findings"]
    note = next(n for n in out["notes"] if str(sourced) in n)
    assert note.startswith("line 3: the script sources"), note
    assert f"was not read (sourced file='{sourced}'" in note and "outside the allowed log roots" in note, note
    assert "pass env_file or env_text" in note, note


async def test_audit_step_shape_on_a_log_of_one_boot_says_to_name_the_proven_source(tmp_path: Path) -> None:
    refused = TWO_BOOTS.splitlines(keepends=True)[len(SETTLED_LINES):]  # only the refused boot
    (tmp_path / "only.log").write_text("".join(refused), encoding="utf-8")
    fleet = Fleet(server=ServerSettings(log_roots=(str(tmp_path),)))
    async with Client(build_server(Runtime(fleet))) as client:
        result = await client.call_tool("audit_step_shape", {"log": str(tmp_path / "only.log")})
    text = " ".join(getattr(block, "text", "") for block in result.content)
    assert result.is_error and "boot=-2 but the log holds 1 boot(s)" in text, text
    assert "name its source (proven_service, proven_log, proven_log_text or proven_container)" in text, text
    assert "pass this log as candidate_log" in text, text


# ---------------------------------------------------------------------------------------
# 7. Error texts name the expected shape and a remedy, with no internal class names


@pytest.mark.parametrize(("tool", "arguments", "says"), [
    ("compute_ceiling", {"log_text": "x", "reserves": [1]},
     "reserves[0]=1: a number is not an object; send a JSON object with the fields mib, label, line, personal"),
    ("compute_ceiling", {"service": 123},
     "service=123: a number is not text; send a JSON string (a service list_fleet names"),
    ("compute_ceiling", {"log_text": "x", "reserves": [{"mib": 1, "label": "", "personal": True}]},
     "reserves[0].label='' is too short; send at least 1 character(s) (what the reserve is for"),
    ("compare_arms", {"arms": [{"value": 1, "rate": 2}, 7]},
     "arms[1]=7: a number is not an object; send a JSON object with the fields value, rate"),
])
async def test_shape_errors_say_what_to_send(tool: str, arguments: dict[str, Any], says: str) -> None:
    error, text = await call_raw(tool, arguments)
    assert error and text.startswith(says), text
    assert "Input" not in text and "instance of" not in text, text


@pytest.mark.slow
def test_the_http_server_writes_no_line_per_request_to_stderr(tmp_path: Path) -> None:
    """The SDK logged 'Terminating session: None' at INFO for every stateless request; a harness that
    never drains stderr then blocks the server in write(2) after a few thousand requests."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "stderr.txt"
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "radiance_mcp", "serve", "--http", "--host", "127.0.0.1",
                                 "--port", str(port)], stdout=subprocess.DEVNULL, stderr=err)
        try:
            for _ in until_hung():
                assert proc.poll() is None, log.read_text()
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
                       "mcp-protocol-version": "2025-06-18"}
            for n in range(5):
                body = {"jsonrpc": "2.0", "id": n, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
                answer = httpx.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=headers, timeout=30)
                assert answer.status_code == 200, answer.text
        finally:
            proc.terminate()
            proc.wait(timeout=HANG_S)
    assert "Terminating session" not in log.read_text(), log.read_text()


async def test_a_flag_the_budget_table_contradicts_is_a_warning_of_the_ceiling() -> None:
    lines = [line.replace("--vram-weights-mib    24000", "--vram-weights-mib    10000") for line in SETTLED_LINES]
    error, out = await ceiling(lines)
    assert not error and out["ceiling_mib"] == 10000 + 5120 + (2058 - 209), out  # 2.01 GiB = 2,058.24 MiB
    flag_line = next(n for n, line in enumerate(lines, 1) if "--vram-weights-mib" in line)
    assert any(f"--vram-weights-mib 10,000 MiB (line {flag_line}) but the table's vram_weights row says 23.44 GiB"
               in w for w in out["warnings"]), out["warnings"]


async def test_the_exact_strings_true_and_false_read_as_booleans() -> None:
    # What a client that sends every argument as text writes; "yes", "1" and "True" stay refused (above).
    reserve = {"mib": 10, "label": "mine", "personal": "true"}
    error, text = await call_raw("compute_ceiling", {"log_text": ledger(SETTLED_LINES), "reserves": [reserve]})
    assert not error and '"kind":"personal"' in text, text
