"""Every command a person meets, as the terminal shows it at 120 columns (issue 26, item 3): each subcommand's
--help, each tool command on a recorded boot of every engine (radiance's example, vLLM, SGLang, llama.cpp from
tests/fixtures/ledgers/) and on the demo fleet, doctor and eval. No line of stdout past 120 columns, and
nothing of ours that reads as code: no 'None', no JSON object ('{"'), no Python True or False, on stdout or in
an error. An error is one line when piped (grep, logs) and wrapped within the columns on a terminal.

The commands run in this process (tests/support/cli_run.py) with COLUMNS=120, as a 120-column terminal sets it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from cli_run import CliRunner, Ran

from radiance_mcp.sources.config import CONFIG_ENV

ROOT = Path(__file__).resolve().parents[1]
LEDGERS = ROOT / "tests" / "fixtures" / "ledgers"
EXAMPLES = ROOT / "radiance_mcp" / "examples"
COLUMNS = 120
ENGINES = {
    # engine: a boot that settled, with the figures a ceiling needs; an earlier boot of that engine (the proven);
    # render-gates' pool for it, below the ceiling (llama.cpp's follows from the window: none given)
    "radiance": (EXAMPLES / "frank-archon.log", EXAMPLES / "qwen38-bf16.log", ("--vram-kv-mib", "6000")),
    "vllm": (LEDGERS / "vllm" / "v0.6_llama3.1-8b_20k.log", LEDGERS / "vllm" / "v1_fp8_100k.log",
             ("--vram-kv-mib", "3000")),
    "sglang": (LEDGERS / "sglang" / "heldout_v0.5.10_one_gpu_no_graphs.log",
               LEDGERS / "sglang" / "heldout_tp4_qwen3-235b-fp8.log", ("--vram-kv-mib", "30000")),
    "llamacpp": (LEDGERS / "llamacpp" / "heldout_b4641_ci_v100_pythia-2.8b.log",
                 LEDGERS / "llamacpp" / "recorded_llama-cpp-python-0.3.36_gemma3-270m.log", ()),
}
JSON_OBJECT = re.compile(r'\{"\w+":')
"""A JSON object as json.dumps prints one."""
OURS = re.compile(r"(?<![=\w'\"])(?<!': )(?<!\": )(None|True|False)\b(?!['\"])")
"""A Python value of ours ('line None', 'ok  False'); an engine's own 'revision=None' or 'enforce_eager=False' in a
quoted ledger line, or "'use_v2': True" in a Python dict it printed, is the engine's text."""
DEMO_COMMANDS = [
    ("list-fleet",),
    ("read-budget-table", "--service", "twin"),
    ("compute-ceiling", "--service", "twin"),
    ("check-pool-contract", "--service", "lowpool"),
    ("audit-step-shape", "--proven-service", "qwen38-proven", "--candidate-service", "qwen38-wide"),
    ("audit-step-shape", "--service", "frank-archon"),
    ("check-serve-script", "--service", "qwen38-wide"),
    ("compare-dry-run", "--service", "qwen38-wide", "--proven-mode", "proven", "--candidate-mode", "wide"),
    ("token-count-probe", "--service", "frank-archon", "--text", "The resize procedure, in the engine's words."),
    ("boundary-probe", "--service", "frank-archon", "--n", "2", "--gen-tokens", "64", "--execute"),
    ("decode-probe", "--service", "frank-archon", "--context-tokens", "8000", "--gen-tokens", "256"),
    ("plan-free-vram",),
    ("plan-free-vram", "--service", "twin"),
    ("render-gates", "--service", "frank-archon", "--vram-kv-mib", "6000", "--seqs", "2"),
    ("verify-deploy", "--service", "frank-archon"),
    ("compute-ceiling", "--service", "frank-archon", "--reserves", '[{"mib": 256, "label": "safety"}]'),
]
ARMS = json.dumps([{"value": v, "rate": r} for v, r in ((22_208, 3_397), (24_000, 3_290), (25_600, 3_584))])


@pytest.fixture(autouse=True)
def no_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)


def unreadable(ran: Ran) -> list[str]:
    """What breaks the rules in a command's output: lines of stdout past COLUMNS, and our code-like values (None,
    True, False, a JSON object) on stdout or stderr."""
    found = [f"line {k} is {len(line)} columns: {line!r}" for k, line in enumerate(ran.stdout.splitlines(), 1)
             if len(line) > COLUMNS]
    for stream, text in (("stdout", ran.stdout), ("stderr", ran.stderr)):
        found += [f"{stream} shows {hit[0]!r}: ...{text[max(hit.start() - 60, 0):hit.end() + 20]!r}"
                  for pattern in (OURS, JSON_OBJECT) for hit in pattern.finditer(text)]
    return found


def run(cli: CliRunner, tmp_path: Path, *argv: str | Path) -> Ran:
    ran = cli(*argv, cwd=tmp_path, env={"COLUMNS": str(COLUMNS)})
    assert ran.returncode != 2, ran.stderr  # a usage error would test nothing
    problems = unreadable(ran)
    assert not problems, "\n".join([" ".join(map(str, argv)), *problems])
    return ran


