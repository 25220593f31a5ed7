"""The step-shape audit's models: audit_step_shape, check_serve_script, compare_dry_run."""

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from radiance_mcp.core.constants import DRY_RUN_OUTPUT_CAP_BYTES, SCRIPT_CAP_BYTES, KVDtype, LedgerEngine
from radiance_mcp.core.rules.remote_words import MODE_PATTERN
from radiance_mcp.models.base import (
    BootIndex,
    BootRef,
    Input,
    LedgerText,
    LineRef,
    MaxChars,
    Name,
    Output,
    PathArg,
    Seconds,
)
from radiance_mcp.models.ledger_ref import SOURCE_KINDS, LedgerRef, given_sources, ledger_field, pairing_problem

ScriptText = Annotated[str, MaxChars(SCRIPT_CAP_BYTES)]
ArgvText = Annotated[str, MaxChars(DRY_RUN_OUTPUT_CAP_BYTES)]
DRY_RUN_TIMEOUT_S = 20.0
DRY_RUN_MAX_TIMEOUT_S = 120.0
# MODE_PATTERN (core.rules.remote_words, beside the other rules on words sent to hosts): a mode name, no leading
# '-', so it can never be read as an option by the script.


# ---------------------------------------------------------------------------------------
# audit_step_shape


class AuditStepShapeInput(Input):
    """The proven and the candidate boot: one source each, or one source and two of its boots."""

    proven_service: Name | None = ledger_field("proven", "service")
    proven_log: PathArg | None = ledger_field("proven", "log")
    proven_log_text: LedgerText | None = ledger_field("proven", "log_text")
    proven_container: Name | None = ledger_field("proven", "container")
    proven_boot: BootIndex | None = ledger_field("proven", "boot")
    candidate_service: Name | None = ledger_field("candidate", "service")
    candidate_log: PathArg | None = ledger_field("candidate", "log")
    candidate_log_text: LedgerText | None = ledger_field("candidate", "log_text")
    candidate_container: Name | None = ledger_field("candidate", "container")
    candidate_boot: BootIndex | None = ledger_field("candidate", "boot")
    service: Name | None = ledger_field("shared", "service")
    log: PathArg | None = ledger_field("shared", "log")
    log_text: LedgerText | None = ledger_field("shared", "log_text")
    container: Name | None = ledger_field("shared", "container")
    host: Name | None = ledger_field("shared", "host")

    @model_validator(mode="after")
    def _sources(self) -> Self:
        shared = given_sources(self)
        sides = {side: given_sources(self, f"{side}_") for side in ("proven", "candidate")}
        if shared:
            if len(shared) > 1 or any(sides.values()):
                raise ValueError(
                    "give either one shared source (service, log, log_text or container) for two boots of one "
                    "ledger, or one source per side (proven_* and candidate_*), not both (found: "
                    f"{', '.join(shared + sides['proven'] + sides['candidate'])})"
                )
            proven = self.proven_boot if self.proven_boot is not None else -2
            candidate = self.candidate_boot if self.candidate_boot is not None else -1
            if proven == candidate:
                raise ValueError(
                    f"proven_boot and candidate_boot are both {proven}: with one source, name two different boots "
                    "(e.g. proven_boot=-2, candidate_boot=-1)"
                )
        else:
            for side, given in sides.items():
                if len(given) != 1:
                    raise ValueError(
                        f"give exactly one {side} source of {', '.join(f'{side}_{k}' for k in SOURCE_KINDS)} "
                        f"(found: {', '.join(given) or 'none'}), or one shared service/log/log_text/container "
                        "for two boots"
                    )
        # host applies to every log and container given here, shared or on either side.
        kinds = {name.removeprefix("proven_").removeprefix("candidate_")
                 for name in shared + sides["proven"] + sides["candidate"]}
        problem = pairing_problem(kinds, self.host is not None)
        if problem:
            raise ValueError(problem)
        return self

    def ledger_refs(self) -> tuple[LedgerRef, LedgerRef]:
        """One LedgerRef per side (host applies to the log and container sources)."""
        shared = bool(given_sources(self))
        result = []
        for side, default_boot in (("proven", -2 if shared else -1), ("candidate", -1)):
            values = {k: getattr(self, k if shared else f"{side}_{k}") for k in SOURCE_KINDS}
            boot = getattr(self, f"{side}_boot")
            remote = values["log"] is not None or values["container"] is not None
            result.append(LedgerRef(**values, host=self.host if remote else None,
                                    boot=boot if boot is not None else default_boot))
        return result[0], result[1]


class ShapeBoot(Output):
    ledger: BootRef
    status: Literal["booted", "refused", "unknown"] = Field(
        description="refused: the boot printed 'startup stopped'; booted: it settled or served; unknown: neither."
    )
    not_printed: list[str] = Field(description="Step-shape phrases this boot does not print.")


