"""The README works as written: every command of a block marked `<!-- runnable -->` runs from the
repository root with the exit status its comment states (0 when it states none), and the example
config loads.

Each command runs in this process (the argv as written, through radiance_mcp.app.cli.main: see
tests/support/cli_run.py); the ones in SPAWNED also run as the README shows them, the console script
in a process of its own, so the installed entry point and its exit status are checked too."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from cli_run import CliRunner, Ran

from radiance_mcp.sources.config import load

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
RUNNABLE = re.compile(r"<!-- runnable -->\n```sh\n(.*?)```", re.S)
EXIT = re.compile(r"\s+#\s*exit (\d+)\b.*$")
PROGRAM = ".venv/bin/radiance-mcp"
"""How the README names the command; a test run may use another environment's copy."""


def _commands() -> list[tuple[str, int]]:
    commands = []
    for block in RUNNABLE.findall(README):
        for line in block.splitlines():
            if not line.strip():
                continue
            found = EXIT.search(line)
            commands.append((EXIT.sub("", line), int(found[1]) if found else 0))
    return commands


COMMANDS = _commands()


def test_the_readme_marks_its_terminal_examples_runnable() -> None:
    assert len(COMMANDS) >= 15
    assert all(command.startswith(PROGRAM + " ") for command, _ in COMMANDS)


SPAWNED = {
    PROGRAM + " compute-ceiling --log radiance_mcp/examples/frank-archon.log",
    PROGRAM + " check-pool-contract --pool-mib 5120 --seqs 2 --max-model-len 200000 --kv-cache-dtype bf16",
}
"""Run as a process too: a success (exit 0) and a failed check (exit 3) through the console script."""


def _check(done: Ran | subprocess.CompletedProcess[str], status: int) -> None:
    assert done.returncode == status, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert (done.stdout if status in (0, 3) else done.stderr).strip()


@pytest.mark.slow
@pytest.mark.parametrize(("command", "status"), COMMANDS, ids=[c.removeprefix(PROGRAM + " ") for c, _ in COMMANDS])
def test_a_readme_command_runs_as_written(command: str, status: int, cli: CliRunner) -> None:
    argv = shlex.split(command)
    assert argv[0] == PROGRAM
    _check(cli(*argv[1:], cwd=ROOT), status)


def test_the_spawned_commands_are_in_the_readme() -> None:
    assert SPAWNED <= {command for command, _ in COMMANDS}


@pytest.mark.slow
@pytest.mark.parametrize(("command", "status"), [(c, s) for c, s in COMMANDS if c in SPAWNED],
                         ids=[c.removeprefix(PROGRAM + " ") for c, _ in COMMANDS if c in SPAWNED])
def test_a_readme_command_runs_as_written_in_a_process(command: str, status: int) -> None:
    argv = shlex.split(command)
    argv[0] = str(Path(sys.executable).with_name("radiance-mcp"))
    _check(subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120), status)


def test_the_readme_example_config_loads(tmp_path: Path) -> None:
    block = re.search(r"## Configuration.*?```toml\n(.*?)```", README, re.S)
    assert block is not None
    tomllib.loads(block[1])
    path = tmp_path / "fleet.toml"
    path.write_text(block[1])
    fleet = load(str(path))
    service = fleet.service("chat-large")
    assert service.host == "gpu-a" and service.endpoint == "http://gpu-a.lan:8000"
