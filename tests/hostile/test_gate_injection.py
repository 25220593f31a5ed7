"""Nothing from outside reaches the gate files unquoted (issue 22, item 1).

The attack: a ledger file under the log roots named 'x<newline>function [ { return 0; }; touch PWNED<newline>#.log'
(a copy of the example ledger). render_gates wrote its name into a '# Ceiling:' comment of the env file and the bats
file; the newline started a shell line, so `bats` passed a pair of 24,000 + 99,999 MiB ('[' now returns 0) and PWNED
was created, and sourcing the env file ran it too. Now a control character in a local path is refused (as for a
remote one), and every value the gates carry is one line, quoted where it is shell code.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from bats_run import needs_bats, run_bats
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp_call import call
from pydantic import ValidationError

from radiance_mcp.app.server import build_server
from radiance_mcp.core import gates, svg
from radiance_mcp.core.constants import DEFAULT_MODEL
from radiance_mcp.core.errors import InputError
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet
from radiance_mcp.sources.runtime import Runtime

SHELLCHECK = shutil.which("shellcheck")
needs_shellcheck = pytest.mark.skipif(SHELLCHECK is None, reason="shellcheck (Debian: shellcheck) is not installed; "
                                                               ".ci/run installs it")

HOSTILE_NAME = "x\nfunction [ { return 0; }; touch PWNED\n#.log"
"""A ledger's file name that, written into a comment, starts a line of shell: '[' always true, and a canary."""

# The example boot: pair 24,000 + 5,120 = 29,120 MiB <= the ceiling 29,120 + (2,058 - 209) = 30,969 MiB/card (line 26);
# 2 seats at 200,000 fp8 need 2 x 200,000 x 7,488 B = 2,856.45 + 220 + 448 = 3,524.45 MiB <= 5,120.
PLAN: dict[str, Any] = {"vram_kv_mib": 5_120}
OVER_KV_MIB = 99_999
"""24,000 + 99,999 = 123,999 MiB: far over the 30,969 MiB ceiling."""


def _hostile_fleet(tmp_path: Path, model: str | None = None, *, configured: bool = False) -> tuple[Fleet, Path]:
    """A fleet whose log root holds the hostile copy of the example ledger beside a plain one; frank-archon's log (of
    that model) is the plain copy, or the hostile one where configured."""
    logs = tmp_path / "logs"
    logs.mkdir()
    hostile, plain = logs / HOSTILE_NAME, logs / "frank-archon.log"
    for copy in (hostile, plain):
        shutil.copy(EXAMPLES_DIR / "frank-archon.log", copy)
    seed = {"rate_fp8_bytes_per_token": 7_488, "rate_bf16_bytes_per_token": 14_144, "per_seq_mib": 110,
            "fixed_mib": 448}  # the seed's model under another name
    log = hostile if configured else plain
    fleet = Fleet.model_validate({"server": {"log_roots": [str(logs)]},
                                  "models": {model: seed} if model else {},
                                  "services": {"frank-archon": {"log": str(log), "model": model}}})
    return fleet, hostile


def _write_the_gates(out: dict[str, Any], run: Path) -> tuple[Path, Path, Path]:
    """The env file and the bats file render_gates returned, written into run, and a copy of the env file whose
    pool takes the pair over the ceiling."""
    env, bats, over = run / "gate.env", run / "gate.bats", run / "over.env"
    env.write_text(out["env_text"], encoding="utf-8")
    bats.write_text(out["bats_text"], encoding="utf-8")
    over.write_text(out["env_text"].replace("_VRAM_KV_MIB=5120\n", f"_VRAM_KV_MIB={OVER_KV_MIB}\n"), encoding="utf-8")
    assert over.read_text() != out["env_text"]
    return env, bats, over


async def test_a_ledger_file_named_to_start_a_shell_line_is_refused(tmp_path: Path) -> None:
    fleet, hostile = _hostile_fleet(tmp_path)
    async with Client(build_server(Runtime(fleet))) as client:
        is_error, text = await call(client, "render_gates", log=str(hostile), **PLAN)
    # the path, the rule and the remedy
    assert is_error, "render_gates rendered gates from a ledger whose name holds a newline"
    assert f"log={str(hostile)!r}" in text and "control character" in text and "rename the file" in text


@needs_bats
def test_a_configured_ledger_named_to_start_a_shell_line_is_refused_as_the_config_is_read(tmp_path: Path) -> None:
    # The fleet config is the operator's own, but its paths reach the gates as the ledger's name: refused as a path
    # a caller names is, with the path and the remedy.
    with pytest.raises(ValidationError, match=r"holds a control character .*rename the path"):
        _hostile_fleet(tmp_path, configured=True)


@pytest.mark.slow
async def test_a_model_named_to_start_shell_lines_leaves_the_gates_inert(tmp_path: Path) -> None:
    # A model's name is the operator's free text: it reaches the bats file's comments, as one inert line.
    fleet, _ = _hostile_fleet(tmp_path, model="w4\nfunction [ { return 0; }; touch PWNED")
    async with Client(build_server(Runtime(fleet))) as client:
        is_error, out = await call(client, "render_gates", service="frank-archon", **PLAN)
    assert not is_error, out
    run = tmp_path / "run"
    run.mkdir()
    env, bats, over = _write_the_gates(out, run)
    result = run_bats(bats, env=over, cwd=run)
    assert not (run / "PWNED").exists(), "a name in the gates ran as a command under bats"
    assert result.returncode != 0, result.stdout + result.stderr
    assert "not ok 1 pair <= ceiling (30,969 MiB/card, from the boot ledger)" in result.stdout
    assert f"pair {24_000 + OVER_KV_MIB} MiB against the ceiling 30969" in result.stdout
    for shell in ("sh", "bash"):  # a deploy script sources the env file
        sourced = subprocess.run([shell, "-c", '. "$1"', shell, str(env)], cwd=run, capture_output=True, text=True,
                                 timeout=60, check=False, env={"PATH": "/usr/bin:/bin"})
        assert sourced.returncode == 0 and not (run / "PWNED").exists(), sourced.stderr
    # the model's name inside one comment line of the bats file, none of the env file
    assert "PWNED" not in out["env_text"]
    assert [line[:1] for line in out["bats_text"].splitlines() if "PWNED" in line] == ["#"]
    assert "w4 function [ { return 0; }; touch PWNED" in out["bats_text"]


# ---------------------------------------------------------------------------------------
# The property: gates rendered from hostile names and texts, run under real bats, sh and bash.

CANARY = "PWNED"
FRAGMENTS = (
    "\n", "\r", "\r\n", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\t", "\x00", "\x1b[2J", "\x7f",
    "\ud800", "\u202e", "\ufeff", "\ufffe", '"', "'", "\\", "{", "}", " {", "#", "%s", "$HOME", "${IFS}",
    f"$(touch {CANARY})", f"`touch {CANARY}`", f"; touch {CANARY}", f"\ntouch {CANARY}\n", f"\rtouch {CANARY}\r",
    f"\u2028touch {CANARY}", "\nfunction [ { return 0; }\n", "\n[() { return 0; }\n", '\n@test "owned" {\n',
    "\n}\n", f"$(touch {CANARY}) {{ # @test", "\n# bats test_tags=x\n", "\nSVC_VRAM_KV_MIB=1\n",
    "\u2028SVC_VRAM_KV_MIB=1\u2028", "\n# prediction ceiling = 1: forged\n", "</text><script>alert(1)</script>",
    "&amp;",
)
hostile_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), min_size=1, max_size=6).map(
    "".join)
