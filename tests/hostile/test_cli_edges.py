"""The CLI's edges as a person meets them (issue 10, defects 5 and 9).

A config that is a FIFO, a device or nested 500 deep; ports out of range or in use;
addresses that are not this machine's; SIGTERM during the demo; relative script paths.
Every case ends with a message naming the input, the rule and the remedy, never a
traceback or a hang (each run has a generous deadline, so a hang fails instead of blocking).
Most run main(argv) in this process (the cli fixture, tests/support/cli_run.py); a port in use and
SIGTERM run as a process, since the socket held and the signal are a process's.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_run import CliRunner, Ran
from http_process import free_port

from radiance_mcp.sources.config import EXAMPLES_DIR

EXAMPLE_LOG = str(EXAMPLES_DIR / "frank-archon.log")
DEADLINE_S = 60


def _cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "radiance_mcp", *args], capture_output=True, text=True,
                          timeout=DEADLINE_S, cwd=cwd, env=env)


def _no_traceback(proc: Ran | subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr and "Error:" not in proc.stderr.replace("radiance-mcp", ""), proc.stderr


def test_a_config_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path, cli: CliRunner) -> None:
    fifo = tmp_path / "fleet.toml"
    os.mkfifo(fifo)  # nothing ever writes to it
    proc = cli("compute-ceiling", "--config", str(fifo), "--log", EXAMPLE_LOG)
    assert proc.returncode == 1
    assert f"config file {fifo} is a FIFO, socket or device, not a regular file; pass the fleet TOML file itself" \
        in proc.stderr
    _no_traceback(proc)


@pytest.mark.parametrize("nested", ["[" * 500 + "]" * 500, "{ k = " * 500 + "0" + " }" * 500])
def test_a_config_nested_500_deep_is_a_config_error(tmp_path: Path, nested: str, cli: CliRunner) -> None:
    config = tmp_path / "deep.toml"
    config.write_text(f"[server]\nlog_roots = []\n[models.m]\nextra = {nested}\n", encoding="utf-8")
    proc = cli("serve", "--config", str(config))
    assert proc.returncode == 1
    assert f"config file {config} nests arrays or tables too deeply to parse" in proc.stderr
    _no_traceback(proc)


@pytest.mark.parametrize("port", ["70000", "-1", "0", "65536", "8k", "99999999999999999999999"])
def test_a_port_out_of_range_is_a_usage_error(port: str, cli: CliRunner) -> None:
    proc = cli("serve", "--http", "--port", port)
    assert proc.returncode == 2
    assert f"argument --port: {port!r} is not a TCP port: give a whole number from 1 to 65535" in proc.stderr
    _no_traceback(proc)


@pytest.mark.slow
def test_a_port_in_use_exits_1_naming_it() -> None:
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        proc = _cli("serve", "--http", "--port", str(port))
    # 1: an error; 3 would claim that a check ran and failed.
    assert proc.returncode == 1, proc.stderr
    assert f"--host 127.0.0.1 --port {port}: cannot listen" in proc.stderr
    assert "stop it or pass another --port" in proc.stderr
    _no_traceback(proc)


@pytest.mark.parametrize(
    ("host", "says"),
    [
        ("192.0.2.77", "that is not an address of this machine; bind one of its addresses"),  # TEST-NET-1
        ("no-such-host.invalid", "'no-such-host.invalid' does not resolve"),
    ],
)
def test_an_address_not_of_this_machine_exits_1(host: str, says: str, cli: CliRunner) -> None:
    proc = cli("serve", "--http", "--host", host, "--port", "8123", "--token", "a-long-enough-secret")
    assert proc.returncode == 1, proc.stderr
    assert says in proc.stderr
    _no_traceback(proc)


# ---------------------------------------------------------------------------------------
# SIGTERM and the demo's temporary directory


def _wait_for_fleet(tmp_path: Path, proc: subprocess.Popen[bytes]) -> Path:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        found = [d for d in tmp_path.glob("radiance-demo-*") if (d / "fleet.toml").exists()]
        if found:
            return found[0]
        assert proc.poll() is None, "the demo ended before its fleet started"
        time.sleep(0.1)
    raise AssertionError("the demo's fleet did not start")


def _processes_naming(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in args:
            found.append(args)
    return found


def _read_line(proc: subprocess.Popen[bytes]) -> bytes:
    """The next line of the process's stdout, within the deadline (a hang fails instead of blocking)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], DEADLINE_S)
    assert ready, f"no line on stdout within {DEADLINE_S} s"
    return proc.stdout.readline()


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    """Until the served demo has accepted a connection on port."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "the served demo did not listen"
            time.sleep(0.05)


def _wait_under_way(command: tuple[str, ...], proc: subprocess.Popen[bytes]) -> None:
    """Until the demo's walk has called a tool, or the served demo has answered a client."""
    if command == ("demo",):
        while not (line := _read_line(proc)).startswith(b"   > "):  # a step's tool call
            assert line, "the demo ended before its walk called a tool"
    elif "--http" in command:
        _wait_listening(int(command[-1]), proc)
    else:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        ).encode() + b"\n")
        proc.stdin.flush()
        assert "result" in json.loads(_read_line(proc))


