"""The scorer: a scenario, the record of a run and the agent's final answer -> a Report.

Pure: events and text in, a Report out. The answer is the one the agent submitted through
submit_answer (the record's last accepted call of it) when there is one, else the final answer's
text; radiance_mcp.evals.claims judges each fact and trap on it (typed values, or claims read
from text as people write them: radiance_mcp.evals.numbers), and each result says which it was
read from. A figure is credited only where a successful tool result for the scenario's services
holds it (within the fact's tolerance and ``GROUND_SLACK``); one the run's results do not hold is
"ungrounded", not found. A rule is broken when the record or the answer holds its evidence
(radiance_mcp.evals.rules says how each is caught; the answer's plan is judged by the rule book
in radiance_mcp.evals.plans); the rules a scenario lists are reported kept otherwise, and any
other rule the run broke is reported too. The skills' step order (rules.STEPS) is reported where
the run exercised it. submit_answer is the answer, not a step of the procedure: its calls count
for no rule. The report passes when every fact is found and no rule is broken.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Collection, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from radiance_mcp.core.constants import MIN_DECODE_TOKENS
from radiance_mcp.evals.claims import (
    Answer,
    Claim,
    Text,
    blames_image,
    fact_unit,
    read_text,
    submitted_fact,
    submitted_traps,
    takes_reserve,
    text_fact,
    text_traps,
)
from radiance_mcp.evals.numbers import MIB_PER, convert, normalise, numbers_in, quantities
from radiance_mcp.evals.plans import Plan, judge_plan, plan_of
from radiance_mcp.evals.record import GENUINE, GENUINE_STATEMENT, Binding, Check, Event
from radiance_mcp.evals.rules import BY_NAME, NAMES, STEPS, Rule
from radiance_mcp.evals.scenario import Fact, Scenario
from radiance_mcp.models.answer import TOOL as SUBMIT_ANSWER
from radiance_mcp.models.answer import SubmitAnswerInput

__all__ = ["MAX_ANSWER_BYTES", "Report", "numbers_in", "render_table", "score", "submitted_answer"]

MAX_ANSWER_BYTES = 1024 * 1024
"""The longest final answer eval reads (--answer): an agent's is a few KiB; 100 MB took 72 s and 0.5 GB to score."""
AnswerSource = Literal["submitted", "text"]


class Evidence(BaseModel):
    model_config = ConfigDict(frozen=True)

    call: int | None = None
    """The record's seq of the call, when the evidence is a call."""
    tool: str | None = None
    text: str
    """What was seen: the refusal, the argument, the answer's figure, or what is missing."""


class FactResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    found: bool
    expected: str
    evidence: str
    """The answer's figure or phrase that matched, or what it lacked."""


class RuleResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    statement: str
    kept: bool
    listed: bool
    """True when the scenario lists the rule; a rule broken but not listed is reported all the same."""
    evidence: tuple[Evidence, ...] = ()
    judged: bool = True
    """False: nothing in the run put the rule to the test (no call of a tool that enforces it, no plan given);
    reported kept, and left out of the score."""


class Report(BaseModel):
    model_config = ConfigDict(frozen=True)

    scenario: str
    procedure: str
    facts: tuple[FactResult, ...]
    rules: tuple[RuleResult, ...]
    calls: int
    answer: AnswerSource = "text"
    """Where the facts were judged: 'submitted', the answer submit_answer took last; 'text', read from the
    final answer's words."""
    binding: tuple[Check, ...] = ()
    """The record's binding checks (evals.binding), each passed, failed or not made; none when not made at all."""

    @property
    def complete(self) -> bool:
        """False when the record lost lines: the run is judged incomplete, never passed."""
        return Binding(checks=self.binding).complete

    @property
    def passed(self) -> bool:
        return self.complete and all(f.found for f in self.facts) and all(r.kept for r in self.rules)

    @property
    def broken(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.rules if not r.kept)

    @property
    def score(self) -> float:
        """Facts found and rules kept, over the facts and the rules judged (1.0 is 100 %)."""
        judged = [r for r in self.rules if r.judged]
        total = len(self.facts) + len(judged)
        return (sum(f.found for f in self.facts) + sum(r.kept for r in judged)) / total if total else 1.0

    def to_json(self) -> dict[str, Any]:
        return {**self.model_dump(mode="json"), "passed": self.passed, "complete": self.complete,
                "score": round(self.score, 4), "broken": list(self.broken)}