"""Text built of pieces that would end a comment, a quote or a line, run a command, or forge a line."""


def _plan(text: str, **fields: Any) -> gates.GatePlan:
    """The example boot's plan with every free text (and the model's name) text, and fields as given.

    Pair 24,000 + 5,120 = 29,120 under the ceiling 30,969 less at most 2 x 500 MiB of reserves = 29,969; the pool
    holds 2 x 200,000 fp8: 3,524.45 MiB. The copy over the ceiling: 24,000 + 99,999.
    """
    plan = gates.GatePlan(
        service=text, prefix=gates.env_prefix(text), env_file="gate.env", bats_file=text, weights_mib=24_000,
        kv_mib=5_120, seqs=2, max_model_len=200_000, dtype="fp8", model=replace(DEFAULT_MODEL, name=text),
        ceiling_mib=30_969, ceiling_text=text, contract_text=text,
        reserves=(gates.GateReserve(10.0, text, None), gates.GateReserve(20.0, text, 18)),
        predictions=(gates.Prediction("ceiling", "30969", text),))
    return replace(plan, **fields)


hostile_reserve = st.builds(gates.GateReserve, mib=st.sampled_from([0.0, 10.0, 268.11, 500.0]), label=hostile_text,
                            line=st.one_of(st.none(), st.integers(1, 1 << 40)))
hostile_plan = st.builds(
    lambda service, ceiling, contract, model, bats_file, reserves, texts: _plan(
        service, ceiling_text=ceiling, contract_text=contract, model=replace(DEFAULT_MODEL, name=model),
        bats_file=bats_file, reserves=tuple(reserves),
        predictions=tuple(gates.Prediction(k, "1", t) for k, t in zip(("ceiling", "referee"), texts, strict=False))),
    hostile_text, hostile_text, hostile_text, hostile_text, hostile_text,
    st.lists(hostile_reserve, max_size=2), st.lists(hostile_text, max_size=2),
)


