"""The step-shape audit's tools: audit_step_shape, check_serve_script, compare_dry_run.

Each reads its sources (two boot ledgers through sources/ledgers.py; a script, its env files and two
dry runs through scripts.py, here or on a host), calls the pure core (radiance_mcp.core.audit.step_shape,
radiance_mcp.core.audit.serve_script) and shapes its output model (models/audit.py).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING

from radiance_mcp.core.boot import Boot, Line
from radiance_mcp.core.errors import GuardRailError, LedgerError
from radiance_mcp.core.units import fmt_gib, fmt_mib
from radiance_mcp.models.audit import (
    ArenaSlopeOut,
    ArgvDifferenceOut,
    ArgvFlagChange,
    AuditStepShapeInput,
    AuditStepShapeOutput,
    CheckServeScriptInput,
    CheckServeScriptOutput,
    CompareDryRunInput,
    CompareDryRunOutput,
    DryRunSide,
    FindingOut,
    FlagChange,
    ModeOut,
    OwnedVarOut,
    SeatCheckOut,
    ShapeBoot,
    ShapeRow,
)
from radiance_mcp.models.base import LineRef, boot_ref, line_ref, mib
from radiance_mcp.models.ledger_ref import LedgerRef, given_sources
from radiance_mcp.sources.engine_logs import configured_engine, read_ledger
from radiance_mcp.sources.ledgers import PodmanLogsSource, RemoteFileSource, ledger_source, read_many
from radiance_mcp.sources.offload import gather, run
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.sources.scripts import ScriptRef, runnable_script, script_source, service_files
from radiance_mcp.tools.registry import ToolFamily

if TYPE_CHECKING:  # loaded by the tool that uses it, on its first call: tools/list needs neither
    from radiance_mcp.core.audit import serve_script, step_shape

FAMILY = ToolFamily()


# ---------------------------------------------------------------------------------------
# audit_step_shape


async def read_two_boots(runtime: Runtime, proven: LedgerRef, candidate: LedgerRef) -> tuple[Boot, Boot]:
    """Both boots: two remote ledgers go through sources.read_many, one SSH command per host.

    So two log files on one host, or two boots of one log or container, cost one round trip
    (the procedure's 'one ssh call, two logs'); any other pair is read concurrently.
    """
    a, b = ledger_source(runtime, proven), ledger_source(runtime, candidate)
    radiance = all(configured_engine(runtime, r) in (None, "radiance") for r in (proven, candidate))
    if radiance and isinstance(a, RemoteFileSource | PodmanLogsSource) and isinstance(b, RemoteFileSource |
                                                                                       PodmanLogsSource):
        boots = await read_many([(a, proven.boot), (b, candidate.boot)])
    else:  # a boot of any engine, in its dialect (sources.engine_logs)
        boots = await gather(read_ledger(runtime, proven), read_ledger(runtime, candidate))
    return boots[0], boots[1]


def _delta_text(row: step_shape.Row) -> str | None:
    if row.delta is None or row.delta == 0:
        return None
    sign = "+" if row.delta > 0 else "-"
    size = abs(row.delta)
    if row.spec.unit == "MiB":  # in GiB from 1 GiB, as the diagnosis says it
        return f"{sign}{fmt_gib(size)}" if size >= 1024 else f"{sign}{fmt_mib(size, 2)} MiB"
    return f"{sign}{fmt_mib(size, 2)}{' points' if row.spec.unit == 'percent' else ''}"


def _printed(value: step_shape.Value | None) -> str | None:
    return value.printed if value else None


def _line_number(value: step_shape.Value | None) -> int | None:
    return value.line.number if value else None


def _row_out(row: step_shape.Row) -> ShapeRow:
    return ShapeRow(
        row=row.spec.label,
        unit=row.spec.unit,
        proven=_printed(row.proven),
        candidate=_printed(row.candidate),
        delta=mib(row.delta) if row.delta is not None else None,
        delta_text=_delta_text(row),
        differs=row.differs,
        proven_line=_line_number(row.proven),
        candidate_line=_line_number(row.candidate),
    )


def _slope_out(slope: step_shape.ArenaSlope | None) -> ArenaSlopeOut | None:
    if slope is None:
        return None
    return ArenaSlopeOut(
        proven_mnbt=slope.proven_mnbt,
        candidate_mnbt=slope.candidate_mnbt,
        proven_arena_mib=mib(slope.proven_arena_mib),
        candidate_arena_mib=mib(slope.candidate_arena_mib),
        mib_per_batched_token=float(round(slope.mib_per_token, 4)),
        kib_per_batched_token=float(round(slope.mib_per_token * 1024, 1)),
        intercept_mib=float(round(slope.intercept_mib, 1)),
        derivation=slope.derivation,
    )


def _seats_out(check: step_shape.SeatCheck | None) -> SeatCheckOut | None:
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


def _lines(shape: step_shape.StepShapeReading) -> list[LineRef]:
    lines: dict[int, Line] = {v.line.number: v.line for v in shape.values.values()}
    if shape.fix_text is not None:
        lines[shape.fix_text.line.number] = shape.fix_text.line
    return [LineRef(line=n, text=lines[n].text) for n in sorted(lines)]


@FAMILY.tool("Audit a step-shape change from two boots", open_world=True)
async def audit_step_shape(runtime: Runtime, args: AuditStepShapeInput) -> AuditStepShapeOutput:
    """Compare a proven boot with a candidate row by row, with a diagnosis and the engine's fix.

    When: a shape change boots differently or runs out of memory. Rule: a wider step grows the
    arena, charged before weights and KV. Next: check_serve_script.
    """
    from radiance_mcp.core.audit import step_shape

    try:
        proven_boot, candidate_boot = await read_two_boots(runtime, *args.ledger_refs())
    except LedgerError as exc:
        shared = given_sources(args)
        if not shared or exc.boots_held != 1:
            raise
        raise LedgerError(
            f"{exc}. One boot cannot be both sides: the proven boot is a boot that served, so name its source "
            f"(proven_service, proven_log, proven_log_text or proven_container) and pass this {shared[0]} as "
            f"candidate_{shared[0]}"
        ) from exc
    model_service = args.candidate_service or args.service or args.proven_service
    result = step_shape.audit(proven_boot, candidate_boot, runtime.fleet.model_constants(model_service))
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
        rows=[_row_out(r) for r in result.rows],
        flag_changes=[
            FlagChange(flag=r.spec.label, proven=_printed(r.proven), candidate=_printed(r.candidate),
                       proven_line=_line_number(r.proven), candidate_line=_line_number(r.candidate))
            for r in result.flag_changes
        ],
        inherit=result.inherit,
        arena_cost=_slope_out(result.arena_slope),
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


MAX_SOURCED_FILES = 4
"""At most this many files a script sources are read as its env files."""


def _in_directory(path: str, directory: str) -> bool:
    return posixpath.commonpath([posixpath.normpath(path), directory]) == directory


def _followed(script_text: str, script_path: str, notes: list[str]) -> list[serve_script.SourceLine]:
    """The files the script sources that can be resolved without running it; the others said in notes."""
    from radiance_mcp.core.audit import serve_script

    found: list[serve_script.SourceLine] = []
    for source in serve_script.source_lines(script_text, script_path):
        if source.path is None:
            notes.append(f"line {source.line}: 'source {source.word}' was not followed: {source.why}")
        elif len(found) < MAX_SOURCED_FILES:
            found.append(source)
    return found


@dataclass(frozen=True)
class _Script:
    label: str
    text: str
    path: str | None
    """Its path (on its host): source lines resolve against its directory; None for script_text."""
    env_files: list[serve_script.EnvFile]


async def _script_and_env(runtime: Runtime, args: CheckServeScriptInput, notes: list[str]) -> _Script:
    """The script and its env files, here or on a host (scripts.script_source).

    The files: a service's serve_script and env_file from the fleet config (their directories
    allowed), or the script and env_file an agent names (under the log roots here, or the host's).
    With no env file named, the files the script sources are read. On a host the <script stem>.env
    beside the script is fetched in the same round trip as the script, so the usual layout costs
    one; a script that sources another file costs a second.
    """
    from radiance_mcp.core.audit import serve_script

    source = script_source(runtime, args.service, args.host)
    refs: list[ScriptRef] = []
    configured_env: ScriptRef | None = None
    if args.service is not None:
        script_ref, configured_env = service_files(runtime, args.service)
        refs.append(script_ref)
    elif args.script is not None:
        refs.append(ScriptRef("script", args.script))
    named: ScriptRef | None = None
    if args.env_text is None:
        named = ScriptRef("env_file", args.env_file) if args.env_file is not None else configured_env
        if named is None and refs and source.prefetch_beside:
            stem, _ = posixpath.splitext(refs[0].path)
            refs.append(ScriptRef("env_file", f"{stem}.env", configured=refs[0].configured, optional=True))
        if named is not None:
            refs.append(named)
    files = await source.read(refs)
    read = dict(zip((r.path for r in refs), files, strict=True))
    if args.script_text is not None:
        label, text, path = "script_text", args.script_text, None
    else:
        script = files[0]
        assert script is not None  # a missing script raised
        label, text, path = script.label, script.text, script.path
    if args.env_text is not None:
        return _Script(label, text, path, [serve_script.EnvFile("env_text", args.env_text)])
    if named is not None:
        env = files[-1]
        assert env is not None
        return _Script(label, text, path, [serve_script.EnvFile(env.label, env.text, env.path)])
    env_files = []
    if path is not None:
        sources = _followed(text, path, notes)
        directory = posixpath.dirname(path)
        # Security: a source line is text in a file, not the operator's word. The file it names is read
        # only inside a configured script's own directory, or under the log roots as any path an agent
        # names (symlinks resolved), so a script cannot lead the read to /etc/shadow.
        trusted = refs[0].configured  # path is not None: refs[0] is the script's
        readable = []
        for found in sources:
            assert found.path is not None
            ref = ScriptRef("sourced file", found.path, configured=trusted and _in_directory(found.path, directory),
                            optional=True)
            why = source.refusal(ref)
            if why is not None:  # the script's own line, not the caller's argument: a note, not a refusal
                notes.append(f"line {found.line}: the script sources {found.path}, which was not read ({why}); its "
                             "variables were not checked: pass env_file or env_text to check ownership against it")
            else:
                readable.append((found, ref))
        more = [ref for _, ref in readable if ref.path not in read]
        if more:
            read.update(zip((r.path for r in more), await source.read(more), strict=True))
        for found, _ in readable:
            assert found.path is not None
            env = read[found.path]
            if env is None:
                notes.append(f"line {found.line}: the script sources {source.where(found.path)}, which is not there")
                continue
            env_files.append(serve_script.EnvFile(env.label, env.text, found.path))
            notes.append(f"env file {env.label}: the script sources it at line {found.line}")
    return _Script(label, text, path, env_files)


@FAMILY.tool("Find per-mode shape literals in a serve script", open_world=True)
async def check_serve_script(runtime: Runtime, args: CheckServeScriptInput) -> CheckServeScriptOutput:
    """Find serve-script modes passing their own shape flags instead of the env file's.

    When: audit_step_shape blames a mode. Rule: the env file owns the shape. Next: compare_dry_run.
    """
    from radiance_mcp.core.audit import serve_script

    notes: list[str] = []
    script = await _script_and_env(runtime, args, notes)
    engine, engine_from = args.engine, "engine"
    if args.service is not None:
        engine, engine_from = runtime.fleet.service(args.service).engine, f"services.{args.service}.engine"
    check = await run(
        lambda *, checkpoint: serve_script.check_script(script.text, script.env_files, script_name=script.label,
                                                        script_path=script.path, engine=engine,
                                                        engine_from=engine_from),
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
            "take every shape value from the env file's variable that owns it (listed in owned); delete the "
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


def _refuse_without_dry_run(label: str, text: str) -> None:
    from radiance_mcp.core.audit import serve_script

    if not serve_script.handles_dry_run(text):
        raise GuardRailError(
            f"script={label!r}: its code never mentions --dry-run, so '<script> <mode> --dry-run' "
            "could start the engine instead of printing its argv; add a --dry-run that prints the argv and exits"
        )


# Runs '<script> <mode> --dry-run' (argv, timeout, cap), here or on a host: not read-only, never destructive.
@FAMILY.tool("Compare two modes' dry-run argv byte for byte", read_only=False, open_world=True)
async def compare_dry_run(runtime: Runtime, args: CompareDryRunInput) -> CompareDryRunOutput:
    """Compare two modes' dry-run argv byte for byte (run, or two given outputs).

    When: to prove a fixed mode inherits the proven shape. Rule: only a serve_script the config
    names is run. Next: deploy, then verify_deploy.
    """
    from radiance_mcp.core.audit.argv import compare_argv

    sides: dict[str, DryRunSide] = {}
    host: str | None = None
    if args.proven_argv is not None and args.candidate_argv is not None:
        raw_proven: bytes = args.proven_argv.encode("utf-8", "surrogateescape")
        raw_candidate: bytes = args.candidate_argv.encode("utf-8", "surrogateescape")
        commands: dict[str, list[str] | None] = {"proven": None, "candidate": None}
        statuses: dict[str, int | None] = {"proven": None, "candidate": None}
    else:
        assert args.proven_mode is not None and args.candidate_mode is not None
        source, ref = runnable_script(runtime, service=args.service, script=args.script, host=args.host)
        (script,) = await source.read([ref])
        assert script is not None  # not optional: a missing script raised
        _refuse_without_dry_run(script.label, script.text)
        proven, candidate = await source.dry_runs(script, (args.proven_mode, args.candidate_mode),
                                                  timeout_s=args.timeout_s)
        host, raw_proven, raw_candidate = source.host, proven.stdout, candidate.stdout
        commands = {"proven": proven.command, "candidate": candidate.command}
        statuses = {"proven": proven.exit_status, "candidate": candidate.exit_status}
    labels = {"proven": args.proven_mode or "proven", "candidate": args.candidate_mode or "candidate"}
    result = await run(
        lambda *, checkpoint: compare_argv(raw_proven, raw_candidate, args.argv_format,
                                           proven_label=labels["proven"], candidate_label=labels["candidate"]),
        label="the dry runs' argv", remedy="pass the dry runs' output itself")
    for side, raw, argv in (("proven", raw_proven, result.proven_argv),
                            ("candidate", raw_candidate, result.candidate_argv)):
        sides[side] = DryRunSide(
            mode=args.proven_mode if side == "proven" else args.candidate_mode,
            host=host,
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
