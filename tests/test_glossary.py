"""The words a newcomer meets in the CLI's output are in the README's glossary ("Words used here"), issue 26
item 3: JARGON lists the demo's, each with the pattern that finds it in the output, COMMAND_JARGON those of the
tool commands and doctor, each with a command that prints it, PLAN_JARGON those of one service's plan
(plan-free-vram --service, which the demo does not print: "mover" among them). The quick tests hold the lists
against the glossary and the commands; the slow one runs the demo and holds JARGON against what it prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_run import CliRunner

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
JARGON = {
    # the glossary's word: the pattern that finds it in the demo's output
    "boot ledger": r"\bledger\b",
    "pair": r"\bpair\b",
    "settled free": r"\bsettled\b.*\bfree\b",
    "engine floor": r"\bfloor\b",
    "ceiling": r"\bceiling\b",
    "reserve": r"\breserves?\b",
    "step, MNBT": r"\bstep\b",
    "seats": r"\bseats\b",
    "window": r"\bwindow\b",
    "pool": r"\bpool\b",
    "contract": r"\bcontract\b",
    "slab": r"\bslab\b",
    "probe": r"\bprobes?\b",
    "headroom": r"\bheadroom\b",
    "arm": r"\barms\b",
    "prediction, verdict": r"\bprediction\b",
    "I, W, E": r"^ +(line \d+: )?[IWE] \w",  # the level letter of a quoted ledger line
    "referee": r"\breferee\b",
    "sampler rows, spec": r"\bsampler rows\b|\bspec\b",
    "slab slots, host pool": r"\bslab slots\b|\bhost pool\b",
    "unclaimed": r"\bunclaimed\b",
    "expert prefetch": r"\bexpert prefetch\b",
    "full-length sessions": r"\bfull-length sessions\b",
    "binding card": r"\bbinds?\b|\bbinding\b",
    "env file, gates": r"\benv file\b|\bgates\b",
    "serve script, mode, dry run": r"\bserve script\b|\bdry runs?\b",
    "prefill, decode, cold": r"\bprefill\b|\bdecode\b|\bcold\b",
    "marker": r"\bmarkers?\b",
    "noise band": r"% band\b",
    "refusal count": r"\brefusal_difference\b",
    "rank": r"\bB/token/rank\b",
    "stranded headroom": r"\bstranded headroom\b",
}
COMMAND_JARGON = {
    # the glossary's word: a command that prints it (beyond the demo), and the pattern that finds it there
    "rank": (("read-budget-table", "--log", "tests/fixtures/ledgers/sglang/tp8_pool_80_layers.log"),
             r"^  card +rank\b(.|\n)*^  0 +TP0\b"),
    "dialect": (("doctor", "--demo"), r"\bdialect\s+radiance\b"),
    "origin, verified": (("read-budget-table", "--log", "radiance_mcp/examples/frank-archon.log"),
                         r"^  origin +local file$(.|\n)*^  verified +yes$"),
    "weights by tier, container-on-disk": (("audit-step-shape", "--demo", "--proven-service", "qwen38-proven",
                                            "--candidate-service", "qwen38-wide"), r"weights by tier: +VRAM"),
    "stranded headroom": (("plan-free-vram", "--demo"), r"\bstranded\b"),
    # the word's meaning is said once, where the summary shows it
    "physical card, sharing": (("plan-free-vram", "--demo"),
                               r"^sharing +partial$(.|\n)*\bphysical card once \(sharing partial: some services"),
    "slope": (("plan-free-vram", "--demo", "--service", "twin"), r"^  slope +0\.72 slots/MiB"),
}


PLAN_JARGON = {
    # words one service's plan prints (plan-free-vram --service, which the demo does not run): the mover's slots
    # on each more-KV plan, and the ledger line the slope is read off
    "lender, ledger mover": r"\bmover\b",
    "slab slots, host pool": r"\bslab slots\b|\bhost pool\b",
    "binding card": r"\bbinding_card\b",
    "headroom": r"\bheadroom\b",
    "engine floor": r"\bengine_floor\b",
    "settled free": r"\bsettled_free\b",
    "seats": r"\bseats\b",
    "window": r"\bwindow\b",
    "contract": r"\bcontract\b",
    "ceiling": r"\bceiling\b",
}


def _glossary() -> set[str]:
    section = README.split("## Words used here", 1)[1].split("\n## ", 1)[0]
    return {row.split("|")[1].strip() for row in section.splitlines() if row.startswith("| ")} - {"word"}


def test_every_jargon_term_is_in_the_glossary() -> None:
    missing = (set(JARGON) | set(COMMAND_JARGON) | set(PLAN_JARGON)) - _glossary()
    assert not missing, f"words the CLI prints that the README's glossary does not define: {sorted(missing)}"


@pytest.mark.parametrize("word", sorted(COMMAND_JARGON))
def test_the_commands_print_the_words_listed(cli: CliRunner, word: str) -> None:
    argv, pattern = COMMAND_JARGON[word]
    ran = cli(*argv, cwd=ROOT)
    assert re.search(pattern, ran.stdout, re.M), f"{' '.join(argv)} no longer prints {word!r}: {ran.stdout[:3000]}"


def test_one_services_plan_prints_the_plan_jargon_listed(cli: CliRunner, tmp_path: Path) -> None:
    ran = cli("plan-free-vram", "--demo", "--service", "frank-archon", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    unseen = [word for word, pattern in PLAN_JARGON.items() if not re.search(pattern, ran.stdout, re.M)]
    assert not unseen, f"PLAN_JARGON lists words the plan no longer prints: {unseen}"
    assert "mover_slots" in ran.stdout and "ledger mover: " in ran.stdout  # each more-KV plan's; line 22's slope


@pytest.mark.slow
def test_the_demo_prints_the_jargon_listed_and_every_listed_word_is_defined(cli: CliRunner) -> None:
    ran = cli("demo", cwd=ROOT, deadline_s=300)  # the MCP server the walk spawns imports this checkout's package
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    unseen = [word for word, pattern in JARGON.items() if not re.search(pattern, ran.stdout, re.M)]
    assert not unseen, f"JARGON lists words the demo no longer prints: {unseen}"
    assert set(JARGON) <= _glossary()
    assert "level: I info, W warning, E error" in ran.stdout  # the demo says what the letters mean
