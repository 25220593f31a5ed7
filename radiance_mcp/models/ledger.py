"""The ledger tools' models: read_budget_table, compute_ceiling, check_pool_contract."""

import json
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator

from radiance_mcp.core.boot import BootStatus
from radiance_mcp.core.constants import MAX_RESERVES, KVDtype, LedgerEngine
from radiance_mcp.models.base import (
    BootIndex,
    BootRef,
    Flag,
    Input,
    LedgerText,
    LineNumber,
    LineRef,
    Name,
    Output,
    PathArg,
    RuleCheck,
    Seqs,
    SizeMib,
    Tokens,
    mib,
)
from radiance_mcp.models.ledger_ref import LedgerRef, Settling, given_sources, ledger_field, source_problem

if TYPE_CHECKING:
    from radiance_mcp.core.rules.capacity import CardCeiling

# ---------------------------------------------------------------------------------------
# Inputs


class ReadBudgetTableInput(Settling, LedgerRef):
    pass


class ReserveInput(Input):
    # MiB held back below the ceiling, labelled: its reserve_candidates line, or personal (no line backs it).
    # Worded once, in the server's instructions (app/server.py LEDGER_ARGUMENTS): tools/list is paid every turn.
    mib: SizeMib = Field(ge=0)
    label: Name = Field(min_length=1)
    line: LineNumber | None = None
    personal: Flag = False


class OutsideFreeInput(Input):
    # Free MiB read outside the engine, labelled where (e.g. 'nvidia-smi 10:02'), on one card (omitted: every
    # card); worded once, in the server's instructions.
    mib: SizeMib = Field(ge=0)
    label: Name = Field(min_length=1)
    card: int | None = Field(None, ge=0, le=4096)


def outside(given: list[OutsideFreeInput]) -> tuple[tuple[int | None, Decimal, str], ...]:
    """The caller's free figures as capacity.with_outside_free takes them: (card, MiB, label)."""
    return tuple((f.card, Decimal(str(f.mib)), f.label) for f in given)


# outside_free and reserves are worded once, in the server's instructions (app/server.py LEDGER_ARGUMENTS).


def _reserves_from_json(value: Any, info: ValidationInfo) -> Any:
    """Clients sometimes send a list argument as a JSON string: read it, bounded."""
    name = info.field_name
    if isinstance(value, str):
        if len(value) > MAX_RESERVES * 1024:  # what 64 reserves with their labels can take, and more
            what = "reserves" if name == "reserves" else "figures"
            raise ValueError(f"{name} is a {len(value):,}-character string: pass at most {MAX_RESERVES} "
                             f"{what}, as a list of objects")
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{name} is a string but not JSON ({exc.msg}); pass a list of objects") from exc
        except (ValueError, RecursionError) as exc:  # a 5,000-digit number, nesting 100,000 deep
            raise ValueError(f"{name} is a string of JSON too deep or with a number too long to read; "
                             "pass a list of objects") from exc
    return value


Reserves = Annotated[list[ReserveInput], Field(max_length=MAX_RESERVES)]


class ComputeCeilingInput(Settling, LedgerRef):
    reserves: Reserves = Field(default_factory=list)
    outside_free: list[OutsideFreeInput] = Field(default_factory=list, max_length=64)

    _json_string = field_validator("reserves", "outside_free", mode="before")(_reserves_from_json)


class CheckPoolContractInput(Settling):
    pool_mib: SizeMib | None = Field(
        None, gt=0, description="The KV pool per card, MiB (--vram-kv-mib)."
    )
    seqs: Seqs | None = Field(None, description="Sequences served at once (--max-num-seqs).")
    max_model_len: Tokens | None = Field(None, ge=1, description="Tokens per sequence, the window (--max-model-len).")
    kv_cache_dtype: KVDtype | None = Field(
        None, description="The KV cache's dtype, e.g. fp8 (--kv-cache-dtype)."
    )
    service: Name | None = ledger_field("contract", "service")
    log: PathArg | None = ledger_field("contract", "log")
    log_text: LedgerText | None = ledger_field("contract", "log_text")
    host: Name | None = ledger_field("contract", "host")
    container: Name | None = ledger_field("contract", "container")
    boot: BootIndex = ledger_field("contract", "boot")
    weights_mib: SizeMib | None = Field(
        None, ge=0, description="Weights per card, MiB, of the pair (--vram-weights-mib).",
    )
    reserves: Reserves = Field(default_factory=list)

    _json_string = field_validator("reserves", mode="before")(_reserves_from_json)

    @model_validator(mode="after")
    def _at_most_one_source(self) -> Self:
        # service names the model's constants too, so it is no rival of the others.
        given = [name for name in given_sources(self) if name != "service"]
        problem = source_problem(
            given, self.host is not None, required=False,
            count=f"give at most one of log, log_text or container (the ledger to read omitted values from; "
                  f"found: {', '.join(given)})",
        )
        if problem:
            raise ValueError(problem)
        return self


