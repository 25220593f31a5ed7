"""What the probes know of one engine while they talk to it, and the counting they share.

An ``Engine`` holds the client, the dialect (selected, or detected from the first refusal),
the window (given, or named by a refusal), every refusal's words, and the prefill paid. Its
counting never sends a generation request that may fit the window: every such request passes
``_guard`` first, which raises ``GuardRailError`` unless the prompt is certainly above the
window (a below-window prompt is accepted and pays real prefill, about 22 s for ~200k tokens).

Two ways to count a prompt below the window without prefill:
- ``tokenize``: the engine's tokenize endpoint, where it has one;
- ``ExtensionCounter``: send the same prompt with k more filler units, enough to go over the
  window, and subtract k * (tokens per unit). The filler repeats one sentence, so units in the
  body add exactly that many tokens; the tokens per unit are measured with two extensions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from radiance_mcp.core.errors import GuardRailError, ProbeError
from radiance_mcp.core.wording.payloads import Api, generation, usage_of
from radiance_mcp.core.wording.refusals import (
    DIALECTS,
    ApiChoice,
    ApiDialect,
    ContextRefusal,
    dialect_for,
    parse_refusal,
    quote,
)
from radiance_mcp.probes.client import Answer, ProbeClient
from radiance_mcp.probes.prompts import FOX_UNIT, Prompt, units_certainly_above

REFUSAL_QUOTE_CHARS = 300


@dataclass
class Engine:
    client: ProbeClient
    choice: ApiChoice
    model: str | None = None
    window_tokens: int | None = None
    window_source: str | None = None
    max_window_tokens: int = 1_048_576
    dialect: ApiDialect = field(init=False)
    detected: bool = False
    refusals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    prefill_tokens_paid: int = 0

    def __post_init__(self) -> None:
        self.dialect = dialect_for(self.choice)
        if self.window_tokens is not None and self.window_source is None:
            self.window_source = "input"

    @property
    def dialect_name(self) -> str:
        return self.dialect.name

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # ----------------------------------------------------------------------------------
    # Sending a prompt above the window

    def _guard(self, lower_bound_tokens: int) -> None:
        """Raise unless a prompt of at least lower_bound_tokens is certainly refused."""
        window = self.window_tokens if self.window_tokens is not None else self.max_window_tokens
        what = "window" if self.window_tokens is not None else "largest window assumed (max_window_tokens)"
        if not self.dialect.refuses(lower_bound_tokens, window, 1):
            raise GuardRailError(
                f"refusing to send a prompt of at least {lower_bound_tokens:,} tokens against a {what} of "
                f"{window:,}: it may fit, and a prompt below the window is accepted and pays real prefill "
                "(about 22 s for ~200k tokens). Counts come from a refusal above the window or a tokenize endpoint.",
                rule="count_above_window",
            )

    async def refusal(self, api: Api, content: str, lower_bound_tokens: int) -> ContextRefusal:
        """Send content (certainly above the window) and read the count its refusal names."""
        self._guard(lower_bound_tokens)
        route, body = generation(api, content, 1, self.model)
        answer = await self.client.post_json(route, body)
        return self.read_refusal(answer, route)

    def read_refusal(self, answer: Answer, route: str) -> ContextRefusal:
        where = f"service {self.client.service!r} ({self.client.endpoint}) POST {route}"
        if answer.status == 200:
            usage = usage_of(answer.data)
            paid = usage.prompt_tokens if usage and usage.prompt_tokens else 0
            self.prefill_tokens_paid += paid
            window = self.window_tokens or self.max_window_tokens
            raise ProbeError(
                f"{where}: the engine accepted a prompt sized above the window (it reports {paid:,} prompt tokens) "
                f"and paid its prefill. Either its window is larger than {window:,} (pass the real window_tokens / "
                "max_model_len, or a larger max_window_tokens), or it silently truncates prompts instead of "
                "refusing them, and then no count can be read from it and a boundary probe on it fails.",
                rule="count_above_window",
            )
        refusal, note = parse_refusal(answer.status, answer.text, self.choice)
        if refusal is None:
            raise ProbeError(
                f"{where}: HTTP {answer.status} that no dialect's refusal wording matches; the body starts "
                f"{quote(answer.text)}. If this is a context refusal of another wording, no count can be read "
                "from it: name the engine with dialect= if it is one of those supported, or count with its "
                "tokenize endpoint."
            )
        if note:
            self.note(note)
        self.refusals.append(refusal.message[:REFUSAL_QUOTE_CHARS])
        if not self.detected:
            self.dialect = DIALECTS[refusal.dialect]
            self.detected = True
            if self.choice == "auto":
                self.note(f"dialect detected from the first refusal: {refusal.dialect}")
        if refusal.kind == "pool_contract":
            raise ProbeError(
                f"{where}: refused with {refusal.message!r}: the KV pool fails its contract for this shape, so long "
                "requests are refused whatever their length and no count can be read. Check the pool contract "
                "(pool_mib >= seqs * max_model_len * rate + 110 * seqs + 448) and resize the pool."
            )
        self._learn_window(refusal)
        return refusal

    def _learn_window(self, refusal: ContextRefusal) -> None:
        if refusal.window_tokens is None:
            return
        if self.window_tokens is None:
            self.window_tokens = refusal.window_tokens
            self.window_source = "refusal"
        elif refusal.window_tokens != self.window_tokens:
            self.note(
                f"the refusal names a window of {refusal.window_tokens:,} tokens, not the {self.window_tokens:,} "
                "given; the engine's figure is used"
            )
            self.window_tokens = refusal.window_tokens
            self.window_source = "refusal"

    def exact_count(self, refusal: ContextRefusal, what: str) -> int:
        """The refusal's count, or an error when it names none or only a bound."""
        if refusal.prompt_tokens is None or not refusal.exact:
            raise ProbeError(
                f"{self.dialect_name} refusal names {'no count' if refusal.prompt_tokens is None else 'only a bound'} "
                f"for {what} ({refusal.message[:200]!r}); this engine's tokenize endpoint is needed for an exact count"
            )
        return refusal.prompt_tokens

    # ----------------------------------------------------------------------------------
    # Tokenize endpoints

    def can_tokenize(self, api: Api) -> bool:
        spec = self.dialect.tokenize
        return spec is not None and (api == "completions" or spec.build_chat is not None)

    async def tokenize(self, api: Api, content: str) -> int:
        spec = self.dialect.tokenize
        if spec is None or (api == "chat" and spec.build_chat is None):
            raise ProbeError(f"{self.dialect_name} has no tokenize endpoint for {api} prompts")
        body = spec.build_chat(content, self.model) if api == "chat" and spec.build_chat else spec.build(
            content, self.model
        )
        answer = await self.client.post_json(spec.path, body)
        where = f"service {self.client.service!r} ({self.client.endpoint}) POST {spec.path}"
        count = spec.count(answer.data) if answer.status == 200 else None
        if count is None:
            raise ProbeError(
                f"{where}: HTTP {answer.status} without a token count ({spec.note}); the body starts "
                f"{quote(answer.text)}"
            )
        window = spec.window(answer.data)
        if window is not None and self.window_tokens is None:
            self.window_tokens = window
            self.window_source = "tokenize_endpoint"
        return count

    # ----------------------------------------------------------------------------------
    # The window

    async def learn_window(self, api: Api) -> None:
        """Name the window from a refusal of filler sized above the largest window assumed."""
        if self.window_tokens is not None:
            return
        units = units_certainly_above(self.max_window_tokens)
        refusal = await self.refusal(api, Prompt("\n", units).text(), self.max_window_tokens + 1)
        if self.window_tokens is None:
            raise ProbeError(
                f"the {refusal.dialect} refusal does not name the window ({refusal.message[:200]!r}); "
                "pass it (window_tokens / max_model_len)"
            )


