"""Shipping a resize: the env-file pair with its header and predictions, and its bats gates (pure: text out).

The env file carries the pair and shape, a header with the arithmetic they rest on, and each
falsifiable prediction as a comment with an empty verdict slot under it:

    # prediction referee = 4x200000: the boot prints 'backs 4 sequences all at 200000 tokens at once'
    # verdict referee:

verify_deploy reads the predictions back (``read_predictions``) and fills the slots
(``fill_verdicts``). The bats file sources the env file and checks the pair against the ceiling,
the pool against the contract (recomputed from the env file's own values), and each reserve,
a personal one labelled as such.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from radiance_mcp.core import knobs
from radiance_mcp.core.constants import MAX_POOL_MIB, KVDtype, LedgerEngine, ModelConstants
from radiance_mcp.core.errors import InputError
from radiance_mcp.core.knobs import KNOBS
from radiance_mcp.core.rules.capacity import kv_dtype
from radiance_mcp.core.units import fmt_mib

VARIABLES = KNOBS["radiance"].variables
"""The env file's variables, each after the service's prefix (FOO_VRAM_KV_MIB)."""

SLAB_TOLERANCE_PCT = 1.0
"""A slab-slot prediction from the slope is kept within this: the slope is measured, ~1,300 per 1,792 MiB."""

PREDICTION = re.compile(r"^#\s*prediction\s+(?P<key>[a-z_]+)\s*=\s*(?P<value>\S+?):\s*(?P<text>.*?)\s*$")
PLANNED_FROM = re.compile(r"^# Planned from: boot (?P<boot>[0-9]{1,9}) of (?P<source>.+)\.$")
VERDICT = re.compile(r"^#\s*verdict\s+(?P<key>[a-z_]+):(?P<text>.*)$")


@dataclass(frozen=True)
class GateReserve:
    mib: float
    label: str
    line: int | None
    """The ledger line holding the figure; None: a personal reserve."""


@dataclass(frozen=True)
class Prediction:
    key: str
    value: str
    text: str


@dataclass(frozen=True)
class SharedGate:
    """A physical card the service shares: the pairs' growth over the services on it stays within room_mib
    (its headroom counted once, less the reserves), each co-tenant's read from its env file when the gate runs."""

    physical: str
    room_mib: int
    pair_now_mib: int
    """This service's pair now, whole MiB down (its growth is then never undercounted)."""
    cotenants: tuple[tuple[str, str, str, int], ...]
    """(service, env prefix, env file, pair now in whole MiB down) of each co-tenant with an env file."""
    without_env: tuple[str, ...]
    """Co-tenants with no env file here: their pairs count as their boots'."""


@dataclass(frozen=True)
class GatePlan:
    service: str
    prefix: str
    env_file: str
    """Where the bats file sources it from: checked to hold no character the shell would expand."""
    bats_file: str
    weights_mib: int
    kv_mib: int
    seqs: int
    max_model_len: int
    dtype: KVDtype | None
    """None: another engine's (its rate is its boot's)."""
    model: ModelConstants
    ceiling_mib: int
    ceiling_text: str
    """The derivation and its line, e.g. '29,120 + (2,058 - 209) = 30,969 MiB/card (line 26)'."""
    contract_text: str
    reserves: tuple[GateReserve, ...]
    predictions: tuple[Prediction, ...]
    planned_from: tuple[str, int] | None = None
    """The ledger (its source) and the boot the plan was rendered from: verify_deploy reads only a later boot."""
    shared: tuple[SharedGate, ...] = ()
    engine: LedgerEngine = "radiance"
    rate: Decimal | None = None
    """Another engine's KV bytes per token, from its boot: what its kv knob is priced at (core.knobs)."""
    rate_line: int | None = None

    @property
    def pair_mib(self) -> int:
        return self.weights_mib + self.kv_mib


def env_prefix(name: str) -> str:
    """A service name as an env-variable prefix: 'frank-archon' -> 'FRANK_ARCHON'."""
    prefix = re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_")
    if not prefix or prefix[0].isdigit():
        prefix = f"SVC_{prefix}"
    return prefix


