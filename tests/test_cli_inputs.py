"""The CLI for long inputs and for newcomers: --X-file for every text argument, --demo, plain help."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
from cli_run import CliRunner

from radiance_mcp.app import cli
from radiance_mcp.sources.config import EXAMPLES_DIR
from radiance_mcp.tools import TOOLS

EXAMPLE = EXAMPLES_DIR / "frank-archon.log"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_text_argument_takes_a_file_too() -> None:
    commands = next(a for a in cli._parser(TOOLS)._actions if a.dest == "command").choices  # type: ignore[union-attr]
    texts = 0
    for spec in TOOLS:
        flags = {flag for action in commands[spec.name.replace("_", "-")]._actions for flag in action.option_strings}
        for name in spec.input_model.model_fields:
            if name == "text" or name.endswith(("_text", "_argv")):
                texts += 1
                assert cli._flag(name) + "-file" in flags, (spec.name, name)
    assert texts >= 8  # log_text, script_text, env_text, text, the audit's proven_/candidate_ texts and argv


def test_a_ledger_from_a_file_and_from_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = _run(capsys, "compute-ceiling", "--log-text-file", str(EXAMPLE), "--json")
    assert code == 0 and '"ceiling_mib": 30969' in out
    assert '"origin": "caller text"' in out  # read as text the caller gave, not as a file the server read
    monkeypatch.setattr(sys, "stdin", io.StringIO(EXAMPLE.read_text()))
    code, out, _ = _run(capsys, "compute-ceiling", "--log-text-file", "-", "--json")
    assert code == 0 and '"ceiling_mib": 30969' in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("compute-ceiling", "--log-text", "x", "--log-text-file", "{example}"),
         "give --log-text or --log-text-file, not both"),
        (("compute-ceiling", "--log-text-file", "{missing}"), "--log-text-file {missing}: No such file or directory"),
        (("compute-ceiling", "--demo", "--config", "{example}", "--service", "x"),
         "--demo runs against a simulated fleet"),
    ],
)
def test_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...], message: str) -> None:
    values = {"example": str(EXAMPLE), "missing": str(tmp_path / "missing.log")}
    code, out, err = _run(capsys, *(a.format(**values) for a in argv))
    assert code in (1, 2) and not out and message.format(**values) in err and "Traceback" not in err


def test_a_misspelled_file_flag_is_named_with_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "compute-ceiling", "--log-txt-file", str(EXAMPLE))
    assert code == 2 and "--log-text-file" in err


def test_help_speaks_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    top = capsys.readouterr().out
    assert "boot ledger" in top and "radiance-mcp demo" in top and "exit status" in top
    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    demo = capsys.readouterr().out
    assert "simulated radiance fleet" in demo and "no GPU" in demo


def test_demo_runs_a_tool_against_the_simulated_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "compute-ceiling", "--demo", "--service", "frank-archon", "--json")
    assert code == 0, err
    assert '"ceiling_mib": 30969' in out


def test_a_required_text_from_its_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # token-count-probe requires its text: --text-file gives it (no service configured: the error is about that).
    text = tmp_path / "corpus.txt"
    text.write_text("word " * 1000)
    code, _, err = _run(capsys, "token-count-probe", "--service", "nowhere", "--text-file", str(text))
    assert code == 1 and "nowhere" in err and "--text" not in err
    code, _, err = _run(capsys, "token-count-probe", "--service", "nowhere")
    assert code == 2 and "--text" in err


@pytest.mark.slow
def test_a_long_probe_shows_progress_on_a_terminal_and_none_when_piped(tmp_path: Path, cli: CliRunner) -> None:
    import shutil
    import subprocess

    program = str(Path(sys.executable).with_name("radiance-mcp"))
    argv = [program, "boundary-probe", "--demo", "--service", "frank-archon", "--n", "2", "--gen-tokens", "64",
            "--execute"]
    piped = cli(*argv[1:])  # in this process, stderr captured: not a terminal, as when piped
    assert piped.returncode == 0, piped.stderr
    assert "[1/2]" not in piped.stderr and "[2/2]" not in piped.stderr
    if shutil.which("script") is None:
        pytest.skip("util-linux's script gives the command a terminal; not installed")
    # stderr on a terminal (script's pty), stdout to a file: the progress line is on the terminal only.
    command = " ".join(argv) + f" > {tmp_path / 'out.txt'}"
    shown = subprocess.run(["script", "-qec", command, "/dev/null"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stdout
    # The two requests run concurrently: either may be the first to come back.
    assert re.search(r"\[1/2\] request [12]/2", shown.stdout) and re.search(r"\[2/2\] request [12]/2", shown.stdout)
    assert "request 1/2: retrieved" in shown.stdout and "request 2/2: retrieved" in shown.stdout
    assert "[1/2]" not in (tmp_path / "out.txt").read_text()
