"""The three audit tools through their input models: sources, guard rails, and a real dry run."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from bounds import HANG_S, until_hung
from pydantic import ValidationError

from radiance_mcp.app.server import build_server
from radiance_mcp.core.constants import DRY_RUN_OUTPUT_CAP_BYTES, SCRIPT_CAP_BYTES
from radiance_mcp.core.errors import GuardRailError, InputError, SourceError
from radiance_mcp.models.audit import (
    DRY_RUN_MAX_TIMEOUT_S,
    DRY_RUN_TIMEOUT_S,
    AuditStepShapeInput,
    CheckServeScriptInput,
    CompareDryRunInput,
)
from radiance_mcp.sources.config import Fleet
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools import TOOLS
from radiance_mcp.tools.audit import audit_step_shape, check_serve_script, compare_dry_run

ENV = """\
FRANK_ARCHON_MAX_SEQS=8
FRANK_ARCHON_MAX_BATCHED_TOKENS=1024
FRANK_ARCHON_HOST_POOL_MIB=7580
FRANK_ARCHON_GPU_HEADROOM_MIB=96
"""

# A fake serve script: modes print their argv one per line on --dry-run; 'bf16' carries a private
# step, 'bf16-fixed' inherits the proven numbers, 'slow' hangs, 'loud' floods, 'flood' floods and
# blocks on a full pipe, 'short' drops a flag.
SCRIPT = """\
#!/usr/bin/env bash
set -euo pipefail
source "$(dirname "$0")/frank-archon.env"
mode="${1:?mode}"
dry="${2:-}"
args=(radiance --max-model-len 32768 --max-num-seqs "$FRANK_ARCHON_MAX_SEQS")
case "$mode" in
  fp8) args+=(--max-num-batched-tokens "$FRANK_ARCHON_MAX_BATCHED_TOKENS" \\
         --host-pool-mib "$FRANK_ARCHON_HOST_POOL_MIB") ;;
  bf16)
    # a wide step is free throughput (it is not)
    args+=(--max-num-batched-tokens 65536 --host-pool-mib "$FRANK_ARCHON_HOST_POOL_MIB")
    ;;
  bf16-fixed)
    args+=(--max-num-batched-tokens "$FRANK_ARCHON_MAX_BATCHED_TOKENS" --host-pool-mib "$FRANK_ARCHON_HOST_POOL_MIB")
    ;;
  short) args+=(--max-num-batched-tokens "$FRANK_ARCHON_MAX_BATCHED_TOKENS") ;;
  slow) sleep 30 ;;
  loud) yes radiance | head -c 400000 ;;
  flood) yes radiance | head -c 40000000 ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
if [[ "$dry" == "--dry-run" ]]; then printf '%s\\n' "${args[@]}"; exit 0; fi
touch "$(dirname "$0")/ENGINE-STARTED"
"""


def line_of(text: str, needle: str) -> int:
    (line,) = [n for n, text_line in enumerate(text.splitlines(), 1) if needle in text_line]
    return line


def runtime_for(root: Path, services: dict[str, Any] | None = None) -> Runtime:
    fleet = Fleet.model_validate({"server": {"log_roots": [str(root)]}, "services": services or {}})
    return Runtime(fleet)


def dry_runtime(scripts: Path) -> Runtime:
    """The fake script's directory as a log root, and a service that names it as its serve_script."""
    return runtime_for(scripts, {"frank-archon": {"serve_script": str(scripts / "frank-archon.sh")}})


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    (tmp_path / "frank-archon.env").write_text(ENV)
    script = tmp_path / "frank-archon.sh"
    script.write_text(SCRIPT)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return tmp_path


# ---------------------------------------------------------------------------------------
# audit_step_shape