def one_line(text: str) -> str:
    """Free text (a label, a name, a path, ledger text) as one printable line.

    Every run of white space (newline, CR, tab, U+2028, U+0085 and the rest Python splits lines or
    words at) becomes one space; every other character that does not print (NUL, ESC, DEL, a
    format or unassigned character, a lone surrogate) becomes U+FFFD.
    """
    # Security: the env file and the bats file are shell, sourced. A newline in a name written into
    # a comment would start a line of shell there; a U+2028 would start a line read_env reads.
    return "".join(c if c.isprintable() else "\ufffd" for c in " ".join(text.split()))



SAFE_PATH = re.compile(r"^[A-Za-z0-9_./+@-]{1,1000}$")
"""The env file's path, as the bats file's shell code may carry it: nothing a shell expands or splits."""
PREFIX = re.compile(r"[A-Z][A-Z0-9_]*")
"""An env prefix (use fullmatch): the start of a shell variable's name, upper case."""


def _check_shell_words(plan: GatePlan) -> None:
    """An InputError unless every value the gates write as shell code (not in a comment) is a plain word.

    Security: the env_file's path, the prefix and the dtype are written into shell code unquoted
    (the prefix in every variable's name); a quote, $( or backtick in one would run commands.
    Everything else is a number, or free text written through one_line into a comment or a test name.
    """
    if not SAFE_PATH.match(plan.env_file):
        raise InputError(f"env_file {plan.env_file[:200]!r}: a path of letters, digits and . _ / + @ - only "
                         "(it is written into the bats file's shell code)")
    for gate in plan.shared:
        for name, prefix, env_file, _ in gate.cotenants:
            if not SAFE_PATH.match(env_file) or not PREFIX.fullmatch(prefix):
                raise InputError(f"service {name!r} shares {gate.physical}: its env_file {env_file[:200]!r} or prefix "
                                 f"{prefix[:40]!r} cannot be written into the bats file's shell code (a path of "
                                 "letters, digits and . _ / + @ - only; an upper-case prefix)")
    if not PREFIX.fullmatch(plan.prefix):
        raise InputError(f"env_prefix {plan.prefix[:200]!r}: upper-case letters, digits and _, starting with a "
                         "letter (it starts every variable's name in the env file); pass env_prefix, e.g. SVC")
    if plan.engine == "radiance" and (plan.dtype or "") not in plan.model.rate_bytes_per_token:
        raise InputError(f"kv_cache_dtype {(plan.dtype or '')[:20]!r}: radiance takes only bf16 or fp8; "
                         "pass kv_cache_dtype")


def render_env(plan: GatePlan) -> str:
    """The env file: header, the pair and shape, the predictions with empty verdict slots."""
    _check_shell_words(plan)
    personal = [r for r in plan.reserves if r.line is None]
    lines = [
        f"# {one_line(plan.service)}: the KV / VRAM pair and its shape (rendered by radiance-mcp render_gates).",
        f"# Ceiling: {one_line(plan.ceiling_text)}; this pair: {plan.weights_mib:,} + {plan.kv_mib:,} = "
        f"{plan.pair_mib:,} MiB.",
        f"# Pool contract: {one_line(plan.contract_text)}.",
    ]
    if plan.planned_from is not None:
        lines.append(f"# Planned from: boot {plan.planned_from[1]} of {one_line(plan.planned_from[0])}.")
    for r in plan.reserves:
        where = f"ledger line {r.line}" if r.line is not None else "PERSONAL reserve: no ledger line backs it"
        lines.append(f"# Reserve: {one_line(r.label)}, {fmt_mib(r.mib, 2)} MiB ({where}).")
    if not personal:
        lines.append("# Personal reserves: none.")
    lines.append(f"# Gates: {one_line(plan.bats_file)} (pair <= ceiling; pool >= contract; each reserve). "
                 "Write each verdict under its prediction when the probe lands, kept or killed.")
    if plan.engine != "radiance":
        assert plan.rate is not None
        flags = ", ".join(f"{k.flag} \"${plan.prefix}_{k.variable}\"" for k in KNOBS[plan.engine].knobs)
        lines += [f"# Engine: {plan.engine}; KV rate {plan.rate:.2f} B per token; weights {plan.weights_mib} MiB per "
                  f"card, the model's (boot line {plan.rate_line}; no flag moves the weights).",
                  f"# Pass them to the engine: {flags}."]
    lines += [f"{plan.prefix}_{name}={value}" for name, value in knobs.values(
        plan.engine, plan.weights_mib, plan.kv_mib, plan.seqs, plan.max_model_len, plan.dtype, plan.rate)]
    lines.append("# Predictions (falsifiable; verdicts filled in from the new boot and the probes):")
    for p in plan.predictions:
        key = one_line(p.key)
        lines += [f"# prediction {key} = {one_line(p.value)}: {one_line(p.text)}", f"# verdict {key}:"]
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    """A bats test name: one line, double-quoted, with nothing the shell would expand."""
    # Security: bats-preprocess writes the name into shell code again, as `bats_test_begin "NAME"`:
    # so '"', '\\', '$' and '`' are dropped, not escaped, and one_line keeps it to its one line.
    return '"' + re.sub(r'["\\$`]', "", one_line(text)) + '"'


