"""check_serve_script and compare_dry_run on a host, against both real SSH servers.

The host directory gets a serve script per test (modes as case arms, printing their argv one
per line on --dry-run) and the env file that owns the shape. The script is read (with its env
file) in one round trip; the two dry runs go in a second, each killed on the host at its limit.
"""

from __future__ import annotations

import asyncio
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest
from bounds import until_hung
from pydantic import ValidationError
from remote_hosts import payloads
from ssh_hosts import LoopbackHost

from radiance_mcp.core.constants import DRY_RUN_OUTPUT_CAP_BYTES
from radiance_mcp.core.errors import GuardRailError, InputError, RadianceMCPError, SourceError
from radiance_mcp.models.audit import CheckServeScriptInput, CompareDryRunInput
from radiance_mcp.sources.remote import FileRequest, LogRequest, SSHPool, file_text, section_boot
from radiance_mcp.sources.remote.framing import Frame, Section
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools.audit import check_serve_script, compare_dry_run

ENV = """\
FRANK_ARCHON_MAX_SEQS=8
FRANK_ARCHON_MAX_BATCHED_TOKENS=1024
FRANK_ARCHON_HOST_POOL_MIB=7580
FRANK_ARCHON_GPU_HEADROOM_MIB=96
"""

# fp8 is the proven mode; bf16 carries a private step (a literal 65,536 and a per-mode seat
# count); bf16-fixed inherits everything; onebyte differs in one byte (7581), short drops a
# flag; slow hangs, loud floods, fake prints lines shaped like the transport's control lines.
SCRIPT = """\
#!/usr/bin/env bash
set -euo pipefail
source "$(dirname "$0")/frank-archon.env"
mode="${1:?mode}"
dry="${2:-}"
args=(radiance --max-model-len 32768)
case "$mode" in
  fp8)
    args+=(--max-num-seqs "$FRANK_ARCHON_MAX_SEQS" --max-num-batched-tokens "$FRANK_ARCHON_MAX_BATCHED_TOKENS")
    args+=(--host-pool-mib "$FRANK_ARCHON_HOST_POOL_MIB") ;;
  bf16)
    # a wide step is free throughput (it is not)
    args+=(--max-num-seqs 4 --max-num-batched-tokens 65536 --host-pool-mib "$FRANK_ARCHON_HOST_POOL_MIB") ;;
  bf16-fixed)
    args+=(--max-num-seqs "$FRANK_ARCHON_MAX_SEQS" --max-num-batched-tokens "$FRANK_ARCHON_MAX_BATCHED_TOKENS")
    args+=(--host-pool-mib "$FRANK_ARCHON_HOST_POOL_MIB") ;;
  onebyte)
    args+=(--max-num-seqs "$FRANK_ARCHON_MAX_SEQS" --max-num-batched-tokens "$FRANK_ARCHON_MAX_BATCHED_TOKENS")
    args+=(--host-pool-mib 7581) ;;
  short)
    args+=(--max-num-seqs "$FRANK_ARCHON_MAX_SEQS" --max-num-batched-tokens "$FRANK_ARCHON_MAX_BATCHED_TOKENS") ;;
  slow) echo $$ > "$(dirname "$0")/slow.pid"; exec sleep 30 ;;
  loud) yes radiance | head -c 400000 ;;
  fake) args+=("#0123456789abcdef Y 0" "#0123456789abcdef Z") ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
if [[ "$dry" == "--dry-run" ]]; then printf '%s\\n' "${args[@]}"; exit 0; fi
touch "$(dirname "$0")/ENGINE-STARTED"
"""

CLEAN_SCRIPT = "\n".join(line for line in SCRIPT.splitlines() if "65536" not in line and "7581" not in line) + "\n"


def line_of(text: str, needle: str) -> int:
    (line,) = [n for n, text_line in enumerate(text.splitlines(), 1) if needle in text_line]
    return line