async def test_audit_two_texts(proven_text: str, refused_text: str) -> None:
    out = await audit_step_shape(
        runtime_for(Path("/nonexistent")),
        AuditStepShapeInput(proven_log_text=proven_text, candidate_log_text=refused_text),
    )
    assert (out.ok, out.verdict) == (False, "refused")
    assert out.inherit == {"--max-num-batched-tokens": "1024"}
    rows = {r.row: r for r in out.rows}
    assert (rows["activation arena"].proven, rows["activation arena"].candidate) == ("504.00 MiB", "10.65 GiB")
    assert rows["activation arena"].delta == 10_401.6 and rows["activation arena"].delta_text == "+10.16 GiB"
    assert rows["claimable"].delta == -14_356.48 and rows["claimable"].delta_text == "-14.02 GiB"
    assert rows["--max-num-batched-tokens"].delta_text == "+64,512"
    assert out.candidate_seats is not None and out.candidate_seats.seats_mib == 3_200.0
    assert out.candidate_seats.one_sequence_mib == 792.0 and out.candidate_seats.below_one_sequence
    assert out.arena_cost is not None and out.arena_cost.label == "two-point estimate"
    assert (out.arena_cost.mib_per_batched_token, out.arena_cost.kib_per_batched_token) == (0.1612, 165.1)
    assert out.fix_text is not None and "lower --max-num-batched-tokens (the arena" in out.fix_text.text
    assert [r.text.split()[-1] for r in out.refusal] == ["sessions", "memory"]
    assert any("startup stopped: out of memory" in line.text for line in out.candidate_lines)


async def test_audit_two_log_files_under_the_roots(tmp_path: Path, proven_text: str, refused_text: str) -> None:
    (tmp_path / "qwen38_bf16_fp8.log").write_text(proven_text)
    (tmp_path / "qwen38_bf16_wide.log").write_text(refused_text)
    out = await audit_step_shape(
        runtime_for(tmp_path),
        AuditStepShapeInput(proven_log=str(tmp_path / "qwen38_bf16_fp8.log"),
                            candidate_log=str(tmp_path / "qwen38_bf16_wide.log")),
    )
    assert out.verdict == "refused"
    assert out.proven.ledger.source.endswith("qwen38_bf16_fp8.log")


async def test_audit_two_boots_of_one_service_log(tmp_path: Path, proven_text: str, refused_text: str) -> None:
    log = tmp_path / "frank_archon.log"
    log.write_text(proven_text + refused_text)
    runtime = runtime_for(tmp_path, {"frank-archon": {"log": str(log)}})
    out = await audit_step_shape(runtime, AuditStepShapeInput(service="frank-archon"))
    assert (out.proven.ledger.boot, out.candidate.ledger.boot, out.candidate.ledger.boots_seen) == (1, 2, 2)
    assert out.verdict == "refused"


async def test_audit_refuses_a_log_outside_the_roots(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="outside the allowed log roots"):
        await audit_step_shape(runtime_for(tmp_path / "roots"),
                               AuditStepShapeInput(log="/etc/passwd"))


