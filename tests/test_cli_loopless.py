"""Issue 15: a tool command that reads only given text and files on this machine runs with no event
loop (offload.drive), and shows what it showed on one: the same stdout, stderr and exit status, the
time limit's error and a failed read of one side included. A call that reaches a host still runs on
a loop. Ctrl-C and a reader that leaves (`| head`) end it as before, in a process of its own.

Each in-process comparison runs the command twice through the CLI: as it runs now, with asyncio.run
refused (a call that started a loop would fail), and with cli._needs_loop forced true, the event
loop's path every command took before.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from bounds import HANG_S
from cli_run import CliRunner, Ran
from pure_commands import PURE, BootBuilder, case_id, write_files
from ssh_hosts import LoopbackHost

from radiance_mcp.app import cli as cli_module
from radiance_mcp.sources import offload
from radiance_mcp.sources.config import CONFIG_ENV, EXAMPLES_DIR
from radiance_mcp.sources.ledgers import SLOW_FILE_REMEDY

SPARSE_BYTES = 64 << 30
"""64 GiB of holes and no boot marker: reading it from the end takes minutes (see tests/hostile/test_blocking.py)."""


def _no_loop(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("asyncio.run was called: this command should run without an event loop")


@pytest.fixture
def both(cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``both(*argv, cwd=...)``: (the run without a loop, the run on one) of one command."""
    monkeypatch.delenv(CONFIG_ENV, raising=False)

    def run(*argv: str | os.PathLike[str], cwd: Path | None = None) -> tuple[Ran, Ran]:
        with monkeypatch.context() as scoped:
            scoped.setattr(asyncio, "run", _no_loop)
            loopless = cli(*argv, cwd=cwd)
        with monkeypatch.context() as scoped:
            scoped.setattr(cli_module, "_needs_loop", lambda *args: True)
            on_loop = cli(*argv, cwd=cwd)
        return loopless, on_loop

    return run


@pytest.fixture
def files(tmp_path: Path, boot_text: BootBuilder) -> Path:
    return write_files(tmp_path, boot_text)


@pytest.mark.parametrize(("argv", "code"), PURE, ids=case_id)
def test_a_pure_command_shows_without_a_loop_what_it_showed_on_one(
    both: Any, files: Path, argv: tuple[str, ...], code: int | None
) -> None:
    loopless, on_loop = both(*argv, cwd=files)
    assert loopless == on_loop
    assert loopless.returncode == code if code is not None else loopless.returncode in (0, 3)
    assert loopless.stdout and not loopless.stderr


def test_the_figures_read_without_a_loop(both: Any, files: Path) -> None:
    loopless, on_loop = both("compute-ceiling", "--log", "gpu-box.log", "--json", cwd=files)
    assert loopless == on_loop and loopless.returncode == 0
    result = json.loads(loopless.stdout)
    # Each card: 24,000 + 4,096 = 28,096 MiB of pair, 3.01 GiB free less the 209.19 MiB floor.
    assert [card["pair_mib"] for card in result["cards"]] == [28096, 28096]
    assert result["ceiling_mib"] == 30969 and result["ledger"]["origin"] == "local file"


def test_script_and_env_files_read_here_without_a_loop(both: Any, cli: CliRunner, files: Path) -> None:
    # Files a tool reads itself (offload.to_thread): a serve script and its env file, a service's env_file.
    loopless, on_loop = both("check-serve-script", "--script", "serve.sh", "--env-file", "inference.env", cwd=files)
    assert loopless == on_loop and loopless.returncode == 3  # the wide mode's own 8192: a finding
    assert f"env_file          {files / 'inference.env'}" in loopless.stdout
    rendered = cli("render-gates", "--log", "gpu-box.log", "--vram-kv-mib", "4608", "--env-prefix", "LAB", "--json",
                   cwd=files)
    (files / "lab.env").write_text(json.loads(rendered.stdout)["env_text"])
    (files / "fleet.toml").write_text(f'[services.lab]\nlog = "{files / "gpu-box.log"}"\n'
                                      f'env_file = "{files / "lab.env"}"\n')
    loopless, on_loop = both("verify-deploy", "--config", files / "fleet.toml", "--service", "lab", cwd=files)
    assert loopless == on_loop
    # The env file asks for 4,608 MiB of KV; the boot deployed 4,096: the check runs and fails.
    assert loopless.returncode == 3 and "LAB_VRAM_KV_MIB=4608" in loopless.stdout


VLLM_LOG = Path(__file__).parent / "fixtures" / "ledgers" / "vllm" / "heldout_v0.8_16gib_47x.log"


@pytest.mark.parametrize("argv", [
    ("compute-ceiling", "--log", VLLM_LOG, "--json"),
    ("compute-ceiling", "--log-text-file", VLLM_LOG, "--json"),
    ("read-budget-table", "--log", VLLM_LOG),
    ("check-pool-contract", "--log", VLLM_LOG, "--pool-mib", "4096", "--seqs", "1"),
    ("plan-free-vram", "--log", VLLM_LOG),
], ids=lambda argv: f"{argv[0]} {argv[1]}")
def test_another_engines_log_reads_without_a_loop_as_on_one(both: Any, argv: tuple[str, ...]) -> None:
    # radiance's ledgers load no other engine's dialect (test_cli_imports.py): a vLLM log loads it when read.
    loopless, on_loop = both(*argv)
    assert loopless == on_loop
    assert loopless.stdout or f"{VLLM_LOG} (vllm boot 1 of 1" in loopless.stderr  # read, in its dialect
    if argv[0] == "compute-ceiling":
        assert json.loads(loopless.stdout)["ceiling_mib"] == 13244