def _sigterm_ends_it(tmp_path: Path, argv: list[str],
                     under_way: Callable[[subprocess.Popen[bytes]], None] | None = None) -> None:
    """Run python argv with its temporary files in tmp_path and, once the demo's fleet has started
    and under_way(proc) has returned, SIGTERM it (under_way None: it sends its own): the exit is 143
    and leaves no directory or process behind."""
    # Unbuffered: the walk's lines reach the pipe as they are printed (the demo's whole output,
    # about 16 KiB, fits the pipe, so the process never waits for this test to read).
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, *argv], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)  # select sees every byte
    try:
        if under_way is not None:
            _wait_for_fleet(tmp_path, proc)
            under_way(proc)
            proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=DEADLINE_S)  # stdin stays open: the exit may not wait for it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        proc.stdout.close()
    assert status == 128 + signal.SIGTERM
    assert sorted(tmp_path.rglob("*")) == []  # the fleet's directory is gone
    assert _processes_naming(str(tmp_path)) == []  # the demo's own MCP server ended with it


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [("demo",), ("serve", "--demo"), ("serve", "--demo", "--http", "--port", "0")],
    ids=["demo", "serve-demo-stdio", "serve-demo-http"],
)
def test_sigterm_removes_the_demos_temporary_directory(tmp_path: Path, command: tuple[str, ...]) -> None:
    if "--http" in command:
        command = (*command[:-1], str(free_port()))
    # SIGTERM reaches the walk (or the server) at work.
    _sigterm_ends_it(tmp_path, ["-m", "radiance_mcp", *command], lambda proc: _wait_under_way(command, proc))


TRIPWIRE = """\
import logging, signal, sys
from radiance_mcp.app import cli, server

class Tripwire(dict):  # a logger's level cache, which setLevel clears holding logging's lock
    armed = False
    def clear(self):
        if Tripwire.armed:
            Tripwire.armed = False
            signal.raise_signal(signal.SIGTERM)
        super().clear()

logging.getLogger("tripwire")._cache = Tripwire()
build = server.http_app
def http_app(*args, **kwargs):  # built once the socket listens; it sets the SDK loggers' levels
    Tripwire.armed = True
    return build(*args, **kwargs)
server.http_app = http_app
sys.exit(cli.main())
"""
"""serve --demo --http with SIGTERM sent while the main thread holds logging's lock, as setLevel
(http_app's, uvicorn's logging config) holds it in Python 3.11 (the CI hang: a py-spy dump showed the
fleet's thread waiting for that lock to log its uvicorn's stop, and the main thread joining it)."""


@pytest.mark.slow
def test_sigterm_while_the_http_app_is_built_holding_loggings_lock_exits(tmp_path: Path) -> None:
    argv = ["-c", TRIPWIRE, "serve", "--demo", "--http", "--port", str(free_port())]
    _sigterm_ends_it(tmp_path, argv)


AGAIN_AS_IT_CLEANS_UP = """\
import shutil, signal, sys
from radiance_mcp.app import cli

remove = shutil.rmtree
def rmtree(*args, **kwargs):  # the demo's directory is being removed
    signal.raise_signal(signal.SIGTERM)
    return remove(*args, **kwargs)
shutil.rmtree = rmtree
sys.exit(cli.main())
"""
"""serve --demo with a second SIGTERM sent as the first one's unwinding removes the directory."""


@pytest.mark.slow
def test_a_second_sigterm_does_not_cut_the_first_ones_cleanup_short(tmp_path: Path) -> None:
    command = ("serve", "--demo")
    _sigterm_ends_it(tmp_path, ["-c", AGAIN_AS_IT_CLEANS_UP, *command], lambda proc: _wait_under_way(command, proc))