@pytest.mark.slow
async def test_a_run_over_the_cap_ends_though_it_still_writes(scripts: Path) -> None:
    # Past the cap the reader stops; the run still writes, its pipe fills and pauses. Killed, its end of
    # file must still be read, or waiting for the run never returns (CI under load hung here, 2026-12-02).
    call = compare_dry_run(dry_runtime(scripts), CompareDryRunInput(
        script=str(scripts / "frank-archon.sh"), proven_mode="fp8", candidate_mode="flood"))
    with pytest.raises(SourceError, match=f"more than {DRY_RUN_OUTPUT_CAP_BYTES // 1024:,} KiB"):
        await asyncio.wait_for(call, HANG_S)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "give exactly one proven source"),
        ({"proven_log_text": "x"}, "give exactly one candidate source"),
        ({"proven_log_text": "x", "proven_log": "/y", "candidate_log_text": "z"}, "exactly one proven source"),
        ({"log_text": "x", "candidate_log_text": "z"}, "not both"),
        ({"log_text": "x", "proven_boot": -1}, "both -1"),
        ({"container": "frank-archon"}, "container needs host: the host"),
        ({"host": "dankserver", "log_text": "x"}, "host goes with log"),
        ({"proven_container": "a", "candidate_log_text": "x"}, "container needs host: the host"),
    ],
)
def test_audit_input_rules(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        AuditStepShapeInput.model_validate(arguments)


# ---------------------------------------------------------------------------------------
# check_serve_script


async def test_check_script_from_the_service_config(scripts: Path) -> None:
    runtime = runtime_for(scripts / "elsewhere", {
        "frank-archon": {"serve_script": str(scripts / "frank-archon.sh"),
                         "env_file": str(scripts / "frank-archon.env")},
    })
    out = await check_serve_script(runtime, CheckServeScriptInput(service="frank-archon"))
    assert not out.ok and out.modes_with_findings == ["bf16"]
    assert [(f.kind, f.line, f.flag, f.value) for f in out.findings] == [
        ("literal", line_of(SCRIPT, "--max-num-batched-tokens 65536"), "max-num-batched-tokens", "65536")
    ]
    assert out.findings[0].file == str(scripts / "frank-archon.sh")
    assert {o.flag: o.variable for o in out.owned} == {
        "max-num-seqs": "FRANK_ARCHON_MAX_SEQS", "max-num-batched-tokens": "FRANK_ARCHON_MAX_BATCHED_TOKENS",
        "host-pool-mib": "FRANK_ARCHON_HOST_POOL_MIB",
    }
    assert out.handles_dry_run and out.sources_env_file
    assert {m.mode: m.findings for m in out.modes}["bf16"] == 1


async def test_check_script_path_follows_its_source_line_to_the_env_file(scripts: Path) -> None:
    out = await check_serve_script(runtime_for(scripts), CheckServeScriptInput(script=str(scripts / "frank-archon.sh")))
    assert out.env_file == str(scripts / "frank-archon.env")
    assert any("the script sources it at line 3" in note for note in out.notes)


async def test_check_script_path_does_not_read_an_env_beside_it_that_links_out_of_the_roots(tmp_path: Path) -> None:
    # The .env beside an agent's script is read without being named: a symlink there must not
    # lead the read out of the log roots (a remote host refuses the same with its real path).
    # The script's own line is not the caller's fault: the check goes on, and a note says why.
    root = tmp_path / "logs"
    root.mkdir()
    (root / "frank-archon.sh").write_text(SCRIPT)
    secret = tmp_path / "secret.env"
    secret.write_text("FRANK_ARCHON_MAX_SEQS=hunter2\n")
    (root / "frank-archon.env").symlink_to(secret)
    out = await check_serve_script(runtime_for(root), CheckServeScriptInput(script=str(root / "frank-archon.sh")))
    assert "hunter2" not in out.model_dump_json() and out.env_file is None
    assert any(re.search(r"was not read \(sourced file='.*frank-archon\.env' resolves to .*secret\.env, outside", n)
               for n in out.notes), out.notes


@pytest.mark.parametrize("trusted", [False, True])
async def test_a_symlink_loop_is_an_input_error_naming_the_argument(tmp_path: Path, trusted: bool) -> None:
    # Path.resolve() raises RuntimeError on a loop (Python 3.11, 3.12): it must not escape as a traceback.
    (tmp_path / "a.sh").symlink_to(tmp_path / "b.sh")
    (tmp_path / "b.sh").symlink_to(tmp_path / "a.sh")
    runtime = runtime_for(tmp_path)
    runtime.trust_local_paths = trusted
    loop = str(tmp_path / "a.sh")
    with pytest.raises(InputError, match=r"^script='.*a\.sh': .*symlink.*loop"):
        await check_serve_script(runtime, CheckServeScriptInput(script=loop))
    with pytest.raises(InputError, match=r"^script='.*a\.sh': .*symlink.*loop"):
        await compare_dry_run(runtime, CompareDryRunInput(script=loop, proven_mode="fp8", candidate_mode="bf16"))
    with pytest.raises(InputError, match=r"^log='.*a\.sh': .*symlink.*loop"):
        await audit_step_shape(runtime, AuditStepShapeInput(log=loop))


async def test_a_fifo_under_the_roots_is_refused_not_waited_on(tmp_path: Path) -> None:
    # Opening a FIFO blocks until something writes to it: the read would hang with no time limit.
    # A host refuses it ('not a regular file'); so must this machine.
    fifo = tmp_path / "ledger.log"
    os.mkfifo(fifo)
    try:
        with pytest.raises(SourceError, match=r"^/.*ledger\.log: not a regular file"):
            await asyncio.wait_for(audit_step_shape(runtime_for(tmp_path), AuditStepShapeInput(log=str(fifo))), 5)
        with pytest.raises(SourceError, match=r"^script='.*ledger\.log': not a regular file"):
            await asyncio.wait_for(check_serve_script(runtime_for(tmp_path), CheckServeScriptInput(
                script=str(fifo), env_text=ENV)), 5)
    finally:
        # Unblock any open() left waiting in a worker thread, so the test run can end.
        for _ in range(2):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


async def test_check_script_inline() -> None:
    out = await check_serve_script(
        runtime_for(Path("/nonexistent")),
        # The bf16 mode passes the env file's second variable for --max-num-seqs: a per-mode alias.
        CheckServeScriptInput(script_text=SCRIPT.replace("bf16)", "bf16) args+=(--max-num-seqs \"$X_BF16_SEATS\")"),
                              env_text=ENV + "X_BF16_SEATS=4\n"),
    )
    assert {(f.kind, f.file) for f in out.findings} == {("literal", "script_text"), ("alias", "script_text"),
                                                     ("alias", "env_text")}


async def test_check_script_outside_the_roots_names_the_argument(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^script='/etc/passwd'"):
        await check_serve_script(runtime_for(tmp_path), CheckServeScriptInput(script="/etc/passwd"))


async def test_check_script_refuses_a_huge_file(tmp_path: Path) -> None:
    big = tmp_path / "big.sh"
    big.write_bytes(b"#" * (SCRIPT_CAP_BYTES + 1))
    with pytest.raises(SourceError, match="not a serve script"):
        await check_serve_script(runtime_for(tmp_path), CheckServeScriptInput(script=str(big), env_text=ENV))


async def test_a_remote_service_without_a_serve_script_is_refused_before_ssh() -> None:
    # (Reads and dry runs on a host, against real SSH servers: tests/remote/test_scripts.py.)
    fleet = Fleet.model_validate({"hosts": {"dankserver": {"log_roots": ["/home/dank/logs"]}}, "services": {
        "frank-archon": {"host": "dankserver", "log": "/home/dank/logs/frank_archon.log"}}})
    with pytest.raises(InputError, match=r"service 'frank-archon' names no serve_script.*on the service's host"):
        await check_serve_script(Runtime(fleet), CheckServeScriptInput(service="frank-archon"))
    with pytest.raises(InputError, match=r"service 'frank-archon' names no serve_script"):
        await compare_dry_run(Runtime(fleet), CompareDryRunInput(service="frank-archon", proven_mode="fp8",
                                                                 candidate_mode="bf16"))
    with pytest.raises(GuardRailError, match=r"not the serve_script of any service of that host.*: none"):
        await compare_dry_run(Runtime(fleet), CompareDryRunInput(
            host="dankserver", script="/home/dank/logs/x.sh", proven_mode="fp8", candidate_mode="bf16"))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"service": "frank-archon", "host": "dankserver"}, "a service names its own host"),
        ({"script_text": "x", "host": "dankserver"}, "host goes with script or env_file"),
        ({"script_text": "x", "env_text": "y", "env_file": "/e"}, "at most one of env_file or env_text"),
    ],
)
def test_check_script_input_rules(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        CheckServeScriptInput.model_validate(arguments)


# ---------------------------------------------------------------------------------------
# compare_dry_run: the fake serve script, executed for real


@pytest.mark.slow
async def test_dry_run_fixed_mode_matches_byte_for_byte(scripts: Path) -> None:
    out = await compare_dry_run(dry_runtime(scripts), CompareDryRunInput(
        script=str(scripts / "frank-archon.sh"), proven_mode="fp8", candidate_mode="bf16-fixed"))
    assert (out.ok, out.verdict, out.identical_bytes) == (True, "identical", True)
    assert out.proven.command == [str(scripts / "frank-archon.sh"), "fp8", "--dry-run"]
    assert out.proven.argv[:3] == ["radiance", "--max-model-len", "32768"] and out.proven.exit_status == 0
    assert not (scripts / "ENGINE-STARTED").exists()


@pytest.mark.slow
async def test_dry_run_private_step_differs_at_its_argument(scripts: Path) -> None:
    out = await compare_dry_run(dry_runtime(scripts), CompareDryRunInput(
        script=str(scripts / "frank-archon.sh"), proven_mode="fp8", candidate_mode="bf16"))
    assert (out.ok, out.verdict) == (False, "differs")
    assert out.first_difference is not None
    assert (out.first_difference.index, out.first_difference.proven, out.first_difference.candidate) == (
        6, "1024", "65536")
    assert [(f.flag, f.proven, f.candidate) for f in out.flag_changes] == [
        ("--max-num-batched-tokens", "1024", "65536")]


@pytest.mark.slow
async def test_dry_run_count_difference(scripts: Path) -> None:
    out = await compare_dry_run(dry_runtime(scripts), CompareDryRunInput(
        script=str(scripts / "frank-archon.sh"), proven_mode="fp8", candidate_mode="short"))
    assert out.first_difference is not None
    assert (out.first_difference.index, out.first_difference.proven, out.first_difference.candidate) == (
        7, "--host-pool-mib", None)
    assert (out.proven.argc, out.candidate.argc) == (9, 7)


@pytest.mark.slow
async def test_dry_run_without_exec_bit_runs_under_bash(scripts: Path) -> None:
    script = scripts / "frank-archon.sh"
    script.chmod(0o644)
    out = await compare_dry_run(dry_runtime(scripts), CompareDryRunInput(
        script=str(script), proven_mode="fp8", candidate_mode="bf16-fixed"))
    assert out.ok and out.proven.command is not None and out.proven.command[0].endswith("bash")


@pytest.mark.slow
async def test_a_cancelled_dry_run_leaves_no_process_behind(tmp_path: Path) -> None:
    # An MCP client may cancel the call: the run's process group must die then too, not live on
    # past every time limit (a mode that ignores --dry-run would be starting the engine).
    script = tmp_path / "serve.sh"
    script.write_text('#!/bin/sh\nif [ "$2" = --dry-run ]; then echo $$ > "$(dirname "$0")/pid"; exec sleep 60; fi\n')
    script.chmod(0o755)
    runtime = runtime_for(tmp_path, {"svc": {"serve_script": str(script)}})
    call = asyncio.ensure_future(compare_dry_run(runtime, CompareDryRunInput(
        service="svc", proven_mode="a", candidate_mode="b", timeout_s=60)))
    pid_file = tmp_path / "pid"
    for _ in until_hung():
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.05)
    pid = int(pid_file.read_text())
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    gc.collect()  # the run's transport, collected now: it must have seen its process end (no ResourceWarning)

    def gone() -> bool:  # killed and reaped: no zombie left (its transport would warn when collected)
        return not Path(f"/proc/{pid}").exists()

    try:
        for _ in range(40):
            if gone():
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail(f"the dry run's process {pid} outlived the cancelled call")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