class ShapeRow(Output):
    row: str
    unit: Literal["flag", "MiB", "count", "percent", "text"]
    proven: str | None = Field(description="As the proven boot printed it.")
    candidate: str | None = Field(description="As the candidate boot printed it.")
    delta: float | None = Field(description="candidate - proven, in the row's unit (MiB for sizes).")
    delta_text: str | None
    differs: bool
    proven_line: int | None
    candidate_line: int | None


class FlagChange(Output):
    flag: str
    proven: str | None
    candidate: str | None
    proven_line: int | None
    candidate_line: int | None


class ArenaSlopeOut(Output):
    label: Literal["two-point estimate"] = "two-point estimate"
    proven_mnbt: int
    candidate_mnbt: int
    proven_arena_mib: float
    candidate_arena_mib: float
    mib_per_batched_token: float
    kib_per_batched_token: float
    intercept_mib: float
    derivation: str


class SeatCheckOut(Output):
    seats: int = Field(description="--max-num-seqs (or the kv cache line's worst-case sequences).")
    window_tokens: int = Field(description="--max-model-len (or the kv cache line's worst-case tokens).")
    kv_cache_dtype: KVDtype
    funded_kv_mib: float = Field(description="The KV cache the engine funded: the smaller of vram_kv and kv cache.")
    funded_kv_printed: str
    funded_kv_line: int
    one_sequence_mib: float = Field(description="The pool contract for one sequence at the full window.")
    seats_mib: float = Field(description="The pool contract for every seat at the full window.")
    below_one_sequence: bool
    below_seats: bool
    derivation: str


class AuditStepShapeOutput(Output):
    ok: bool = Field(description="True only when the candidate echoes the proven shape and did not refuse.")
    verdict: Literal["refused", "shape differs", "same shape"]
    proven: ShapeBoot
    candidate: ShapeBoot
    rows: list[ShapeRow]
    flag_changes: list[FlagChange]
    inherit: dict[str, str] = Field(description="Flag -> the proven value, for every step flag that differs.")
    arena_cost: ArenaSlopeOut | None = Field(description="The arena's MiB per batched token: a two-point estimate.")
    proven_seats: SeatCheckOut | None
    candidate_seats: SeatCheckOut | None
    fix_text: LineRef | None = Field(description="The engine's own fix text (vram_budget.cpp:117), when printed.")
    refusal: list[LineRef] = Field(description="The candidate's refusal lines: kv cache backing and startup stopped.")
    diagnosis: list[str]
    remedy: list[str]
    notes: list[str]
    proven_lines: list[LineRef] = Field(description="Every proven ledger line the audit read.")
    candidate_lines: list[LineRef] = Field(description="Every candidate ledger line the audit read.")


# ---------------------------------------------------------------------------------------
# check_serve_script


class CheckServeScriptInput(Input):
    service: Name | None = Field(
        None, description="A fleet service: its serve_script and env_file."
    )
    script: PathArg | None = Field(
        None, description="Script path under the log roots (or on host)."
    )
    script_text: ScriptText | None = Field(None, description="The script's text.")
    env_file: PathArg | None = Field(
        None, description="Env file owning the shape; default: the service's, else the sourced one."
    )
    env_text: ScriptText | None = Field(None, description="Env file text.")
    host: Name | None = Field(None, description="Fleet host (SSH) of script and env_file.")
    engine: LedgerEngine | None = Field(None, description="The engine it launches; default: the launcher's.")

    @model_validator(mode="after")
    def _sources(self) -> Self:
        if self.engine is not None and self.service is not None:
            raise ValueError("engine goes with script or script_text; a service names its engine in the fleet config "
                             "(engine = \"...\")")
        given = [n for n in ("service", "script", "script_text") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of service, script or script_text (found: {', '.join(given) or 'none'})"
            )
        if self.env_file is not None and self.env_text is not None:
            raise ValueError("give at most one of env_file or env_text")
        if self.host is not None and self.service is not None:
            raise ValueError("host goes with script or env_file; a service names its own host in the fleet config")
        if self.host is not None and self.script is None and self.env_file is None:
            raise ValueError("host goes with script or env_file: paths of files on that host")
        return self


class OwnedVarOut(Output):
    flag: str
    variable: str = Field(description="The env file's variable the script passes to this flag.")
    value: str | None = Field(description="Its value in the env file.")
    line: int | None
    file: str | None = Field(None, description="The env file that defines it.")


class ModeOut(Output):
    mode: str
    kind: Literal["case arm", "if branch", "function", "top level", "env file"]
    first_line: int
    last_line: int
    findings: int


