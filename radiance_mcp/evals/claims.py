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
not found. A trap's figure in a sentence that goes on to deny it (a negation after it that no later
figure takes: 'card 0 alone would allow 30,969 MiB, but it does not bind') is said for contrast, no
claim. A claim of a service other than the fact's (named in its sentence, or the last one
named before it) is not credited. Each result says that it was read from text.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from radiance_mcp.evals.numbers import MIB_PER, Quantity, convert, normalise, quantities, slack
from radiance_mcp.evals.scenario import Fact, Scenario, Trap
from radiance_mcp.models.answer import FigureClaim, PlanClaim, SubmitAnswerInput

RESTATED = 0.05
"""A figure within 5 % of a fact, offered as a correction or an alternative, is a claim of the fact."""
NEGATORS = frozenset({"not", "never", "no", "nor", "neither", "without", "cannot"})
"""Words that negate a claim among the three words before it, in its clause (and any word ending in n't)."""
HEDGES = frozenset({"about", "around", "roughly", "maybe", "perhaps"})
"""Words between 'or' and a figure it offers: '30,282 or about 30,400'."""
VERDICT_WORDS: dict[str, tuple[str, ...]] = {
    "fails_contract": ("fails its contract", "too small for its contract", "short of its contract",
                       "smaller than its contract", "below its contract"),
    "meets_contract": ("meets its contract", "holds its contract"),
    "thinking_on": ("thinks first", "thinking on", "model thinks", "thinks before"),
    "warm_prefix_cache": ("warm prefix cache", "prefix cache hit", "cached prefix"),
    "first_token_noise": ("first-token noise", "first token noise"),
    "no_plateau": ("no plateau", "cannot show a plateau", "not to read a plateau"),
}
"""Other words people give a verdict in, by the submitted verdict (models.answer.Verdict) they state: a verdict
fact is found by its own phrases or these."""
_CORRECTION = re.compile(r"\b(?:on second thought|instead|actually|correction|rather|scratch that|use)\b",
                         re.IGNORECASE)
_SENTENCE = re.compile(r"(?:[^\n.!?]|[.!?](?=\S))+[.!?]*\n?")
"""A sentence: up to a full stop, ! or ? before a space, or a line's end (3,524.45 holds no full stop)."""
_TOKEN = re.compile(r"(?P<word>[\w']+)|,(?!\d)|[;:()\u2014\n]|[.!?](?=\s|$)")
"""A word, or where a clause ends: a comma that is no thousands separator, a semicolon, a colon, a bracket, a
dash, a line's or a sentence's end."""
LOOK_BACK_CHARS = 160
"""How far back in its sentence a figure's correction cue is looked for."""


def _negates(word: str) -> bool:
    """A negating word: one of NEGATORS, or one ending in n't (the words are lower-cased)."""
    return word in NEGATORS or word.endswith("n't")


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
    plan: PlanClaim | None = None

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
        return cls(submitted.service, tuple(figures.values()), submitted.verdict, submitted.text, plan)


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
    """The figure, in the fact's unit, states the fact's value (None: it measures something else)."""
    converted = convert(value, unit, to)
    assert fact.value is not None
    return converted is not None and abs(converted - fact.value) <= fact.tolerance + slack(unit, to, decimals) + 1e-9


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
        read = text_fact(fact, scenario, read_text(answer.text, services, default=answer.service))
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
class Seen:
    """A figure of the answer, and what its words before it say: negated, offered as another value, a correction."""

    figure: Quantity
    negated: bool
    offers: bool
    corrects: bool


