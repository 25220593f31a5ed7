"""What every tool's models share: the bounded argument types, the Input and Output bases,
the references to a ledger line and a boot, and the MiB every output shows.

Every tool's input derives from ``Input`` (unknown names refused), every output from
``Output`` (frozen).
"""

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    Strict,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from radiance_mcp.core.boot import Boot, Line
from radiance_mcp.core.constants import (
    MAX_BOOT,
    MAX_LEDGER_TEXT_CHARS,
    MAX_LINE_NUMBER,
    MAX_NAME_CHARS,
    MAX_PATH_CHARS,
    MAX_POOL_MIB,
    MAX_SEQS,
    MAX_WAIT_S,
    MAX_WINDOW_TOKENS,
)
from radiance_mcp.core.rules.book import Check

# ---------------------------------------------------------------------------------------
# Argument types: the upper bound of every argument, each from radiance_mcp.core.constants (where
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
# Strict, with one allowance: pydantic's lax mode reads JSON true as 1 (boot=true as the oldest
# boot), "yes" as true and "2_0" as 20, so every number and yes-or-no argument is strict. A
# client that sends every argument as a string (the MCP Inspector's CLI does, for a nullable
# number) still gets through with plain ASCII figures: "3000", "-2", "1.5e3", "true", "false".
# Kept flat: a Field inside a nested Annotated loses its bounds in the schema.
_PLAIN_INT = re.compile(r"-?[0-9]+", re.ASCII)
_PLAIN_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?", re.ASCII)


def _int_text(value: Any) -> Any:
    return int(value) if isinstance(value, str) and _PLAIN_INT.fullmatch(value) else value


def _number_text(value: Any) -> Any:
    return float(value) if isinstance(value, str) and _PLAIN_NUMBER.fullmatch(value) else value


def _flag_text(value: Any) -> Any:
    return {"true": True, "false": False}.get(value, value) if isinstance(value, str) else value


_INT = (Strict(), BeforeValidator(_int_text))
_NUMBER = (Strict(), BeforeValidator(_number_text))
Int = Annotated[int, *_INT]
Number = Annotated[float, *_NUMBER]
Flag = Annotated[bool, Strict(), BeforeValidator(_flag_text)]
BootIndex = Annotated[int, Field(ge=-MAX_BOOT, le=MAX_BOOT), *_INT]
LineNumber = Annotated[int, Field(ge=1, le=MAX_LINE_NUMBER), *_INT]
SizeMib = Annotated[float, Field(allow_inf_nan=False, le=MAX_POOL_MIB), *_NUMBER]
Seqs = Annotated[int, Field(ge=1, le=MAX_SEQS), *_INT]
Tokens = Annotated[int, Field(le=MAX_WINDOW_TOKENS), *_INT]
Seconds = Annotated[float, Field(allow_inf_nan=False, gt=0), *_NUMBER]
WaitSeconds = Annotated[float, Field(allow_inf_nan=False, ge=0, le=MAX_WAIT_S), *_NUMBER]
ByteOffset = Annotated[int, Field(ge=0, le=MAX_LINE_NUMBER), *_INT]



class Input(BaseModel):
    """A tool's input: flat fields, no other names allowed."""

    # Built on first use: a CLI command validates one input of its family's three; the server
    # builds all 14 when it writes their schemas for tools/list.
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Output(BaseModel):
    """A tool's output (or a part of one): frozen."""

    # Built on first use, like Input: a CLI command makes one tool's output, not its family's.
    model_config = ConfigDict(frozen=True, defer_build=True)


class LineRef(Output):
    line: int = Field(description="1-based line number in the source.")
    text: str = Field(description="The ledger line as printed.")


class BootRef(Output):
    source: str
    boot: int = Field(description="Which boot was read, 1 = oldest; -1 = the newest, -2 ... when the boots "
                                  "before it were not counted (lines_from_byte set).")
    boots_seen: int | None = Field(None, description="How many boots the source holds (null: not counted).")
    first_line: int
    last_line: int
    origin: Literal["host", "local file", "caller text"] = Field(
        "caller text", description="Where the text came from: read on a host, read from a file here, or "
        "given by the caller (log_text).",
    )
    verified: bool = Field(
        False, description="False for caller text: its figures are the caller's, not read from a host or file."
    )
    first_byte: int | None = Field(
        default=None, description="Byte offset of first_line in the file (null: not known). With first_line, the "
        "boot's identity: pass both as after_line / after_byte to wait past this boot.",
    )
    lines_from_byte: int | None = Field(
        default=None,
        description="null: every line number is the file's own. Else the lines before the boot were not counted "
                    "(a large file read from its end): line numbers count from 1 at the line that starts "
                    "at this byte offset; line n is `tail -c +<offset+1> FILE | sed -n <n>p`.",
    )


class RuleCheck(Output):
    """One rule of the rule book (core/rules/book.py) on this plan: its verdict, arithmetic, lines and remedy."""

    rule: str
    verdict: Literal["pass", "fail", "unchecked"]
    arithmetic: str
    lines: list[LineRef] = Field(default_factory=list)
    remedy: str = Field(description="Failed: what to do instead; unchecked: what would let it be checked.")


def rule_check(check: Check) -> RuleCheck:
    return RuleCheck(rule=check.rule, verdict=check.verdict, arithmetic=check.arithmetic,
                     lines=[line_ref(line) for line in check.lines], remedy=check.remedy)


def mib(value: Decimal) -> float:
    """Decimal MiB to a JSON number with two decimals, as every output shows it."""
    return float(round(value, 2))


def boot_ref(boot: Boot) -> BootRef:
    """Which boot of which source a result read, and whether its figures are verified."""
    return BootRef(
        source=boot.source,
        boot=boot.index,
        boots_seen=boot.boots_seen,
        first_line=boot.first_line,
        last_line=boot.last_line,
        origin=boot.origin,
        verified=boot.origin != "caller text",
        first_byte=boot.first_byte,
        lines_from_byte=boot.lines_from_byte,
    )


def line_ref(line: Line) -> LineRef:
    return LineRef(line=line.number, text=line.text)