class FindingOut(Output):
    kind: Literal["literal", "default", "override", "alias", "unowned"]
    file: str
    line: int
    mode: str | None = Field(
        description="The case arm, if branch or function it sits in (null: shared part or env file)."
    )
    flag: str | None
    variable: str | None
    value: str
    text: str = Field(description="The line as written.")
    message: str


class CheckServeScriptOutput(Output):
    ok: bool = Field(description="True when no mode carries its own shape value or alias.")
    script: str
    env_file: str | None = Field(description="The env file read (null: none found; then only literals are checked).")
    owned: list[OwnedVarOut]
    modes: list[ModeOut]
    modes_with_findings: list[str]
    findings: list[FindingOut]
    handles_dry_run: bool
    sources_env_file: bool | None
    notes: list[str]
    remedy: list[str]


# ---------------------------------------------------------------------------------------
# compare_dry_run


class CompareDryRunInput(Input):
    proven_mode: Name | None = Field(None, description="Proven mode: runs '<script> <mode> --dry-run'.")
    candidate_mode: Name | None = Field(None, description="The mode under review, run the same way.")
    service: Name | None = Field(None, description="A fleet service: its serve_script is run.")
    script: PathArg | None = Field(None, description="Path of a serve script a fleet service names.")
    host: Name | None = Field(None, description="Fleet host (SSH) of script.")
    proven_argv: ArgvText | None = Field(
        None, description="Proven dry-run output: compare without running."
    )
    candidate_argv: ArgvText | None = Field(None, description="Candidate dry-run output.")
    argv_format: Literal["auto", "lines", "shell", "nul"] = Field(
        "auto", description="How the dry run prints argv."
    )
    timeout_s: Seconds = Field(
        DRY_RUN_TIMEOUT_S, le=DRY_RUN_MAX_TIMEOUT_S, description="Seconds per dry run."
    )

    @model_validator(mode="after")
    def _sources(self) -> Self:
        inline = [n for n in ("proven_argv", "candidate_argv") if getattr(self, n) is not None]
        run = [n for n in ("service", "script") if getattr(self, n) is not None]
        modes = [n for n in ("proven_mode", "candidate_mode") if getattr(self, n) is not None]
        if self.host is not None and self.script is None:
            raise ValueError("host goes with script (a serve script on that host); a service names its own host")
        if inline:
            if len(inline) != 2 or run or modes:
                raise ValueError(
                    "for a comparison without running, give both proven_argv and candidate_argv and nothing else; "
                    "to run the script, give service or script with proven_mode and candidate_mode"
                )
            return self
        if len(run) != 1 or len(modes) != 2:
            raise ValueError(
                "give service or script (one of them) with proven_mode and candidate_mode, or the two dry-run "
                f"outputs as proven_argv and candidate_argv (found: {', '.join(run + modes) or 'none'})"
            )
        for name in ("proven_mode", "candidate_mode"):
            value = getattr(self, name)
            # Security: the mode is passed as one argv word; a leading '-' would make it an option of the
            # script (e.g. '--help' or '-x') and anything beyond a plain name has no business there.
            if not MODE_PATTERN.fullmatch(value):
                raise ValueError(
                    f"{name}={value!r} is not a mode name: letters, digits, '.', '_', '+', '-' only, at most 64, "
                    "not starting with '-'"
                )
        if self.proven_mode == self.candidate_mode:
            raise ValueError(f"proven_mode and candidate_mode are both {self.proven_mode!r}: name two modes")
        return self


class DryRunSide(Output):
    mode: str | None
    host: str | None = Field(None, description="The host it ran on (null: this machine, or an inline comparison).")
    command: list[str] | None = Field(description="The argv that was run (null for an inline comparison).")
    exit_status: int | None
    bytes: int
    argc: int
    argv: list[str]


class ArgvDifferenceOut(Output):
    index: int = Field(description="0-based position of the first differing argument.")
    proven: str | None = Field(description="null: the proven argv has no argument there.")
    candidate: str | None = Field(description="null: the candidate argv has no argument there.")
    char_offset: int | None
    detail: str


class ArgvFlagChange(Output):
    flag: str
    proven: str | None
    candidate: str | None


class CompareDryRunOutput(Output):
    ok: bool = Field(description="True only when the two outputs are identical byte for byte.")
    verdict: Literal["identical", "differs"]
    identical_bytes: bool
    identical_argv: bool
    format: Literal["lines", "shell", "nul"]
    first_byte_offset: int | None
    first_difference: ArgvDifferenceOut | None
    edits: list[str]
    flag_changes: list[ArgvFlagChange]
    summary: str
    proven: DryRunSide
    candidate: DryRunSide
