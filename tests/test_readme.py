"""The README works as written: every command of a block marked `<!-- runnable -->` runs from the
repository root with the exit status its comment states (0 when it states none), and the example
config loads."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from radiance_mcp.config import load

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


@pytest.mark.parametrize(("command", "status"), COMMANDS, ids=[c.removeprefix(PROGRAM + " ") for c, _ in COMMANDS])
def test_a_readme_command_runs_as_written(command: str, status: int) -> None:
    argv = shlex.split(command)
    argv[0] = str(Path(sys.executable).with_name("radiance-mcp"))
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == status, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert (done.stdout if status in (0, 3) else done.stderr).strip()


def test_the_readme_example_config_loads(tmp_path: Path) -> None:
    block = re.search(r"## Configuration.*?```toml\n(.*?)```", README, re.S)
    assert block is not None
    tomllib.loads(block[1])
    path = tmp_path / "fleet.toml"
    path.write_text(block[1])
    fleet = load(str(path))
    service = fleet.service("chat-large")
    assert service.host == "gpu-a" and service.endpoint == "http://gpu-a.lan:8000"