def script_dir(host: LoopbackHost, *, under_logs: bool = False, script: str = SCRIPT,
               name: str = "frank-archon.sh", env: bool = True) -> Path:
    """A fresh directory on the host with the serve script (exec bit set) and, if env, its env file."""
    base = host.logs if under_logs else host.root / "scripts"
    directory = base / uuid.uuid4().hex
    directory.mkdir(parents=True)
    path = directory / name
    path.write_text(script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    if env:
        (directory / "frank-archon.env").write_text(ENV)
    return directory


def runtime_for(host: LoopbackHost, pool: SSHPool, services: dict[str, dict[str, Any]] | None = None) -> Runtime:
    return Runtime(host.fleet(services=services), ssh_pool=pool)


def service(directory: Path, *, env_file: bool = True, name: str = "frank-archon.sh") -> dict[str, Any]:
    entry: dict[str, Any] = {"host": "testhost", "serve_script": str(directory / name)}
    if env_file:
        entry["env_file"] = str(directory / "frank-archon.env")
    return entry


# ---------------------------------------------------------------------------------------
# check_serve_script


async def test_a_services_script_on_its_host_names_each_private_literal(ssh_host: LoopbackHost,
                                                                        pool: SSHPool) -> None:
    directory = script_dir(ssh_host)
    runtime = runtime_for(ssh_host, pool, {"frank-archon": service(directory)})
    out = await check_serve_script(runtime, CheckServeScriptInput(service="frank-archon"))
    script = f"testhost:{directory / 'frank-archon.sh'}"
    assert not out.ok and out.modes_with_findings == ["bf16", "onebyte"]
    assert out.script == script and out.env_file == f"testhost:{directory / 'frank-archon.env'}"
    assert [(f.kind, f.file, f.line, f.mode, f.flag, f.value) for f in out.findings] == [
        ("literal", script, line_of(SCRIPT, "--max-num-seqs 4"), "bf16", "max-num-seqs", "4"),
        ("literal", script, line_of(SCRIPT, "65536"), "bf16", "max-num-batched-tokens", "65536"),
        ("literal", script, line_of(SCRIPT, "7581"), "onebyte", "host-pool-mib", "7581"),
    ]
    assert out.handles_dry_run and out.sources_env_file
    assert {o.variable: o.value for o in out.owned}["FRANK_ARCHON_MAX_BATCHED_TOKENS"] == "1024"
    assert pool.transfer.commands == 1  # the script and its env file in one round trip


async def test_a_script_on_a_host_sourcing_a_file_outside_its_roots_is_checked_with_a_note(
    ssh_host: LoopbackHost, pool: SSHPool
) -> None:
    # An agent's script under the host's log roots that sources a file outside them: the file is
    # not read (the script's own line is not the caller's fault), the literals are still reported.
    secret = ssh_host.root / "secret.env"
    secret.write_text("FRANK_ARCHON_MAX_SEQS=hunter2\n")
    script = SCRIPT.replace('source "$(dirname "$0")/frank-archon.env"', f"source {secret}")
    directory = script_dir(ssh_host, under_logs=True, script=script, env=False)
    runtime = runtime_for(ssh_host, pool)
    out = await check_serve_script(runtime, CheckServeScriptInput(host="testhost",
                                                                  script=str(directory / "frank-archon.sh")))
    assert "hunter2" not in out.model_dump_json() and out.env_file is None
    assert ("bf16", "max-num-seqs", "4") in [(f.mode, f.flag, f.value) for f in out.findings]
    assert any(f"sources {secret}, which was not read" in note for note in out.notes), out.notes


async def test_a_clean_script_on_a_host_passes(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    directory = script_dir(ssh_host, script=CLEAN_SCRIPT)
    runtime = runtime_for(ssh_host, pool, {"frank-archon": service(directory)})
    out = await check_serve_script(runtime, CheckServeScriptInput(service="frank-archon"))
    assert out.ok and out.findings == [] and out.remedy == []


async def test_a_script_an_agent_names_on_a_host_and_the_env_beside_it(ssh_host: LoopbackHost,
                                                                       pool: SSHPool) -> None:
    directory = script_dir(ssh_host, under_logs=True)
    out = await check_serve_script(runtime_for(ssh_host, pool), CheckServeScriptInput(
        host="testhost", script=str(directory / "frank-archon.sh")))
    assert out.env_file == f"testhost:{directory / 'frank-archon.env'}"
    assert any("the script sources it at line 3" in note for note in out.notes)
    assert [f.value for f in out.findings] == ["4", "65536", "7581"]
    # The file it sources is not there: the read still succeeds, only literals are checked, and it says so.
    bare = script_dir(ssh_host, under_logs=True, env=False)
    out = await check_serve_script(runtime_for(ssh_host, pool), CheckServeScriptInput(
        host="testhost", script=str(bare / "frank-archon.sh")))
    assert out.env_file is None and out.owned == []
    assert any(f"sources testhost:{bare / 'frank-archon.env'}, which is not there" in n for n in out.notes)
    assert any("no env file" in n for n in out.notes) and [f.value for f in out.findings] == ["4", "65536", "7581"]
    assert pool.transfer.commands == 2


# if/elif modes, env variables named for nothing in particular, the env file in a subdirectory.
FOLLOWED = """\
#!/bin/bash
here=${BASH_SOURCE%/*}
. "$here/conf/shape.env"
if [[ $1 == quality ]]; then
  exec radiance --max-num-seqs "$SEATS" --max-num-batched-tokens "$STEP"
elif [[ $1 == wide ]]; then
  exec radiance --max-num-seqs 6 --max-num-batched-tokens "$STEP"
fi
"""


async def test_a_script_on_a_host_is_followed_to_the_env_file_it_sources(ssh_host: LoopbackHost,
                                                                         pool: SSHPool) -> None:
    directory = script_dir(ssh_host, under_logs=True, script=FOLLOWED, name="run-llm", env=False)
    (directory / "conf").mkdir()
    (directory / "conf" / "shape.env").write_text("SEATS=3\nSTEP=2048\n")
    out = await check_serve_script(runtime_for(ssh_host, pool), CheckServeScriptInput(
        host="testhost", script=str(directory / "run-llm")))
    assert out.env_file == f"testhost:{directory / 'conf' / 'shape.env'}" and out.sources_env_file
    assert {o.flag: o.variable for o in out.owned} == {"max-num-seqs": "SEATS", "max-num-batched-tokens": "STEP"}
    assert [(f.kind, f.line, f.mode, f.value) for f in out.findings] == [
        ("literal", line_of(FOLLOWED, "--max-num-seqs 6"), "elif [[ $1 == wide ]]", "6")]
    assert pool.transfer.commands == 2  # the script (with the absent run-llm.env beside it), then conf/shape.env


async def test_an_agents_script_outside_the_hosts_roots_is_refused_before_any_command(ssh_host: LoopbackHost,
                                                                                    pool: SSHPool) -> None:
    directory = script_dir(ssh_host)  # under scripts/, not under the log root
    for arguments in ({"script": str(directory / "frank-archon.sh")},
                      {"script_text": SCRIPT, "env_file": str(directory / "frank-archon.env")},
                      {"script": "/etc/passwd"}):
        with pytest.raises(InputError, match=r"(script|env_file)=.* is outside the log roots of host testhost"):
            await check_serve_script(runtime_for(ssh_host, pool), CheckServeScriptInput.model_validate(
                {"host": "testhost", **arguments}))
    assert pool.transfer.commands == 0


async def test_a_symlink_out_of_the_roots_is_refused_on_the_host(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    directory = script_dir(ssh_host, under_logs=True)
    (directory / "link.sh").symlink_to(ssh_host.root / "secret.txt")
    with pytest.raises(InputError, match=r"script=.*link\.sh.*real path on host testhost .* outside"):
        await check_serve_script(runtime_for(ssh_host, pool), CheckServeScriptInput(
            host="testhost", script=str(directory / "link.sh"), env_text=ENV))


@pytest.mark.parametrize("code", ["missing", "outside", "notfile", "unreadable"])
def test_a_file_refusal_reads_alike_for_a_ledger_and_a_script(code: str) -> None:
    """One wording per refusal, each with its remedy, whether a ledger or a script was refused.

    (Tests run as root, so 'unreadable' cannot be staged on the test hosts: the host's X line is given.)
    """
    roots = ("/home/dank/logs",)
    path = "/home/dank/logs/a"
    frame = Frame(fields={"X": [code]})
    with pytest.raises(RadianceMCPError) as script_error:
        file_text(frame, FileRequest(path, roots, "script"), "testhost", 1024)
    section = Section(error=[code])
    with pytest.raises(RadianceMCPError) as ledger_error:
        section_boot(section, LogRequest("file", path, -1, f"testhost:{path}", roots), "testhost")
    assert type(script_error.value) is type(ledger_error.value)
    said_script = str(script_error.value).removeprefix(f"script={path!r}")
    said_ledger = str(ledger_error.value).removeprefix(f"testhost:{path}")
    assert said_script == said_ledger
    assert "; " in said_script  # the remedy follows the rule


async def test_an_oversized_script_on_a_host_is_refused(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    directory = script_dir(ssh_host, under_logs=True, script="#" * (1 << 20) + "\n")
    with pytest.raises(SourceError, match=r"1,048,577 bytes: over the cap, so not a serve script"):
        await check_serve_script(runtime_for(ssh_host, pool), CheckServeScriptInput(
            host="testhost", script=str(directory / "frank-archon.sh")))


async def test_a_configured_script_path_must_be_absolute_on_the_host(asyncssh_host: LoopbackHost,
                                                                     pool: SSHPool) -> None:
    # Refused when the config is loaded (issue 10): '~' would expand on this machine, not the host.
    with pytest.raises(ValidationError, match=r"serve_script: '~/scripts/frank-archon\.sh' is not an absolute path"):
        runtime_for(asyncssh_host, pool, {"frank-archon": {"host": "testhost",
                                                           "serve_script": "~/scripts/frank-archon.sh"}})
    assert pool.transfer.commands == 0


# ---------------------------------------------------------------------------------------
# compare_dry_run


# (candidate mode, identical, first differing index, proven value there, candidate value there)
DRY_RUNS: list[tuple[str, bool, int | None, str | None, str | None]] = [
    ("bf16-fixed", True, None, None, None),  # a match
    ("onebyte", False, 8, "7580", "7581"),  # one byte
    ("short", False, 7, "--host-pool-mib", None),  # a count: 9 arguments against 7
    ("bf16", False, 4, "8", "4"),  # the private step
]


async def test_dry_runs_on_the_host(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    """Each candidate against fp8 with a script of its own, one after another through one pool."""
    for candidate, identical, index, proven_value, candidate_value in DRY_RUNS:
        directory = script_dir(ssh_host)
        runtime = runtime_for(ssh_host, pool, {"frank-archon": service(directory)})
        sent = pool.transfer.commands
        out = await compare_dry_run(runtime, CompareDryRunInput(service="frank-archon", proven_mode="fp8",
                                                                candidate_mode=candidate))
        assert (out.ok, out.identical_bytes) == (identical, identical), candidate
        script = str(directory / "frank-archon.sh")
        assert out.proven.host == "testhost" and out.proven.command == [script, "fp8", "--dry-run"]
        assert out.candidate.command == [script, candidate, "--dry-run"]
        assert (out.proven.exit_status, out.candidate.exit_status) == (0, 0)
        assert out.proven.argv[:3] == ["radiance", "--max-model-len", "32768"] and out.proven.argc == 9
        if identical:
            assert out.first_difference is None
        else:
            first = out.first_difference
            assert first is not None and (first.index, first.proven, first.candidate) == (
                index, proven_value, candidate_value), candidate
        assert pool.transfer.commands - sent == 2, candidate  # the script read and checked, then both modes run
        assert not (directory / "ENGINE-STARTED").exists()


async def test_a_script_on_a_host_named_by_path_runs_only_if_configured(ssh_host: LoopbackHost,
                                                                        pool: SSHPool) -> None:
    directory = script_dir(ssh_host, under_logs=True)  # readable under the log root
    path = str(directory / "frank-archon.sh")
    with pytest.raises(GuardRailError, match=r"not the serve_script of any service of that host"):
        await compare_dry_run(runtime_for(ssh_host, pool), CompareDryRunInput(
            host="testhost", script=path, proven_mode="fp8", candidate_mode="bf16"))
    assert pool.transfer.commands == 0
    out = await compare_dry_run(runtime_for(ssh_host, pool, {"svc": service(directory)}), CompareDryRunInput(
        host="testhost", script=path, proven_mode="fp8", candidate_mode="bf16-fixed"))
    assert out.ok and out.proven.host == "testhost"


async def test_without_the_exec_bit_the_host_runs_it_under_bash(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    directory = script_dir(ssh_host)
    (directory / "frank-archon.sh").chmod(0o644)
    runtime = runtime_for(ssh_host, pool, {"frank-archon": service(directory)})
    out = await compare_dry_run(runtime, CompareDryRunInput(service="frank-archon", proven_mode="fp8",
                                                            candidate_mode="bf16-fixed"))
    assert out.ok and out.proven.command == ["bash", str(directory / "frank-archon.sh"), "fp8", "--dry-run"]


async def test_a_dry_run_printing_control_lines_is_data(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    directory = script_dir(ssh_host)
    runtime = runtime_for(ssh_host, pool, {"frank-archon": service(directory)})
    out = await compare_dry_run(runtime, CompareDryRunInput(service="frank-archon", proven_mode="fp8",
                                                            candidate_mode="fake"))
    assert out.candidate.argv == ["radiance", "--max-model-len", "32768", "#0123456789abcdef Y 0",
                                  "#0123456789abcdef Z"]


async def test_a_script_without_dry_run_is_read_but_never_run(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    script = '#!/bin/sh\n# pass --dry-run? not handled\ntouch "$(dirname "$0")/ENGINE-STARTED"\n'
    directory = script_dir(ssh_host, script=script)
    runtime = runtime_for(ssh_host, pool, {"frank-archon": service(directory)})
    with pytest.raises(GuardRailError, match=r"script='testhost:.*never mentions --dry-run"):
        await compare_dry_run(runtime, CompareDryRunInput(service="frank-archon", proven_mode="a",
                                                          candidate_mode="b"))
    assert pool.transfer.commands == 1 and not (directory / "ENGINE-STARTED").exists()


# slow is the proven side: its failure is the one reported whatever the other run does, so the
# 1 s budget (which each mode gets on the host) decides only the hang, never whether fp8, run
# under load beside it, finishes in time. (With fp8 as the proven side, a loaded host that took
# over 1 s to start bash for fp8 reported fp8 killed, and the test failed for the wrong run.)
@pytest.mark.parametrize(
    ("proven", "mode", "timeout_s", "message"),
    [
        ("fp8", "nope", 20.0,
         r"testhost: .*frank-archon\.sh nope --dry-run: exited 2; stderr ends: 'unknown mode nope'"),
        ("slow", "fp8", 1.0, r"slow --dry-run \(killed on the host\): no result within 1 s"),
        ("fp8", "loud", 20.0, f"printed more than {DRY_RUN_OUTPUT_CAP_BYTES // 1024:,} KiB"),
    ],
)
async def test_dry_run_failures_on_the_host(ssh_host: LoopbackHost, pool: SSHPool, proven: str, mode: str,
                                            timeout_s: float, message: str) -> None:
    directory = script_dir(ssh_host)
    runtime = runtime_for(ssh_host, pool, {"frank-archon": service(directory)})
    with pytest.raises(SourceError, match=message):
        await compare_dry_run(runtime, CompareDryRunInput(service="frank-archon", proven_mode=proven,
                                                          candidate_mode=mode, timeout_s=timeout_s))
    if proven == "slow":
        # The host's time limit killed the run: the process the mode started is gone (or dead, not yet reaped).
        pid = int((directory / "slow.pid").read_text())
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            state = "gone"
        assert state in ("gone", "Z", "X")


async def test_a_cancelled_dry_run_closes_its_session(asyncssh_host: LoopbackHost) -> None:
    """A call its client cancels stops the command there and then (this server kills a closed session's
    processes; the host's own time limit is the backstop where sshd does not)."""
    pool = SSHPool()
    directory = script_dir(asyncssh_host)
    runtime = runtime_for(asyncssh_host, pool, {"frank-archon": service(directory)})
    call = asyncio.ensure_future(compare_dry_run(runtime, CompareDryRunInput(
        service="frank-archon", proven_mode="slow", candidate_mode="fp8", timeout_s=60)))
    pid_file = directory / "slow.pid"
    try:
        for _ in until_hung():
            if pid_file.exists() and pid_file.read_text().strip():
                break
            await asyncio.sleep(0.05)
        pid = int(pid_file.read_text())
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        for _ in range(60):
            if not Path(f"/proc/{pid}").exists() or " Z " in Path(f"/proc/{pid}/stat").read_text():
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail(f"the cancelled dry run's process {pid} still runs on the host")
    finally:
        await pool.close()


async def test_a_script_changed_after_its_check_is_not_run(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    """The host runs the script only while its cksum is the one read (and checked) before."""
    directory = script_dir(ssh_host)
    path = directory / "frank-archon.sh"
    target = ssh_host.target()
    (script,) = await pool.read_files(target, [FileRequest(str(path), (str(directory),), "script")],
                                      cap_bytes=1 << 20)
    assert script is not None and script.data == SCRIPT.encode()
    path.write_text(SCRIPT.replace("exit 0; fi", "exit 0; fi\ntouch \"$(dirname \"$0\")/ENGINE-STARTED\""))
    with pytest.raises(SourceError, match=r"changed between the check of its text and the dry run"):
        await pool.dry_runs(target, script, ["fp8", "bf16"], (str(directory),), timeout_s=20, cap_bytes=1024)
    assert not (directory / "ENGINE-STARTED").exists()


# ---------------------------------------------------------------------------------------
# Injection: mode names and paths


# Payloads that name no '/' (so a file can be named after them): a command they smuggled in
# would create 'pwned' in the directory its shell runs in.
RELATIVE = ["; touch pwned", "$(touch pwned)", "`touch pwned`", "| touch pwned", "'; touch pwned; '",
            '"; touch pwned; "', "&& touch pwned", "--help", "..", "*", "~root", "a b"]


def nothing_ran(host: LoopbackHost, directory: Path) -> None:
    host.assert_untouched()
    for place in (host.root, directory, Path.home()):  # the shells' working directories: host, dry run, sshd
        assert not (place / "pwned").exists(), f"an injected command ran in {place}"
    assert not (directory / "ENGINE-STARTED").exists()


async def test_injection_corpus_in_modes_and_paths(ssh_host: LoopbackHost, pool: SSHPool) -> None:
    """Mode names and paths from the corpus: refused, or quoted and harmless; the canary says so."""
    directory = script_dir(ssh_host, under_logs=True)
    runtime = runtime_for(ssh_host, pool, {"frank-archon": service(directory)})
    script = str(directory / "frank-archon.sh")
    (read,) = await pool.read_files(ssh_host.target(), [FileRequest(script, (str(directory),), "script")],
                                    cap_bytes=1 << 20)
    assert read is not None
    outcomes: dict[str, int] = {}
    for payload in [*payloads(ssh_host), *RELATIVE]:
        # A mode: refused by the input model, and by the remote package before anything is sent when the model
        # is bypassed.
        with pytest.raises(ValidationError):
            CompareDryRunInput(service="frank-archon", proven_mode="fp8", candidate_mode=payload)
        sent = pool.transfer.commands
        with pytest.raises(InputError, match="is not a mode name"):
            await pool.dry_runs(ssh_host.target(), read, ["fp8", payload], (str(directory),), timeout_s=20,
                                cap_bytes=1024)
        assert pool.transfer.commands == sent
        attempts: list[tuple[Any, type[Any], dict[str, Any]]] = [
            (check_serve_script, CheckServeScriptInput, {"script": f"{directory}/{payload}"}),
            (check_serve_script, CheckServeScriptInput, {"script": f"{directory}/{payload}.sh"}),
            (check_serve_script, CheckServeScriptInput, {"script": payload}),
            (check_serve_script, CheckServeScriptInput, {"script": script, "env_file": f"{directory}/{payload}"}),
            (check_serve_script, CheckServeScriptInput, {"host": payload, "script": script}),
            (compare_dry_run, CompareDryRunInput, {"script": f"{directory}/{payload}", "proven_mode": "fp8",
                                                   "candidate_mode": "bf16"}),
        ]
        for tool, model, arguments in attempts:
            arguments = {"host": "testhost", **arguments}
            with pytest.raises(RadianceMCPError) as caught:  # never a success, never a traceback
                await tool(runtime, model.model_validate(arguments))
            outcomes[type(caught.value).__name__] = outcomes.get(type(caught.value).__name__, 0) + 1
        nothing_ran(ssh_host, directory)
    # Refused here (InputError), not run (GuardRailError), and quoted into a 'no such file' there (SourceError).
    assert {"InputError", "GuardRailError", "SourceError"} <= set(outcomes), outcomes


async def test_scripts_named_like_injections_are_read_and_run_as_themselves(ssh_host: LoopbackHost,
                                                                           pool: SSHPool) -> None:
    """Configured scripts whose names hold the corpus: quoted on the host, read and run as files."""
    for payload in [*payloads(ssh_host), *RELATIVE]:
        if "/" in payload or "\n" in payload or "\x00" in payload:
            continue  # no file can be named so
        name = f"x{payload}.sh"
        directory = script_dir(ssh_host, name=name)
        runtime = runtime_for(ssh_host, pool, {"frank-archon": service(directory, name=name)})
        checked = await check_serve_script(runtime, CheckServeScriptInput(service="frank-archon"))
        assert [f.value for f in checked.findings] == ["4", "65536", "7581"]
        out = await compare_dry_run(runtime, CompareDryRunInput(service="frank-archon", proven_mode="fp8",
                                                                candidate_mode="bf16-fixed"))
        assert out.ok and out.proven.command == [str(directory / name), "fp8", "--dry-run"]
        nothing_ran(ssh_host, directory)


def test_the_tools_are_marked_open_world() -> None:
    from radiance_mcp.tools import TOOLS

    specs = {spec.name: spec for spec in TOOLS}
    assert specs["check_serve_script"].open_world and specs["check_serve_script"].read_only
    assert specs["compare_dry_run"].open_world and not specs["compare_dry_run"].read_only