def render_bats(plan: GatePlan) -> str:
    """The gates, run with `bats FILE`; ENV_FILE overrides the env file's path."""
    _check_shell_words(plan)
    p = plan.prefix
    held = sum(r.mib for r in plan.reserves)
    # Security: each comment line ends in fixed text, never a value: bats-preprocess reads any line
    # ending 'NAME { # @test' as a test and writes NAME into shell code, comment or not.
    rate = math.ceil(plan.rate) if plan.rate is not None else 0
    if plan.engine == "radiance":
        contract = (f"# Contract ({one_line(plan.model.name)}): pool_mib >= seqs * max_model_len * rate + "
                    f"{plan.model.per_seq_mib} * seqs + {plan.model.fixed_mib}.")
        pair = f"  pair=$(( {p}_VRAM_WEIGHTS_MIB + {p}_VRAM_KV_MIB ))"
    else:
        contract = (f"# Contract ({plan.engine}): KV tokens >= seats x window, at the boot's {rate} B per token "
                    "(rounded up).")
        pair = (f"  pair=$(( {plan.weights_mib} + ({knobs.shell_kv_bytes(plan.engine, p, rate)} + 1048575) / "
                "1048576 ))")
    lines = [
        "#!/usr/bin/env bats",
        f"# Gates of {one_line(plan.service)}'s KV / VRAM pair (rendered by radiance-mcp render_gates).",
        f"# Ceiling {plan.ceiling_mib:,} MiB/card: {one_line(plan.ceiling_text)}.",
        contract,
        "",
        "setup() {",
        f"  ENV_FILE=\"${{ENV_FILE:-{plan.env_file}}}\"",
        "  [ -r \"$ENV_FILE\" ] || { echo \"env file $ENV_FILE is not readable\" >&2; return 1; }",
        "  # shellcheck source=/dev/null",
        "  source \"$ENV_FILE\"",
        pair,
        "}",
        "",
        f"@test {_quote(f'pair <= ceiling ({plan.ceiling_mib:,} MiB/card, from the boot ledger)')} {{",
        f"  echo \"pair $pair MiB against the ceiling {plan.ceiling_mib}\"",
        f"  [ \"$pair\" -le {plan.ceiling_mib} ]",
        "}",
    ]
    named: set[str] = set()
    for number, r in enumerate(plan.reserves, 1):
        bound = int(plan.ceiling_mib - r.mib)
        kind = f"traced reserve, ledger line {r.line}" if r.line is not None else "PERSONAL reserve, no ledger line"
        text = f"{kind}: {r.label} ({fmt_mib(r.mib, 2)} MiB): pair <= {bound:,}"
        name = _quote(text)
        if name in named:  # bats refuses a file that names two tests alike, and runs none of its gates
            name = _quote(f"{text} (reserve {number})")
        named.add(name)
        lines += [
            "",
            f"@test {name} {{",
            f"  [ \"$pair\" -le {bound} ]",
            "}",
        ]
    if plan.reserves:
        total = int(plan.ceiling_mib - held)
        lines += ["", f"@test {_quote(f'pair <= ceiling less every reserve ({total:,} MiB)')} {{",
                  f"  [ \"$pair\" -le {total} ]", "}"]
    for gate in plan.shared:
        names = ", ".join([plan.service, *(c[0] for c in gate.cotenants), *gate.without_env])
        title = f"shared card {gate.physical} ({names}): the pairs grow by at most {gate.room_mib:,} MiB in all"
        lines += ["", f"@test {_quote(title)} {{", f"  growth=$(( pair - {gate.pair_now_mib} ))"]
        for name, prefix, env_file, pair_now in gate.cotenants:
            lines += [f"  # {one_line(name)}'s env file: its planned pair, less its pair now",
                      f"  growth=$(( growth + $( source \"{env_file}\" && echo $(( {prefix}_VRAM_WEIGHTS_MIB + "
                      f"{prefix}_VRAM_KV_MIB - {pair_now} )) ) ))"]
        lines += ["  echo \"the pairs grow by $growth MiB\"", f"  [ \"$growth\" -le {gate.room_mib} ]", "}"]
    return "\n".join([*lines, *_contract_gate(plan, rate)]) + "\n"


