"""The shipping tools' models: render_gates, verify_deploy."""

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from radiance_mcp.core.constants import MAX_POOL_MIB, KVDtype
from radiance_mcp.models.base import BootRef, Int, LineRef, MaxChars, Output, PathArg, Seqs
from radiance_mcp.models.ledger import OutsideFreeInput, ReserveInput
from radiance_mcp.models.ledger_ref import LedgerRef, Settling
from radiance_mcp.models.plan import json_list

MAX_ENV_BYTES = 256 * 1024
"""An env file is a few hundred bytes; a bigger one is not an env file."""


class RenderGatesInput(LedgerRef):
    """The boot the ceiling is read from (service, log, log_text or container), and the planned pair and shape."""

    vram_kv_mib: Int | None = Field(None, gt=0, le=MAX_POOL_MIB, description="The planned KV memory per card, MiB. "
                                    "Omitted on llama.cpp only: it follows from seqs x max_model_len cells.")
    vram_weights_mib: Int | None = Field(
        None, ge=0, le=MAX_POOL_MIB, description="The planned weights per card, MiB. Omitted: the boot's."
    )
    seqs: Seqs | None = Field(None, description="--max-num-seqs planned. Omitted: the boot's.")
    max_model_len: Int | None = Field(None, ge=1, le=1 << 24, description="--max-model-len planned. Omitted: boot's.")
    kv_cache_dtype: KVDtype | None = Field(None, description="bf16 or fp8. Omitted: the boot's.")
    spec: Int | None = Field(None, ge=0, le=64, description=(
        "Draft tokens per step (speculative decoding). Omitted: the boot's sampler line."))
    reserves: list[ReserveInput] = Field(default_factory=list, max_length=64)
    env_prefix: Annotated[str, MaxChars(63)] | None = Field(
        None, pattern=r"^[A-Z][A-Z0-9_]{0,62}$",
        description="e.g. SVC for SVC_VRAM_KV_MIB. Omitted: from the service's name.",
    )
    env_file: PathArg | None = Field(
        None, description="Where the bats file sources it. Omitted: the config's, else <name>.env beside it.",
    )

    outside_free: list[OutsideFreeInput] = Field(default_factory=list, max_length=64)

    @field_validator("reserves", "outside_free", mode="before")
    @classmethod
    def _json_string(cls, value: Any, info: Any) -> Any:
        return json_list(info.field_name, value)


class PredictionOutput(Output):
    key: str
    value: str = Field(description="The expected figure, as the env file records it.")
    text: str


class RenderGatesOutput(Output):
    ledger: BootRef
    service: str
    pair_mib: int
    ceiling_mib: int
    ceiling_derivation: str
    max_pair_mib: int = Field(description="The ceiling less every reserve.")
    contract: str
    contract_margin_mib: float
    sampler_rows: int | None
    personal_reserves: list[str]
    env_file: str
    env_text: str = Field(description="The env file: header, pair and shape, predictions with empty verdict slots.")
    bats_file: str
    bats_text: str = Field(description="The gates: run `bats <bats_file>` (ENV_FILE=... to point at another copy).")
    predictions: list[PredictionOutput]
    sources: list[LineRef]
    notes: list[str]


class VerifyDeployInput(Settling, LedgerRef):
    """The new boot (service, log, log_text or container), and the env file render_gates wrote."""

    env_text: Annotated[str, MaxChars(MAX_ENV_BYTES)] | None = Field(
        None, description="The env file's text as render_gates wrote it (its predictions). "
        "Omitted: the service's env_file from the config, on this machine.",
    )
    outside_free: list[OutsideFreeInput] = Field(default_factory=list, max_length=64)

    @field_validator("outside_free", mode="before")
    @classmethod
    def _json_string(cls, value: Any, info: Any) -> Any:
        return json_list(info.field_name, value)

    boundary_found: Int | None = Field(
        None, ge=0, le=4096, description="Markers the boundary probe retrieved (boundary_probe's result); omitted: "
        "the boundary prediction stays pending.",
    )


class DeployCheck(Output):
    check: str
    ok: bool | None = Field(description="null: the boot does not print the line this check needs.")
    expected: str
    found: str
    line: LineRef | None


class Verdict(Output):
    key: str
    predicted: str
    verdict: Literal["kept", "killed", "pending"]
    text: str = Field(description="What to write in the env file's verdict slot.")


class VerifyDeployOutput(Output):
    ledger: BootRef
    ok: bool = Field(description="Every check passed and no prediction was killed.")
    checks: list[DeployCheck]
    verdicts: list[Verdict]
    env_text: str = Field(description="The env file with every verdict slot filled: write it back yourself.")
    notes: list[str]