# ---------------------------------------------------------------------------------------
# Outputs


class FigureOut(Output):
    """A figure and where it comes from: read off one line, or derived from the lines named."""

    value: float = Field(description="In unit; exact for the printed figure.")
    unit: str = Field(description="MiB, tokens, B/token, sequences, slots or fraction.")
    printed: str = Field("", description="The figure as the line prints it ('2.01 GiB'); empty for a derived one.")
    resolution: float = Field(0, description="The printed figure's rounding step, in unit (0: exact).")
    lines: list[int] = Field(description="The numbers of the lines the figure is read or derived from (their text: "
                                         "the answer's lines).")
    arithmetic: str = Field("", description="For a derived figure: how it follows from the lines.")


class BudgetCard(Output):
    """One card or rank of a boot of any engine, in the procedures' terms."""

    card: int = Field(description="radiance: the card's number; another engine: the rank's place (-1: a view that "
                                  "totals the devices beside it, llama.cpp's 'all').")
    rank: str = Field(description="The card or rank as the engine names it: 0, TP0, CUDA0, engine (one card), all.")
    weights_mib: FigureOut | None
    kv_mib: FigureOut | None
    kv_tokens: FigureOut | None
    kv_bytes_per_token: FigureOut | None = Field(description="KV memory over KV tokens: the engine's own pair.")
    activation_mib: FigureOut | None
    graph_mib: FigureOut | None
    free_mib: FigureOut | None = Field(description="What the engine left free once it settled.")
    floor_mib: FigureOut | None = Field(description="What the engine keeps free by design.")
    window_tokens: FigureOut | None
    full_length_sequences: FigureOut | None = Field(description="KV tokens / window, rounded down.")
    card_total_mib: FigureOut | None = Field(None, description="radiance: the table's card total.")
    unclaimed_mib: FigureOut | None = Field(None, description="radiance: the table's unclaimed row.")
    gpu_headroom_mib: FigureOut | None = Field(None, description="radiance: the floor's --gpu-headroom-mib part.")
    static_region_mib: FigureOut | None = Field(None, description="radiance: the floor's static region part.")
    pair_mib: float | None = Field(description="weights + KV of this card, as the ceiling counts them.")
    pair_source: Literal["echoed flags", "table rows"] | None = Field(
        description="radiance's pair: echoed flags (exact MiB) or table rows (rounded to 0.01 GiB); null for another "
                    "engine, whose pair is its own weights and KV figures."
    )
    pair_lines: list[int] = Field(description="The numbers of the pair's lines.")


class MissingFigure(Output):
    """A figure the log does not print, said once for every card or rank it is missing on."""

    figure: str = Field(description="The card's field left null, e.g. free_mib.")
    ranks: list[str] = Field(description="The cards or ranks (their rank) it is missing on.")
    why: str = Field(description="Where the engine prints it, and how to get it. Nothing is estimated.")


class ReserveCandidate(Output):
    card: int
    line: LineRef
    mib: float = Field(description="The figure a reserve citing this line must hold (line=N, mib=this).")
    printed: str = Field(description="How the figure follows from the printed ones.")
    why: str = Field(description="Why this figure may back a reserve below the ceiling.")


class ReadBudgetTableOutput(Output):
    ledger: BootRef
    boot_status: BootStatus = Field("settled", description="unsettled: figures so far; see notes.")
    engine: LedgerEngine = Field(description="The engine that printed the log.")
    cards: list[BudgetCard] = Field(default_factory=list, description="Per card or rank, for every engine.")
    missing: list[MissingFigure] = Field(default_factory=list, description=(
        "Figures the log does not print, each said once with the cards it is missing on."))
    settings: dict[str, FigureOut] = Field(default_factory=dict, description=(
        "What another engine says the whole boot was set to."))
    kv_flag: str = Field(description="The flag that moves this engine's KV memory.")
    floor: str = Field(description="What the floor is in this engine's terms.")
    flags: dict[str, str] = Field(default_factory=dict, description="Echoed flags of the boot, by name without dashes.")
    pair_source: Literal["echoed flags", "table rows"] | None = Field(
        default=None, description="null for another engine."
    )
    disagreements: list[str] = Field(
        default_factory=list, description="Flag and table row that differ beyond rounding."
    )
    reserve_candidates: list[ReserveCandidate] = Field(
        default_factory=list,
        description="The figures of this boot a traced reserve may cite; anything else is personal.",
    )
    lines: dict[int, str] = Field(default_factory=dict, description=(
        "Each ledger line a figure cites, by number, as printed: once."))
    notes: list[str] = Field(default_factory=list)