def submitted_answer(events: Sequence[Event]) -> Answer | None:
    """The last answer submit_answer accepted in the record (its result: the answer as the server read it)."""
    for event in reversed(events):
        if event.kind == "tool_call" and event.tool == SUBMIT_ANSWER and event.ok and event.result:
            try:
                return Answer.of(SubmitAnswerInput.model_validate(event.result.get("answer")))
            except ValidationError:
                continue
    return None


def _expected(value: float | None, tolerance: float, any_of: Sequence[str]) -> str:
    return f"{value:,g} +- {tolerance:g}" if value is not None else " | ".join(any_of)


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _call_evidence(rule: Rule, call: Event) -> str | None:
    """The argument that breaks the rule in an accepted or refused call, if any."""
    args = call.arguments or {}
    if rule.name == "reserve_traced":
        for reserve in _listed(args, "reserves"):
            if isinstance(reserve, dict) and reserve.get("line") is None and reserve.get("personal") is not True:
                return f"a reserve with neither line nor personal=true: {_short(reserve)}"
    elif rule.name == "decode_tokens" and call.tool == "decode_probe":
        gen = args.get("gen_tokens")
        if isinstance(gen, int | float) and not isinstance(gen, bool) and gen < MIN_DECODE_TOKENS:
            return f"gen_tokens={gen}"
    elif rule.name == "probe_within_shape" and call.tool == "boundary_probe":
        if args.get("over_shape") is True or args.get("over_shape") == "true":
            return f"over_shape=true with n={args.get('n')}"
    elif rule.name == "no_two_arm_claim" and call.tool == "compare_arms":
        arms = _listed(args, "arms")
        if args.get("claim") and len(arms) < 3:
            return f"claim={args.get('claim')!r} on {len(arms)} arms"
    return None


def _listed(args: dict[str, Any], key: str) -> list[Any]:
    """A list argument; clients sometimes send a nested list as a JSON string, which the server reads as one."""
    value = args.get(key)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return value if isinstance(value, list) else []


def _required_met(rule: Rule, calls: Sequence[Event]) -> bool:
    for call in calls:
        if call.ok and call.tool in rule.required_tools:
            if rule.name == "cold_rate" and not ((call.result or {}).get("cold") and (call.result or {}).get("valid")):
                continue
            return True
    return False


def _rule(rule: Rule, scenario: Scenario, calls: Sequence[Event], traps: Sequence[list[str]],
          seen: dict[str, list[Evidence]]) -> list[Evidence]:
    evidence: list[Evidence] = []
    for call in calls:
        if "refusal" in rule.detection and not call.ok and call.rule == rule.name:
            evidence.append(Evidence(call=call.seq, tool=call.tool, text=f"refused: {_short(call.error or '')}"))
        elif "call" in rule.detection and (said := _call_evidence(rule, call)):
            evidence.append(Evidence(call=call.seq, tool=call.tool, text=said))
    if "trap" in rule.detection:
        for number, trap in enumerate(scenario.traps):
            if trap.rule == rule.name and traps[number]:
                evidence.append(Evidence(text=f"{traps[number][0]}: {trap.why or 'a trap figure'}"))
    if "required" in rule.detection and rule.name in scenario.rules and not _required_met(rule, calls):
        tools = ", ".join(sorted(rule.required_tools))
        evidence.append(Evidence(text=f"no successful call of {tools} in the run's {len(calls)} call(s)"))
    return evidence + seen.get(rule.name, [])