@pytest.mark.slow
def test_a_read_past_the_time_limit_stops_with_the_same_error(
    both: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(offload, "READ_TIMEOUT_S", 1.0)
    sparse = tmp_path / "sparse.log"
    with open(sparse, "wb") as stream:
        stream.truncate(SPARSE_BYTES)
    start = time.monotonic()
    loopless, on_loop = both("read-budget-table", "--log", sparse)
    assert loopless == on_loop
    assert loopless.returncode == 1 and not loopless.stdout
    assert loopless.stderr == (f"radiance-mcp: {sparse}: stopped after the 1 s limit for reading and parsing one "
                               f"input here; {SLOW_FILE_REMEDY}\n")
    assert time.monotonic() - start < 30  # each stopped at its limit, not at the end of 64 GiB


def test_one_side_that_cannot_be_read_fails_the_audit_alike(both: Any, files: Path) -> None:
    # The proven side is missing: the candidate's read never starts without a loop, and leaves no coroutine behind.
    loopless, on_loop = both("audit-step-shape", "--proven-log", "gone.log", "--candidate-log", "two.log", cwd=files)
    gc.collect()  # a coroutine never awaited would warn here, and warnings fail the suite
    assert loopless == on_loop
    assert loopless.returncode == 1 and "gone.log: no such file" in loopless.stderr


def test_a_plan_of_local_services_runs_without_a_loop_and_names_the_unreadable_one(
    both: Any, tmp_path: Path, boot_text: BootBuilder
) -> None:
    (tmp_path / "left.log").write_text(boot_text(name="left"))
    (tmp_path / "fleet.toml").write_text(
        f'[services.left]\nlog = "{tmp_path / "left.log"}"\ncards = ["lab:0"]\n\n'
        f'[services.right]\nlog = "{tmp_path / "right.log"}"\ncards = ["lab:0"]\n'
    )
    loopless, on_loop = both("plan-free-vram", "--config", tmp_path / "fleet.toml", "--service", "left", "--json")
    assert loopless == on_loop and loopless.returncode == 0, loopless.stderr
    result = json.loads(loopless.stdout)
    assert [entry["service"] for entry in result["unreadable"]] == ["right"]
    assert "right.log: no such file" in result["unreadable"][0]["error"]  # one service's plan: its own reason


@pytest.mark.slow
def test_a_service_on_a_host_still_runs_on_a_loop(
    cli: CliRunner, asyncssh_host: LoopbackHost, tmp_path: Path, boot_text: BootBuilder,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    log = asyncssh_host.write_log(boot_text(name="far-box"))
    entry = asyncssh_host.host_entry()
    config = tmp_path / "fleet.toml"
    config.write_text(
        "[hosts.far]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in entry.items())
        + f'\n[services.far-box]\nhost = "far"\nlog = "{log}"\n'
    )
    runs: list[object] = []
    real_run = asyncio.run

    def counted(call: Any) -> Any:
        runs.append(call)
        return real_run(call)

    monkeypatch.setattr(asyncio, "run", counted)
    ran = cli("compute-ceiling", "--config", config, "--service", "far-box", "--json")
    assert ran.returncode == 0, ran.stderr
    assert len(runs) == 1
    result = json.loads(ran.stdout)
    assert result["ceiling_mib"] == 30969 and result["ledger"]["origin"] == "host"
    # A local file of the same fleet needs no loop.
    (tmp_path / "near.log").write_text(boot_text(name="near-box"))
    with config.open("a") as stream:
        stream.write(f'\n[services.near-box]\nlog = "{tmp_path / "near.log"}"\n')
    ran = cli("compute-ceiling", "--config", config, "--service", "near-box", "--json")
    assert ran.returncode == 0 and json.loads(ran.stdout)["ceiling_mib"] == 30969
    assert len(runs) == 1


def test_a_coroutine_that_needs_a_loop_is_refused_not_left_hanging() -> None:
    closed: list[bool] = []

    async def sleeps() -> int:
        try:
            await asyncio.sleep(0)  # a turn of the loop: there is none to take it
            return 1
        finally:
            closed.append(True)

    with pytest.raises(RuntimeError, match="driven without an event loop awaited"):
        offload.drive(sleeps())
    assert closed == [True]


# ---------------------------------------------------------------------------------------
# In a process of its own: what only a process shows (a signal, a closed pipe)


def _spawn(*argv: str | os.PathLike[str], cwd: Path) -> subprocess.Popen[bytes]:
    env = {name: value for name, value in os.environ.items() if name != CONFIG_ENV}
    return subprocess.Popen([sys.executable, "-m", "radiance_mcp", *map(str, argv)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _holds_open(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc to see the read under way")
def test_ctrl_c_during_a_read_without_a_loop_exits_130_quietly(tmp_path: Path) -> None:
    sparse = tmp_path / "sparse.log"
    with open(sparse, "wb") as stream:
        stream.truncate(SPARSE_BYTES)
    with _spawn("read-budget-table", "--log", sparse, cwd=tmp_path) as process:
        deadline = time.monotonic() + HANG_S
        while not _holds_open(process.pid, sparse) and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.01)
        assert _holds_open(process.pid, sparse), "the read never started"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=HANG_S)
    assert process.returncode == 130 and out == b"" and err == b""


@pytest.mark.slow
def test_a_reader_that_leaves_ends_a_command_without_a_loop_as_sigpipe_would(tmp_path: Path) -> None:
    with _spawn("compute-ceiling", "--log", EXAMPLES_DIR / "frank-archon.log", cwd=tmp_path) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # as `| head -0` does, before the command prints
        err = process.stderr.read()
        status = process.wait(timeout=HANG_S)
    assert status == 141 and err == b""  # 128 + SIGPIPE, as a shell tool killed by the pipe
