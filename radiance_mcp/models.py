"""Tool inputs and outputs: the pydantic models at the MCP and CLI boundary.

Inputs are flat where they can be (clients sometimes send a nested object as a JSON string,
which the list fields accept too). Outputs carry every figure with its ledger line, so an
agent can quote the engine rather than a number of its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    Strict,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from radiance_mcp.constants import (
    MAX_BOOT,
    MAX_LEDGER_TEXT_CHARS,
    MAX_LINE_NUMBER,
    MAX_NAME_CHARS,
    MAX_PATH_CHARS,
    MAX_POOL_MIB,
    MAX_RESERVES,
    MAX_SEQS,
    MAX_WINDOW_TOKENS,
    KVDtype,
)

# ---------------------------------------------------------------------------------------
# Argument types: the upper bound of every argument, each from radiance_mcp.constants (where
# its reason is stated); a field adds its own lower bound.



@dataclass(frozen=True)
class MaxChars:
    """A string's cap, published as maxLength and checked by length alone.

    Not pydantic's max_length: any constraint makes pydantic refuse a lone surrogate (a byte of
    a non-UTF-8 file name, as the CLI's argv holds it), which the tools refuse better
    themselves, naming the argument and UTF-8.
    """

    limit: int

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {**handler(schema), "maxLength": self.limit}

    def _check(self, value: str) -> str:
        if len(value) > self.limit:
            raise PydanticCustomError(
                "string_too_long", "String should have at most {max_length} characters", {"max_length": self.limit}
            )
        return value


Name = Annotated[str, MaxChars(MAX_NAME_CHARS)]
PathArg = Annotated[str, MaxChars(MAX_PATH_CHARS)]
LedgerText = Annotated[str, MaxChars(MAX_LEDGER_TEXT_CHARS)]
# Strict: pydantic's lax mode reads JSON true as 1 (boot=true as the oldest boot), "yes" and
# "true" as true, and "2_0" as 20. A number argument is a JSON number (an integer also serves a
# float), a yes-or-no argument a JSON boolean. Kept flat: a Field inside a nested Annotated loses
# its bounds in the schema.
Int = Annotated[int, Strict()]
Number = Annotated[float, Strict()]
Flag = Annotated[bool, Strict()]
BootIndex = Annotated[int, Field(ge=-MAX_BOOT, le=MAX_BOOT), Strict()]
LineNumber = Annotated[int, Field(ge=1, le=MAX_LINE_NUMBER), Strict()]
SizeMib = Annotated[float, Field(allow_inf_nan=False, le=MAX_POOL_MIB), Strict()]
Seqs = Annotated[int, Field(ge=1, le=MAX_SEQS), Strict()]
Tokens = Annotated[int, Field(le=MAX_WINDOW_TOKENS), Strict()]
Seconds = Annotated[float, Field(allow_inf_nan=False, gt=0), Strict()]

# ---------------------------------------------------------------------------------------
# Inputs


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LedgerArgs(_Input):
    """Which ledger to read: exactly one of service, log, log_text, container (log and container with host)."""

    service: Name | None = Field(None, description="A service named in the fleet config; its ledger is read.")
    log: PathArg | None = Field(
        None,
        description="Absolute path of a ledger file on this machine, under the config's log_roots; with host, "
        "a file on that host, under the host's log_roots.",
    )
    log_text: LedgerText | None = Field(None, description="The ledger text itself (e.g. pasted podman logs output).")
    host: Name | None = Field(
        default=None, description="A host listed in the fleet config: read log (a file there) or container over SSH."
    )
    container: Name | None = Field(
        default=None, description="A container on host (give host too): its `podman logs` holds the ledger."
    )
    boot: BootIndex = Field(
        -1, description="Which boot of the log: -1 the newest (default), -2 the one before, 1 the oldest."
    )

    @model_validator(mode="after")
    def _one_source(self) -> LedgerArgs:
        given = [name for name in ("service", "log", "log_text", "container") if getattr(self, name) is not None]
        if len(given) != 1:
            found = ", ".join(given) if given else "none"
            raise ValueError(
                f"give exactly one ledger source of service, log, log_text or container (found: {found}); "
                "a service from the fleet config is the usual choice"
            )
        if self.container is not None and self.host is None:
            raise ValueError("container needs host: the host (from the fleet config) where podman runs it")
        if self.host is not None and self.log is None and self.container is None:
            raise ValueError("host goes with log (a file on that host) or container (its podman logs)")
        return self


class ReadBudgetTableInput(LedgerArgs):
    pass


class ReserveInput(_Input):
    mib: SizeMib = Field(ge=0, description="MiB held back below the engine's ceiling.")
    label: Name = Field(min_length=1, description="What the reserve is for, in a few words.")
    line: LineNumber | None = Field(None, description="The ledger line that holds this figure (a traced reserve).")
    personal: Flag = Field(False, description="True for a reserve no ledger line backs: it is labelled personal.")


RESERVES_DESCRIPTION = (
    "Reserves below the ceiling; each cites the ledger line of a figure that can back one (line=N; "
    "read_budget_table lists them as reserve_candidates) or is personal=true."
)


def _reserves_from_json(value: Any) -> Any:
    """Clients sometimes send a list argument as a JSON string: read it, bounded."""
    if isinstance(value, str):
        if len(value) > MAX_RESERVES * 1024:  # what 64 reserves with their labels can take, and more
            raise ValueError(f"reserves is a {len(value):,}-character string: pass at most {MAX_RESERVES} "
                             "reserves, as a list of objects")
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"reserves is a string but not JSON ({exc.msg}); pass a list of objects") from exc
        except (ValueError, RecursionError) as exc:  # a 5,000-digit number, nesting 100,000 deep
            raise ValueError("reserves is a string of JSON too deep or with a number too long to read; "
                             "pass a list of objects") from exc
    return value


Reserves = Annotated[list[ReserveInput], Field(max_length=MAX_RESERVES, description=RESERVES_DESCRIPTION)]


class ComputeCeilingInput(LedgerArgs):
    reserves: Reserves = Field(default_factory=list)

    _json_string = field_validator("reserves", mode="before")(_reserves_from_json)


class CheckPoolContractInput(_Input):
    pool_mib: SizeMib | None = Field(
        None, gt=0, description="The KV pool per card (--vram-kv-mib), MiB. Omitted: read from the ledger."
    )
    seqs: Seqs | None = Field(None, description="--max-num-seqs. Omitted: read from the ledger.")
    max_model_len: Tokens | None = Field(None, ge=1, description="--max-model-len, tokens. Omitted: from the ledger.")
    kv_cache_dtype: KVDtype | None = Field(
        None, description="--kv-cache-dtype: bf16 or fp8 only. Omitted: read from the ledger."
    )
    service: Name | None = Field(
        None, description="A service from the config: its model's constants, and its ledger for omitted values."
    )
    log: PathArg | None = Field(
        None, description="A ledger file to read omitted values from (under log_roots); with host, a file on that "
        "host, under the host's log_roots.",
    )
    log_text: LedgerText | None = Field(None, description="Ledger text to read omitted values from.")
    host: Name | None = Field(
        None, description="A host listed in the fleet config: read log (a file there) or container over SSH."
    )
    container: Name | None = Field(
        None, description="A container on host (give host too): its `podman logs` holds the ledger."
    )
    boot: BootIndex = Field(-1, description="Which boot of the ledger: -1 the newest.")
    weights_mib: SizeMib | None = Field(
        None, ge=0, description="--vram-weights-mib of the pair to check against the ceiling. Omitted: the "
        "ledger's (the pair keeps its weights, the pool changes).",
    )
    reserves: Reserves = Field(default_factory=list)

    _json_string = field_validator("reserves", mode="before")(_reserves_from_json)

    @model_validator(mode="after")
    def _at_most_one_source(self) -> CheckPoolContractInput:
        given = [name for name in ("log", "log_text", "container") if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(
                f"give at most one of log, log_text or container (the ledger to read omitted values from; "
                f"found: {', '.join(given)})"
            )
        if self.container is not None and self.host is None:
            raise ValueError("container needs host: the host (from the fleet config) where podman runs it")
        if self.host is not None and self.log is None and self.container is None:
            raise ValueError("host goes with log (a file on that host) or container (its podman logs)")
        return self


# ---------------------------------------------------------------------------------------
# Outputs


class _Output(BaseModel):
    model_config = ConfigDict(frozen=True)


class LineRef(_Output):
    line: int = Field(description="1-based line number in the source.")
    text: str = Field(description="The ledger line as printed.")


class SourcedFigure(_Output):
    mib: float = Field(description="The figure in MiB (exact for the printed value).")
    printed: str = Field(description="The figure as radiance printed it, e.g. '2.01 GiB'.")
    resolution_mib: float = Field(description="The printed figure's rounding step, in MiB.")
    line: int
    text: str


class BootRef(_Output):
    source: str
    boot: int = Field(description="Which boot was read, 1 = oldest; -1 = the newest, -2 ... when the boots "
                                  "before it were not counted (lines_from_byte set).")
    boots_seen: int | None = Field(description="How many boots the source holds (null: not counted).")
    first_line: int
    last_line: int
    origin: Literal["host", "local file", "caller text"] = Field(
        "caller text", description="Where the text came from: read on a host, read from a file here, or "
        "given by the caller (log_text).",
    )
    verified: bool = Field(
        False, description="False for caller text: its figures are the caller's, not read from a host or file."
    )
    lines_from_byte: int | None = Field(
        default=None,
        description="null: every line number is the file's own. Else the lines before the boot were not counted "
                    "(a large remote file read from its end): line numbers count from 1 at the line that starts "
                    "at this byte offset; line n is `tail -c +<offset+1> FILE | sed -n <n>p`.",
    )


class BudgetCard(_Output):
    card: int
    card_total: SourcedFigure | None
    vram_weights: SourcedFigure | None
    vram_kv: SourcedFigure | None
    unclaimed: SourcedFigure | None
    settled_free: SourcedFigure
    engine_floor: SourcedFigure = Field(description="--gpu-headroom-mib plus the static region, as printed.")
    gpu_headroom: SourcedFigure | None
    static_region: SourcedFigure | None
    pair_mib: float = Field(description="vram_weights + vram_kv of this card.")
    pair_source: Literal["echoed flags", "table rows"] = Field(
        description="echoed flags: exact MiB; table rows: rounded to 0.01 GiB."
    )
    pair_lines: list[LineRef]


class ReserveCandidate(_Output):
    card: int
    line: LineRef
    mib: float = Field(description="The figure a reserve citing this line must hold (line=N, mib=this).")
    printed: str = Field(description="How the figure follows from the printed ones.")
    why: str = Field(description="Why this figure may back a reserve below the ceiling.")


class ReadBudgetTableOutput(_Output):
    ledger: BootRef
    cards: list[BudgetCard]
    flags: dict[str, str] = Field(description="Echoed flags of the boot, by name without dashes.")
    pair_source: Literal["echoed flags", "table rows"]
    disagreements: list[str] = Field(description="Flag and table row that differ beyond rounding.")
    reserve_candidates: list[ReserveCandidate] = Field(
        description="The figures of this boot a traced reserve may cite; anything else is personal."
    )


class CeilingCard(_Output):
    card: int
    settled_free_mib: float
    engine_floor_mib: float
    pair_mib: float
    ceiling_mib: int
    headroom_mib: int
    derivation: str
    max_pair_mib: int = Field(description="This card's ceiling less the reserves it holds.")


class ReserveOutput(_Output):
    mib: float
    label: str
    kind: Literal["traced", "personal"]
    line: LineRef | None
    card: int | None = Field(description="The card a traced reserve holds memory on; null (personal): every card.")


class ComputeCeilingOutput(_Output):
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


class CeilingCheck(_Output):
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


class PoolContractOutput(_Output):
    model: str
    pool_mib: float
    seqs: int
    max_model_len: int
    kv_cache_dtype: KVDtype
    rate_bytes_per_token: int
    kv_mib: float = Field(description="seqs * max_model_len * rate, in MiB.")
    per_seq_total_mib: int
    fixed_mib: int
    required_mib: float
    margin_mib: float = Field(description="pool_mib - required_mib; negative means the contract fails.")
    ok: bool
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


def mib(value: Decimal) -> float:
    """Decimal MiB to a JSON number with two decimals, as every output shows it."""
    return float(round(value, 2))
