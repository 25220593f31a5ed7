"""The planning tools' models: compare_arms, plan_free_vram."""

import json
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    Strict,
    field_validator,
    model_serializer,
    model_validator,
)

from radiance_mcp.core import planning
from radiance_mcp.core.constants import MAX_NAME_CHARS, NOISE_BAND
from radiance_mcp.models.base import (
    BootIndex,
    BootRef,
    Input,
    LedgerText,
    MaxChars,
    Name,
    Number,
    Output,
    PathArg,
)
from radiance_mcp.models.ledger import (
    OutsideFreeInput,
    ReserveInput,
    ReserveOutput,
)
from radiance_mcp.models.ledger_ref import given_sources, ledger_field, source_problem


def json_list(name: str, value: Any) -> Any:
    """Clients sometimes send a list of objects as a JSON string."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{name} is a string but not JSON ({exc.msg}); pass a list") from exc
    return value


class ArmInput(Input):
    value: Number = Field(ge=-planning.MAX_ARM_FIGURE, le=planning.MAX_ARM_FIGURE,
                         description="The knob's setting in this arm, e.g. the slab in MiB.")
    rate: Number = Field(ge=planning.MIN_RATE, le=planning.MAX_ARM_FIGURE,
                        description="The rate measured in this arm, e.g. prefill tokens/s.")


class CompareArmsInput(Input):
    arms: list[ArmInput] = Field(
        min_length=2, max_length=planning.MAX_ARMS,
        description="The arms: [{value, rate}, ...], one per knob value, measured with the same workload.",
    )
    knob: Annotated[str, MaxChars(80)] = Field("value", description="What the value is, e.g. 'slab MiB'.")
    rate_unit: Annotated[str, MaxChars(40)] = Field("t/s", description="What the rate is measured in.")
    noise_band_pct: Number = Field(
        NOISE_BAND * 100, gt=0, le=50, description="The run-to-run noise, +- percent (default 3)."
    )
    claim: Literal["plateau", "threshold"] | None = Field(
        None, description="A reading to check: 'plateau' (the rate stops moving) or 'threshold' (it steps once)."
    )
    claim_arms: list[Annotated[float, Field(ge=-planning.MAX_ARM_FIGURE, le=planning.MAX_ARM_FIGURE),
                               Strict()]] = Field(
        default_factory=list, max_length=planning.MAX_ARMS,
        description="The knob values of the arms the claim rests on (default: every arm).",
    )

    @field_validator("arms", "claim_arms", mode="before")
    @classmethod
    def _json_string(cls, value: Any, info: Any) -> Any:
        return json_list(info.field_name, value)


class ArmStepOutput(Output):
    low_value: float
    high_value: float
    low_rate: float
    high_rate: float
    change_pct: float = Field(description="(high_rate - low_rate) / low_rate, percent: the lower value is baseline.")
    inside_noise: bool = Field(description="|change_pct| <= the band: these two arms cannot be told apart.")
    intervals_overlap: bool = Field(description="The two rates' +-band intervals overlap.")
    reading: str


class ClaimOutput(Output):
    claim: Literal["plateau", "threshold"]
    arms: list[float]
    verdict: Literal["refused", "supported", "contradicted"]
    reason: str
    rule: str
    remedy: str | None
    measure_next: float | None = Field(description="The knob value to measure next, where one more arm helps.")


class CompareArmsOutput(Output):
    knob: str
    rate_unit: str
    noise_band_pct: float
    steps: list[ArmStepOutput] = Field(description="Neighbouring arms, by knob value.")
    inside_noise: list[str] = Field(description="The pairs of arms that differ by no more than the band.")
    span_pct: float = Field(description="Lowest to highest rate, relative to the lowest.")
    claim: ClaimOutput | None
    ok: bool = Field(description="False when the claim is refused or contradicted.")
    notes: list[str]


Source = Literal["ledger", "model constant", "config", "argument", "arithmetic"]


class Compact(Output):
    """A part of a plan published without the null fields its OMITTED names: such a field left out is null."""

    OMITTED: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")  # no return annotation: the schema stays the model's
    def _without_nulls(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        return {key: value for key, value in handler(self).items() if value is not None or key not in self.OMITTED}


class Traced(Output):
    """A figure and where it comes from: a ledger line, a model constant, the config, or arithmetic on those.

    Published without what another field says: no null fields nor the default source (arithmetic), a whole number
    without its '.0', a ledger figure without its text (the plan's lines[line] has it)."""

    name: str
    value: float
    unit: str
    source: Source = "arithmetic"
    line: int | None = Field(None, description="The ledger line number, for source=ledger (its text: the plan's "
                                               "lines).")
    text: str | None = Field(None, description="The constant's name or the arithmetic (a ledger figure's line "
                                               "as printed is the plan's lines[line]).")
    now: float | None = Field(default=None, description="A gain's figure as the service runs now.")

    @model_serializer(mode="wrap")  # no return annotation: the schema stays the model's
    def _published(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        data = {key: whole(value) for key, value in handler(self).items() if value is not None}
        if self.line is not None:
            data.pop("text", None)  # the line as printed: once per plan, in its lines
        if self.source == "arithmetic":
            data.pop("source")
        if isinstance(self, CardFigure):
            data.pop("name")  # the card's key names it
            if self.unit == "MiB":
                data.pop("unit")
        return data


class CardFigure(Traced):
    """A card's figure, published as a Traced is, without its name (the card's key names it) and, in MiB, its
    unit: {value, line} read off a ledger line, {value, text} its arithmetic."""

    name: str = Field("", description="Left out: the card's key names it.")
    unit: str = Field("MiB", description="Left out: MiB.")


def whole(value: Any) -> Any:
    """A whole float as an int (4, not 4.0); anything else as it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


class PlanFreeVramInput(Input):
    service: Name | None = ledger_field("plan", "service")
    log: PathArg | None = ledger_field("plan", "log")
    log_text: LedgerText | None = ledger_field("plan", "log_text")
    host: Name | None = ledger_field("plan", "host")
    container: Name | None = ledger_field("plan", "container")
    boot: BootIndex = ledger_field("plan", "boot")
    reserves: list[ReserveInput] = Field(
        default_factory=list, max_length=64,
    )
    outside_free: list[OutsideFreeInput] = Field(default_factory=list, max_length=64,
                                                 description="One ledger only.")
    cursor: Annotated[str, MaxChars(MAX_NAME_CHARS * 2)] | None = Field(
        None, description="Whole fleet: next_cursor of the page before.")

    @field_validator("reserves", "outside_free", mode="before")
    @classmethod
    def _json_string(cls, value: Any, info: Any) -> Any:
        return json_list(info.field_name, value)

    @model_validator(mode="after")
    def _sources(self) -> Self:
        given = given_sources(self)
        problem = source_problem(
            given, self.host is not None, required=False, host_alone=not given,  # host alone: its services
            count=f"give at most one of service, log, log_text or container (found: {', '.join(given)}); "
                  "none plans the whole fleet",
        )
        if problem:
            raise ValueError(problem)
        if self.reserves and not given:
            raise ValueError("reserves cite the lines of one ledger: give a service (or log) with them")
        if self.outside_free and not given:
            raise ValueError("outside_free is read off one service's cards: give a service (or log) with it")
        if self.cursor is not None and given:
            raise ValueError("cursor pages the whole fleet's rows: give it without service, log, log_text or "
                             "container")
        return self


class CardPlan(Compact):
    """A card of the plan: the binding card in full, each other card as a short row (its ceiling, derivation and
    headroom; compute_ceiling and read_budget_table give its figures and their lines)."""

    card: int
    physical: str | None = Field(None, description="The physical card from the config's cards; null: not said.")
    # The picture's own figures, not the ceiling's (compute_ceiling shows them): kept out of the published plan.
    card_total: CardFigure | None = Field(None, exclude=True)
    vram_weights: CardFigure | None = Field(None, description="The binding card's (so vram_kv, engine_floor, "
                                                               "settled_free); left out on another card.")
    vram_kv: CardFigure | None = None
    activation_arena: CardFigure | None = Field(None, exclude=True)
    engine_floor: CardFigure | None = None
    settled_free: CardFigure | None = None
    unclaimed: CardFigure | None = Field(None, exclude=True)
    ceiling_mib: int
    derivation: str
    headroom_mib: int = Field(description="ceiling - pair as this service reads it.")
    shared_with: list[str] = Field(default_factory=list, description="Other services on this physical card.")
    headroom_once_mib: int = Field(description="The headroom counted once on a shared card; else headroom_mib.")
    OMITTED: ClassVar[frozenset[str]] = frozenset({"vram_weights", "vram_kv", "engine_floor", "settled_free"})
    _figures: dict[str, CardFigure] = PrivateAttr(default_factory=dict)
    """Every figure of the card, the short row's too: the picture draws each card from them."""

    def figure(self, name: str) -> CardFigure | None:
        """One of the card's figures (vram_weights, vram_kv, engine_floor, settled_free, card_total,
        activation_arena, unclaimed), a short row's too."""
        return self._figures.get(name)

    def row(self) -> "CardPlan":
        """The card as a short row: its figures left out of the published plan, kept for the picture."""
        return self.model_copy(update={"vram_weights": None, "vram_kv": None, "engine_floor": None,
                                       "settled_free": None})


class ResizePlanOutput(Compact):
    """One plan of an option, named as render_gates takes its arguments: pass them with the service (and the
    reserves this plan was priced with) and it renders. Every rule of the service's plan_rules passed on it but
    those in unchecked (a plan a rule fails is not offered: the option's notes give its arithmetic)."""

    vram_weights_mib: int | None = Field(None, description="null: another engine's, the model's weights.")
    vram_kv_mib: int | None = Field(None, description="null: llama.cpp's, which follows from seqs x max_model_len "
                                                      "cells.")
    seqs: int
    max_model_len: int
    kv_cache_dtype: str | None = Field(None, description="null: another engine's, whose rate is its boot's.")
    spec: int | None = None
    unchecked: list[str] | None = Field(None, description="The rules the book could not check on this plan; "
                                                          "null: none.")
    idle_kv_mib: float | None = Field(None, description=(
        "More KV: the pool less the contract at seqs x max_model_len, every seat full: the idle KV the mover may "
        "still lend the experts."))
    mover_slots: int | None = Field(None, description="idle_kv_mib x the plan's slope, in expert slots.")
    OMITTED: ClassVar[frozenset[str]] = frozenset({"unchecked", "idle_kv_mib", "mover_slots"})


class PlanOption(Output):
    name: str
    axis: str = Field(description="What it moves: capacity (seats, window) or prefill throughput (the slab).")
    adds_mib: int
    flags: list[str] = Field(default_factory=list, description="The flag changes, per card.")
    gains: list[Traced] = Field(default_factory=list)
    takes: list[Traced] = Field(default_factory=list, description=(
        "What it takes from the other option. More KV takes residency twice: its MiB never reach the slab (the "
        "slots more slab gains), and the idle KV the mover lends the experts is taken back as the seats fill "
        "(here the mover's slots now at its dtype, every seat full; each plan's mover_slots at its shape). More "
        "slab takes its adds_mib from the KV options; the pool stays."))
    plans: list[ResizePlanOutput] = Field(default_factory=list, description=(
        "The option as plans render_gates accepts (more KV: the seats at the window, then the window at the "
        "seats); none where the boot does not set its pair in MiB."))
    notes: list[str] = Field(default_factory=list)


class PlanCheck(Compact):
    """A rule of the rule book on the service as it runs (core/rules/book.py): its verdict, arithmetic, the ledger
    lines it reads (their text: the plan's lines) and, failed or unchecked, its remedy."""

    rule: str
    verdict: Literal["pass", "fail", "unchecked"]
    arithmetic: str
    lines: list[int] = Field(default_factory=list)
    remedy: str | None = Field(None, description="Failed: what to do instead; unchecked: what would let it be "
                                                 "checked; null: passed.")
    OMITTED: ClassVar[frozenset[str]] = frozenset({"remedy"})


class ServicePlan(Output):
    service: str | None = None
    ledger: BootRef
    lines: dict[int, str] = Field(default_factory=dict, description=(
        "Each ledger line the plan cites (its figures' line, its checks' lines), by number, as printed: once."))
    model: str
    shape: list[Traced] = Field(default_factory=list)
    kv_cache_dtype: str | None = None
    cards: list[CardPlan] = Field(description="The binding card in full, each other card as a short row.")
    binding_card: int
    reserves: list[ReserveOutput] = Field(default_factory=list)
    personal_reserves: list[str] = Field(default_factory=list)
    headroom_mib: int = Field(description="The binding card's headroom, counted once where a card is shared.")
    usable_mib: int = Field(description="headroom_mib less every reserve: what the options spend.")
    slope: Traced | None = Field(None, description="Resident expert slots per slab MiB (radiance; null for "
                                                   "another engine).")
    slab: Traced | None = Field(None, description="Resident slots now, from the `slab slots` line.")
    options: list[PlanOption] = Field(default_factory=list)
    plan_rules: list[str] = Field(default_factory=list, description=(
        "The rules the book judges each offered plan by, as render_gates does: each passed but a plan's unchecked."))
    sharing: Literal["known", "unknown"]
    checks: list[PlanCheck] = Field(default_factory=list, description=(
        "The rule book's rules on the service as it runs (the pool contract, the sampler bound): a failed one is "
        "worth fixing before spending."))
    notes: list[str] = Field(default_factory=list)

    def cited(self, checked: dict[int, str]) -> dict[int, str]:
        """Each ledger line the plan cites, by number, once: its traced figures' (published without their text)
        and its checks' (checked, by number)."""
        figures = [*self.shape, self.slope, self.slab,
                   *(getattr(c, name) for c in self.cards for name in CardPlan.OMITTED),
                   *(f for o in self.options for f in (*o.gains, *o.takes))]
        cited = {f.line: f.text or "" for f in figures if f is not None and f.line is not None}
        return dict(sorted({**cited, **checked}.items()))


class PhysicalCard(Output):
    card: str
    services: list[str] = Field(description="'service card N' for each engine card on it.")
    headroom_mib: int = Field(description="Counted once.")
    derivation: str


class Unreadable(Output):
    """A service whose ledger could not be planned. In the whole fleet's answer its reason is its problem's (the
    problem names it), said there once."""

    service: str
    problem: int | None = Field(None, description="Whole fleet: the index in problems of the problem naming it.")
    where: str | None = Field(None, description="Its ledger (path, boot, lines) where neither error nor the problem's "
                                              "detail names it.")
    error: str | None = Field(None, description="Why; null: as problems[problem].detail says, word for word.")


class ServiceRow(Output):
    """One service on a page of the whole fleet's answer: its headroom and what each option buys, in a line each."""

    service: str
    host: str | None = None
    headroom_mib: int = Field(description="The binding card's headroom, counted once where a card is shared.")
    usable_mib: int
    options: list[str] = Field(default_factory=list, description="Each option: what it adds and buys.")


Measure = Literal["seats at the window", "window at the seats", "resident slots"]
MEASURE_UNITS: dict[Measure, str] = {"seats at the window": "seats", "window at the seats": "tokens",
                                     "resident slots": "slots"}
"""The measures the whole fleet's best options are ranked by, in their order, and the unit of each."""


class BestOption(Output):
    """One of the fleet's best options by one measure: what it buys over what the service has now."""

    by: Measure
    service: str
    option: str
    adds_mib: int
    value: float = Field(description="The measure after the option.")
    gain: float = Field(description="value less what the service has now.")


class Problem(Output):
    """What many services say alike, said once: a kind, how many say it, the first of them, one of their texts."""

    kind: Literal["refused boot", "unsettled boot", "unreadable ledger", "below its contract", "fails a rule",
                  "stranded headroom"]
    rule: str | None = None
    count: int
    services: list[str] = Field(description="The first services that say it (count gives them all).")
    detail: str = Field(description="What the first of them says (an unreadable ledger's whole reason, up to "
                                    "DETAIL_CHARS of what it says).")


Sharing = Literal["known", "unknown", "partial"]
SHARING: dict[Sharing, str] = {
    "known": "every service names its physical cards (cards = [...] in the config), so a shared card counts once",
    "unknown": "no service names its cards",
    "partial": "some services name their cards, not all (notes names the others)",
}
"""What each word of sharing means: the field's description, the whole fleet's summary and the CLI say it."""


class PlanFreeVramOutput(Output):
    """The plan of one service (or ledger), or the whole fleet's bounded answer (tools/plan_fleet.py)."""

    services: list[ServicePlan] = Field(default_factory=list, description=(
        "The plan of the service (or ledger) asked for; none for the whole fleet (see rows)."))
    physical_cards: list[PhysicalCard] = Field(default_factory=list, description=(
        "The physical cards several services share, each with its headroom counted once (whole fleet: the first "
        "page's); a card one service has alone is that service's card."))
    fleet_headroom_mib: int = Field(description="Every card's headroom counted once (shared cards once).")
    sharing: Sharing = Field(description="; ".join(f"{word}: {means}" for word, means in SHARING.items()) + ".")
    summary: list[str] = Field(default_factory=list, description="The answer in a few lines.")
    rows: list[ServiceRow] = Field(default_factory=list, description="Whole fleet: one page of services, by name.")
    best: list[BestOption] = Field(default_factory=list, description=(
        "Whole fleet: the best options by each measure, most gained first."))
    problems: list[Problem] = Field(default_factory=list, description=(
        "Whole fleet: every problem, grouped where services say the same."))
    unreadable: list[Unreadable] = Field(default_factory=list, description=(
        "Services whose ledger could not be planned (whole fleet: this page's, each naming its problem)."))
    services_total: int = Field(description="How many services this answer covers (the fleet's, or a host's).")
    next_cursor: str | None = Field(default=None, description="The cursor of the next page of rows; null: the last.")
    notes: list[str] = Field(default_factory=list)
    _pictured: list[ServicePlan] = PrivateAttr(default_factory=list)
    """Whole fleet: the page's plans, for the picture (not published)."""