def test_the_check_fails_on_each_kind_of_violation() -> None:
    assert unreadable(Ran(0, "x" * 121, "")) and not unreadable(Ran(0, "x" * 120, "e" * 500))
    for bad in ("slope  line None", "ok  False", "verified  True", 'ledger  {"source": "x"}'):
        assert unreadable(Ran(0, bad, "")) and unreadable(Ran(1, "", bad)), bad
    for engines in ("line 3: INFO revision=None, enforce_eager=False", "  'use_v2': True"):
        assert not unreadable(Ran(0, engines, "")), engines


@pytest.mark.parametrize("command", ["", "serve", "demo", "eval", "doctor", "read-budget-table", "compute-ceiling",
                                     "check-pool-contract", "audit-step-shape", "check-serve-script",
                                     "compare-dry-run", "token-count-probe", "boundary-probe", "decode-probe",
                                     "list-fleet", "compare-arms", "plan-free-vram", "render-gates", "verify-deploy"])
def test_every_help_fits(cli: CliRunner, tmp_path: Path, command: str) -> None:
    """--help within the columns and with no Python value; a JSON object only in the example of an option that
    takes JSON ('e.g. [{"mib": 256, ...}]': the shape a person types)."""
    ran = cli(*([command] if command else []), "--help", cwd=tmp_path, env={"COLUMNS": str(COLUMNS)})
    assert ran.returncode == 0 and "usage: radiance-mcp" in ran.stdout
    examples = re.compile(r"e\.g\. \[.*?\](?=\s|$)", re.DOTALL)
    problems = unreadable(Ran(ran.returncode, examples.sub("e.g. [...]", ran.stdout), ran.stderr))
    assert not problems, "\n".join([command, *problems])


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_every_tool_command_on_each_engines_boot(cli: CliRunner, tmp_path: Path, engine: str) -> None:
    log, proven, pool = ENGINES[engine]
    for command in ("read-budget-table", "compute-ceiling"):
        assert run(cli, tmp_path, command, "--log", log).returncode == 0
    assert run(cli, tmp_path, "check-pool-contract", "--log", log, "--seqs", "2").returncode in (0, 1, 3)
    assert run(cli, tmp_path, "audit-step-shape", "--proven-log", proven, "--candidate-log", log).returncode in (0, 3)
    assert run(cli, tmp_path, "plan-free-vram", "--log", log).returncode == 0
    gates = ("render-gates", "--log", log, "--seqs", "1", *pool)
    assert run(cli, tmp_path, *gates).returncode == 0
    env = tmp_path / f"{engine}.env"
    env.write_text(json.loads(cli(*gates, "--json", cwd=tmp_path).stdout)["env_text"])
    assert run(cli, tmp_path, "verify-deploy", "--log", log, "--env-text-file", env).returncode in (0, 3)


@pytest.mark.parametrize("argv", DEMO_COMMANDS, ids=lambda argv: " ".join(argv[:3]))
def test_every_tool_command_on_the_demo_fleet(cli: CliRunner, tmp_path: Path, argv: tuple[str, ...]) -> None:
    assert run(cli, tmp_path, argv[0], "--demo", *argv[1:]).returncode in (0, 1, 3)


def test_doctor_eval_and_compare_arms(cli: CliRunner, tmp_path: Path) -> None:
    assert run(cli, tmp_path, "doctor", "--demo").returncode == 3  # qwen38-wide refused to boot: its rows fail
    assert run(cli, tmp_path, "doctor").returncode == 1  # no fleet file: the error names the remedy
    assert run(cli, tmp_path, "eval", "--list").returncode == 0
    faulty = run(cli, tmp_path, "eval", "--agent", "decode-8", "--scenario", "eight-token-decode-trap")
    assert faulty.returncode == 0 and "at least 128\n    generated tokens" in faulty.stdout  # its evidence, wrapped
    assert run(cli, tmp_path, "compare-arms", "--knob", "slab MiB", "--claim", "threshold", "--arms", ARMS,
               ).returncode == 3


def test_an_error_is_one_line_piped_and_wrapped_on_a_terminal(
        cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ("compute-ceiling", "--log", ENGINES["vllm"][1])  # no ceiling: the figures it lacks and where to find them
    piped = cli(*argv, cwd=tmp_path, env={"COLUMNS": str(COLUMNS)})
    assert piped.returncode == 1 and len(piped.stderr.splitlines()) == 1 and len(piped.stderr) > 3 * COLUMNS
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    shown = cli(*argv, cwd=tmp_path, env={"COLUMNS": str(COLUMNS)})
    lines = shown.stderr.splitlines()
    assert shown.returncode == 1 and len(lines) > 3 and max(map(len, lines)) <= COLUMNS
    assert all(line.startswith("  ") for line in lines[1:])
    assert " ".join(line.strip() for line in lines).split() == piped.stderr.split()  # every word kept, in order


def test_a_quoted_line_of_thousands_of_characters_is_cut(cli: CliRunner, tmp_path: Path) -> None:
    """SGLang's server_args line (10,900 characters) was 90 lines of compute-ceiling's sources; --json keeps it."""
    log = ENGINES["sglang"][0]
    ran = run(cli, tmp_path, "compute-ceiling", "--log", log)
    flowing = " ".join(ran.stdout.split())  # the cut's note wraps like any text
    assert "skip_server_warmup=False, ... (10,418 characters more: --json quotes the line whole)" in flowing
    assert len(ran.stdout.splitlines()) < 60 and "31,482" in ran.stdout
    whole = json.loads(cli("compute-ceiling", "--log", log, "--json", cwd=tmp_path).stdout)
    assert max(len(source["text"]) for source in whole["sources"]) > 10_000