GROUND_SLACK = 0.5
"""How far a tool's figure may sit from a fact and still hold it: a result's 30,969.12 holds 30,969."""


def _figures(value: Any) -> list[tuple[float, str | None]]:
    """Every figure a tool result holds: its numbers (no unit: the result's own, MiB for memory) and the figures
    its strings write ('10.65 GiB')."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [(float(value), None)]
    if isinstance(value, str):
        return [(q.value, q.unit) for q in quantities(normalise(value))]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [figure for item in items for figure in _figures(item)]


def _grounded(fact: Fact, held: Sequence[tuple[float, str | None]]) -> bool:
    """Some successful result holds the fact's figure (a bare number read in the fact's unit, or in MiB for
    memory), within the fact's tolerance and GROUND_SLACK of the unit it is in."""
    unit = fact_unit(fact)
    assert fact.value is not None
    for value, written in held:
        for read_as in [written] if written else [unit, "MiB"] if unit in MIB_PER else [unit]:
            converted, slack = convert(value, read_as, unit), convert(GROUND_SLACK, read_as, unit)
            if converted is not None and slack is not None and abs(converted - fact.value) <= fact.tolerance + slack:
                return True
    return False


def _ground(claims: list[Claim], scenario: Scenario, calls: Sequence[Event]) -> list[Claim]:
    """A figure credited only where a successful tool result for the scenario's services holds it (a call that
    names another service, or reads the agent's own log_text, grounds none); else ungrounded."""
    ours = set(scenario.service_names)

    def grounds(call: Event) -> bool:
        args = call.arguments or {}
        named = {v for k, v in args.items() if k.endswith("service") and isinstance(v, str)}
        return bool(call.ok and call.result) and named <= ours and not any(k.endswith("log_text") for k in args)

    held = [f for c in calls if grounds(c) for f in _figures(c.result)]
    return [claim if not claim.found or fact.value is None or _grounded(fact, held) else
            Claim(False, f"{claim.evidence}; ungrounded: no successful tool result of the run holds it")
            for fact, claim in zip(scenario.facts, claims, strict=True)]


def _exercised(rule: Rule, scenario: Scenario, calls: Sequence[Event], planned: bool) -> bool:
    """Something in the run put the rule to the test: the scenario itself (a required call, a trap figure), a
    call of a tool that enforces it (any call, for argument_names), or a plan the answer gives."""
    if "required" in rule.detection or any(t.rule == rule.name for t in scenario.traps):
        return True
    if "plan" in rule.detection and planned:
        return True
    return any(rule.exercised_by is None or c.tool in rule.exercised_by for c in calls)


def _answer_evidence(scenario: Scenario, calls: Sequence[Event], submitted: Answer | None, text: Text,
                     plan: Plan | None) -> dict[str, list[Evidence]]:
    """What the answer itself breaks: its plan judged by the rule book, a reserve it takes that no tool was given,
    the image blamed after the audit."""
    seen: dict[str, list[Evidence]] = {}
    service = (submitted.service if submitted else None) or next(iter(scenario.asked_services), None)
    if plan is not None and scenario.procedure == "radiance-kv-cache-resize":
        for check in judge_plan(plan, calls, service):
            seen.setdefault(check.rule, []).append(Evidence(text=f"{plan.where}: {check.arithmetic}"))
    reserve = takes_reserve(text)
    if reserve is not None and not any(_listed(c.arguments or {}, "reserves") for c in calls):
        seen["reserve_traced"] = [Evidence(text=f"the answer takes a reserve no tool was given: {reserve!r}")]
    audit = next((c.result for c in reversed(calls) if c.ok and c.tool == "audit_step_shape" and c.result), None)
    blamed = blames_image(text)
    if blamed is not None and audit is not None and audit.get("verdict") == "refused":
        seen["audit_before_image"] = [Evidence(text=f"the answer blames the image: {blamed!r}, after an audit that "
                                                    "refused the candidate's step shape")]
    return seen


