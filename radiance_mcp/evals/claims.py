"""What an answer claims, fact by fact: from the submitted answer (submit_answer) when there is one, else read
from its text.

Pure: the scenario's facts and traps, and the answer (an ``Answer`` as submitted, or text), in;
for each fact whether the answer's final claim states it, and the trap figures it claims, out.

A submitted answer is judged on its values: the last answer submitted, and within it each
figure by the last name given (the plan's pair, pool, seats and window are figures too); a
figure counts in the fact's unit (memory converted, the written precision kept), of the fact's
service (the figure's own, else the answer's); a verdict fact is judged on the verdict chosen,
or read from the answer's text when it chose none, or the fact names no choice.

Text is read as a careful reader reads it (radiance_mcp.evals.numbers reads the figures):
per fact, the claims are the figures within its tolerance, and the figures near it (within
``RESTATED``) that correct it ('on second thought, use 31,000 MiB') or offer another ('30,282
or 30,400'): the last claim counts. A figure or phrase under a negation in its clause ('not
31,178', 'never fails its contract') is no claim, and a verdict the answer negates anywhere is
not found. A claim of a service other than the fact's (named in its sentence, or the last one
named before it) is not credited. Each result says that it was read from text.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from radiance_mcp.evals.numbers import MIB_PER, PLAIN, Quantity, convert, dimension, normalise, quantities, slack
from radiance_mcp.evals.scenario import Fact, Scenario, Trap
from radiance_mcp.models.answer import FigureClaim, SubmitAnswerInput

RESTATED = 0.05
"""A figure within 5 % of a fact, offered as a correction or an alternative, is a claim of the fact."""
_NEGATORS = re.compile(r"\b(?:not|never|no|nor|neither|without|isn't|wasn't|doesn't|didn't|won't|cannot|can't)\b"
                       r"(?:\W+\w+){0,2}\W*$", re.IGNORECASE)
"""A negation among the three words before a claim, in its clause."""
_CORRECTION = re.compile(r"\b(?:on second thought|instead|actually|correction|rather|scratch that|use)\b",
                         re.IGNORECASE)
_ALTERNATIVE = re.compile(r"\bor(?: about| around| roughly| maybe| perhaps)? *$", re.IGNORECASE)
_SENTENCE = re.compile(r"(?:[^\n.!?]|[.!?](?=\S))+[.!?]*\n?")
"""A sentence: up to a full stop, ! or ? before a space, or a line's end (3,524.45 holds no full stop)."""
_CLAUSE_BREAK = re.compile(r",(?!\d)|[;:()\u2014]")
"""Where a clause ends: a comma that is no thousands separator, a semicolon, a colon, a bracket, a dash."""


@dataclass(frozen=True)
class Claim:
    found: bool
    evidence: str


@dataclass(frozen=True)
class Answer:
    """The final submitted answer: its figures (last per name, plan included), verdict, service, text."""

    service: str | None
    figures: tuple[FigureClaim, ...]
    verdict: str | None
    text: str

    @classmethod
    def of(cls, submitted: SubmitAnswerInput) -> Answer:
        figures = {f.name: f for f in submitted.figures}
        plan = submitted.plan
        if plan is not None:
            for name, unit in (("pair_mib", "MiB"), ("pool_mib", "MiB"), ("seqs", "seqs"),
                               ("max_model_len", "tokens")):
                value = getattr(plan, name)
                if value is not None:
                    figures[f"plan.{name}"] = FigureClaim.model_validate({"name": f"plan.{name}", "value": value,
                                                                          "unit": unit})
        return cls(submitted.service, tuple(figures.values()), submitted.verdict, submitted.text)


def fact_unit(fact: Fact) -> str | None:
    """The fact's unit: given, or read off its name (mib, gib, pct, per_s: contract_mib_at_4_seqs is in MiB);
    None: a count."""
    if fact.unit is not None:
        return fact.unit
    words = fact.name.split("_")
    for word, unit in (("mib", "MiB"), ("gib", "GiB"), ("pct", "%")):
        if word in words:
            return unit
    return "t/s" if "_per_s" in fact.name else None


