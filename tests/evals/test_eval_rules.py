"""The scorer reads figures and phrases as a person writes them; scenario files are checked with errors that
name the key. (That every rule a refusal names is in the rule book: tests/test_rule_book.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import radiance_mcp
from radiance_mcp.core.errors import EvalError
from radiance_mcp.evals.record import Event
from radiance_mcp.evals.scenario import Scenario, load_scenario, parse_scenario
from radiance_mcp.evals.score import numbers_in, score

PACKAGE = Path(radiance_mcp.__file__).parent


@pytest.mark.parametrize(("text", "figures"), [
    ("ceiling 30,969 MiB/card", [30969]),            # thousands separator
    ("headroom: 1849.5 MiB; card 1 binds", [1849.5, 1]),
    ("between 6,282 and 5,062.67", [6282, 5062.67]),
    ("card 1 209 MiB", [1, 209]),                     # a plain space separates two figures
    ("card\u00a030\u202f969", [30969]),              # a narrow no-break space groups thousands
    ("x2 or v3.1", []),                              # figures glued to a word are not figures
    ("-3.15 %", [-3.15]),
])
def test_the_scorer_reads_figures_as_written(text: str, figures: list[float]) -> None:
    assert numbers_in(text) == figures


def _holding(scenario: Scenario) -> Event:
    """A successful ledger read whose result holds the scenario's figures: what an answer states is grounded
    (grounding itself is tested in test_eval_grounding.py)."""
    return Event(version=1, seq=1, time="t", kind="tool_call", tool="compute_ceiling", arguments={}, ok=True,
                 result={"figures": [f.value for f in scenario.facts if f.value is not None]})


def test_a_fact_within_its_tolerance_is_found_and_outside_it_missed() -> None:
    scenario = load_scenario(Path("evals/scenarios/resize-to-the-ceiling.toml"))
    found = score(scenario, [_holding(scenario)], "ceiling 30,970 MiB; headroom 1,848; pool 6,969 MiB; "
                  "contract 6,600.89 MiB")
    assert [f.found for f in found.facts] == [True, True, True, True]
    missed = score(scenario, [_holding(scenario)], "ceiling 30,968 MiB, headroom 1,851 MiB")  # 1,851: outside +-1
    assert [f.name for f in missed.facts if not f.found] == ["headroom_mib", "new_pool_mib", "contract_mib_at_4_seqs"]
    # No call at all: the ledger was never read, and no figure is grounded.
    unread = score(scenario, [], "ceiling 30,970 MiB")
    assert unread.broken == ("ledger_first",) and not unread.facts[0].found


def test_a_refused_call_breaks_its_rule_even_when_the_run_goes_on() -> None:
    scenario = load_scenario(Path("evals/scenarios/untraceable-reserve.toml"))
    untraced = '[{"mib": 512, "label": "safety"}]'  # sent as a JSON string, as some clients do
    events = [
        Event(version=1, seq=1, time="t", kind="tool_call", tool="compute_ceiling", arguments={
            "service": "frank-archon", "reserves": untraced}, ok=False,
            error="reserve 'safety' ... [rule: reserve_traced]", rule="reserve_traced"),
        _holding(scenario).model_copy(update={"seq": 2}),
        # A server without the guard rail accepted it: the argument alone is the evidence.
        Event(version=1, seq=3, time="t", kind="tool_call", tool="render_gates", arguments={
            "service": "frank-archon", "reserves": untraced}, ok=True, result={}),
    ]
    report = score(scenario, events, "ceiling 30,969; max pair 30,457; pool 6,457; a personal reserve")
    broken = {r.name: [(e.call, e.text[:30]) for e in r.evidence] for r in report.rules if not r.kept}
    assert broken == {"reserve_traced": [(1, "refused: reserve 'safety' ... "), (3, "a reserve with neither line no")]}
    assert [f.found for f in report.facts] == [True, True, True, True]


@pytest.mark.parametrize(("patch", "message"), [
    (("rules = [\"no_two_arm_claim\"]", "rules = [\"no_two_arms\"]"), r"rules: .*unknown rule\(s\) \['no_two_arms'\]"),
    (("procedure = \"radiance-kv-cache-resize\"", "procedure = \"resize\""), r"procedure: "),
    (("task = \"arms\"", "task = \"vibes\""), r"agent.task: "),
    (("value = -3.15", "value = -3.15\nany_of = [\"x\"]"), r"give either value .* or any_of"),
    (("[[facts]]", "[[facts"), r"not TOML"),
])
def test_a_broken_scenario_names_its_key(patch: tuple[str, str], message: str) -> None:
    text = Path("evals/scenarios/two-arm-plateau-claim.toml").read_text()
    assert patch[0] in text
    with pytest.raises(EvalError, match=message):
        parse_scenario(text.replace(*patch, 1), "scenario x")


def test_a_scenario_file_named_otherwise_than_its_scenario_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "other-name.toml"
    copy.write_text(Path("evals/scenarios/two-arm-plateau-claim.toml").read_text())
    with pytest.raises(EvalError, match=r"name it two-arm-plateau-claim.toml|name the file two-arm-plateau-claim.toml"):
        load_scenario(copy)


@pytest.mark.parametrize("module", ["scenario", "rules", "score", "claims", "numbers", "plans"])
def test_the_scorer_is_pure(module: str) -> None:
    """scenario, rules and score import no MCP, server, CLI, simulator or network code (read with ast)."""
    path = PACKAGE / "evals" / f"{module}.py"
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    allowed_internal = {"radiance_mcp.core.errors", "radiance_mcp.core.constants",
                        "radiance_mcp.core.units",  # sizes and their units: pure
                        "radiance_mcp.core.rules",  # the rule book: pure
                        "radiance_mcp.evals.rules",
                        "radiance_mcp.evals.scenario", "radiance_mcp.evals.record",
                        "radiance_mcp.evals.numbers", "radiance_mcp.evals.claims", "radiance_mcp.evals.plans",
                        "radiance_mcp.models.answer"}  # submit_answer's answer: pydantic, pure
    wrong = sorted(m for m in imported if m.split(".")[0] in {"mcp", "httpx", "asyncssh", "anyio"}
                   or (m.startswith("radiance_mcp") and m not in allowed_internal))
    assert not wrong, f"evals/{module}.py imports {wrong}"