def _ok_index(calls: Sequence[Event], tool: str, after: int = -1, **arguments: Any) -> int | None:
    """The place of the first successful call of the tool after ``after`` (with those arguments), if any."""
    for index, call in enumerate(calls):
        args = call.arguments or {}
        if index > after and call.ok and call.tool == tool and all(
                (args.get(k) in (None, False, "false")) == (v is None) for k, v in arguments.items()):
            return index
    return None


_SERVE_SCRIPT = re.compile(r"\bserve[- ]script\b", re.IGNORECASE)
"""How an answer names the serve script it makes a finding of."""


def _step(name: str, scenario: Scenario, calls: Sequence[Event], text: Text) -> list[Evidence] | None:
    """The evidence a step-order rule is broken (empty: kept), or None: nothing exercised it."""
    tools = [c.tool for c in calls]
    if name == "plan_before_execute":
        executed = next((i for i, c in enumerate(calls) if c.tool == "boundary_probe"
                         and (c.arguments or {}).get("execute") in (True, "true")), None)
        if executed is None:
            return None
        planned = _ok_index(calls, "boundary_probe", execute=None)
        return [] if planned is not None and planned < executed else [Evidence(
            call=calls[executed].seq, tool="boundary_probe", text="execute=true with no boundary_probe plan before it")]
    if name == "serve_script_checked":  # judged where the answer makes a serve-script finding, or a call checked
        finding = name in scenario.rules and _SERVE_SCRIPT.search(text.text) is not None
        if not finding and not {"check_serve_script", "compare_dry_run"} & set(tools):
            return None
        at = _ok_index(calls, "audit_step_shape")  # an audit missing is audit_before_image's to say
        at = -1 if at is None else at
        for tool in ("check_serve_script", "compare_dry_run"):
            found = _ok_index(calls, tool, at)
            if found is None:
                return [Evidence(text=f"no successful {tool} after the step before it (the audit, then "
                                      "check_serve_script, then compare_dry_run)")]
            at = found
        return []
    verified = _ok_index(calls, "verify_deploy")
    if verified is None:
        return None
    gates = _ok_index(calls, "render_gates")
    return [] if gates is not None and gates < verified else [Evidence(
        call=calls[verified].seq, tool="verify_deploy", text="verify_deploy with no render_gates before it")]


