"""How the scorer reads an answer: numbers as people write them (evals/numbers.py), a submitted answer judged on
its final values, free text read claim by claim (evals/claims.py), and submit_answer offered only when recording."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from radiance_mcp.app.server import build_server
from radiance_mcp.evals.fleet import SERVICE_NAMES
from radiance_mcp.evals.numbers import convert, numbers_in, read_figure
from radiance_mcp.evals.record import Event
from radiance_mcp.evals.scenario import load_scenario
from radiance_mcp.evals.score import score
from radiance_mcp.sources.config import Fleet
from radiance_mcp.sources.runtime import Runtime

SCENARIOS = Path(__file__).resolve().parents[2] / "evals" / "scenarios"
RESIZE = load_scenario(SCENARIOS / "resize-to-the-ceiling.toml")
POOL = load_scenario(SCENARIOS / "pool-below-contract.toml")
ARMS = load_scenario(SCENARIOS / "two-arm-plateau-claim.toml")
BOUNDARY = load_scenario(SCENARIOS / "boundary-within-shape.toml")
LEDGER = Event(version=2, session="s", seq=1, time="t", kind="tool_call", tool="compute_ceiling", ok=True, result={
    "figures": [x.value for s in (RESIZE, POOL, ARMS, BOUNDARY) for x in (*s.facts, *s.traps) if x.value is not None]})
"""A ledger read whose result holds every figure of these scenarios: the figures an answer states are grounded
(grounding itself is tested in test_eval_grounding.py)."""


@pytest.mark.parametrize(("text", "figures"), [
    ("ceiling 30,969 MiB/card", [30969]),
    ("30\u2009969 MiB", [30969]),                    # U+2009, a thin space, groups thousands
    ("30\u202f969 and 30\u00a0969", [30969, 30969]),  # a narrow no-break space, a no-break space
    ("card 1 209 MiB", [1, 209]),                     # a plain space separates two figures
    ("\u22123.15 %", [-3.15]),                        # U+2212, the minus sign
    ("\u20133.15 %", [-3.15]),                        # an en dash before a digit
    ("fell 3.15 %", [-3.15]),                         # a fall is a negative change
    ("dropped by 3.15 %", [-3.15]),
    ("claimable fell by 14.02 GiB (30.87 GiB -> 16.85 GiB)", [-14.02, 30.87, 16.85]),  # only the change falls
    ("backs two sequences", [2]),                     # small counts in words
    ("Twelve seats, one card", [12, 1]),
    ("2,058 - 209", [2058, 209]),                     # a spaced minus is an operator, not a sign
    ("(+64,512)", [64512]),
    ("x2 or v3.1", []),                               # glued to a word: no figure
    ("everyone, someone", []),                        # 'one' inside a word is no figure
])
def test_numbers_are_read_as_people_write_them(text: str, figures: list[float]) -> None:
    assert numbers_in(text) == figures


@pytest.mark.parametrize(("text", "read"), [
    ("10.65 GiB", (10.65, "GiB")), ("504.00 MiB", (504.0, "MiB")), ("1024", (1024.0, None)),
    ("4 sequence(s)", (4.0, "seqs")), ("124.1 t/s", (124.1, "t/s")), ("n/a", None),
])
def test_a_figure_is_read_with_its_unit(text: str, read: tuple[float, str | None] | None) -> None:
    assert read_figure(text) == read


def test_memory_converts_and_other_units_do_not() -> None:
    assert convert(30.24, "GiB", "MiB") == pytest.approx(30965.76)
    assert convert(7488, "B", "KiB") == pytest.approx(7.3125)
    assert convert(124.1, "t/s", "MiB") is None
    assert convert(4, "seqs", None) == 4


def _submitted(*answers: dict[str, Any]) -> list[Event]:
    return [LEDGER, *(Event(version=2, session="s", seq=n + 2, time="t", kind="tool_call", tool="submit_answer",
                            ok=True, result={"answer": a}) for n, a in enumerate(answers))]


RESIZE_ANSWER = {"service": "frank-archon", "figures": [
    {"name": "ceiling", "value": 30.24, "unit": "GiB"},  # 30,969 MiB: 30.2432 GiB, written to 2 decimals
    {"name": "headroom_mib", "value": 1849, "unit": "MiB"},
    {"name": "contract_mib", "value": 6600.89, "unit": "MiB"}],
    "plan": {"pair_mib": 30969, "pool_mib": 6969, "seqs": 4}}


def test_a_submitted_answer_is_judged_on_its_values_in_their_units() -> None:
    report = score(RESIZE, _submitted(RESIZE_ANSWER), "no words at all", SERVICE_NAMES)
    assert report.answer == "submitted" and report.passed, report.facts
    assert report.facts[0].evidence == "submitted ceiling = 30.24 GiB"


def test_the_last_submitted_answer_counts_for_facts_and_traps() -> None:
    trap = {"service": "frank-archon", "figures": [{"name": "ceiling_mib", "value": 31178, "unit": "MiB"}]}
    corrected = score(RESIZE, _submitted(trap, RESIZE_ANSWER), "", SERVICE_NAMES)
    assert corrected.passed
    overridden = score(RESIZE, _submitted(RESIZE_ANSWER, trap), "", SERVICE_NAMES)
    assert overridden.broken == ("engine_ceiling",)
    assert [f.name for f in overridden.facts if not f.found] == ["ceiling_mib", "headroom_mib", "new_pool_mib",
                                                                "contract_mib_at_4_seqs"]


def test_a_submitted_figure_with_the_wrong_unit_or_service_is_not_credited() -> None:
    mislabelled = {**RESIZE_ANSWER, "figures": [{"name": "ceiling_mib", "value": 30969, "unit": "GiB"}]}
    report = score(RESIZE, _submitted(mislabelled), "", SERVICE_NAMES)
    assert not report.facts[0].found and "wrong unit" in report.facts[0].evidence  # the plan's pair does not save it
    pool = {"service": "frank-archon", "verdict": "fails_contract",
            "figures": [{"name": "required_mib", "value": 3524.45, "unit": "MiB"}]}
    facts = score(POOL, _submitted(pool), "", SERVICE_NAMES).facts
    assert [f.found for f in facts][:2] == [True, False] and "of frank-archon" in facts[1].evidence
    assert not score(POOL, _submitted({**pool, "service": "lowpool", "verdict": "meets_contract"}), "",
                     SERVICE_NAMES).facts[0].found


def test_submit_answer_calls_count_for_no_rule() -> None:
    refused = Event(version=2, session="s", seq=9, time="t", kind="tool_call", tool="submit_answer", ok=False,
                    error="submit_answer has no argument 'verdit'", rule="argument_names")
    report = score(RESIZE, [*_submitted(RESIZE_ANSWER), refused], "", SERVICE_NAMES)
    assert report.passed and report.calls == 1


@pytest.mark.parametrize(("scenario", "text", "found"), [
    (ARMS, "22,208 -> 24,000: fell 3.15 %; no plateau", [True, True]),
    (ARMS, "22,208 -> 24,000: \u22123.15\u2009%; no plateau", [True, True]),
    (BOUNDARY, "The ledger backs two sequences; 2/2 retrieved; 199,931 tokens", [True, True, True]),
    (BOUNDARY, "The ledger never backs 2 sequences; 2/2 retrieved; 199,931 tokens", [False, True, True]),
    (POOL, "lowpool's KV pool never fails its contract: 3,524.45 MiB; 163,279 tokens at 2 seats", [False, True, True]),
    (POOL, "frank-archon's KV pool fails its contract: 3,524.45 MiB. It backs 163,279 tokens at 2 seats",
     [False, False, False]),  # said of another service; the next sentence carries it
])
def test_text_is_read_claim_by_claim(scenario: Any, text: str, found: list[bool]) -> None:
    report = score(scenario, [LEDGER], text, SERVICE_NAMES)
    assert [f.found for f in report.facts] == found, report.facts
    assert report.answer == "text" and all(f.evidence.startswith("read from text") for f in report.facts)


@pytest.mark.parametrize(("text", "found"), [
    ("ceiling 30,969 MiB. On second thought, use 31,000 MiB for the pair.", False),  # the final claim counts
    ("ceiling 31,000 MiB per card. Correction: the ceiling is 30,969 MiB, not 31,000 MiB.", True),
    ("the ceiling is 30,969 MiB, 30,492 MiB or 30,282 MiB per card", False),  # a hedge claims none
    ("the ceiling is 30,969 GiB per card: 29,120 + 1,849 = 30,969 MiB", False),  # the figure with the wrong unit
    ("the ceiling is 30.24 GiB per card", True),  # converted, to the precision written
])
def test_the_final_claim_of_a_figure_counts(text: str, found: bool) -> None:
    assert score(RESIZE, [LEDGER], text, SERVICE_NAMES).facts[0].found is found


def test_a_negated_trap_figure_is_no_claim() -> None:
    text = "ceiling 30,969 MiB. Not 31,178 MiB: that is the pair plus the free memory."
    assert "engine_ceiling" not in score(RESIZE, [LEDGER], text, SERVICE_NAMES).broken
    assert "engine_ceiling" in score(RESIZE, [LEDGER], "the pair can grow to 31,178 MiB", SERVICE_NAMES).broken


async def test_submit_answer_is_offered_only_when_recording() -> None:
    async with Client(build_server(Runtime(Fleet()))) as client:
        assert "submit_answer" not in {t.name for t in (await client.list_tools()).tools}
    async with Client(build_server(Runtime(Fleet()), submit_answer=True)) as client:
        assert "submit_answer" in {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("submit_answer", {"service": "frank-archon", "verdict": "fails_contract",
                                                          "figures": [{"name": "x", "value": 1, "unit": "MiB"}]})
        assert not result.is_error and result.structured_content is not None
        assert result.structured_content["answer"]["verdict"] == "fails_contract"
        wrong = await client.call_tool("submit_answer", {"figures": [{"name": "x", "value": 1, "unit": "GB"}]})
        assert wrong.is_error and "figures[0].unit='GB'" in wrong.content[0].text  # type: ignore[union-attr]