async def test_dry_run_refuses_a_script_without_dry_run(tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text('#!/bin/sh\n# pass --dry-run? not handled\ntouch "$(dirname "$0")/ENGINE-STARTED"\n')
    script.chmod(0o755)
    runtime = runtime_for(tmp_path, {"svc": {"serve_script": str(script)}})
    with pytest.raises(GuardRailError, match="never mentions --dry-run"):
        await compare_dry_run(runtime, CompareDryRunInput(service="svc", proven_mode="a", candidate_mode="b"))
    assert not (tmp_path / "ENGINE-STARTED").exists()


@pytest.mark.slow
async def test_dry_run_runs_only_configured_serve_scripts(scripts: Path) -> None:
    # Under the log roots (readable) but named by no service: not run.
    with pytest.raises(GuardRailError, match="not the serve_script of any service"):
        await compare_dry_run(runtime_for(scripts), CompareDryRunInput(
            script=str(scripts / "frank-archon.sh"), proven_mode="fp8", candidate_mode="bf16"))
    # The service's own script, by name: run.
    out = await compare_dry_run(dry_runtime(scripts), CompareDryRunInput(
        service="frank-archon", proven_mode="fp8", candidate_mode="bf16-fixed"))
    assert out.ok


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "timeout_s", "message"),
    [
        ("nope", DRY_RUN_TIMEOUT_S, "exited 2; stderr ends: 'unknown mode nope'"),
        ("slow", 0.5, "no result within 0.5 s"),
        ("loud", DRY_RUN_TIMEOUT_S, f"more than {DRY_RUN_OUTPUT_CAP_BYTES // 1024:,} KiB"),
    ],
)
async def test_dry_run_failures(scripts: Path, mode: str, timeout_s: float, message: str) -> None:
    with pytest.raises(SourceError, match=message):
        await compare_dry_run(dry_runtime(scripts), CompareDryRunInput(
            script=str(scripts / "frank-archon.sh"), proven_mode="fp8", candidate_mode=mode, timeout_s=timeout_s))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"script": "/s", "proven_mode": "--help", "candidate_mode": "fp8"}, "not starting with '-'"),
        ({"script": "/s", "proven_mode": "fp8", "candidate_mode": "a;touch x"}, "is not a mode name"),
        ({"script": "/s", "proven_mode": "fp8", "candidate_mode": "fp8 --x"}, "is not a mode name"),
        ({"script": "/s", "proven_mode": "fp8", "candidate_mode": "fp8\n"}, "is not a mode name"),  # '$' took it
        ({"service": "s", "host": "h", "proven_mode": "fp8", "candidate_mode": "bf16"}, "host goes with script"),
        ({"script": "/s", "proven_mode": "fp8", "candidate_mode": "fp8"}, "name two modes"),
        ({"script": "/s", "proven_mode": "fp8"}, "give service or script"),
        ({"proven_argv": "a"}, "give both proven_argv and candidate_argv"),
        ({"proven_argv": "a", "candidate_argv": "b", "script": "/s"}, "nothing else"),
        ({"proven_argv": "a", "candidate_argv": "b", "timeout_s": DRY_RUN_MAX_TIMEOUT_S + 1}, "less than or equal"),
    ],
)
def test_dry_run_input_rules(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        CompareDryRunInput.model_validate(arguments)


async def test_dry_run_inline_texts() -> None:
    out = await compare_dry_run(runtime_for(Path("/nonexistent")), CompareDryRunInput(
        proven_argv="radiance --max-num-batched-tokens 1024\n",
        candidate_argv="radiance --max-num-batched-tokens 1025\n",
    ))
    assert out.format == "shell" and out.first_difference is not None
    assert (out.first_difference.index, out.first_difference.char_offset) == (2, 3)
    assert out.proven.command is None and out.proven.mode is None


# ---------------------------------------------------------------------------------------
# Registry, MCP wiring and docstrings


async def test_registered_in_the_server_with_flat_inputs() -> None:
    names = {spec.name: spec for spec in TOOLS}
    assert {"audit_step_shape", "check_serve_script", "compare_dry_run"} <= set(names)
    assert names["compare_dry_run"].read_only is False and names["audit_step_shape"].read_only is True
    listed = {t.name: t for t in await build_server(Runtime(Fleet())).list_tools()}
    audit_inputs = set(listed["audit_step_shape"].input_schema["properties"])
    assert {"proven_log_text", "candidate_boot", "service"} <= audit_inputs
    check_inputs = set(listed["check_serve_script"].input_schema["properties"])
    assert {"script_text", "env_file", "env_text"} <= check_inputs and "env_prefix" not in check_inputs


async def test_mcp_call_returns_the_structured_diff() -> None:
    server = build_server(Runtime(Fleet()))
    result = await server.call_tool("compare_dry_run", {"proven_argv": "a\nb\n", "candidate_argv": "a\nc\n"})
    assert result.structured_content is not None  # type: ignore[union-attr]
    assert result.structured_content["first_difference"]["index"] == 1  # type: ignore[union-attr,index]