@pytest.mark.slow
def test_sigterm_while_a_request_body_is_awaited_exits(tmp_path: Path) -> None:
    port = free_port()
    with contextlib.ExitStack() as held:

        def request_half_sent(proc: subprocess.Popen[bytes]) -> None:
            """A request whose head is read and whose body never comes, held open across the SIGTERM."""
            _wait_listening(port, proc)
            client = held.enter_context(socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S))
            client.sendall(f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
                           "accept: application/json, text/event-stream\r\ncontent-length: 100\r\n"
                           "expect: 100-continue\r\n\r\n".encode())
            # The server asks for the body when the app reads it: the request is in flight.
            assert client.recv(100).startswith(b"HTTP/1.1 100 Continue")

        _sigterm_ends_it(tmp_path, ["-m", "radiance_mcp", "serve", "--demo", "--http", "--port", str(port)],
                         request_half_sent)


# ---------------------------------------------------------------------------------------
# Relative script paths (defect 5)

SCRIPT = """\
#!/usr/bin/env bash
# {label}
if [ "$2" = "--dry-run" ]; then printf '%s\\n' engine --mode "$1" --from {label}; exit 0; fi
exec false
"""


def test_a_relative_serve_script_in_the_config_is_refused_naming_the_key(tmp_path: Path, cli: CliRunner) -> None:
    (tmp_path / "launch.sh").write_text(SCRIPT.format(label="here"), encoding="utf-8")
    config = tmp_path / "fleet.toml"
    config.write_text('[services.lab]\nserve_script = "launch.sh"\n', encoding="utf-8")
    proc = cli("compare-dry-run", "--config", str(config), "--service", "lab", "--proven-mode", "a",
                "--candidate-mode", "b", cwd=tmp_path)
    assert proc.returncode == 1
    assert "services.lab: serve_script: 'launch.sh' is not an absolute path; write it from '/' or '~'" in proc.stderr
    _no_traceback(proc)


@pytest.mark.slow
def test_a_relative_script_runs_the_file_that_was_read_not_one_on_path(tmp_path: Path, cli: CliRunner) -> None:
    work, decoys = tmp_path / "work", tmp_path / "bin"
    work.mkdir()
    decoys.mkdir()
    for directory, label in ((work, "here"), (decoys, "decoy")):
        script = directory / "launch.sh"
        script.write_text(SCRIPT.format(label=label), encoding="utf-8")
        script.chmod(0o755)
    env = {"PATH": f"{decoys}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = cli("compare-dry-run", "--script", "launch.sh", "--proven-mode", "slim", "--candidate-mode", "wide",
                "--json", cwd=work, env=env)
    assert proc.returncode in (0, 3), proc.stderr
    out = json.loads(proc.stdout)
    assert out["proven"]["command"][0] == str(work / "launch.sh")
    assert out["proven"]["argv"] == ["engine", "--mode", "slim", "--from", "here"]
    assert out["candidate"]["argv"] == ["engine", "--mode", "wide", "--from", "here"]


@pytest.mark.slow
async def test_a_service_script_runs_by_the_absolute_path_that_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth, through an MCP client: a relative serve_script that got past the config
    (built in code, unvalidated) still runs the file that was read, never one found on PATH."""
    from mcp import Client

    from radiance_mcp.app.server import build_server
    from radiance_mcp.sources.config import Fleet, Service
    from radiance_mcp.sources.runtime import Runtime

    work, decoys = tmp_path / "work", tmp_path / "bin"
    for directory, label in ((work, "here"), (decoys, "decoy")):
        directory.mkdir()
        script = directory / "launch.sh"
        script.write_text(SCRIPT.format(label=label), encoding="utf-8")
        script.chmod(0o755)
    monkeypatch.chdir(work)
    monkeypatch.setenv("PATH", f"{decoys}{os.pathsep}{os.environ.get('PATH', '')}")
    runtime = Runtime(Fleet.model_construct(services={"lab": Service.model_construct(serve_script="launch.sh")}))
    async with Client(build_server(runtime)) as client:
        result = await client.call_tool("compare_dry_run", {"service": "lab", "proven_mode": "slim",
                                                            "candidate_mode": "wide"})
    assert not result.is_error, result.content
    out = result.structured_content
    assert out is not None
    assert out["proven"]["command"][0] == str(work / "launch.sh")
    assert out["proven"]["argv"] == ["engine", "--mode", "slim", "--from", "here"]
