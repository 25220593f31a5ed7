"""The step-shape audit's tools: audit_step_shape, check_serve_script, compare_dry_run.

Each reads its sources (ledgers, a script and its env file, two dry runs), calls the pure
core (radiance_mcp.step_shape, radiance_mcp.serve_script) and shapes the output model.
The only process this module starts is ``<script> <mode> --dry-run``, with an argv list
(never a shell), a validated mode name, a timeout and an output cap. On a host, the same
run goes through remote.py's dry-run template (sources.run_remote_dry_runs), under the same
limits, killed there at the timeout.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, model_validator

from radiance_mcp import serve_script as ss
from radiance_mcp.constants import DRY_RUN_OUTPUT_CAP_BYTES, SCRIPT_CAP_BYTES
from radiance_mcp.errors import GuardRailError, InputError, LedgerError, SourceError
from radiance_mcp.ledger import Boot, Line
from radiance_mcp.models import (
    BootIndex,
    BootRef,
    LedgerArgs,
    LedgerText,
    LineRef,
    MaxChars,
    Name,
    PathArg,
    Seconds,
    _Input,
    _Output,
    mib,
)
from radiance_mcp.offload import run
from radiance_mcp.runtime import Runtime, ToolSpec, boot_ref, ledger_source, line_ref, local_path
from radiance_mcp.sources import (
    PodmanLogsSource,
    RemoteFileSource,
    RemotePath,
    check_regular,
    file_error,
    read_many,
    read_remote_files,
    remote_path_refusal,
    resolve_local,
    run_remote_dry_runs,
)
from radiance_mcp.units import fmt_gib, fmt_mib

if TYPE_CHECKING:
    from radiance_mcp import step_shape as sh
    from radiance_mcp.remote import DryRun

ScriptText = Annotated[str, MaxChars(SCRIPT_CAP_BYTES)]
ArgvText = Annotated[str, MaxChars(DRY_RUN_OUTPUT_CAP_BYTES)]
DRY_RUN_TIMEOUT_S = 20.0
DRY_RUN_MAX_TIMEOUT_S = 120.0
# MODE_PATTERN (remote.py, beside the other argument rules): a mode name, no leading '-', so
# it can never be read as an option by the script; STDERR_TAIL_BYTES: the stderr a failure quotes.


# ---------------------------------------------------------------------------------------
# audit_step_shape: models


_SOURCE_KINDS = ("service", "log", "log_text", "container")


class AuditStepShapeInput(_Input):
    """The proven and the candidate boot: one source each, or one source and two of its boots."""

    proven_service: Name | None = Field(None, description="Service whose newest boot is the proven shape.")
    proven_log: PathArg | None = Field(
        None, description="Ledger file of the proven boot: under log_roots here, or on host (under its log_roots)."
    )
    proven_log_text: LedgerText | None = Field(None, description="Ledger text of the proven boot.")
    proven_container: Name | None = Field(None, description="Container on host whose podman logs hold the proven boot.")
    proven_boot: BootIndex | None = Field(
        None, description="Which boot of the proven source: -1 newest (default), or -2 with one shared source."
    )
    candidate_service: Name | None = Field(None, description="Service whose newest boot is the candidate shape.")
    candidate_log: PathArg | None = Field(None, description="Ledger file of the candidate boot (here, or on host).")
    candidate_log_text: LedgerText | None = Field(None, description="Ledger text of the candidate boot.")
    candidate_container: Name | None = Field(None, description="Container on host holding the candidate boot.")
    candidate_boot: BootIndex | None = Field(
        None, description="Which boot of the candidate source: -1 newest (default)."
    )
    service: Name | None = Field(
        None, description="One service for both: boots proven_boot and candidate_boot of its ledger."
    )
    log: PathArg | None = Field(None, description="One ledger file for both (two boots of it).")
    log_text: LedgerText | None = Field(None, description="One ledger text for both (two boots of it).")
    container: Name | None = Field(None, description="One container on host for both (two boots of its logs).")
    host: Name | None = Field(
        None, description="A host of the fleet config where the log / container sources given here live; two "
        "ledgers on one host are read in one SSH round trip.",
    )

    @model_validator(mode="after")
    def _sources(self) -> AuditStepShapeInput:
        shared = [k for k in _SOURCE_KINDS if getattr(self, k) is not None]
        sides = {
            side: [f"{side}_{k}" for k in _SOURCE_KINDS if getattr(self, f"{side}_{k}") is not None]
            for side in ("proven", "candidate")
        }
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
                        f"give exactly one {side} source of {', '.join(f'{side}_{k}' for k in _SOURCE_KINDS)} "
                        f"(found: {', '.join(given) or 'none'}), or one shared service/log/log_text/container "
                        "for two boots"
                    )
        kinds = [k for k in _SOURCE_KINDS for name in (k, f"proven_{k}", f"candidate_{k}")
                 if getattr(self, name) is not None]
        if self.host is not None and not {"log", "container"} & set(kinds):
            raise ValueError("host goes with a log (a file on that host) or a container (its podman logs)")
        if self.host is None and "container" in kinds:
            raise ValueError("a container needs host: the host (from the fleet config) where podman runs it")
        return self

    def ledger_args(self) -> tuple[LedgerArgs, LedgerArgs]:
        """One LedgerArgs per side (host applies to the log and container sources)."""
        shared = any(getattr(self, k) is not None for k in _SOURCE_KINDS)
        result = []
        for side, default_boot in (("proven", -2 if shared else -1), ("candidate", -1)):
            values = {k: getattr(self, k if shared else f"{side}_{k}") for k in _SOURCE_KINDS}
            boot = getattr(self, f"{side}_boot")
            remote = values["log"] is not None or values["container"] is not None
            result.append(LedgerArgs(**values, host=self.host if remote else None,
                                     boot=boot if boot is not None else default_boot))
        return result[0], result[1]


class ShapeBoot(_Output):
    ledger: BootRef
    status: Literal["booted", "refused", "unknown"] = Field(
        description="refused: the boot printed 'startup stopped'; booted: it settled or served; unknown: neither."
    )
    not_printed: list[str] = Field(description="Step-shape phrases this boot does not print.")


class ShapeRow(_Output):
    row: str
    unit: Literal["flag", "MiB", "count", "percent", "text"]
    proven: str | None = Field(description="As the proven boot printed it.")
    candidate: str | None = Field(description="As the candidate boot printed it.")
    delta: float | None = Field(description="candidate - proven, in the row's unit (MiB for sizes).")
    delta_text: str | None
    differs: bool
    proven_line: int | None
    candidate_line: int | None


class FlagChange(_Output):
    flag: str
    proven: str | None
    candidate: str | None
    proven_line: int | None
    candidate_line: int | None


class ArenaSlopeOut(_Output):
    label: Literal["two-point estimate"] = "two-point estimate"
    proven_mnbt: int
    candidate_mnbt: int
    proven_arena_mib: float
    candidate_arena_mib: float
    mib_per_batched_token: float
    kib_per_batched_token: float
    intercept_mib: float
    derivation: str


class SeatCheckOut(_Output):
    seats: int = Field(description="--max-num-seqs (or the kv cache line's worst-case sequences).")
    window_tokens: int = Field(description="--max-model-len (or the kv cache line's worst-case tokens).")
    kv_cache_dtype: Literal["fp8", "bf16"]
    funded_kv_mib: float = Field(description="The KV cache the engine funded: the smaller of vram_kv and kv cache.")
    funded_kv_printed: str
    funded_kv_line: int
    one_sequence_mib: float = Field(description="The pool contract for one sequence at the full window.")
    seats_mib: float = Field(description="The pool contract for every seat at the full window.")
    below_one_sequence: bool
    below_seats: bool
    derivation: str


class AuditStepShapeOutput(_Output):
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
# audit_step_shape


async def read_two_boots(runtime: Runtime, proven: LedgerArgs, candidate: LedgerArgs) -> tuple[Boot, Boot]:
    """Both boots: two remote ledgers go through sources.read_many, one SSH command per host.

    So two log files on one host, or two boots of one log or container, cost one round trip
    (the procedure's 'one ssh call, two logs'); any other pair is read concurrently.
    """

    sources = [
        ledger_source(runtime, service=a.service, log=a.log, log_text=a.log_text, host=a.host, container=a.container)
        for a in (proven, candidate)
    ]
    a, b = sources
    if isinstance(a, RemoteFileSource | PodmanLogsSource) and isinstance(b, RemoteFileSource | PodmanLogsSource):
        boots = await read_many([(a, proven.boot), (b, candidate.boot)])
    else:
        boots = list(await asyncio.gather(a.read(proven.boot), b.read(candidate.boot)))
    return boots[0], boots[1]


def _delta_text(row: sh.Row) -> str | None:
    if row.delta is None or row.delta == 0:
        return None
    sign = "+" if row.delta > 0 else "-"
    if row.spec.unit == "MiB":
        size = abs(row.delta)
        return f"{sign}{fmt_gib(size)}" if size >= 1024 else f"{sign}{fmt_mib(size, 2)} MiB"
    if row.spec.unit == "percent":
        return f"{sign}{fmt_mib(abs(row.delta))} points"
    places = 0 if row.delta == row.delta.to_integral_value() else 1
    return f"{sign}{fmt_mib(abs(row.delta), places)}"


def _seats_out(check: sh.SeatCheck | None) -> SeatCheckOut | None:
    if check is None:
        return None
    assert check.kv.quantity is not None
    return SeatCheckOut(
        seats=check.seats,
        window_tokens=check.window_tokens,
        kv_cache_dtype=check.dtype,
        funded_kv_mib=mib(check.kv.quantity),
        funded_kv_printed=check.kv.printed,
        funded_kv_line=check.kv.line.number,
        one_sequence_mib=mib(check.one_sequence_mib),
        seats_mib=mib(check.seats_mib),
        below_one_sequence=check.below_one_sequence,
        below_seats=check.below_seats,
        derivation=check.derivation,
    )


def _lines(shape: sh.ShapeLedger) -> list[LineRef]:
    lines: dict[int, Line] = {v.line.number: v.line for v in shape.values.values()}
    if shape.fix_text is not None:
        lines[shape.fix_text.line.number] = shape.fix_text.line
    return [LineRef(line=n, text=lines[n].text) for n in sorted(lines)]


async def audit_step_shape(runtime: Runtime, args: AuditStepShapeInput) -> AuditStepShapeOutput:
    """Price a serving-shape change from the engine's own boot ledger: proven boot against candidate.

    The rule: --max-num-batched-tokens (MNBT) sizes the activation arena, and the arena is
    charged to the card before the weights and the KV cache are funded, so a wider step is
    taken out of the weight tiers and the KV cache, not out of the disk tier. Measured: MNBT
    1,024 -> arena 504 MiB, claimable 30.87 GiB; MNBT 65,536 -> arena 10.65 GiB, claimable
    16.85 GiB, experts squeezed to 10.98 GiB, 56 GiB of weights stranded on the disk tier.
    A comment calling a wide step free throughput is not evidence; these rows are.

    Rows side by side with deltas: the echoed --max-model-len, --max-num-seqs,
    --max-num-batched-tokens, --host-pool-mib, --tp, --kv-cache-dtype, --placement; the
    activation arena, claimable, vram_kv, weights by tier (VRAM, host pool, container-on-
    disk), the kv cache line and its full-length sessions, expert prefetch and lender, and
    any refusal. The diagnosis names the differing flags, what the arena's growth cost, and
    whether the funded KV cache is below one full-length sequence for the seats asked
    (the pool contract: seqs * window * rate + 110 * seqs + 448 MiB; fp8 8 x 32,768 needs
    3,200.00 MiB): that is the out-of-memory cause even where a narrower shape at the same
    window booted. It quotes the engine's own fix text (vram_budget.cpp:117) and gives the
    arena's cost per batched token from the two boots, labelled a two-point estimate. The
    remedy is always to inherit the proven numbers from the env file that owns them.

    Sources: one per side (proven_service / proven_log / proven_log_text / proven_container
    and the candidate_* ones), or one shared service / log / log_text / container with two of
    its boots (proven_boot=-2, candidate_boot=-1 by default); host names the fleet host a log
    or container lives on. Two ledgers on one host are read in one SSH round trip, cut on the
    host, newest boot first. ok is true only for the same shape.
    """

    proven_args, candidate_args = args.ledger_args()
    try:
        proven_boot, candidate_boot = await read_two_boots(runtime, proven_args, candidate_args)
    except LedgerError as exc:
        shared = [k for k in _SOURCE_KINDS if getattr(args, k) is not None]
        if not shared or exc.boots_held != 1:
            raise
        raise LedgerError(
            f"{exc}. One boot cannot be both sides: the proven boot is a boot that served, so name its source "
            f"(proven_service, proven_log, proven_log_text or proven_container) and pass this {shared[0]} as "
            f"candidate_{shared[0]}"
        ) from exc
    model_service = args.candidate_service or args.service or args.proven_service
    from radiance_mcp import step_shape as sh  # the pure core loads on first use (server start-up stays fast)

    result = sh.audit(proven_boot, candidate_boot, runtime.fleet.model_constants(model_service))
    refusal = []
    if result.candidate.status == "refused":
        for key in ("kv_cache", "refusal"):
            value = result.candidate.get(key)
            if value is not None:
                refusal.append(line_ref(value.line))
    return AuditStepShapeOutput(
        ok=result.verdict == "same shape",
        verdict=result.verdict,
        proven=ShapeBoot(ledger=boot_ref(proven_boot), status=result.proven.status,
                         not_printed=list(result.proven.missing)),
        candidate=ShapeBoot(ledger=boot_ref(candidate_boot), status=result.candidate.status,
                            not_printed=list(result.candidate.missing)),
        rows=[
            ShapeRow(
                row=r.spec.label,
                unit=r.spec.unit,
                proven=r.proven.printed if r.proven else None,
                candidate=r.candidate.printed if r.candidate else None,
                delta=mib(r.delta) if r.delta is not None else None,
                delta_text=_delta_text(r),
                differs=r.differs,
                proven_line=r.proven.line.number if r.proven else None,
                candidate_line=r.candidate.line.number if r.candidate else None,
            )
            for r in result.rows
        ],
        flag_changes=[
            FlagChange(
                flag=r.spec.label,
                proven=r.proven.printed if r.proven else None,
                candidate=r.candidate.printed if r.candidate else None,
                proven_line=r.proven.line.number if r.proven else None,
                candidate_line=r.candidate.line.number if r.candidate else None,
            )
            for r in result.flag_changes
        ],
        inherit=result.inherit,
        arena_cost=(
            ArenaSlopeOut(
                proven_mnbt=result.arena_slope.proven_mnbt,
                candidate_mnbt=result.arena_slope.candidate_mnbt,
                proven_arena_mib=mib(result.arena_slope.proven_arena_mib),
                candidate_arena_mib=mib(result.arena_slope.candidate_arena_mib),
                mib_per_batched_token=float(round(result.arena_slope.mib_per_token, 4)),
                kib_per_batched_token=float(round(result.arena_slope.mib_per_token * 1024, 1)),
                intercept_mib=float(round(result.arena_slope.intercept_mib, 1)),
                derivation=result.arena_slope.derivation,
            )
            if result.arena_slope
            else None
        ),
        proven_seats=_seats_out(result.proven_seats),
        candidate_seats=_seats_out(result.candidate_seats),
        fix_text=line_ref(result.fix_text.line) if result.fix_text else None,
        refusal=refusal,
        diagnosis=list(result.diagnosis),
        remedy=list(result.remedy),
        notes=list(result.notes),
        proven_lines=_lines(result.proven),
        candidate_lines=_lines(result.candidate),
    )


# ---------------------------------------------------------------------------------------
# check_serve_script


class CheckServeScriptInput(_Input):
    service: Name | None = Field(
        None, description="A service from the config: its serve_script and env_file entries are read."
    )
    script: PathArg | None = Field(
        None, description="Absolute path of the serve script (under the config's log_roots); with host, a file on "
        "that host, under its log_roots."
    )
    script_text: ScriptText | None = Field(None, description="The serve script itself.")
    env_file: PathArg | None = Field(
        None, description="The env file that owns the shape (default: the service's env_file, else the files the "
        "script itself sources).",
    )
    env_text: ScriptText | None = Field(None, description="The env file's text.")
    host: Name | None = Field(
        None, description="A host of the fleet config where script and env_file live; both are read in one SSH "
        "round trip. A service on a host needs no host here.",
    )

    @model_validator(mode="after")
    def _sources(self) -> CheckServeScriptInput:
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


class OwnedVarOut(_Output):
    flag: str
    variable: str = Field(description="The env file's variable the script passes to this flag.")
    value: str | None = Field(description="Its value in the env file.")
    line: int | None
    file: str | None = Field(None, description="The env file that defines it.")


class ModeOut(_Output):
    mode: str
    kind: Literal["case arm", "if branch", "function", "top level", "env file"]
    first_line: int
    last_line: int
    findings: int


class FindingOut(_Output):
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


class CheckServeScriptOutput(_Output):
    ok: bool = Field(description="True when no mode carries its own shaped number or alias.")
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


def _read_small(path: Path, argument: str) -> str:
    """A script or env file's text, refused above SCRIPT_CAP_BYTES."""
    check_regular(path, f"{argument}={str(path)!r}", argument)
    try:
        with path.open("rb") as stream:
            data = stream.read(SCRIPT_CAP_BYTES + 1)
    except OSError as exc:
        raise file_error(f"{argument}={str(path)!r}", exc, setting=argument) from exc
    if len(data) > SCRIPT_CAP_BYTES:
        raise SourceError(
            f"{argument}={str(path)!r} is over {SCRIPT_CAP_BYTES // 1024:,} KiB: not a serve script or env file; "
            "name the right file"
        )
    return data.decode("utf-8", "replace")


MAX_SOURCED_FILES = 4
"""At most this many files a script sources are read as its env files."""


def _service_paths(runtime: Runtime, service: str) -> tuple[Path, Path | None]:
    """A local service's serve_script and env_file (a service on a host goes through _remote_script_and_env)."""
    entry = runtime.fleet.service(service)
    if entry.serve_script is None:
        raise InputError(
            f"service {service!r} names no serve_script in the fleet config; add serve_script = \"/path/to/script\" "
            "or pass script=..."
        )
    # The config is the operator's own file: its paths need no log root.
    script = Path(entry.serve_script).expanduser()
    env = Path(entry.env_file).expanduser() if entry.env_file else None
    return script, env


def _configured_script(service: str, serve_script: str | None) -> RemotePath:
    if serve_script is None:
        raise InputError(
            f"service {service!r} names no serve_script in the fleet config; add serve_script = \"/path/to/script\" "
            "(its absolute path on the service's host)"
        )
    return RemotePath(f"services.{service}.serve_script", serve_script, configured=True)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _in_directory(path: str, directory: str) -> bool:
    return posixpath.commonpath([posixpath.normpath(path), directory]) == directory


def _followed(script_text: str, script_path: str, notes: list[str]) -> list[ss.SourceLine]:
    """The files the script sources that can be resolved without running it; the others said in notes."""
    found: list[ss.SourceLine] = []
    for source in ss.source_lines(script_text, script_path):
        if source.path is None:
            notes.append(f"line {source.line}: 'source {source.word}' was not followed: {source.why}")
        elif len(found) < MAX_SOURCED_FILES:
            found.append(source)
    return found


def _unread_source(source: ss.SourceLine, why: str) -> str:
    return (f"line {source.line}: the script sources {source.path}, which was not read ({why}); its variables "
            "were not checked: pass env_file or env_text to check ownership against it")


@dataclass(frozen=True)
class _Script:
    label: str
    text: str
    path: str | None
    """Its path (on its host): source lines resolve against its directory; None for script_text."""
    env_files: list[ss.EnvFile]


async def _local_script_and_env(runtime: Runtime, args: CheckServeScriptInput, notes: list[str]) -> _Script:
    """The script and its env files from this machine's files or the texts given."""
    env_path: Path | None = None
    configured = args.service is not None
    if args.script_text is not None:
        label, text, path = "script_text", args.script_text, None
    else:
        if args.service is not None:
            script_path, env_path = _service_paths(runtime, args.service)
        else:
            assert args.script is not None
            script_path = local_path(runtime, args.script, "script")
        text = await asyncio.to_thread(_read_small, script_path, "script")
        label = path = str(script_path)
    if args.env_text is not None:
        return _Script(label, text, path, [ss.EnvFile("env_text", args.env_text)])
    if args.env_file is not None:
        env_path = local_path(runtime, args.env_file, "env_file")
    if env_path is not None:
        env_text = await asyncio.to_thread(_read_small, env_path, "env_file")
        return _Script(label, text, path, [ss.EnvFile(str(env_path), env_text, str(env_path))])
    env_files = []
    if path is not None:
        for source in _followed(text, path, notes):
            assert source.path is not None
            # Security: a source line is text in a file, not the operator's word. The file it names is read
            # only inside a configured script's own directory, or under the log roots as any path an agent
            # names (symlinks resolved), so a script cannot lead the read to /etc/shadow.
            trusted = configured and _in_directory(source.path, posixpath.dirname(path))
            try:
                env_path = Path(source.path) if trusted else local_path(runtime, source.path, "sourced file")
                if not env_path.is_file():
                    notes.append(f"line {source.line}: the script sources {source.path}, which is not there")
                    continue
                env_text = await asyncio.to_thread(_read_small, env_path, "sourced file")
            except (InputError, SourceError) as exc:  # the script's own line, not the caller's argument
                notes.append(_unread_source(source, str(exc)))
                continue
            env_files.append(ss.EnvFile(str(env_path), env_text, source.path))
            notes.append(f"env file {env_path}: the script sources it at line {source.line}")
    return _Script(label, text, path, env_files)


async def _remote_script_and_env(
    runtime: Runtime, args: CheckServeScriptInput, host: str, notes: list[str]
) -> _Script:
    """The script and its env files, read on host.

    The files: a service's serve_script and env_file from the fleet config (their directories
    allowed), or the script and env_file an agent names (under the host's log_roots). With no
    env file named, the files the script sources are read: the <script stem>.env beside it is
    fetched in the same round trip as the script, so the usual layout costs one; a script that
    sources another file costs a second.
    """
    refs: list[RemotePath] = []
    configured_env: str | None = None
    if args.service is not None:
        entry = runtime.fleet.service(args.service)
        refs.append(_configured_script(args.service, entry.serve_script))
        configured_env = entry.env_file
    elif args.script is not None:
        refs.append(RemotePath("script", args.script))
    named: RemotePath | None = None
    if args.env_text is None:
        if args.env_file is not None:
            named = RemotePath("env_file", args.env_file)
        elif configured_env is not None:
            named = RemotePath(f"services.{args.service}.env_file", configured_env, configured=True)
        elif refs:
            stem, _ = posixpath.splitext(refs[0].path)
            refs.append(RemotePath("env_file", f"{stem}.env", configured=refs[0].configured, optional=True))
        if named is not None:
            refs.append(named)
    texts = await read_remote_files(runtime.fleet, runtime.extras, host, refs, cap_bytes=SCRIPT_CAP_BYTES)
    read = dict(zip((r.path for r in refs), texts, strict=True))
    if args.script_text is not None:
        label, text, path = "script_text", args.script_text, None
    else:
        script = read[refs[0].path]
        assert script is not None  # a missing script raised
        label, text, path = f"{host}:{script.path}", _decode(script.data), refs[0].path
    if args.env_text is not None:
        return _Script(label, text, path, [ss.EnvFile("env_text", args.env_text)])
    if named is not None:
        env = read[named.path]
        assert env is not None
        return _Script(label, text, path, [ss.EnvFile(f"{host}:{env.path}", _decode(env.data), named.path)])
    env_files = []
    if path is not None:
        directory = posixpath.dirname(path)
        sources = []
        for source in _followed(text, path, notes):
            assert source.path is not None
            ref = RemotePath("sourced file", source.path, optional=True,
                             configured=refs[0].configured and _in_directory(source.path, directory))
            why = remote_path_refusal(runtime.fleet, host, ref)
            if why is not None:  # the script's own line, not the caller's argument
                notes.append(_unread_source(source, why))
            else:
                sources.append((source, ref))
        more = [ref for source, ref in sources if source.path not in read]
        if more:
            texts = await read_remote_files(runtime.fleet, runtime.extras, host, more, cap_bytes=SCRIPT_CAP_BYTES)
            read.update(zip((r.path for r in more), texts, strict=True))
        for source, _ in sources:
            assert source.path is not None
            env = read[source.path]
            if env is None:
                notes.append(f"line {source.line}: the script sources {host}:{source.path}, which is not there")
                continue
            env_files.append(ss.EnvFile(f"{host}:{env.path}", _decode(env.data), source.path))
            notes.append(f"env file {host}:{env.path}: the script sources it at line {source.line}")
    return _Script(label, text, path, env_files)


async def check_serve_script(runtime: Runtime, args: CheckServeScriptInput) -> CheckServeScriptOutput:
    """Find every mode of a multi-mode serve script that carries its own step or seat count.

    The rule: no mode may carry its own --max-num-seqs or --max-num-batched-tokens (nor host
    pool or GPU headroom); all four come from the env file that owns the shape. A private step
    is how a mode ends up with a 65,536-token arena of 10.65 GiB where the proven 1,024 costs
    504 MiB.

    The env file is the one named (env_file, env_text, or the service's env_file), else the
    files the script itself sources (source FILE / . FILE, relative to the script's directory,
    $(dirname "$0"), ${BASH_SOURCE%/*} and variables set to those), read when they lie in a
    configured script's directory or under the log roots. Ownership is read from the files,
    whatever the variables are called: an env-file variable owns the flag the script passes
    it to. A mode that inherits every shaped number has no finding. With no env file found,
    the result says so and reports only the numbers the script passes itself.

    Reports, with file, line and the mode (case arm, if branch or function) each sits in: a
    literal number passed to one of those flags (directly, in an argv array, in a flags
    string, or through a variable the script sets to a number); a numeric fallback of a
    variable that reaches one (${SEATS:-8}); an assignment in the script of an env-file
    variable that owns one; a second env-file variable passed to the same flag by some modes
    (a per-mode alias); a flag value that is computed or comes from a variable nothing sets.
    Comments, heredoc usage texts and quoted messages that mention a flag do not count.

    The fix: inherit the proven numbers from the env file, delete the literals (no shim, no
    alias), correct the mode's comment, then prove it with compare_dry_run.

    Sources: a service (its serve_script and env_file; on its host when the config gives one),
    a script path (with host: a file on that host, under its log_roots), or script_text; the
    env file likewise. On a host the script and the env file beside it are read in one SSH
    round trip, each capped at 1 MiB.
    """
    notes: list[str] = []
    host = runtime.fleet.service(args.service).host if args.service is not None else args.host
    if host is not None:
        script = await _remote_script_and_env(runtime, args, host, notes)
    else:
        script = await _local_script_and_env(runtime, args, notes)
    check = await run(
        lambda *, checkpoint: ss.check_script(script.text, script.env_files, script_name=script.label,
                                              script_path=script.path),
        label=script.label, remedy="name the serve script itself")
    if len(script.env_files) > 1:
        notes.append("env files: " + ", ".join(check.env_files) + " (a later one overrides an earlier one)")
    counts: dict[str, int] = {}
    for finding in check.findings:
        if finding.mode is not None:
            counts[finding.mode] = counts.get(finding.mode, 0) + 1
    remedy = []
    if check.findings:
        remedy = [
            "take every shaped number from the env file's variable that owns it (listed in owned); delete the "
            "literals, fallbacks, overrides and aliases listed (no shim left behind)",
            "correct the comment of each mode named so its premise (e.g. that a wide step is free throughput) is gone",
            "prove the fix with compare_dry_run: the mode's argv must match the proven mode's byte for byte",
        ]
    if not script.env_files:
        remedy.append(
            "no env file was found, so ownership was not checked: pass env_file (or env_text), or have the script "
            "source its env file, and check again"
        )
    return CheckServeScriptOutput(
        ok=check.ok,
        script=check.script,
        env_file=check.env_files[0] if check.env_files else None,
        owned=[OwnedVarOut(flag=o.flag, variable=o.name, value=o.value, line=o.line, file=o.file)
               for o in check.owned],
        modes=[ModeOut(mode=m.path, kind=m.kind, first_line=m.first_line, last_line=m.last_line,
                       findings=counts.get(m.path, 0)) for m in check.modes],
        modes_with_findings=list(dict.fromkeys(f.mode for f in check.findings if f.mode is not None)),
        findings=[
            FindingOut(kind=f.kind, file=f.file, line=f.line, mode=f.mode, flag=f.flag, variable=f.variable,
                       value=f.value, text=f.text, message=f.message)
            for f in check.findings
        ],
        handles_dry_run=check.handles_dry_run,
        sources_env_file=check.sources_env_file,
        notes=[*notes, *check.notes],
        remedy=remedy,
    )


# ---------------------------------------------------------------------------------------
# compare_dry_run


class CompareDryRunInput(_Input):
    proven_mode: Name | None = Field(None, description="The proven mode: '<script> <proven_mode> --dry-run' is run.")
    candidate_mode: Name | None = Field(None, description="The mode under review.")
    service: Name | None = Field(None, description="A service from the config whose serve_script is run.")
    script: PathArg | None = Field(None, description="Absolute path of a serve script a service of the config names.")
    host: Name | None = Field(
        None, description="With script: the host it is on, where a service of the config runs it. A service on a "
        "host needs no host here.",
    )
    proven_argv: ArgvText | None = Field(
        None, description="The proven mode's dry-run output, for a comparison without running anything."
    )
    candidate_argv: ArgvText | None = Field(None, description="The candidate mode's dry-run output.")
    argv_format: Literal["auto", "lines", "shell", "nul"] = Field(
        "auto", description="How the dry run prints argv: one per line, a shell command line, NUL-separated, or auto."
    )
    timeout_s: Seconds = Field(
        DRY_RUN_TIMEOUT_S, le=DRY_RUN_MAX_TIMEOUT_S, description="Per dry run, seconds."
    )

    @model_validator(mode="after")
    def _sources(self) -> CompareDryRunInput:
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
            from radiance_mcp.remote import MODE_PATTERN  # the remote package loads on first use

            if not MODE_PATTERN.fullmatch(value):
                raise ValueError(
                    f"{name}={value!r} is not a mode name: letters, digits, '.', '_', '+', '-' only, at most 64, "
                    "not starting with '-'"
                )
        if self.proven_mode == self.candidate_mode:
            raise ValueError(f"proven_mode and candidate_mode are both {self.proven_mode!r}: name two modes")
        return self


class DryRunSide(_Output):
    mode: str | None
    host: str | None = Field(None, description="The host it ran on (null: this machine, or an inline comparison).")
    command: list[str] | None = Field(description="The argv that was run (null for an inline comparison).")
    exit_status: int | None
    bytes: int
    argc: int
    argv: list[str]


class ArgvDifferenceOut(_Output):
    index: int = Field(description="0-based position of the first differing argument.")
    proven: str | None = Field(description="null: the proven argv has no argument there.")
    candidate: str | None = Field(description="null: the candidate argv has no argument there.")
    char_offset: int | None
    detail: str


class ArgvFlagChange(_Output):
    flag: str
    proven: str | None
    candidate: str | None


class CompareDryRunOutput(_Output):
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


def _over_cap(shown: str, cap_bytes: int) -> SourceError:
    return SourceError(
        f"{shown}: printed more than {cap_bytes // 1024:,} KiB; a dry run prints one argv. Check that the mode "
        "honours --dry-run"
    )


def _timed_out(shown: str, timeout_s: float) -> SourceError:
    return SourceError(
        f"{shown}: no result within {timeout_s:g} s; a dry run should print its argv at once. Check that the "
        "mode honours --dry-run, or raise timeout_s"
    )


def _exited(shown: str, status: int, stderr: str) -> SourceError:
    tail = stderr.strip()
    return SourceError(
        f"{shown}: exited {status}" + (f"; stderr ends: {tail[-500:]!r}" if tail else "")
        + "; check the mode name against the script's modes (check_serve_script lists them)"
    )


async def run_dry_run(command: list[str], *, cwd: Path, timeout_s: float, cap_bytes: int) -> tuple[bytes, int]:
    """Run one dry run: argv list, no shell, no stdin; stdout capped; the whole group killed on timeout,
    over the cap or when the call is cancelled.

    Returns stdout and the exit status; raises SourceError on a timeout, an oversized output
    or a non-zero exit, with the command and the end of stderr.
    """
    shown = " ".join(command)
    try:
        proc = await asyncio.create_subprocess_exec(
            *command, cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True,
        )
    except OSError as exc:
        raise SourceError(f"{shown}: cannot be started: {exc.strerror or exc}") from exc
    assert proc.stdout is not None and proc.stderr is not None
    stdout, stderr = proc.stdout, proc.stderr

    async def read_capped() -> bytes:
        data = bytearray()
        while chunk := await stdout.read(64 * 1024):
            data += chunk
            if len(data) > cap_bytes:
                raise _over_cap(shown, cap_bytes)
        return bytes(data)

    from radiance_mcp.remote import STDERR_TAIL_BYTES

    async def read_tail() -> bytes:
        tail = b""
        while chunk := await stderr.read(64 * 1024):
            tail = (tail + chunk)[-STDERR_TAIL_BYTES:]
        return tail

    def kill() -> None:
        # The dry run's own process group (start_new_session): the script and anything it spawned.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    try:
        out, err, status = await asyncio.wait_for(asyncio.gather(read_capped(), read_tail(), proc.wait()), timeout_s)
    except TimeoutError:
        kill()
        await proc.wait()
        raise _timed_out(shown, timeout_s) from None
    except SourceError:
        kill()
        await proc.wait()
        raise
    except asyncio.CancelledError:
        kill()  # the client gave up on the call: the run dies with it, not at its timeout or never
        raise
    if status != 0:
        raise _exited(shown, status, err.decode("utf-8", "replace"))
    return out, status


def _remote_output(run: DryRun, host: str, cap_bytes: int) -> bytes:
    """A dry run's stdout from the host, or the error the local run would give, naming the host."""
    shown = f"{host}: {' '.join(run.command)}"
    if run.killed:
        raise _timed_out(f"{shown} (killed on the host)", run.timeout_s)
    if len(run.stdout) > cap_bytes:
        raise _over_cap(shown, cap_bytes)
    if run.exit_status is None:
        raise SourceError(f"{shown}: its exit status did not come back (a process it left behind kept writing to "
                          "stderr); run it by hand on the host to see")
    if run.exit_status != 0:
        raise _exited(shown, run.exit_status, run.stderr_tail)
    return run.stdout


def _runnable_script(runtime: Runtime, raw: str) -> Path:
    """A script path an agent may have run: one that a service of the fleet config names.

    Security: running is not reading. The log roots let an agent read any file under them;
    executing any file under them would let it run whatever sits there. Over MCP, only a
    serve_script the operator wrote into the config runs (the CLI runs what its user names).
    """
    if runtime.trust_local_paths:
        return resolve_local(raw, "script")
    if not raw or "\x00" in raw or not Path(raw).is_absolute():
        raise InputError(f"script={raw!r}: give the absolute path of a configured serve script")
    path = resolve_local(raw, "script")
    configured = {
        Path(entry.serve_script).expanduser().resolve(): name
        for name, entry in runtime.fleet.services.items()
        if entry.serve_script and entry.host is None
    }
    if path not in configured:
        listed = ", ".join(f"{name} ({p})" for p, name in configured.items()) or "none"
        raise GuardRailError(
            f"script={raw!r} is not the serve_script of any service in the fleet config, so it is not run (its "
            f"text can still be checked with check_serve_script); configured serve scripts: {listed}. Name the "
            "service, or add serve_script = \"...\" to its entry"
        )
    return path


def _remote_runnable(runtime: Runtime, args: CompareDryRunInput) -> tuple[str, RemotePath] | None:
    """The host and configured serve_script a remote dry run runs; None for a local one.

    Security: running is not reading. An agent may read any file under a host's log_roots,
    but on a host only a serve_script the operator wrote into the config for a service on
    that host is run; a path an agent names is run only if it is, character for character,
    one of those.
    """
    if args.service is not None:
        entry = runtime.fleet.service(args.service)
        if entry.host is None:
            return None
        return entry.host, _configured_script(args.service, entry.serve_script)
    if args.host is None:
        return None
    configured = {
        entry.serve_script: name
        for name, entry in runtime.fleet.services.items()
        if entry.host == args.host and entry.serve_script
    }
    if args.script not in configured:
        listed = ", ".join(f"{name} ({path})" for path, name in configured.items()) or "none"
        raise GuardRailError(
            f"script={args.script!r} on host {args.host!r} is not the serve_script of any service of that host in the "
            f"fleet config, so it is not run (its text can still be checked with check_serve_script); configured "
            f"serve scripts there: {listed}. Name the service, or add serve_script = \"...\" to its entry"
        )
    return args.host, RemotePath(f"services.{configured[args.script]}.serve_script", args.script, configured=True)


def _script_command(script: Path, mode: str) -> list[str]:
    """'<script> <mode> --dry-run' as an argv list; a script without the exec bit runs under bash."""
    script = script.absolute()  # Security: a bare 'serve.sh' would be looked up on PATH, not the file read
    if os.access(script, os.X_OK):
        return [str(script), mode, "--dry-run"]
    bash = shutil.which("bash")
    if bash is None:
        raise SourceError(f"{script}: not executable and no bash on PATH to run it with; chmod +x it")
    return [bash, str(script), mode, "--dry-run"]


def _refuse_without_dry_run(label: str, text: str) -> None:
    from radiance_mcp import serve_script as ss

    if not ss.handles_dry_run(text):
        raise GuardRailError(
            f"script={label!r}: its code never mentions --dry-run, so '<script> <mode> --dry-run' "
            "could start the engine instead of printing its argv; add a --dry-run that prints the argv and exits"
        )


async def _remote_dry_runs(
    runtime: Runtime, host: str, ref: RemotePath, modes: tuple[str, str], *, timeout_s: float
) -> tuple[bytes, bytes, dict[str, list[str] | None], dict[str, int | None]]:
    """Both modes' dry runs on host: the script read and checked (one round trip), then run (one more)."""
    (script,) = await read_remote_files(runtime.fleet, runtime.extras, host, [ref], cap_bytes=SCRIPT_CAP_BYTES)
    assert script is not None  # not optional: a missing script raised
    _refuse_without_dry_run(f"{host}:{script.path}", _decode(script.data))
    runs = await run_remote_dry_runs(runtime.fleet, runtime.extras, host, script, modes, timeout_s=timeout_s,
                                     cap_bytes=DRY_RUN_OUTPUT_CAP_BYTES)
    outputs = [_remote_output(run, host, DRY_RUN_OUTPUT_CAP_BYTES) for run in runs]
    commands: dict[str, list[str] | None] = {"proven": list(runs[0].command), "candidate": list(runs[1].command)}
    statuses: dict[str, int | None] = {"proven": runs[0].exit_status, "candidate": runs[1].exit_status}
    return outputs[0], outputs[1], commands, statuses


async def compare_dry_run(runtime: Runtime, args: CompareDryRunInput) -> CompareDryRunOutput:
    """Prove a fixed mode's argv is the proven mode's, byte for byte: '<script> <mode> --dry-run' for both.

    The procedure's proof after removing a mode's private step: run the serve script's dry run
    for the proven mode and the fixed mode and compare the argv they print byte for byte. On a
    difference the result names the first differing argument (0-based index) and both values,
    with the first differing character, including when one argv is longer than the other, and
    lists the flags whose values differ (e.g. --max-num-batched-tokens 1,024 against 65,536).

    The script is a service's serve_script entry (by service, or its path as script, with
    host for a script on a host): over MCP nothing else is run. It is refused unless its code
    handles --dry-run (running a serve script without it would start the engine). Each run is
    an argv list (never a shell) with a validated mode name, a 20 s timeout by default (at
    most 120 s) and a 256 KiB output cap. On a host (a service with host in the config) the
    script is read and checked in one SSH round trip and both modes run in a second, each
    killed there at the timeout, and only while the script's bytes are still those checked.
    Two dry-run outputs can also be passed as proven_argv and candidate_argv for a comparison
    without running anything. ok is true only for identical bytes.
    """
    sides: dict[str, DryRunSide] = {}
    remote: tuple[str, RemotePath] | None = None
    if args.proven_argv is not None and args.candidate_argv is not None:
        raw_proven: bytes = args.proven_argv.encode("utf-8", "surrogateescape")
        raw_candidate: bytes = args.candidate_argv.encode("utf-8", "surrogateescape")
        commands: dict[str, list[str] | None] = {"proven": None, "candidate": None}
        statuses: dict[str, int | None] = {"proven": None, "candidate": None}
    elif (remote := _remote_runnable(runtime, args)) is not None:
        assert args.proven_mode is not None and args.candidate_mode is not None
        host, ref = remote
        raw_proven, raw_candidate, commands, statuses = await _remote_dry_runs(
            runtime, host, ref, (args.proven_mode, args.candidate_mode), timeout_s=args.timeout_s)
    else:
        if args.service is not None:
            script_path, _ = _service_paths(runtime, args.service)
        else:
            assert args.script is not None
            script_path = _runnable_script(runtime, args.script)
        text = await asyncio.to_thread(_read_small, script_path, "script")
        _refuse_without_dry_run(str(script_path), text)
        assert args.proven_mode is not None and args.candidate_mode is not None
        commands = {
            "proven": _script_command(script_path, args.proven_mode),
            "candidate": _script_command(script_path, args.candidate_mode),
        }
        outputs: dict[str, bytes] = {}
        statuses = {}
        for side in ("proven", "candidate"):
            command = commands[side]
            assert command is not None
            outputs[side], statuses[side] = await run_dry_run(
                command, cwd=script_path.parent, timeout_s=args.timeout_s, cap_bytes=DRY_RUN_OUTPUT_CAP_BYTES
            )
        raw_proven, raw_candidate = outputs["proven"], outputs["candidate"]
    labels = {"proven": args.proven_mode or "proven", "candidate": args.candidate_mode or "candidate"}
    from radiance_mcp import step_shape as sh

    result = await run(
        lambda *, checkpoint: sh.compare_argv(raw_proven, raw_candidate, args.argv_format,
                                              proven_label=labels["proven"], candidate_label=labels["candidate"]),
        label="the dry runs' argv", remedy="pass the dry runs' output itself")
    for side, raw, argv in (("proven", raw_proven, result.proven_argv),
                            ("candidate", raw_candidate, result.candidate_argv)):
        sides[side] = DryRunSide(
            mode=args.proven_mode if side == "proven" else args.candidate_mode,
            host=remote[0] if remote is not None else None,
            command=commands[side],
            exit_status=statuses[side],
            bytes=len(raw),
            argc=len(argv),
            argv=list(argv),
        )
    first = result.first_difference
    return CompareDryRunOutput(
        ok=result.identical_bytes,
        verdict="identical" if result.identical_bytes else "differs",
        identical_bytes=result.identical_bytes,
        identical_argv=result.identical_argv,
        format=result.format,
        first_byte_offset=result.first_byte_offset,
        first_difference=(
            ArgvDifferenceOut(index=first.index, proven=first.proven, candidate=first.candidate,
                              char_offset=first.char_offset, detail=first.detail)
            if first else None
        ),
        edits=list(result.edits),
        flag_changes=[ArgvFlagChange(flag=f, proven=a, candidate=b) for f, a, b in result.flag_changes],
        summary=result.summary,
        proven=sides["proven"],
        candidate=sides["candidate"],
    )


__all__ = [
    "AuditStepShapeInput",
    "AuditStepShapeOutput",
    "CheckServeScriptInput",
    "CheckServeScriptOutput",
    "CompareDryRunInput",
    "CompareDryRunOutput",
    "audit_step_shape",
    "check_serve_script",
    "compare_dry_run",
]


AUDIT_TOOLS: list[ToolSpec] = [
    ToolSpec("audit_step_shape", "Audit a step-shape change from two boots", AuditStepShapeInput,
             AuditStepShapeOutput, audit_step_shape, open_world=True),
    ToolSpec("check_serve_script", "Find per-mode shape literals in a serve script",
             CheckServeScriptInput, CheckServeScriptOutput, check_serve_script, open_world=True),
    # Runs '<script> <mode> --dry-run' (argv, timeout, cap), here or on a host: not read-only, never destructive.
    ToolSpec("compare_dry_run", "Compare two modes' dry-run argv byte for byte", CompareDryRunInput,
             CompareDryRunOutput, compare_dry_run, read_only=False, open_world=True),
]