def _contract_gate(plan: GatePlan, rate: int) -> list[str]:
    """The contract's gate: radiance's pool in MiB against the model's constants per dtype; another engine's KV
    tokens against the seats x window, at the boot's rate (whole bytes up)."""
    p, rates = plan.prefix, plan.model.rate_bytes_per_token
    if plan.engine != "radiance":
        return [
            "",
            f"@test {_quote('KV tokens >= seats x window (the engine enforces it at request time, not at boot)')} {{",
            f"  tokens=$(( {knobs.shell_tokens(plan.engine, p, rate)} ))",
            f"  need=$(( {knobs.shell_need(plan.engine, p, plan.max_model_len)} ))",
            "  echo \"KV tokens $tokens against seats x window $need\"",
            "  [ \"$tokens\" -ge \"$need\" ]",
            "}",
        ]
    return [
        "",
        f"@test {_quote('pool >= contract (the engine enforces it at request time, not at boot)')} {{",
        f"  case \"${p}_KV_CACHE_DTYPE\" in",
        *(f"    {dtype}) rate={per_token} ;;" for dtype, per_token in rates.items()),
        f"    *) echo \"--kv-cache-dtype ${p}_KV_CACHE_DTYPE: radiance takes only bf16 or fp8\"; return 1 ;;",
        "  esac",
        f"  need_bytes=$(( {p}_MAX_SEQS * {p}_MAX_MODEL_LEN * rate"
        f" + ({plan.model.per_seq_mib} * {p}_MAX_SEQS + {plan.model.fixed_mib}) * 1048576 ))",
        f"  pool_bytes=$(( {p}_VRAM_KV_MIB * 1048576 ))",
        "  echo \"pool $pool_bytes B against the contract $need_bytes B\"",
        "  [ \"$pool_bytes\" -ge \"$need_bytes\" ]",
        "}",
    ]


def read_env(text: str, variables: Sequence[str] = VARIABLES) -> tuple[str, dict[str, str]]:
    """The prefix and the values of variables (radiance's, or another engine's knobs) an env file assigns (the
    last assignment wins)."""
    found = _assignments(text, variables)
    complete = {prefix: values for prefix, values in found.items() if len(values) == len(variables)}
    if len(complete) != 1:
        shown = ", ".join(f"{p}_* ({len(v)} of {len(variables)})" for p, v in found.items()) or "none"
        raise InputError(
            f"env file: expected one prefix assigning every one of {', '.join(variables)} "
            f"(e.g. SVC_{variables[0]}=...); "
            f"found {shown}; pass the env file render_gates wrote"
        )
    [(prefix, values)] = complete.items()
    return prefix, values


def _assignments(text: str, variables: Sequence[str]) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        for name in variables:
            match = re.fullmatch(rf"([A-Z0-9_]+)_{name}=[\"']?([^\"'\s#]+)[\"']?(?:\s+#.*)?", line)
            if match:
                found.setdefault(match.group(1), {})[name] = match.group(2)
    return found


ENGINE_LINE = re.compile(r"^# Engine: (?P<engine>[a-z.]+); KV rate (?P<rate>[0-9]+(?:\.[0-9]+)?) B per token; "
                         r"weights (?P<weights>[0-9]+) MiB per card")