def _of_fact(fact: Fact, scenario: Scenario) -> frozenset[str]:
    return frozenset(fact.services or scenario.asked_services)


def _within(value: float, unit: str | None, decimals: int, fact: Fact | Trap, to: str | None) -> bool:
    converted = convert(value, unit, to)
    if converted is None or (to is None and dimension(unit) != "count") or (unit in PLAIN and to not in PLAIN
                                                                                and to is not None):
        return False
    return abs(converted - fact.value) <= fact.tolerance + slack(unit, to, decimals) + 1e-9  # type: ignore[operator]


def _wrong_unit(value: float, unit: str | None, fact: Fact | Trap, to: str | None) -> bool:
    """The fact's figure with another memory unit: 30,969 GiB for 30,969 MiB states a false figure."""
    assert fact.value is not None
    return (unit in MIB_PER and to in MIB_PER and unit != to
            and abs(value - fact.value) <= fact.tolerance + 1e-9)


def _decimals(value: float) -> int:
    text = repr(float(value))
    return 0 if "e" in text else len(text.partition(".")[2].rstrip("0"))


# ---------------------------------------------------------------------------------------
# A submitted answer


def submitted_fact(fact: Fact, scenario: Scenario, answer: Answer, services: Collection[str]) -> Claim:
    if fact.value is None:
        if fact.verdict is not None and answer.verdict is not None:
            chosen = answer.verdict == fact.verdict
            return Claim(chosen, f"the submitted verdict is {answer.verdict}" + ("" if chosen else
                                                                                   f", not {fact.verdict}"))
        read = text_fact(fact, scenario, answer.text, services, default=answer.service)
        return Claim(read.found, f"{read.evidence} (the submitted text)")
    of = _of_fact(fact, scenario)
    unit = fact_unit(fact)
    mislabelled = next((f for f in answer.figures if _wrong_unit(f.value, f.unit, fact, unit)), None)
    if mislabelled is not None:
        return Claim(False, f"submitted {mislabelled.name} = {mislabelled.value:,g} {mislabelled.unit}: the "
                            f"figure with the wrong unit ({unit})")
    for figure in answer.figures:
        if _within(figure.value, figure.unit, _decimals(figure.value), fact, unit):
            whose = figure.service or answer.service
            if of and whose is not None and whose not in of:
                return Claim(False, f"submitted {figure.name} = {figure.value:,g} {figure.unit} of {whose}, "
                                    f"not of {', '.join(sorted(of))}")
            return Claim(True, f"submitted {figure.name} = {figure.value:,g} {figure.unit}")
    return Claim(False, "no submitted figure within tolerance")


def submitted_traps(trap: Trap, answer: Answer) -> list[str]:
    return [f"submitted {f.name} = {f.value:,g} {f.unit}" for f in answer.figures
            if _within(f.value, f.unit, _decimals(f.value), trap, trap.unit)]


# ---------------------------------------------------------------------------------------
# Free text


@dataclass(frozen=True)
class _Text:
    """A normalised answer, its sentences with the services each names (or carries from before)."""

    text: str
    sentences: tuple[tuple[int, int, frozenset[str]], ...]

    @classmethod
    def read(cls, answer: str, services: Collection[str], default: str | None = None) -> _Text:
        text = normalise(answer)
        names = sorted(services, key=len, reverse=True)
        pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])") if names else None
        sentences = []
        carried = frozenset({default} if default else ())
        for match in _SENTENCE.finditer(text):
            named = frozenset(pattern.findall(match.group(0))) if pattern else frozenset()
            carried = named or carried
            sentences.append((match.start(), match.end(), carried))
        return cls(text, tuple(sentences))

    def sentence(self, at: int) -> tuple[int, int, frozenset[str]]:
        return next((s for s in self.sentences if s[0] <= at < s[1]), (0, len(self.text), frozenset()))

    def clause_before(self, at: int) -> str:
        start = self.sentence(at)[0]
        before = self.text[start:at]
        breaks = list(_CLAUSE_BREAK.finditer(before))
        return before[breaks[-1].end():] if breaks else before

    def negated(self, at: int) -> bool:
        return _NEGATORS.search(self.clause_before(at)) is not None

    def whose(self, at: int) -> frozenset[str]:
        return self.sentence(at)[2]