@dataclass(frozen=True)
class Text:
    """A normalised answer, read once for every fact: its sentences (where each starts, the services it names
    or carries from before), its words and clause breaks (a break is an empty word), the places of its
    correction cues, and its figures."""

    text: str
    starts: tuple[int, ...]
    services: tuple[frozenset[str], ...]
    word_starts: tuple[int, ...] = ()
    words: tuple[str, ...] = ()
    cues: tuple[int, ...] = ()
    figures: tuple[Seen, ...] = ()

    def _index(self, at: int, starts: tuple[int, ...]) -> int:
        return max(0, bisect.bisect_right(starts, at) - 1)

    def last_words(self, at: int) -> list[str]:
        """The clause's last three words before ``at``, lower-cased."""
        out: list[str] = []
        for word in reversed(self.words[max(0, bisect.bisect_left(self.word_starts, at) - 3):
                                        bisect.bisect_left(self.word_starts, at)]):
            if not word:
                break
            out.insert(0, word)
        return out

    def negated(self, at: int) -> bool:
        return any(map(_negates, self.last_words(at)))

    def offered(self, at: int) -> bool:
        """The figure is offered after 'or': another value."""
        words = self.last_words(at)
        return bool(words) and (words[-1] == "or" or (len(words) > 1 and words[-2] == "or" and words[-1] in HEDGES))

    def corrected(self, at: int) -> bool:
        """A correction cue earlier in the figure's sentence, within LOOK_BACK_CHARS."""
        since = max(self.starts[self._index(at, self.starts)] if self.starts else 0, at - LOOK_BACK_CHARS)
        return bisect.bisect_left(self.cues, at) > bisect.bisect_left(self.cues, since)

    def disowned(self, at: int) -> bool:
        """Later in the figure's sentence a negation that no later figure takes: the sentence states the figure
        to deny it ('card 0 alone would allow 30,969 MiB, but it does not bind', '31,178 MiB is not spare
        capacity'), where '31,178 MiB, not 30,969' negates the figure after it."""
        number = self._index(at, self.starts)
        end = self.starts[number + 1] if number + 1 < len(self.starts) else len(self.text)
        words = self.words[bisect.bisect_right(self.word_starts, at):bisect.bisect_left(self.word_starts, end)]
        denials = sum(map(_negates, words))
        taken = sum(s.negated for s in self.figures if at < s.figure.start < end)
        return denials > taken

    def whose(self, at: int) -> frozenset[str]:
        return self.services[self._index(at, self.starts)] if self.starts else frozenset()


def _without_data(text: str) -> str:
    """The text with each line that is a JSON object or array blanked (kept as long): a tool's result pasted
    whole is data quoted, not a claim, and an answer of nothing else claims nothing."""
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines):
        stripped = line.strip()
        if stripped[:1] in "{[" and stripped:
            try:
                data = json.loads(stripped)
            except (ValueError, RecursionError):
                continue
            if isinstance(data, dict | list):
                lines[number] = " " * len(line.rstrip("\n")) + line[len(line.rstrip("\n")):]
    return "".join(lines)


def read_text(answer: str, services: Collection[str], default: str | None = None) -> Text:
    """The answer read once for every fact: services are the names a sentence may give a figure to; default,
    the service of the sentences before any is named."""
    text = _without_data(normalise(answer))
    names = sorted(services, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])") if names else None
    starts, whose = [], []
    carried = frozenset({default} if default else ())
    for match in _SENTENCE.finditer(text):
        named = frozenset(pattern.findall(match.group(0))) if pattern else frozenset()
        carried = named or carried
        starts.append(match.start())
        whose.append(carried)
    tokens = [(m.start(), (m.group("word") or "").lower()) for m in _TOKEN.finditer(text)]
    read = Text(text, tuple(starts), tuple(whose), tuple(t[0] for t in tokens), tuple(t[1] for t in tokens),
                tuple(m.start() for m in _CORRECTION.finditer(text)))
    seen = tuple(Seen(q, read.negated(q.start), read.offered(q.start), read.corrected(q.start))
                 for q in quantities(text))
    return Text(text, read.starts, read.services, read.word_starts, read.words, read.cues, seen)


def _service_problem(text: Text, at: int, of: frozenset[str]) -> str | None:
    whose = text.whose(at)
    if of and whose and not whose & of:
        return f"said of {', '.join(sorted(whose))}, not of {', '.join(sorted(of))}"
    return None


Kind = Literal["states", "corrects", "offers", "wrong unit"]
"""How a figure claims a fact: it states it (within tolerance); near it, it corrects it ('use 31,000') or offers
another value ('30,282 or 30,400': a hedge); or it states the fact's figure with the wrong unit."""


