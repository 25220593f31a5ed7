"""The CLI's tables as a person reads them (issue 26, item 3): every line within the terminal's columns (120, or
COLUMNS), no JSON object in a cell, no 'None', a sentence every row repeats printed once, the figures still there.

Each tool command runs in this process (tests/support/cli_run.py) on the demo fleet or on a recorded boot of each
engine (tests/fixtures/ledgers/).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_run import CliRunner, Ran

from radiance_mcp.sources.config import CONFIG_ENV

LEDGERS = Path(__file__).parent / "fixtures" / "ledgers"
EXAMPLE = Path(__file__).parents[1] / "radiance_mcp" / "examples" / "frank-archon.log"
VLLM = LEDGERS / "vllm" / "v1_fp8_100k.log"
JSON_OBJECT = re.compile(r'\{"\w+":')
"""A JSON object as json.dumps prints one (an engine's own '{}' in a quoted line is the engine's text)."""
OUR_NONE = re.compile(r"(?<!=)\bNone\b")
"""'None' as a value of ours ('line None'); an engine's own 'revision=None' in a quoted ledger line is its text."""
AUDIT = ("audit-step-shape", "--demo", "--proven-service", "qwen38-proven", "--candidate-service", "qwen38-wide")

COMMANDS = [
    # (argv, figures a person needs, exit status)
    (("read-budget-table", "--log", str(EXAMPLE)), ["23.44 GiB (line 16)", "2.01 GiB (line 26)", "29,120"], 0),
    (("read-budget-table", "--log", str(VLLM)),
     ["10,803.20 MiB (line 1)", "230,528 tokens (line 2)", "100,000 tokens (line 3)"], 0),
    (("read-budget-table", "--log", str(LEDGERS / "sglang" / "heldout_tp4_qwen3-235b-fp8.log")),
     ["16,855.04 MiB (line 1)", "367,404 tokens (line 1)"], 0),
    (("read-budget-table", "--log", str(LEDGERS / "llamacpp" / "recorded_llama-cpp-python-0.3.36_gemma3-270m.log")),
     ["247.82 MiB (line 2, 3)", "36 MiB (line 24, 29)"], 0),
    (("read-budget-table", "--log", str(LEDGERS / "sglang" / "tp8_pool_80_layers.log")), ["sglang"], 0),
    (("compute-ceiling", "--demo", "--service", "frank-archon"), ["30,969", "29,120 + (2,058 - 209) = 30,969"], 0),
    (("compute-ceiling", "--log", str(LEDGERS / "vllm" / "v0.6_llama3.1-8b_20k.log")), ["ceiling_mib"], 0),
    (("compute-ceiling", "--log", str(LEDGERS / "sglang" / "heldout_v0.5.10_one_gpu_no_graphs.log")),
     ["ceiling_mib"], 0),
    (("compute-ceiling", "--log", str(LEDGERS / "llamacpp" / "b9849_vulkan_device_id_rs_buffer.log")),
     ["ceiling_mib"], 0),
    (("check-pool-contract", "--demo", "--service", "frank-archon"), ["pool"], 0),
    (("check-pool-contract", "--log", str(LEDGERS / "llamacpp" / "ollama_2025_four_seqs_n_ctx_per_seq.log")),
     ["pool"], 0),
    (("plan-free-vram", "--demo"), ["14,660", "most seats at the window", "qwen38-wide"], 0),
    # One service's plan: its ceiling and slope, each option's gains (and what it has now), flags and plans.
    (("plan-free-vram", "--demo", "--service", "frank-archon"),
     ["30,969 MiB/card", "0.72 slots/MiB (line 22)", "29,120 + (2,058 - 209) = 30,969", "2,058.24 MiB (line 27)",
      "--vram-kv-mib 5,120 -> 6,969", "4 seats         3 seats", "441,177 tokens", "1,155 slots", "368.11", "266",
      "--vram-weights-mib 24,000 -> 25,849", "18,749 slots  17,410 slots"], 0),
    (("plan-free-vram", "--log", str(LEDGERS / "vllm" / "v0.6_llama3.1-8b_20k.log")),
     ["19,249 MiB/card", "15,348.53 MiB (line 1)", "3,901.44 MiB (line 2)"], 0),
    (("plan-free-vram", "--log", str(LEDGERS / "sglang" / "heldout_v0.5.10_one_gpu_no_graphs.log")),
     ["31,482 MiB/card", "4,567.04 MiB (line 15)", "allows 81 seats at 32,768 tokens"], 0),
    (("plan-free-vram", "--log", str(LEDGERS / "llamacpp" / "heldout_b4641_ci_v100_pythia-2.8b.log")),
     ["41,580 tokens", "20.30 sequences", "2,684.57 MiB (line 85)"], 0),
    (AUDIT, ["+10.16 GiB", "65536", "--max-num-batched-tokens 1024", "out of memory"], 3),
    (("render-gates", "--demo", "--service", "frank-archon", "--vram-kv-mib", "6000", "--seqs", "2"), ["6000"], 0),
]


@pytest.fixture(autouse=True)
def no_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)


def _lines_within(ran: Ran, columns: int) -> None:
    wide = [line for line in ran.stdout.splitlines() if len(line) > columns]
    assert not wide, f"{len(wide)} lines over {columns} columns, the widest {max(map(len, wide))}: {wide[0]!r}"


def _id(value: object) -> str | None:
    return " ".join(Path(a).name for a in value[:3]) if isinstance(value, tuple) else None