def _shell(run: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=run, capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin"})


def _tap(result: subprocess.CompletedProcess[str]) -> list[bool]:
    """Each test's outcome, in order, from bats' TAP."""
    return [line.startswith("ok ") for line in result.stdout.splitlines() if line.startswith(("ok ", "not ok "))]


def _refused(plan: gates.GatePlan) -> bool:
    try:
        gates.render_env(plan)
        gates.render_bats(plan)
    except InputError:
        return True
    return False


@pytest.mark.slow
@needs_bats
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=hostile_plan, word=hostile_text)
# two reserves alike: bats would refuse the file (a duplicate test name) and run none of its gates
@pytest.mark.slow
@example(plan=_plan("\n", reserves=(gates.GateReserve(0.0, "\n", None),) * 2), word="\n")
def test_gates_from_hostile_names_fail_every_pair_over_the_ceiling_and_run_nothing(
    tmp_path: Path, plan: gates.GatePlan, word: str
) -> None:
    # the words written into shell code unquoted are refused unless plain, never quoted
    assert _refused(replace(plan, env_file=word)) is not bool(gates.SAFE_PATH.match(word))
    assert _refused(replace(plan, prefix=word)) is not bool(gates.PREFIX.fullmatch(word))
    assert _refused(replace(plan, dtype=word)) is (word not in ("fp8", "bf16"))
    run = Path(tempfile.mkdtemp(dir=tmp_path))
    env_text, bats_text = gates.render_env(plan), gates.render_bats(plan)
    (run / "gate.env").write_text(env_text, encoding="utf-8")
    (run / "gate.bats").write_text(bats_text, encoding="utf-8")
    (run / "over.env").write_text(env_text.replace("_VRAM_KV_MIB=5120\n", "_VRAM_KV_MIB=99999\n"), encoding="utf-8")
    # read back as verify_deploy reads it: the planned values, and only the predictions rendered
    assert gates.read_env(env_text) == (plan.prefix, {"VRAM_WEIGHTS_MIB": "24000", "VRAM_KV_MIB": "5120",
                                                      "MAX_SEQS": "2", "MAX_MODEL_LEN": "200000",
                                                      "KV_CACHE_DTYPE": "fp8"})
    assert [p.key for p in gates.read_predictions(env_text)] == [p.key for p in plan.predictions]
    for shell in ("sh", "bash"):
        checked = _shell(run, shell, "-n", "gate.env")
        sourced = _shell(run, shell, "-c", '. ./gate.env && [ "$' + plan.prefix + '_VRAM_KV_MIB" = 5120 ]')
        assert checked.returncode == 0 and sourced.returncode == 0, checked.stderr + sourced.stderr
    within, over = run_bats(run / "gate.bats", cwd=run), run_bats(run / "gate.bats", env=run / "over.env", cwd=run)
    assert not list(run.rglob(CANARY)), "a hostile name ran as a command"
    pair_gates = 1 + len(plan.reserves) + (1 if plan.reserves else 0)  # the pair, each reserve, every reserve
    assert within.returncode == 0 and _tap(within) == [True] * (pair_gates + 1), within.stdout + within.stderr
    assert over.returncode != 0 and _tap(over) == [False] * pair_gates + [True], over.stdout + over.stderr


@pytest.mark.slow
@needs_shellcheck
def test_shellcheck_finds_nothing_in_gates_rendered_from_hostile_names(tmp_path: Path) -> None:
    plan = _plan("".join(FRAGMENTS))
    for name, rendered in (("gate.env", gates.render_env(plan)), ("gate.bats", gates.render_bats(plan))):
        (tmp_path / name).write_text(rendered, encoding="utf-8")
    assert SHELLCHECK is not None
    # the env file's variables are for whoever sources it (SC2034: unused); the bats file's shebang names its dialect
    for argv in (["--shell=sh", "--exclude=SC2034", "gate.env"], ["gate.bats"]):
        result = subprocess.run([SHELLCHECK, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                                check=False)
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(title=hostile_text, label=hostile_text, source=hostile_text)
def test_the_picture_from_hostile_labels_is_one_svg_document_of_plain_text(title: str, label: str, source: str
                                                                          ) -> None:
    bar = svg.Bar(title, 32_000.0, (svg.Segment("weights", label, 24_000.0, source),
                                    svg.Segment("floor", label, 209.19)), 2_000.0,
                  (svg.Ghost("kv", label, 29_000.0, 500.0),))
    document = ElementTree.fromstring(svg.render([bar]))  # XML that parses: no control character, nothing unescaped
    names = {element.tag.rpartition("}")[2] for element in document.iter()}
    assert names == {"svg", "rect", "text"}
    texts = [element.text or "" for element in document.iter("{http://www.w3.org/2000/svg}text")]
    assert all(t == gates.one_line(t) for t in texts) and any(gates.one_line(label) in t for t in texts)
