"""submit_answer's input: the procedure's answer as data (offered only under ``serve --record``).

An eval scores a run on the record and the agent's final answer. Read from free text, the
answer is a guess at what the agent claimed (which figure, in which unit, of which service,
negated or not); submitted here, each claim is typed: the service the answer is about, every
figure with its unit, the verdict as one choice, and the plan where the question asks for one.
The server answers with the answer as it read it, so the record (radiance_mcp.evals.record)
holds the parsed answer as the call's result; the scorer judges facts and traps on the last
answer submitted, and on its figures by their last name given.
"""

from typing import Annotated, Literal

from pydantic import Field

from radiance_mcp.core.constants import KVDtype
from radiance_mcp.models.base import Input, LineNumber, MaxChars, Name, Number, Output, Seqs, SizeMib, Tokens

TOOL = "submit_answer"
"""The tool's name: not one of the 14 procedure tools; the server offers it only when it records."""
DESCRIPTION = (
    "Submit your final answer as data, once you have it: the service it is about, each figure with its unit "
    "(as the tools gave it), the verdict as one choice, and the plan where the question asks for one; text holds "
    "the answer in words. Submit again to correct it: the last answer counts."
)
MAX_FIGURES = 64
MAX_TEXT_CHARS = 65_536
"""The answer in words: a few KiB for any answer a person reads."""

Unit = Literal["MiB", "GiB", "KiB", "B", "%", "t/s", "tokens", "seqs", "count"]
"""The units a figure is given in; memory is converted (1 GiB = 1,024 MiB), never matched as a string."""
Verdict = Literal[
    "meets_contract", "fails_contract", "boots", "refused", "plateau", "threshold", "no_plateau",
    "retrieved", "not_retrieved", "first_token_noise", "thinking_on", "warm_prefix_cache", "healthy", "broken",
]
"""The verdicts the procedures reach (skills/*/SKILL.md): the pool's contract, the candidate boot, a claim on
arms, a boundary probe, what a misleading rate was."""


class FigureClaim(Input):
    name: Name = Field(min_length=1, description="What the figure is, e.g. ceiling_mib or the tool's field name.")
    value: Number = Field(allow_inf_nan=False, description="The figure.")
    unit: Unit
    service: Name | None = Field(None, description="Whose figure, when not the answer's service.")


class ReserveClaim(Input):
    mib: SizeMib = Field(ge=0)
    label: Name = Field(min_length=1)
    line: LineNumber | None = Field(None, description="The ledger line that backs it.")
    personal: bool = Field(False, description="No line backs it: labelled personal.")


class PlanClaim(Input):
    pair_mib: SizeMib | None = Field(None, ge=0, description="The KV / VRAM pair planned.")
    pool_mib: SizeMib | None = Field(None, ge=0, description="The KV pool (--vram-kv-mib) planned.")
    seqs: Seqs | None = None
    max_model_len: Tokens | None = Field(None, ge=1)
    kv_cache_dtype: KVDtype | None = None
    reserves: list[ReserveClaim] = Field(default_factory=list, max_length=16)


class SubmitAnswerInput(Input):
    service: Name | None = Field(None, description="The service the answer is about; omitted: the fleet.")
    figures: list[FigureClaim] = Field(default_factory=list, max_length=MAX_FIGURES)
    verdict: Verdict | None = None
    plan: PlanClaim | None = None
    text: Annotated[str, MaxChars(MAX_TEXT_CHARS)] = Field("", description="The answer in words.")


class SubmitAnswerOutput(Output):
    answer: SubmitAnswerInput = Field(description="The answer as the server read it (the record keeps it).")
    note: str = "recorded; submit again to correct it: the last answer counts"