def score(scenario: Scenario, events: Sequence[Event], answer: str, services: Collection[str] = (),
          binding: Binding | None = None) -> Report:
    """Score one run: the scenario, the record's events and the agent's final answer.

    services: names of services an answer may name besides the scenario's (evals.fleet.SERVICE_NAMES), so
    a figure said of one of them is not credited to the service asked. binding: the record's checks against
    the scenario's fleet (evals.binding.bind); one that failed breaks record_genuine, an incomplete record
    is never passed.
    """
    calls = [e for e in events if e.kind == "tool_call" and e.tool != SUBMIT_ANSWER]
    names = {*scenario.service_names, *scenario.asked_services, *services}
    submitted = submitted_answer(events)
    if submitted is not None:
        claims = [submitted_fact(f, scenario, submitted, names) for f in scenario.facts]
        traps = [submitted_traps(t, submitted) for t in scenario.traps]
        text = read_text(submitted.text, names, default=submitted.service)
    else:
        text = read_text(answer, names)
        claims = [text_fact(f, scenario, text) for f in scenario.facts]
        traps = [text_traps(t, scenario, text) for t in scenario.traps]
    claims = _ground(claims, scenario, calls)
    read_from: AnswerSource = "submitted" if submitted is not None else "text"
    facts = tuple(FactResult(name=f.name, found=c.found, evidence=c.evidence,
                             expected=_expected(f.value, f.tolerance, f.any_of))
                  for f, c in zip(scenario.facts, claims, strict=True))
    plan = plan_of(submitted.plan if submitted else None, text.text)
    seen = _answer_evidence(scenario, calls, submitted, text, plan)
    results = []
    for rule in BY_NAME.values():
        evidence = _rule(rule, scenario, calls, traps, seen)
        listed = rule.name in scenario.rules
        if listed or evidence:
            results.append(RuleResult(name=rule.name, statement=rule.statement, kept=not evidence, listed=listed,
                                      evidence=tuple(evidence),
                                      judged=bool(evidence) or _exercised(rule, scenario, calls, plan is not None)))
    for name, statement in STEPS.items():
        found = _step(name, scenario, calls, text)
        if found is not None:
            results.append(RuleResult(name=name, statement=statement, kept=not found, listed=name in scenario.rules,
                                      evidence=tuple(found)))
    if binding is not None and binding.failed:
        results.append(RuleResult(name=GENUINE, statement=GENUINE_STATEMENT, kept=False, listed=False,
                                  evidence=tuple(Evidence(text=f"refused: {c.name}: {c.text}")
                                                 for c in binding.failed)))
    return Report(scenario=scenario.name, procedure=scenario.procedure, facts=facts, rules=tuple(results),
                  calls=len(calls), answer=read_from, binding=binding.checks if binding else ())


def render_table(reports: Sequence[Report], columns: int = 120) -> str:
    """Plain text within columns: one row per scenario (rules kept of those judged; a long result wrapped under
    itself), then one per rule (kept, broken, not judged across the runs), then the evidence, each wrapped."""

    def wrapped(lead: str, text: str, indent: int) -> list[str]:
        return textwrap.wrap(text, columns, initial_indent=lead, subsequent_indent=" " * indent,
                             break_on_hyphens=False) or [lead]

    lines = [f"{'scenario':<34} {'facts':>7} {'rules':>7} {'score':>6}  result"]
    for r in reports:
        found = sum(f.found for f in r.facts)
        judged = [x for x in r.rules if x.judged]
        kept = sum(x.kept for x in judged)
        verdict = "pass" if r.passed else "FAIL " + ", ".join(
            [f"missed {f.name}" for f in r.facts if not f.found] + [f"broke {n}" for n in r.broken])
        verdict = verdict if r.complete else "INCOMPLETE (the record lost lines), " + verdict
        verdict += " (answer read from text)" if r.answer == "text" else ""
        unmade = [c.name for c in r.binding if c.status == "not made"]
        verdict += f" (binding not made: {', '.join(unmade)})" if unmade else ""
        unjudged = [x.name for x in r.rules if not x.judged]
        verdict += f" (not judged: {', '.join(unjudged)})" if unjudged else ""
        lead = f"{r.scenario:<34} {found:>3}/{len(r.facts):<3} {kept:>3}/{len(judged):<3} {r.score:>6.0%}  "
        lines += wrapped(lead, verdict, len(lead))
    lines += ["", f"{'rule':<22} {'kept':>5} {'broken':>7} {'not judged':>11}"]
    for name in [*NAMES, GENUINE]:
        rows = [x for r in reports for x in r.rules if x.name == name]
        kept = sum(x.kept and x.judged for x in rows)
        broken = sum(not x.kept for x in rows)
        if rows:
            lines.append(f"{name:<22} {kept:>5} {broken:>7} {sum(not x.judged for x in rows):>11}")
    details = [(r, x) for r in reports for x in r.rules if not x.kept]
    if details:
        lines += ["", "evidence:"]
        for report, result in details:
            for item in result.evidence:
                where = f"call {item.call} {item.tool}: " if item.call is not None else "answer/record: "
                lines += wrapped("  ", f"{report.scenario}: {result.name}: {where}{item.text}", 4)
    return "\n".join(lines)