def _service_problem(text: _Text, at: int, of: frozenset[str]) -> str | None:
    whose = text.whose(at)
    if of and whose and not whose & of:
        return f"said of {', '.join(sorted(whose))}, not of {', '.join(sorted(of))}"
    return None


Kind = str
"""How a figure claims a fact: 'states' it, 'corrects' it (a correction near it), offers an 'alternative'
(a hedge: '30,282 or 30,400'), or states it with a 'wrong unit'."""


def _claims(text: _Text, fact: Fact | Trap, unit: str | None) -> list[tuple[Quantity, Kind]]:
    """The figures claiming the fact, in order, each with how it claims it; negated figures are none."""
    out = []
    assert fact.value is not None
    for q in quantities(text.text):
        if text.negated(q.start):
            continue
        alternative = _ALTERNATIVE.search(text.clause_before(q.start)) is not None
        if _within(q.value, q.unit, q.decimals, fact, unit):
            out.append((q, "alternative" if alternative else "states"))
        elif _wrong_unit(q.value, q.unit, fact, unit):
            out.append((q, "wrong unit"))
        elif (converted := convert(q.value, q.unit, unit)) is not None and fact.value and \
                abs(converted - fact.value) <= RESTATED * abs(fact.value):
            if alternative:
                out.append((q, "alternative"))
            elif _CORRECTION.search(text.text[text.sentence(q.start)[0]:q.start]):
                out.append((q, "corrects"))
    return out


def text_fact(fact: Fact, scenario: Scenario, answer: str, services: Collection[str],
              default: str | None = None) -> Claim:
    text = _Text.read(answer, services, default)
    of = _of_fact(fact, scenario)
    if fact.value is None:
        return _phrase(fact, text, of)
    every = _claims(text, fact, fact_unit(fact))
    claims = [(q, kind) for q, kind in every if _service_problem(text, q.start, of) is None]
    offered = [q for q, kind in claims if kind in ("states", "alternative")]
    if any(kind == "alternative" for _, kind in claims) and len({q.value for q in offered}) > 1:
        return Claim(False, f"read from text: the answer hedges between {' and '.join(q.written for q in offered)}")
    claims = [(q, "states" if kind == "alternative" else kind) for q, kind in claims]
    mislabelled = next((q for q, kind in claims if kind == "wrong unit"), None)
    if mislabelled is not None:
        return Claim(False, f"read from text: the answer states {mislabelled.written}: the figure with the wrong unit")
    if not claims:
        wrong = next((p for q, kind in every if kind == "states" and (p := _service_problem(text, q.start, of))),
                     None)
        return Claim(False, f"read from text: {wrong}" if wrong else "read from text: no figure within tolerance")
    last, kind = claims[-1]
    if kind != "states":
        first = next((q for q, k in claims if k == "states"), None)
        before = f"stated {first.written}, then " if first else ""
        return Claim(False, f"read from text: {before}the final claim is {last.written!r}")
    return Claim(True, f"read from text: the answer states {last.written}")


def _phrase(fact: Fact, text: _Text, of: frozenset[str]) -> Claim:
    lowered = text.text.casefold()
    found = None
    for phrase in fact.any_of:
        wanted = normalise(phrase).casefold()
        for match in re.finditer(re.escape(wanted), lowered):
            if text.negated(match.start()):
                return Claim(False, f"read from text: the answer negates {phrase!r}: "
                                    f"{text.text[max(0, match.start() - 24):match.end()].strip()!r}")
            problem = _service_problem(text, match.start(), of)
            if problem:
                return Claim(False, f"read from text: {phrase!r} {problem}")
            found = found or phrase
    if found is None:
        return Claim(False, "read from text: none of the phrases")
    return Claim(True, f"read from text: the answer says {found!r}")


def text_traps(trap: Trap, scenario: Scenario, answer: str, services: Collection[str]) -> list[str]:
    text = _Text.read(answer, services)
    of = frozenset(scenario.asked_services)
    return [f"the answer states {q.written}" for q, kind in _claims(text, trap, trap.unit)
            if kind == "states" and _service_problem(text, q.start, of) is None]

