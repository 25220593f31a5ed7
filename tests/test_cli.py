"""cli: one subcommand per tool; exit 0 ok, 1 error or refusal, 2 usage, 3 a check that ran and failed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from radiance_mcp.app.cli import main
from radiance_mcp.sources.config import CONFIG_ENV


@pytest.fixture(autouse=True)
def no_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)


def fill(argv: tuple[str, ...], **values: str) -> list[str]:
    """'{example}' and the like in an argument, replaced (str.format would trip on the JSON braces)."""
    out = []
    for arg in argv:
        for name, value in values.items():
            arg = arg.replace("{" + name + "}", value)
        out.append(arg)
    return out


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's usage errors and --help
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


POOL = ("check-pool-contract", "--seqs", "2", "--max-model-len", "200000", "--kv-cache-dtype")


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (("compute-ceiling", "--log", "{example}"), 0),
        (("read-budget-table", "--log", "{example}"), 0),
        (("compute-ceiling", "--log-text", "{example_text}"), 0),
        # the unclaimed row less the floor (477.30 - 209.19) may back a reserve; the headroom, in the floor, may not
        (("compute-ceiling", "--log", "{example}", "--reserves", '[{"mib": 268.11, "label": "unusable", "line": 18}]'),
         0),
        (("compute-ceiling", "--log", "{example}", "--reserves", '[{"mib": 96, "label": "headroom", "line": 26}]'), 1),
        (("compute-ceiling", "--log", "{example}", "--reserves", '[{"mib": 330, "label": "mine", "personal": true}]'),
         0),
        ((*POOL, "fp8", "--pool-mib", "3524.45"), 0),  # 2 x 200,000 x 7,488 B + 220 + 448 = 3,524.45 <= 3,524.45
        ((*POOL, "bf16", "--pool-mib", "6063.51"), 0),  # 5,395.51 + 220 + 448 = 6,063.51
        (("check-pool-contract", "--log", "{example}"), 0),  # all four from the ledger: 5,120 >= 3,524.45
        # 3: the check ran and failed
        ((*POOL, "fp8", "--pool-mib", "3524"), 3),  # 3,524 < 3,524.45
        ((*POOL, "bf16", "--pool-mib", "5120"), 3),  # 5,120 < 6,063.51
        (("check-pool-contract", "--log", "{example}", "--kv-cache-dtype", "bf16"), 3),  # the example's pool at bf16
        # 1: an error or a refusal, message on stderr
        (("compute-ceiling", "--log", "{missing}"), 1),
        (("compute-ceiling", "--log", "{example}", "--boot", "2"), 1),  # the example holds one boot
        (("compute-ceiling", "--log", "{example}", "--reserves", '[{"mib": 330, "label": "safety"}]'), 1),
        (("compute-ceiling", "--log", "{example}", "--reserves", '[{"mib": 330, "label": "x", "line": 26}]'), 1),
        (("compute-ceiling", "--log-text", "hello"), 1),
        (("compute-ceiling", "--service", "frank-archon"), 1),  # no config names it
        (("compute-ceiling", "--config", "{missing}", "--log", "{example}"), 1),
        ((*POOL, "fp8"), 1),  # no pool and no ledger to read it from
        (("serve", "--http", "--host", "0.0.0.0"), 1),  # not loopback and no token: refused before binding
        # 2: usage
        ((), 2),
        (("no-such-command",), 2),
        (("compute-ceiling",), 2),  # no ledger source
        (("compute-ceiling", "--log", "{example}", "--log-text", "x"), 2),  # two sources
        (("compute-ceiling", "--log", "{example}", "--boot", "newest"), 2),
        (("compute-ceiling", "--log", "{example}", "--reserves", "not json"), 2),
        (("compute-ceiling", "--log", "{example}", "--reserves", '[{"mib": -1, "label": "x"}]'), 2),
        (("compute-ceiling", "--log", "{example}", "--reserves", '[{"mib": 1, "label": "x", "colour": 1}]'), 2),
        ((*POOL, "fp16", "--pool-mib", "3524.45"), 2),  # only bf16 or fp8
        ((*POOL, "fp8", "--pool-mib", "0"), 2),
        ((*POOL, "fp8", "--pool-mib", "nan"), 2),
        ((*POOL, "fp8", "--pool-mib", "inf"), 2),  # the schema's bound (finite, at most 1 PiB), like nan
        (("check-pool-contract", "--seqs", "two"), 2),
        (("check-pool-contract", "--seqs", "0", "--log", "{example}"), 2),
        (("check-pool-contract", "--log", "{example}", "--log-text", "x"), 2),
        (("serve", "--port", "http"), 2),
        (("compute-ceiling", "--log", "{example}", "--reserve", "[]"), 2),  # misspelled: refused, never dropped
        (("read-budget-table", "--log", "{example}", "--bo", "2"), 2),  # no abbreviations: --bo is not --boot
        (("check-pool-contract", "--seqs", str(10**100), "--log", "{example}"), 2),  # out of range, no traceback
    ],
)
def test_exit_codes(
    argv: tuple[str, ...], code: int, capsys: pytest.CaptureFixture[str], example_path: Path, example_text: str,
    tmp_path: Path,
) -> None:
    values = {"example": str(example_path), "example_text": example_text, "missing": str(tmp_path / "missing.log")}
    got, out, err = run(capsys, *fill(argv, **values))
    assert got == code, err
    assert "Traceback" not in err
    if code == 1:
        assert err.startswith("radiance-mcp: ") and not out
    if code == 2:
        assert err and not out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("compute-ceiling", "--log", "{missing}"), r"missing\.log: no such file"),
        (("compute-ceiling", "--log", "{example}", "--boot", "2"), r"frank-archon\.log: boot=2 but the log holds 1"),
        (("compute-ceiling", "--log", "{example}", "--reserves", '[{"mib": 330, "label": "safety"}]'),
         r"reserve 'safety' of 330 MiB is neither traced nor labelled"),
        (("compute-ceiling", "--log-text", "hello"), r"log_text: no radiance ledger phrase"),
        (("compute-ceiling", "--log", "{example}", "--reserves", '[{"mib": Infinity, "label": "x", "personal": true}]'),
         r"--reserves\[0\]\.mib=inf is out of range: send a finite number from 0 to 1,073,741,824"),
        (("compute-ceiling", "--log", "{example}", "--reserves", '[{"mib": 1e9, "label": "x", "personal": true}]'),
         r"reserve 'x' of 1,000,000,000 MiB is larger than card 0's ceiling of 30,969 MiB"),
        (("compute-ceiling",), r"give exactly one ledger source of service, log, log_text"),
        ((*POOL, "fp16", "--pool-mib", "1"), r"invalid choice: 'fp16'"),
    ],
)
def test_error_messages(
    argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str], example_path: Path, tmp_path: Path
) -> None:
    values = {"example": str(example_path), "missing": str(tmp_path / "missing.log")}
    _, _, err = run(capsys, *fill(argv, **values))
    assert re.search(message, err), err


def test_compute_ceiling_table_shows_the_derivation(capsys: pytest.CaptureFixture[str], example_path: Path) -> None:
    code, out, _ = run(capsys, "compute-ceiling", "--log", str(example_path))
    assert code == 0
    assert "derivation    29,120 + (2,058 - 209) = 30,969 MiB/card" in out
    assert "ceiling_mib   30,969" in out
    assert "headroom_mib  1,849" in out  # 30,969 - 29,120
    assert "26    W card 0 settled at 2.01 GiB free against 209.19 MiB" in out  # the source line, numbered


def test_compute_ceiling_json(capsys: pytest.CaptureFixture[str], example_path: Path) -> None:
    code, out, _ = run(capsys, "compute-ceiling", "--log", str(example_path), "--json",
                       "--reserves", '[{"mib": 268.11, "label": "unusable", "line": 18}, '
                                     '{"mib": 330, "label": "mine", "personal": true}]')
    data = json.loads(out)
    assert code == 0
    assert (data["ceiling_mib"], data["headroom_mib"], data["binding_card"]) == (30_969, 1_849, 0)
    assert data["derivation"] == "29,120 + (2,058 - 209) = 30,969 MiB/card"
    assert [(c["card"], c["ceiling_mib"]) for c in data["cards"]] == [(0, 30_969)]
    assert data["personal_reserves"] == ["mine"]
    assert data["max_pair_mib"] == 30_370  # 30,969 - 268.11 - 330 = 30,370.89
    assert [r["kind"] for r in data["reserves"]] == ["traced", "personal"]


def test_read_budget_table_json(capsys: pytest.CaptureFixture[str], example_path: Path) -> None:
    code, out, _ = run(capsys, "read-budget-table", "--log", str(example_path), "--json")
    data = json.loads(out)
    assert code == 0
    assert data["pair_source"] == "echoed flags"
    card = data["cards"][0]
    assert (card["pair_mib"], card["free_mib"]["value"], card["floor_mib"]["value"]) == (29_120, 2_058.24, 209.19)
    assert card["free_mib"]["lines"] == [26] and card["unclaimed_mib"]["lines"] == [18]
    assert data["ledger"] == {"source": str(example_path), "boot": 1, "boots_seen": 1, "first_line": 1,
                              "last_line": 27, "origin": "local file", "verified": True, "first_byte": 0,
                              "lines_from_byte": None}
    assert data["reserve_candidates"] == [{
        "card": 0, "line": {"line": 18, "text": data["lines"]["18"]}, "mib": 268.11,  # 477.30 - 209.19 (line 18)
        "printed": "477.30 MiB unclaimed less the 209.19 MiB engine floor (line 26)",
        "why": data["reserve_candidates"][0]["why"]}]


@pytest.mark.parametrize(
    ("dtype", "pool", "required", "ok", "code"),
    [
        ("fp8", "3524.45", 3_524.45, True, 0),  # 2 x 200,000 x 7,488 B = 2,856.45 MiB + 220 + 448
        ("bf16", "6063.51", 6_063.51, True, 0),  # 2 x 200,000 x 14,144 B = 5,395.51 MiB + 220 + 448
        ("bf16", "5120", 6_063.51, False, 3),  # 5,120 - 6,063.51 = -943.51
    ],
)
def test_check_pool_contract_json(
    dtype: str, pool: str, required: float, ok: bool, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    got, out, _ = run(capsys, *POOL, dtype, "--pool-mib", pool, "--json")
    data = json.loads(out)  # printed on a failed verdict too
    assert (got, data["required_mib"], data["contract_ok"]) == (code, required, ok)
    assert data["ok"] is (None if ok else False)  # no ledger: the ceiling was not checked, so never true
    assert data["refusal"] == (None if ok else
                               "does not fit the 200000 token context, which leaves nothing to generate into")


def test_check_pool_contract_table(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, *POOL, "fp8", "--pool-mib", "3524.45")
    assert "2 x 200,000 x 7,488 B = 2,856.45 MiB + 110 x 2 + 448 = 3,524.45 MiB <= pool 3,524.45 MiB" in out


@pytest.mark.slow
def test_a_real_process(example_path: Path, tmp_path: Path) -> None:
    """The console entry: exit status and streams as a shell sees them, no traceback on an error."""
    ok = subprocess.run([sys.executable, "-m", "radiance_mcp", "compute-ceiling", "--log", str(example_path),
                         "--json"], capture_output=True, text=True, timeout=60)
    assert (ok.returncode, json.loads(ok.stdout)["ceiling_mib"], ok.stderr) == (0, 30_969, "")
    bad = subprocess.run([sys.executable, "-m", "radiance_mcp", "compute-ceiling", "--log", str(tmp_path / "x.log")],
                         capture_output=True, text=True, timeout=60)
    assert (bad.returncode, bad.stdout) == (1, "")
    assert bad.stderr == (
        f"radiance-mcp: {tmp_path / 'x.log'}: no such file; check the path or the service's log setting\n"
    )


def test_render_gates_without_spec_takes_the_ledgers(capsys: pytest.CaptureFixture[str], example_path: Path) -> None:
    """--spec omitted is the boot's own 3 draft tokens, not the CLI's bookkeeping (it once shadowed the field)."""
    code, out, err = run(capsys, "render-gates", "--log", str(example_path), "--vram-kv-mib", "5120", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["sampler_rows"] == 8  # 2 seqs x (1 + 3 draft tokens) = 8 rows