def _claims(text: Text, fact: Fact | Trap, unit: str | None) -> list[tuple[Quantity, Kind]]:
    """The figures claiming the fact, in order, each with how it claims it; negated figures are none."""
    out: list[tuple[Quantity, Kind]] = []
    assert fact.value is not None
    near = RESTATED * abs(fact.value)
    for seen in text.figures:
        q = seen.figure
        converted = convert(q.value, q.unit, unit)
        if seen.negated or converted is None:
            continue
        off = abs(converted - fact.value)
        if off <= fact.tolerance + slack(q.unit, unit, q.decimals) + 1e-9:
            out.append((q, "states"))
        elif _wrong_unit(q.value, q.unit, fact, unit):
            out.append((q, "wrong unit"))
        elif off <= near:
            if seen.offers:
                out.append((q, "offers"))
            elif seen.corrects:
                out.append((q, "corrects"))
    return out


def text_fact(fact: Fact, scenario: Scenario, text: Text) -> Claim:
    """The fact judged on the answer's words: the final claim of it, of its service, not negated."""
    of = _of_fact(fact, scenario)
    if fact.value is None:
        return _phrase(fact, text, of)
    every = _claims(text, fact, fact_unit(fact))
    claims = [(q, kind) for q, kind in every if _service_problem(text, q.start, of) is None]
    if any(kind == "offers" for _, kind in claims) and any(kind == "states" for _, kind in claims):
        offered = " and ".join(q.written for q, kind in claims if kind in ("states", "offers"))
        return Claim(False, f"read from text: the answer hedges between {offered}")
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


def _phrase(fact: Fact, text: Text, of: frozenset[str]) -> Claim:
    """A verdict: one of its phrases said of the fact's service; any phrase of it negated denies it."""
    lowered = text.text.casefold()
    found, elsewhere = None, None
    for phrase in (*fact.any_of, *VERDICT_WORDS.get(fact.verdict or "", ())):
        for match in re.finditer(re.escape(normalise(phrase).casefold()), lowered):
            if text.negated(match.start()):
                return Claim(False, f"read from text: the answer negates {phrase!r}: "
                                    f"{text.text[max(0, match.start() - 24):match.end()].strip()!r}")
            problem = _service_problem(text, match.start(), of)
            if problem:
                elsewhere = elsewhere or f"{phrase!r} {problem}"
            else:
                found = found or phrase
    if found is not None:
        return Claim(True, f"read from text: the answer says {found!r}")
    return Claim(False, f"read from text: {elsewhere or 'none of the phrases'}")


_BLAME = re.compile(r"\b(?:image|environment)\b[^.;\n]{0,40}?\b(?:at fault|to blame|the cause|caused)\b"
                    r"|\b(?:roll(?:ing)?|revert(?:ing)?) (?:back )?(?:to )?(?:the |an? )?(?:\w+ ){0,2}image\b"
                    r"|\bblam(?:e|es|ed|ing) (?:the |an? )?(?:\w+ ){0,2}(?:image|environment)\b")
"""Words that blame the container image or the environment: 'the image is at fault', 'roll the image back'."""


def blames_image(text: Text) -> str | None:
    """Where the answer blames the image or the environment, not negated (before it or within the words)."""
    for match in _BLAME.finditer(text.text):
        inside = re.findall(r"[\w']+", match.group(0).lower())
        if not text.negated(match.start()) and not any(map(_negates, inside)):
            return text.text[max(0, match.start() - 40):match.end()].strip()
    return None


_RESERVE = re.compile(r"\breserve[sd]?\b[^.;\n]{0,40}?(?<![\w.,])\d[\d,]*(?:\.\d+)? ?(?:MiB|GiB)\b", re.IGNORECASE)
"""A reserve taken with its figure: 'less our personal reserve of 512 MiB'."""


def takes_reserve(text: Text) -> str | None:
    """Where the answer takes a reserve of a figure, not negated."""
    for match in _RESERVE.finditer(text.text):
        if not text.negated(match.start()):
            return match.group(0)
    return None


def text_traps(trap: Trap, scenario: Scenario, text: Text) -> list[str]:
    """What the answer's words claim of the trap's figure (not negated, not of another service)."""
    of = frozenset(scenario.asked_services)
    return [f"the answer states {q.written}" for q, kind in _claims(text, trap, trap.unit)
            if kind == "states" and _service_problem(text, q.start, of) is None and not text.disowned(q.start)]