class CeilingCard(Output):
    card: int
    settled_free_mib: float
    engine_floor_mib: float
    pair_mib: float
    ceiling_mib: int
    headroom_mib: int
    derivation: str
    max_pair_mib: int = Field(description="This card's ceiling less the reserves it holds.")


def ceiling_card(card: "CardCeiling", derivation: str) -> CeilingCard:
    """A card of compute_ceiling's output, from the card capacity.hold_reserves returned (its
    max_pair_mib set), for radiance's boots and the other engines' alike."""
    assert card.max_pair_mib is not None  # hold_reserves sets it on every card
    return CeilingCard(card=card.card, settled_free_mib=mib(card.free_mib), engine_floor_mib=mib(card.floor_mib),
                       pair_mib=mib(card.pair_mib), ceiling_mib=card.ceiling_mib, headroom_mib=card.headroom_mib,
                       derivation=derivation, max_pair_mib=card.max_pair_mib)


class ReserveOutput(Output):
    mib: float
    label: str
    kind: Literal["traced", "personal"]
    line: LineRef | None
    card: int | None = Field(description="The card a traced reserve holds memory on; null (personal): every card.")


class ComputeCeilingOutput(Output):
    ledger: BootRef
    ceiling_mib: int = Field(description="The binding (smallest) card's ceiling, whole MiB rounded down.")
    binding_card: int
    pair_mib: float = Field(description="The binding card's current pair.")
    headroom_mib: int = Field(description="ceiling_mib - pair_mib: what the pair may still grow by.")
    derivation: str = Field(description="The binding card's arithmetic, written out.")
    cards: list[CeilingCard]
    reserves: list[ReserveOutput]
    personal_reserves: list[str] = Field(description="Labels of reserves no ledger line backs.")
    max_pair_mib: int = Field(description="The smallest card's ceiling less its reserves: the gate's bound.")
    reserve_candidates: list[ReserveCandidate] = Field(description="Figures of this boot a reserve may cite.")
    warnings: list[str] = Field(description="E.g. max_pair_mib below the current pair.")
    sources: list[LineRef] = Field(description="The ledger lines every figure came from.")
    notes: list[str]


class CeilingCheck(Output):
    ok: bool
    ceiling_mib: int = Field(description="The binding card's ceiling.")
    binding_card: int
    weights_mib: float
    weights_from: LineRef | str
    pool_mib: float
    reserves_mib: float = Field(description="Traced and personal reserves held on the tightest card.")
    reserves: list[ReserveOutput]
    max_pair_mib: int = Field(description="The smallest card's ceiling less its reserves.")
    pair_mib: float = Field(description="weights_mib + pool_mib: the pair this pool makes.")
    margin_mib: float = Field(description="max_pair_mib - pair_mib; negative means the pair does not fit.")
    formula: str


class PoolContractOutput(Output):
    # The rate and MiB figures (and seqs, max_model_len where neither given nor printed) are null only for a refused
    # boot that printed no KV rate: its pool backs nothing, and the pool_contract check fails on its refusal's lines.
    model: str
    pool_mib: float | None
    seqs: int | None
    max_model_len: int | None
    kv_cache_dtype: KVDtype | None
    rate_bytes_per_token: int | None
    kv_mib: float | None = Field(description="seqs * max_model_len * rate, in MiB.")
    per_seq_total_mib: int
    fixed_mib: int
    required_mib: float | None
    margin_mib: float | None = Field(description="pool_mib - required_mib; negative means the contract fails.")
    ok: bool | None = Field(
        description="true only if every rule in checks passed; false: one failed, or the boot did not settle "
                    "(boot_status); null: none failed but one was not checked (its remedy says what to give)."
    )
    checks: list[RuleCheck] = Field(description="Every rule of the verdict: pool_contract, pair_within_ceiling, "
                                                "and sampler_rows where a boot shows spec (or none was read).")
    max_seqs_at_window: int = Field(description="The most sequences this pool backs at max_model_len.")
    max_window_at_seqs: int = Field(description="The longest window this pool backs at seqs.")
    formula: str
    refusal: str | None = Field(description="What a client sees on a long request when the contract fails.")
    inputs_from: dict[str, LineRef | str] = Field(description="Where each input came from: argument or ledger line.")
    contract_ok: bool = Field(description="The pool contract alone.")
    ceiling: CeilingCheck | None = Field(
        description="weights + pool + reserves <= ceiling, with a ledger that settled; null without one."
    )
    ledger: BootRef | None = Field(description="The boot read, if any.")
    boot_status: Literal["settled", "refused", "unsettled"] | None = Field(
        description="refused: the boot stopped (its pool backs nothing); unsettled: no settled line yet."
    )
    refusal_lines: list[LineRef] = Field(description="A refused boot's lines: kv cache, fix text, startup stopped.")
    notes: list[str] = Field(description="What the verdict rests on, and what to call next.")