@dataclass
class UnitCalibration:
    """Tokens one filler unit adds in the middle of the body, measured on one prompt."""

    unit_tokens: Fraction
    """Whole on a real tokenizer (the filler repeats); a fraction on a ratio model such as the simulator's."""
    reference: Prompt
    reference_lower_bound: int
    """Tokens the reference prompt certainly has (its head aside)."""
    method: str

    @property
    def periodic(self) -> bool:
        return self.unit_tokens.denominator == 1

    @property
    def uncertainty_tokens(self) -> int:
        """0 when counts are exact; else the rounding a fractional unit leaves (+-)."""
        return 0 if self.periodic else NON_PERIODIC_UNCERTAINTY_TOKENS


NON_PERIODIC_UNCERTAINTY_TOKENS = 2


class ExtensionCounter:
    """Counts of prompts below the window: tokenize endpoint, else refusals of extensions.

    A prompt is sent with e more filler units, e just enough to be certainly over the window;
    the refusal's count less e * (tokens per unit) is the prompt's count. Tokens per unit are
    measured once from two long extensions of the first prompt.
    """

    def __init__(self, engine: Engine, api: Api) -> None:
        self.engine = engine
        self.api = api
        self.calibration: UnitCalibration | None = None

    @property
    def method(self) -> str:
        return self.calibration.method if self.calibration else "none"

    @property
    def uncertainty_tokens(self) -> int:
        return self.calibration.uncertainty_tokens if self.calibration else 0

    async def calibrate(self, prompt: Prompt) -> UnitCalibration:
        """Measure the tokens one filler unit adds, on ``prompt``."""
        engine = self.engine
        if engine.window_tokens is None:
            await engine.learn_window(self.api)
        if engine.can_tokenize(self.api):
            step = 64
            base = await engine.tokenize(self.api, prompt.text())
            longer = await engine.tokenize(self.api, prompt.text(step))
            unit = self._unit(longer - base, step)
            self.calibration = UnitCalibration(unit, prompt, base - len(prompt.head), "tokenize_endpoint")
            return self.calibration
        assert engine.window_tokens is not None
        k1 = units_certainly_above(engine.window_tokens)
        first = await engine.refusal(self.api, prompt.text(k1), engine.window_tokens + 1)
        if not first.exact and engine.can_tokenize(self.api):
            engine.note("the refusal names only a bound; prompts are counted with the tokenize endpoint")
            return await self.calibrate(prompt)
        c1 = engine.exact_count(first, "the calibration prompt")
        second = await engine.refusal(self.api, prompt.text(2 * k1), c1)
        c2 = engine.exact_count(second, "the calibration prompt")
        unit = self._unit(c2 - c1, k1)
        lower = int(c1 - k1 * unit) - NON_PERIODIC_UNCERTAINTY_TOKENS - len(prompt.head)
        self.calibration = UnitCalibration(unit, prompt, lower, "refusal_extension")
        if not self.calibration.periodic:
            engine.note(
                f"one filler unit is {float(unit):.4f} tokens on this engine, not a whole number: counts below the "
                f"window are +-{NON_PERIODIC_UNCERTAINTY_TOKENS} tokens"
            )
        return self.calibration

    def _unit(self, delta: int, step: int) -> Fraction:
        if delta <= 0:
            raise ProbeError(
                f"{step} more filler units added {delta} tokens: the engine does not count the filler "
                f"({FOX_UNIT!r}) as text, so a prompt below the window cannot be counted by extension"
            )
        return Fraction(delta, step)

    def lower_bound(self, prompt: Prompt, extra_units: int) -> int:
        """Tokens ``prompt`` with extra_units certainly has, from the reference's count."""
        cal = self.calibration
        assert cal is not None
        units = prompt.units + extra_units - cal.reference.units
        if prompt.head.isascii() and prompt.tail == cal.reference.tail:
            # Same tail; heads differ only in ASCII characters, at most one token each.
            return int(cal.reference_lower_bound + units * cal.unit_tokens)
        return int((prompt.units + extra_units) * cal.unit_tokens) - NON_PERIODIC_UNCERTAINTY_TOKENS

    async def count(self, prompt: Prompt) -> int:
        """The token count of ``prompt`` as this api serves it (exact, or +-uncertainty_tokens)."""
        engine = self.engine
        cal = self.calibration or await self.calibrate(prompt)
        if cal.method == "tokenize_endpoint":
            return await engine.tokenize(self.api, prompt.text())
        assert engine.window_tokens is not None
        # Just enough extra units to be certainly above the window.
        extra = 1
        while (bound := self.lower_bound(prompt, extra)) <= engine.window_tokens:
            extra += max(1, math.ceil((engine.window_tokens + 1 - bound) / cal.unit_tokens))
        refusal = await engine.refusal(self.api, prompt.text(extra), self.lower_bound(prompt, extra))
        return round(engine.exact_count(refusal, "a boundary prompt") - extra * cal.unit_tokens)
