"""evals/README.md works as written from a fresh clone (issue 26, item 3): every command of its ``sh``
blocks starts in ``.venv/bin/`` (where the README's install puts it) and names what exists: a radiance-mcp
subcommand and options its parser takes, the files, scenarios and agents it names, Inspect's task file and
its -T parameters, the pip extra; every ``radiance-mcp ...`` the text quotes parses too. Inspect's own
``logs/`` folder is ignored by git. The cheap commands also run (slow)."""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
from cli_run import CliRunner

from radiance_mcp.app import cli as cli_module
from radiance_mcp.evals.agents import AGENTS
from radiance_mcp.tools import FAMILIES, family

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "evals" / "README.md").read_text()
BLOCKS = re.findall(r"```sh\n(.*?)```", README, re.S)
COMMANDS = [shlex.split(line, comments=True) for block in BLOCKS for line in block.splitlines() if line.strip()]
QUOTED = [shlex.split(span) for span in re.findall(r"`(radiance-mcp [^`]+)`", README)]
"""The commands the text quotes, with placeholders (FLEET, RUN.jsonl, <name>) in place of files."""
PREFIX = ".venv/bin/"


def _parsed(argv: list[str]) -> tuple[str, dict[str, object]]:
    """The subcommand and the options radiance-mcp's own parser reads from argv (a usage error fails)."""
    parser = cli_module._parser([spec for module in FAMILIES for spec in family(module)])
    args, extra = parser.parse_known_args(argv)
    assert not extra and args.command, f"radiance-mcp {shlex.join(argv)}: not a command it takes ({extra})"
    return args.command, vars(args)


def test_every_command_starts_where_the_install_puts_it() -> None:
    assert len(COMMANDS) >= 10
    assert all(argv[0].startswith(PREFIX) for argv in COMMANDS), [argv[0] for argv in COMMANDS]
    assert {argv[0] for argv in COMMANDS} == {PREFIX + "radiance-mcp", PREFIX + "inspect", PREFIX + "pip"}


def test_every_radiance_mcp_command_names_what_exists() -> None:
    for argv in [a[1:] for a in COMMANDS if a[0] == PREFIX + "radiance-mcp"]:
        command, args = _parsed(argv)
        assert command == "eval"
        for name in ("record", "answer"):
            assert args[name] is None or (ROOT / str(args[name])).is_file(), argv
        scenarios = args["scenario"]
        assert isinstance(scenarios, list)
        assert all((ROOT / "evals" / "scenarios" / f"{name}.toml").is_file() for name in scenarios), argv
        assert args["agent"] == "all" or args["agent"] in AGENTS, argv
    for argv in QUOTED:
        _parsed(argv[1:])


def test_every_inspect_and_pip_command_names_what_exists() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for argv in COMMANDS:
        if argv[0] == PREFIX + "pip":
            extra = re.fullmatch(r"\.\[(\w+)\]", argv[-1])
            assert argv[1:3] == ["install", "-e"] and extra, argv
            assert extra[1] in pyproject["project"]["optional-dependencies"]
        elif argv[0] == PREFIX + "inspect":
            assert argv[1] == "eval" and (ROOT / argv[2]).is_file(), argv
            task = next(node for node in ast.walk(ast.parse((ROOT / argv[2]).read_text()))
                        if isinstance(node, ast.FunctionDef) and node.name == "radiance")
            params = {a.arg for a in task.args.args}
            given = [argv[i + 1].split("=", 1)[0] for i, word in enumerate(argv) if word == "-T"]
            assert set(given) <= params, argv


def test_inspects_logs_folder_is_ignored_by_git() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = subprocess.run(["git", "check-ignore", "-q", "logs/2026-12-02T04-00-00_radiance.eval"], cwd=ROOT,
                             capture_output=True, timeout=30, check=False)
    assert ignored.returncode == 0, "logs/ (Inspect's log folder) is not in .gitignore"


@pytest.mark.slow
@pytest.mark.parametrize("argv", [a for a in COMMANDS if a[0] == PREFIX + "radiance-mcp"
                                  and ("--list" in a or "--record" in a)], ids=shlex.join)
def test_the_quick_commands_run_as_written(argv: list[str], cli: CliRunner) -> None:
    ran = cli(*argv[1:], cwd=ROOT)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert ran.stdout.strip()
