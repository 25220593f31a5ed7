"""The step-shape audit, pure: two boots in, a row-by-row diff and a diagnosis out.

The law (PHRASEBOOK section 6): ``--max-num-batched-tokens`` (MNBT) sizes the activation
arena, and the arena is charged to the card before the weights and the KV cache are
funded. A wider step is therefore paid for by the weight tiers and the KV cache, never by
the disk tier. Measured: MNBT 1,024 -> arena 504 MiB, claimable 30.87 GiB; MNBT 65,536 ->
arena 10.65 GiB, claimable 16.85 GiB, experts squeezed to 10.98 GiB, 56 GiB of weights
stranded on the disk tier. A KV cache below one full-length sequence for the seats asked
is an out-of-memory refusal, even where a narrower shape at the same window booted.

``read_shape`` takes the figures the audit compares off one parsed boot, each with its
ledger line; ``audit`` lines two of them up (proven, candidate) and writes the diagnosis.
The dry-run argv comparison lives in radiance_mcp.core.audit.argv. Nothing here reads a file or a
network.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from radiance_mcp.core.boot import Boot, Hit, Line
from radiance_mcp.core.constants import KV_DTYPES, KVDtype, ModelConstants
from radiance_mcp.core.engine_facts import AUDIT_FLAGS, AUDIT_ROWS
from radiance_mcp.core.errors import InputError, LedgerError
from radiance_mcp.core.rules.capacity import pool_contract
from radiance_mcp.core.units import fmt_gib, fmt_mib, parse_number

STEP_FLAGS: tuple[str, ...] = (
    "max-model-len",
    "max-num-seqs",
    "max-num-batched-tokens",
    "host-pool-mib",
    "tp",
    "kv-cache-dtype",
    "placement",
)
"""The echoed flags that make a serving shape (the seed greps these, in this order)."""

FIX_TEXT_SOURCE = "vram_budget.cpp:117"
"""Where the engine prints its own fix text for an arena that leaves too little."""

Unit = Literal["flag", "MiB", "count", "percent", "text"]
Status = Literal["booted", "refused", "unknown"]
Verdict = Literal["refused", "shape differs", "same shape"]


@dataclass(frozen=True)
class RowSpec:
    key: str
    label: str
    unit: Unit


ROWS: tuple[RowSpec, ...] = (
    *(RowSpec(f"--{flag}", f"--{flag}", "flag") for flag in STEP_FLAGS),
    RowSpec("arena", "activation arena", "MiB"),
    RowSpec("claimable", "claimable", "MiB"),
    RowSpec("vram_kv", "vram_kv", "MiB"),
    RowSpec("weights_vram", "weights by tier: VRAM", "MiB"),
    RowSpec("weights_host", "weights by tier: host pool", "MiB"),
    RowSpec("weights_disk", "weights by tier: container-on-disk", "MiB"),
    RowSpec("kv_cache", "kv cache", "MiB"),
    RowSpec("backing", "kv backing of the worst case", "percent"),
    RowSpec("sessions", "full-length sessions", "count"),
    RowSpec("expert_prefetch", "expert prefetch", "MiB"),
    RowSpec("lender", "lender", "text"),
    RowSpec("refusal", "startup stopped", "text"),
)


@dataclass(frozen=True)
class Value:
    """One figure of one boot: as printed, as a quantity where it is one, and its line."""

    printed: str
    line: Line
    quantity: Decimal | None = None
    """MiB for sizes, the number for counts, percentages and numeric flags; None for text."""


@dataclass(frozen=True)
class StepShapeReading:
    """What the audit reads off one boot."""

    boot: Boot
    values: dict[str, Value]
    """By row key (see ROWS); a row the boot does not print is absent."""
    worst_case_seqs: int | None
    worst_case_tokens: int | None
    arena_mnbt: int | None
    """MNBT as the arena line names it, else as the flag echoes it."""
    fix_text: Value | None
    status: Status
    missing: tuple[str, ...]
    """Step-shape phrases this boot does not print (by the phrase's words)."""

    def get(self, key: str) -> Value | None:
        return self.values.get(key)

    def mib(self, key: str) -> Decimal | None:
        value = self.values.get(key)
        return value.quantity if value else None


def _quantity(text: str) -> Decimal | None:
    try:
        return parse_number(text)
    except LedgerError:
        return None


def _engine_values(boot: Boot) -> dict[str, Value]:
    """Another engine's step shape, off its binding rank's figures and its settings (contract.binding_rank)."""
    from radiance_mcp.core.rules.contract import binding_rank  # the rule's home; the audit reads it only here

    rank, values = binding_rank(boot), {}
    for key, where in AUDIT_ROWS[boot.engine]:
        figure = boot.settings.get(where.split(":", 1)[1]) if where.startswith("setting:") else getattr(rank, where)
        if figure is not None and figure.lines:
            unit = "" if figure.unit in ("tokens", "sequences") else f" {figure.unit}"
            # a flag's value as typed (as radiance echoes it), any other figure as every text writes it
            number = f"{figure.value.normalize():f}" if key.startswith("--") else fmt_mib(figure.value, 2)
            shown = figure.printed or f"{number}{unit}"
            values[key] = Value(shown, figure.lines[0], figure.value)
    refusal = next((r for r in boot.refusals if r.final), None)
    if refusal is not None:
        values["refusal"] = Value(refusal.detail, refusal.line)
    return values


def read_shape(boot: Boot) -> StepShapeReading:
    """The step-shape figures of one boot (the first line holding each phrase), with their lines: radiance's
    step-shape ledger, or another engine's figures in the same rows (engine_facts.AUDIT_ROWS)."""
    src = boot.where()
    if boot.engine != "radiance":
        found = _engine_values(boot)
        status: Status = "refused" if boot.state.status == "refused" else (
            "booted" if boot.state.status == "settled" else "unknown")
        labels = {spec.key: spec.label for spec in ROWS}
        missing = tuple(labels[key] for key, _ in AUDIT_ROWS[boot.engine] if key not in found)
        return StepShapeReading(boot, found, None, None, None, None, status, missing)
    values: dict[str, Value] = {}

    def size(key: str, hit: Hit | None, field: str = "size") -> None:
        if hit is not None and hit.fields.get(field) is not None:
            figure = hit.size(field, src)
            values[key] = Value(figure.text, hit.line, figure.mib)

    for flag in STEP_FLAGS:
        hit = boot.flags.get(flag)
        if hit is not None:
            raw = hit.raw("value", src)
            values[f"--{flag}"] = Value(raw, hit.line, _quantity(raw))

    arena = boot.first("activation_arena")
    size("arena", arena)
    size("claimable", boot.first("claimable"))
    size("vram_kv", boot.first("vram_kv"))
    tiers = boot.first("weights_by_tier")
    size("weights_vram", tiers, "vram")
    size("weights_host", tiers, "host")
    size("weights_disk", tiers, "disk")
    backing = boot.first("kv_backing")
    size("kv_cache", backing)
    worst_seqs, worst_tokens = _backing(backing, src, values)
    prefetch = boot.first("expert_prefetch")
    size("expert_prefetch", prefetch)
    _lender(boot.first("no_lender"), prefetch, values)
    stopped = boot.first("startup_stopped")
    if stopped is not None:
        values["refusal"] = Value(stopped.raw("reason", src), stopped.line)
    fix = boot.first("fix_text")
    fix_text = Value(fix.raw("text", src), fix.line) if fix is not None else None
    return StepShapeReading(boot, values, worst_seqs, worst_tokens, _step_tokens(arena, src, values), fix_text,
                       _status(boot), _missing(src, values))


def _backing(backing: Hit | None, src: str, values: dict[str, Value]) -> tuple[int | None, int | None]:
    """The KV backing line's percent and sessions into values; (its worst-case seqs, tokens)."""
    if backing is None:
        return None, None
    percent = backing.number("percent", src)
    values["backing"] = Value(f"{backing.raw('percent', src)}%", backing.line, percent)
    sessions = backing.number("sessions", src)
    values["sessions"] = Value(backing.raw("sessions", src), backing.line, sessions)
    return int(backing.number("seqs", src)), int(backing.number("tokens", src))


def _lender(no_lender: Hit | None, prefetch: Hit | None, values: dict[str, Value]) -> None:
    """Who lends the expert prefetch its memory: 'no lender', or the engine's words after the size."""
    if no_lender is not None:
        values["lender"] = Value("no lender", no_lender.line)
    elif prefetch is not None:
        # The engine's own words after the size, e.g. 'lender: the KV cache'.
        printed = str(prefetch.fields.get("size") or "")
        rest = prefetch.line.text.split(printed, 1)[-1].strip(" ,;") if printed else ""
        if rest:
            values["lender"] = Value(rest, prefetch.line)


def _step_tokens(arena: Hit | None, src: str, values: dict[str, Value]) -> int | None:
    """The step (max-num-batched-tokens): as the arena line states it, else the echoed flag."""
    if arena is not None and arena.fields.get("mnbt"):
        return int(arena.number("mnbt", src))
    if (flag_value := values.get("--max-num-batched-tokens")) and flag_value.quantity is not None:
        return int(flag_value.quantity)
    return None


def _status(boot: Boot) -> Status:
    if boot.state.status == "refused":  # the one rule every ledger tool judges a boot by
        return "refused"
    if boot.first("serving") is not None or boot.first("settled") is not None:
        return "booted"
    return "unknown"


_WANTED = {
    "activation arena": "arena",
    "claimable": "claimable",
    "vram_kv": "vram_kv",
    "weights by tier": "weights_vram",
    "full-length sessions": "sessions",
}
"""The step-shape lines a boot should print (their words -> the value read from each)."""


def _missing(src: str, values: dict[str, Value]) -> tuple[str, ...]:
    """The step-shape lines the boot does not print; a boot that prints none of them, nor any step
    flag, is not a radiance step-shape ledger, and is refused."""
    missing = tuple(words for words, key in _WANTED.items() if key not in values)
    if len(missing) == len(_WANTED) and not any(f"--{flag}" in values for flag in STEP_FLAGS):
        raise LedgerError(
            f"{src}: this boot prints none of the step-shape lines (echoed --max-num-batched-tokens and "
            f"the other step flags, {', '.join(repr(w) for w in _WANTED)}); point the audit at the radiance "
            "boot log that holds the step-shape ledger"
        )
    return missing


# ---------------------------------------------------------------------------------------
# The diff


@dataclass(frozen=True)
class Row:
    spec: RowSpec
    proven: Value | None
    candidate: Value | None
    delta: Decimal | None
    """candidate - proven, for quantities both boots print."""
    differs: bool


@dataclass(frozen=True)
class ArenaSlope:
    """The arena's cost per batched token, from two boots: a two-point estimate, not a law."""

    proven_mnbt: int
    candidate_mnbt: int
    proven_arena_mib: Decimal
    candidate_arena_mib: Decimal
    mib_per_token: Decimal
    intercept_mib: Decimal
    derivation: str
    label: str = "two-point estimate"


@dataclass(frozen=True)
class SeatCheck:
    """The KV cache a boot funded against what its seats need at full length (the pool contract)."""

    seats: int
    window_tokens: int
    dtype: KVDtype
    kv: Value
    """The smaller of the vram_kv row and the kv cache line: what the engine funded."""
    one_sequence_mib: Decimal
    seats_mib: Decimal
    below_one_sequence: bool
    below_seats: bool
    derivation: str


@dataclass(frozen=True)
class StepShapeAudit:
    proven: StepShapeReading
    candidate: StepShapeReading
    rows: tuple[Row, ...]
    flag_changes: tuple[Row, ...]
    arena_slope: ArenaSlope | None
    proven_seats: SeatCheck | None
    candidate_seats: SeatCheck | None
    fix_text: Value | None
    verdict: Verdict
    diagnosis: tuple[str, ...]
    remedy: tuple[str, ...]
    inherit: dict[str, str]
    """Flag -> the proven boot's value, for every echoed step flag that differs."""
    notes: tuple[str, ...]


def _differs(a: Value | None, b: Value | None) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    if a.quantity is not None and b.quantity is not None:
        return a.quantity != b.quantity
    return a.printed != b.printed


def diff_rows(proven: StepShapeReading, candidate: StepShapeReading) -> tuple[Row, ...]:
    """The rows either boot prints, in ROWS' order: a row neither prints says nothing, and is left out."""
    rows = []
    for spec in ROWS:
        a, b = proven.get(spec.key), candidate.get(spec.key)
        if a is None and b is None:
            continue
        delta = None
        if a is not None and b is not None and a.quantity is not None and b.quantity is not None:
            delta = b.quantity - a.quantity
        rows.append(Row(spec, a, b, delta, _differs(a, b)))
    return tuple(rows)


def arena_slope(proven: StepShapeReading, candidate: StepShapeReading) -> ArenaSlope | None:
    """(arena_b - arena_a) / (mnbt_b - mnbt_a) MiB per batched token; None without two distinct points."""
    a_mib, b_mib = proven.mib("arena"), candidate.mib("arena")
    a_tok, b_tok = proven.arena_mnbt, candidate.arena_mnbt
    if a_mib is None or b_mib is None or a_tok is None or b_tok is None or a_tok == b_tok:
        return None
    slope = (b_mib - a_mib) / Decimal(b_tok - a_tok)
    intercept = a_mib - slope * a_tok
    derivation = (
        f"({fmt_mib(b_mib, 2)} - {fmt_mib(a_mib, 2)}) MiB / ({b_tok:,} - {a_tok:,}) tokens = "
        f"{slope:.4f} MiB ({slope * 1024:.1f} KiB) per batched token, intercept {fmt_mib(intercept, 1)} MiB; "
        "a two-point estimate from these two boots, not a measured law"
    )
    return ArenaSlope(a_tok, b_tok, a_mib, b_mib, slope, intercept, derivation)


def seat_check(shape: StepShapeReading, model: ModelConstants) -> SeatCheck | None:
    """Is the funded KV cache below one full-length sequence, and below the seats asked?

    Seats and window come from the echoed --max-num-seqs and --max-model-len, else from the
    kv cache line's 'N x M worst case'; the need is the pool contract's
    (seqs * window * rate + per_seq * seqs + fixed).
    """
    candidates = [v for v in (shape.get("vram_kv"), shape.get("kv_cache")) if v and v.quantity is not None]
    if not candidates:
        return None
    kv = min(candidates, key=lambda v: v.quantity or Decimal(0))
    seats_value = shape.get("--max-num-seqs")
    window_value = shape.get("--max-model-len")
    seats = int(seats_value.quantity) if seats_value and seats_value.quantity else shape.worst_case_seqs
    window = int(window_value.quantity) if window_value and window_value.quantity else shape.worst_case_tokens
    dtype_value = shape.get("--kv-cache-dtype")
    dtype = dtype_value.printed if dtype_value else None
    if not seats or not window or dtype not in KV_DTYPES:
        return None
    assert dtype == "fp8" or dtype == "bf16"
    assert kv.quantity is not None
    try:
        one = pool_contract(kv.quantity, 1, window, dtype, model)
        full = pool_contract(kv.quantity, seats, window, dtype, model)
    except InputError:
        return None  # figures beyond any real card (the contract names them); the audit notes the gap
    rate = one.rate_bytes_per_token
    derivation = (
        f"one full-length sequence: 1 x {window:,} x {rate:,} B = {fmt_mib(one.kv_mib, 2)} MiB + "
        f"{model.per_seq_mib} + {model.fixed_mib} = {fmt_mib(one.required_mib, 2)} MiB; "
        f"{seats} seats: {seats} x {window:,} x {rate:,} B = {fmt_mib(full.kv_mib, 2)} MiB + "
        f"{model.per_seq_mib} x {seats} + {model.fixed_mib} = {fmt_mib(full.required_mib, 2)} MiB; "
        f"funded: {kv.printed} = {fmt_mib(kv.quantity, 2)} MiB (line {kv.line.number})"
    )
    return SeatCheck(
        seats=seats,
        window_tokens=window,
        dtype=dtype,
        kv=kv,
        one_sequence_mib=one.required_mib,
        seats_mib=full.required_mib,
        below_one_sequence=kv.quantity < one.required_mib,
        below_seats=kv.quantity < full.required_mib,
        derivation=derivation,
    )


def _change(a: Decimal | None, b: Decimal | None) -> tuple[str, Decimal] | None:
    if a is None or b is None:
        return None
    return ("grew" if b > a else "fell" if b < a else "held", b - a)


def _moved(label: str, proven: Value | None, candidate: Value | None) -> str | None:
    if proven is None or candidate is None or proven.quantity is None or candidate.quantity is None:
        return None
    change = _change(proven.quantity, candidate.quantity)
    assert change is not None
    word, delta = change
    if word == "held":
        return f"{label} held at {candidate.printed}"
    return f"{label} {word} by {fmt_gib(abs(delta))} ({proven.printed} -> {candidate.printed})"


def _flag_text(row: Row) -> str:
    a = f"{row.proven.printed} (line {row.proven.line.number})" if row.proven else "not echoed"
    b = f"{row.candidate.printed} (line {row.candidate.line.number})" if row.candidate else "not echoed"
    return f"{row.spec.label} {a} -> {b}"


def audit(proven_boot: Boot, candidate_boot: Boot, model: ModelConstants) -> StepShapeAudit:
    """Line the two boots up row by row and say, in the seed's terms, what the change cost.

    The diagnosis reads in this order: which flags differ, what the arena took, the seats
    the KV cache backs, the engine's own refusal and fix text, then the arena's slope.
    """
    if proven_boot.engine != candidate_boot.engine:
        raise InputError(f"the proven boot is {proven_boot.engine}'s and the candidate {candidate_boot.engine}'s: the "
                         "audit compares two boots of one engine; pass the candidate of the proven boot's engine")
    proven, candidate = read_shape(proven_boot), read_shape(candidate_boot)
    rows = diff_rows(proven, candidate)
    flag_changes = tuple(r for r in rows if r.spec.unit == "flag" and r.differs)
    slope = arena_slope(proven, candidate)
    proven_seats, candidate_seats = seat_check(proven, model), seat_check(candidate, model)
    fix = candidate.fix_text or proven.fix_text
    diagnosis: list[str] = [_flags_finding(rows, flag_changes)]
    notes: list[str] = []
    by_key = {r.spec.key: r for r in rows}
    if (arena_row := by_key.get("arena")) is None or arena_row.proven is None or arena_row.candidate is None:
        who = "neither boot prints" if arena_row is None else "one boot does not print"
        notes.append(f"{who} 'activation arena': the arena's cost cannot be read from both")
    elif (arena := _arena_finding(by_key, candidate)) is not None:
        diagnosis.append(arena)
    if proven_boot.engine == "radiance":  # the seats its model's constants price (another engine: its own rows)
        _seat_findings(proven, candidate, proven_seats, candidate_seats, diagnosis, notes)
    else:
        named = "; ".join(f"{row} is {flag}" for row, flag in AUDIT_FLAGS[proven_boot.engine].items())
        kept = {key for key, _ in AUDIT_ROWS[proven_boot.engine]} | {"refusal"}
        unprinted = ", ".join(spec.label for spec in ROWS if spec.key not in kept)
        notes.append(f"a {proven_boot.engine} boot in radiance's rows: {named}; its KV memory and full-length "
                     "sequences are its own figures (check_pool_contract prices its seats). Its ledger prints "
                     f"none of radiance's {unprinted}: those rows are left out")
    diagnosis.extend(_engine_findings(proven, candidate, notes))
    if fix is not None:
        diagnosis.append(f"the engine's own fix text ({FIX_TEXT_SOURCE}, line {fix.line.number}): {fix.printed!r}")
    if slope is not None:
        diagnosis.append(f"the arena's cost per batched token: {slope.derivation}")
    inherit = {r.spec.label: r.proven.printed for r in flag_changes if r.proven is not None}
    for name, shape in (("proven", proven), ("candidate", candidate)):
        if shape.missing:
            notes.append(f"the {name} boot does not print: {', '.join(repr(m) for m in shape.missing)}")
    verdict: Verdict = "refused" if candidate.status == "refused" else "shape differs" if flag_changes else "same shape"
    return StepShapeAudit(
        proven=proven,
        candidate=candidate,
        rows=rows,
        flag_changes=flag_changes,
        arena_slope=slope,
        proven_seats=proven_seats,
        candidate_seats=candidate_seats,
        fix_text=fix,
        verdict=verdict,
        diagnosis=tuple(diagnosis),
        remedy=_remedy(flag_changes, inherit, candidate),
        inherit=inherit,
        notes=tuple(notes),
    )


def _flags_finding(rows: tuple[Row, ...], flag_changes: tuple[Row, ...]) -> str:
    """Which echoed step flags differ, and which are the same in both."""
    if not flag_changes:
        return (
            "no echoed step flag differs (" + ", ".join(f"--{f}" for f in STEP_FLAGS) + "): the step shape is "
            "not what changed; compare the image, the env file and the card instead"
        )
    same = [r.spec.label for r in rows if r.spec.unit == "flag" and not r.differs and r.proven]
    text = "the echoed step flags differ: " + "; ".join(_flag_text(r) for r in flag_changes)
    if same:
        text += f". The same in both: {', '.join(same)}"
    return text


def _arena_finding(by_key: dict[str, Row], candidate: StepShapeReading) -> str | None:
    """The arena's change against what claimable, the experts and the KV cache lost; None if it did not move."""
    arena_row = by_key["arena"]
    if arena_row.delta is None or arena_row.proven is None or arena_row.candidate is None or arena_row.delta == 0:
        return None  # the caller notes a missing arena line
    grew = arena_row.delta > 0
    parts = [
        f"the activation arena {'grew' if grew else 'shrank'} by {fmt_gib(abs(arena_row.delta))} "
        f"({arena_row.proven.printed} -> {arena_row.candidate.printed}, lines {arena_row.proven.line.number} / "
        f"{arena_row.candidate.line.number}); it is charged to the card before weights and KV cache are funded"
    ]
    for key, label in (
        ("claimable", "claimable"),
        ("weights_vram", "the experts' VRAM tier"),
        ("weights_disk", "the weights on the disk tier (container-on-disk)"),
        ("vram_kv", "vram_kv"),
        ("kv_cache", "the KV cache"),
    ):
        row = by_key.get(key)
        moved = _moved(label, row.proven, row.candidate) if row else None
        if moved:
            parts.append(moved)
    disk = candidate.get("weights_disk")
    if grew and disk is not None and disk.quantity:
        parts.append(f"{disk.printed} of weights stranded on the disk tier (line {disk.line.number})")
    return "; ".join(parts)


def _seat_findings(
    proven: StepShapeReading,
    candidate: StepShapeReading,
    proven_seats: SeatCheck | None,
    candidate_seats: SeatCheck | None,
    diagnosis: list[str],
    notes: list[str],
) -> None:
    """Each boot's KV cache against one full-length sequence and the seats asked (appended in place)."""
    for name, check, shape in (("candidate", candidate_seats, candidate), ("proven", proven_seats, proven)):
        if check is None:
            notes.append(
                f"the {name} boot's KV cache cannot be checked against its seats: it needs a vram_kv or kv cache "
                "line, --max-num-seqs and --max-model-len (or the kv cache line's worst case) and "
                "--kv-cache-dtype bf16 or fp8"
            )
            continue
        if not check.below_seats:
            continue
        other = proven if name == "candidate" else candidate
        narrower = ""
        if name == "candidate" and other.status == "booted":
            narrower = ", even though the proven shape booted"
            if proven_seats and proven_seats.window_tokens == check.window_tokens:
                narrower += " at the same window"
        scope = "below one full-length sequence" if check.below_one_sequence else "below the seats asked"
        cause = "the out-of-memory cause" if shape.status == "refused" else "a refusal waiting for load"
        diagnosis.append(
            f"the {name} boot's KV cache is {scope}: {check.kv.printed} funded against "
            f"{fmt_mib(check.one_sequence_mib, 2)} MiB for one sequence of {check.window_tokens:,} tokens and "
            f"{fmt_mib(check.seats_mib, 2)} MiB for the {check.seats} seats asked ({check.dtype}); "
            f"{cause}{narrower}"
        )


def _engine_findings(proven: StepShapeReading, candidate: StepShapeReading, notes: list[str]) -> list[str]:
    """The engine's own words: the candidate's refusal, and an expert prefetch left with nothing."""
    found: list[str] = []
    if candidate.status == "refused":
        refusal = candidate.get("refusal")
        backing = candidate.get("kv_cache")
        if refusal is not None:
            text = f"the candidate refused to start: 'startup stopped: {refusal.printed}' (line {refusal.line.number})"
        else:
            text = "the candidate refused to start: its KV cache backs no full-length session (no 'startup stopped')"
        if backing is not None:
            text += f"; the kv cache line reads {backing.line.text.strip()!r} (line {backing.line.number})"
        found.append(text)
    if proven.status == "refused":
        notes.append("the proven boot did not start either: pick a boot that served as the proven one")
    lender = candidate.get("lender")
    no_lender = lender if lender is not None and lender.printed == "no lender" else None
    prefetch = candidate.get("expert_prefetch")
    if no_lender is not None or (prefetch is not None and prefetch.quantity == 0):
        line = (no_lender or prefetch).line.number  # type: ignore[union-attr]
        found.append(
            f"expert prefetch {prefetch.printed if prefetch else '0 B'} / no lender (line {line}): the engine had "
            "already given the expert slab everything the arena left"
        )
    return found


def _remedy(flag_changes: tuple[Row, ...], inherit: dict[str, str], candidate: StepShapeReading) -> tuple[str, ...]:
    """What to do: inherit the proven numbers and prove it by dry run; or, flags equal, look elsewhere."""
    if not flag_changes:
        if candidate.status == "refused":
            return ("the step flags match the proven boot: look for what else changed (image, env file, card)",)
        return ()
    numbers = ", ".join(f"{flag} {value}" for flag, value in inherit.items())
    return (
        f"inherit the proven numbers ({numbers}) from the env file that owns the shape, not from the mode",
        "delete the mode's private literals (no shim, no second env variable for the mode's own number) "
        "and rewrite the mode's comment so the premise that a wide step is free throughput is gone",
        "prove it: '<script> <mode> --dry-run' must print an argv identical, byte for byte, to the proven "
        "mode's (compare_dry_run)",
    )