@pytest.mark.parametrize(("argv", "figures", "status"), COMMANDS, ids=_id)
def test_every_table_fits_120_columns_and_shows_no_json_nor_none(
        cli: CliRunner, tmp_path: Path, argv: tuple[str, ...], figures: list[str], status: int) -> None:
    ran = cli(*argv, cwd=tmp_path)
    assert ran.returncode == status, ran.stderr
    _lines_within(ran, 120)
    assert not OUR_NONE.search(ran.stdout), OUR_NONE.search(ran.stdout)
    assert not JSON_OBJECT.search(ran.stdout), JSON_OBJECT.search(ran.stdout)
    assert not re.search(r"(?<![='])\{\}", ran.stdout)  # an empty mapping is '-' (the engine's own 'x={}' kept)
    missing = [figure for figure in figures if figure not in ran.stdout]
    assert not missing, ran.stdout


def test_a_plan_quotes_each_ledger_line_once(cli: CliRunner, tmp_path: Path) -> None:
    # twin's binding card reads its floor and its settled free off one line, 34: quoted once, under lines, and
    # named by its number where each figure stands; the fleet's answer has a line per service (issue 26).
    ran = cli("plan-free-vram", "--demo", "--service", "twin", cwd=tmp_path)
    assert ran.stdout.count("W card 1 settled at 1.95 GiB free") == 1, ran.stdout
    assert "card 1 engine_floor  209.19 MiB (line 34)" in ran.stdout
    assert "card 1 settled_free  1,996.80 MiB (line 34)" in ran.stdout
    assert "line 34  W card 1 settled at" in ran.stdout
    assert "decode" not in ran.stdout  # the tool's description says it, once (not every plan)


def test_columns_sets_the_width_and_json_stays_as_it_was(cli: CliRunner, tmp_path: Path) -> None:
    narrow = cli("compute-ceiling", "--log", str(EXAMPLE), cwd=tmp_path, env={"COLUMNS": "80"})
    _lines_within(narrow, 80)
    assert "30,969" in narrow.stdout
    wide = cli(*AUDIT, cwd=tmp_path, env={"COLUMNS": "200"})
    assert max(map(len, wide.stdout.splitlines())) > 120  # more room, fewer wrapped cells
    _lines_within(wide, 200)
    as_json = [cli("compute-ceiling", "--log", str(EXAMPLE), "--json", cwd=tmp_path, env={"COLUMNS": columns}).stdout
               for columns in ("40", "200")]
    assert as_json[0] == as_json[1] and json.loads(as_json[0])["ceiling_mib"] == 30_969
    assert "\n  " in as_json[0]  # --json is indented JSON, as before


def test_a_sentence_several_rows_repeat_is_printed_once(cli: CliRunner, tmp_path: Path) -> None:
    twin = cli("compute-ceiling", "--demo", "--service", "twin", cwd=tmp_path)
    assert twin.stdout.count("whether its settled free figure leaves it out") == 1, twin.stdout  # every row's ending
    assert "card 0's memory no budget can use" in twin.stdout and "card 1's memory" in twin.stdout  # each its own
    llama = cli("check-pool-contract", "--log", str(LEDGERS / "llamacpp" / "2026_alpaca_vulkan_n_seq_max_1.log"),
                cwd=tmp_path)
    assert llama.stdout.count("line 18: llama_kv_cache: size = 2048.00 MiB") == 1, llama.stdout  # two keys, one line
    assert "pool_mib, rate_bytes_per_token  line 18:" in llama.stdout
    rendered = cli("render-gates", "--demo", "--service", "frank-archon", "--vram-kv-mib", "5120", "--seqs", "2",
                   "--json", cwd=tmp_path)
    (tmp_path / "frank-archon.env").write_text(json.loads(rendered.stdout)["env_text"])
    verified = cli("verify-deploy", "--demo", "--service", "frank-archon", "--env-text-file",
                   str(tmp_path / "frank-archon.env"), cwd=tmp_path)
    verdicts = verified.stdout.split("\nverdicts:\n", 1)[1].split("\n\n", 1)[0]  # the table, to its blank line
    # The ceiling's and the settled verdicts both come from the settled line: it is quoted once.
    assert verdicts.count("W card 0 settled at") == 1, verdicts
    assert "line 27, as above" in verdicts


def test_a_column_empty_in_every_row_is_named_once_under_its_table(cli: CliRunner, tmp_path: Path) -> None:
    """The demo's services are all on this machine: no row has a host, so the column goes and is said once."""
    ran = cli("plan-free-vram", "--demo", cwd=tmp_path, env={"COLUMNS": "120"})
    rows = ran.stdout.split("\nrows:\n", 1)[1].split("\nbest:\n", 1)[0]
    assert rows.splitlines()[0].split() == ["service", "headroom_", "usable_", "options"]
    assert rows.rstrip().endswith("empty in every row  host"), rows


@pytest.mark.parametrize("command", ["read-budget-table", "compute-ceiling", "check-pool-contract"])
def test_no_none_on_any_engines_recorded_boot(cli: CliRunner, tmp_path: Path, command: str) -> None:
    """On every recorded log of every engine, the table or the refusal says '-' or names what is missing."""
    logs = sorted(LEDGERS.glob("*/*.log"))
    assert {log.parent.name for log in logs} == {"vllm", "sglang", "llamacpp"}
    for log in logs:
        ran = cli(command, "--log", str(log), cwd=tmp_path)
        assert ran.returncode in (0, 1, 3), ran.stderr
        assert not OUR_NONE.search(ran.stdout + ran.stderr), f"{command} {log.name}: {ran.stdout}{ran.stderr}"
        _lines_within(ran, 120)