"""Another engine's env file states its engine, the KV rate its knobs are priced at and the weights (the model's)."""


@dataclass(frozen=True)
class EnvPlan:
    """The shape the env file asks for."""

    prefix: str
    seqs: int
    window: int
    weights_mib: int
    pool_mib: int
    dtype: KVDtype | None
    engine: LedgerEngine = "radiance"
    kv: int | None = None
    """Another engine's kv knob as the env file sets it (bytes, tokens or cells: core.knobs)."""


def _whole(prefix: str, key: str, raw: str, low: int, high: int) -> int:
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise InputError(f"env file: {prefix}_{key}={raw[:40]!r}: a whole number from {low} to "
                         f"{high:,}; pass the env file render_gates wrote")
    return int(raw)


def read_env_plan(text: str) -> EnvPlan:
    """The pair and shape an env file sets, radiance's or (with its '# Engine:' line) another engine's knobs
    (InputError: a value that is not one the engine takes)."""
    header = next((m for m in map(ENGINE_LINE.match, text.splitlines()) if m), None)
    if header is not None and header["engine"] in KNOBS and header["engine"] != "radiance":
        engine = next(e for e in KNOBS if e == header["engine"])
        return _engine_env_plan(text, engine, Decimal(header["rate"]), int(header["weights"]))
    prefix, values = read_env(text)
    numbers = {key: _whole(prefix, key, values[key], low, MAX_POOL_MIB) for key, low in
               (("MAX_SEQS", 1), ("MAX_MODEL_LEN", 1), ("VRAM_WEIGHTS_MIB", 0), ("VRAM_KV_MIB", 0))}
    dtype = kv_dtype(values["KV_CACHE_DTYPE"], f"env file: {prefix}_KV_CACHE_DTYPE",
                     "pass the env file render_gates wrote")
    return EnvPlan(prefix, numbers["MAX_SEQS"], numbers["MAX_MODEL_LEN"], numbers["VRAM_WEIGHTS_MIB"],
                   numbers["VRAM_KV_MIB"], dtype)


def _engine_env_plan(text: str, engine: LedgerEngine, rate: Decimal, weights: int) -> EnvPlan:
    table = KNOBS[engine]
    prefix, values = read_env(text, table.variables)
    kv_name, seats_name, window_name = (table.variable(r) for r in ("kv", "seats", "window"))
    assert kv_name and seats_name
    kv = _whole(prefix, kv_name, values[kv_name], 1, 1 << 62)
    seqs = _whole(prefix, seats_name, values[seats_name], 1, 1 << 20)
    window = _whole(prefix, window_name, values[window_name], 1, 1 << 30) if window_name else kv // seqs
    pool = math.ceil(knobs.pool_of(engine, kv, rate))
    return EnvPlan(prefix, seqs, window, weights, pool, None, engine, kv)


def read_planned_from(text: str) -> tuple[str, int] | None:
    """The (source, boot) the env file says it was planned from, or None (an env file of another make)."""
    for line in text.splitlines():
        if (match := PLANNED_FROM.match(line)) is not None:
            return match["source"], int(match["boot"])
    return None


def read_predictions(text: str) -> list[Prediction]:
    """The predictions an env file records, in order."""
    found = []
    for line in text.splitlines():
        match = PREDICTION.match(line.strip())
        if match:
            found.append(Prediction(match["key"], match["value"], match["text"]))
    return found


def fill_verdicts(text: str, verdicts: Mapping[str, str]) -> str:
    """The env file with each named verdict slot written (an earlier verdict is replaced, never appended)."""
    out = []
    for line in text.splitlines():
        match = VERDICT.match(line.strip())
        if match and match["key"] in verdicts:
            line = f"# verdict {match['key']}: {one_line(verdicts[match['key']])}"
        out.append(line)
    return "\n".join(out) + "\n"


def missing_slots(text: str, keys: Sequence[str]) -> list[str]:
    present = {m["key"] for m in (VERDICT.match(line.strip()) for line in text.splitlines()) if m}
    return [k for k in keys if k not in present]
