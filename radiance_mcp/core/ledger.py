"""radiance's boot ledger: the phrase table and a pure reader (text in, records out).

Every phrase the engine prints that a tool reads is one entry of ``PHRASES``: the words it
is keyed on (``keyword``, a plain substring every such line holds, used to prefilter lines
locally and on remote hosts), the pattern that reads its figures, and the template the
simulator writes it with, so reader and writer cannot drift apart (a round-trip test ties
them). Entries marked ``seed`` are verbatim from the procedures; ``assumed`` ones are a
plausible layout around seed words (see PHRASEBOOK section 8). Each entry also marks what
every size it reads is to a reserve below the ceiling (``reserve=``; reserves' docstring
gives the reasoning), and ``boot_state`` is the one rule by which every tool judges whether
a boot settled, refused to start, or did neither.

The reader tolerates what sits around the phrases: timestamps and ``podman logs -t`` or
journald prefixes, ANSI colour codes, CRLF line ends, runs of spaces, thousands
separators, any of B/KiB/MiB/GiB. A log can hold many boots; one is read (the newest by
default), its figures keep their line number and text, and a missing phrase is an error
that names it. Nothing is ever guessed.

This module reads text only; radiance_mcp.sources.ledger_file streams a boot out of a file into the
same reader.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from radiance_mcp.core.boot import (
    UNSETTLED,
    Boot,
    BootState,
    Hit,
    Line,
    Phrase,
    Refusal,
    RefusalKind,
    ReserveMark,
    StopCheck,
    never_stop,
)
from radiance_mcp.core.errors import LedgerError
from radiance_mcp.core.units import NUMBER, SIZE, parse_number

MAX_LINE_BYTES = 64 * 1024
"""A longer line cannot be a ledger line; it is skipped (and counted), never buffered whole."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


_mark = ReserveMark  # short, for the table's rows
_SIZE_GROUP = re.compile(r"\(\?P<(\w+)>\{SIZE\}\)")


def _phrase(
    key: str, keyword: str, pattern: str, template: str, *, seed: bool = True,
    reserve: Mapping[str, ReserveMark] | None = None,
) -> Phrase:
    marks = dict(reserve or {})
    unmarked = set(_SIZE_GROUP.findall(pattern)) - set(marks)
    if unmarked:  # a programming error, caught at import
        raise AssertionError(f"phrase {key!r}: size group(s) {sorted(unmarked)} need a reserve mark")
    # A literal space in a pattern stands for any run of blanks: logs realign columns.
    # Every pattern matches in time linear in the line (a hostile line is up to MAX_LINE_BYTES):
    # numbers start only at the start of a run and never give back (units.NUMBER); a gap
    # between words never crosses the phrase's own first words again (each search attempt
    # then scans its own stretch); a tail is taken greedily to its last non-blank, never
    # lazily up to a '\s*$' (which retries the blanks from every position).
    regex = pattern.replace("{SIZE}", SIZE).replace("{NUM}", NUMBER).replace(" ", r"\s+")
    return Phrase(key, keyword, regex, template, seed, marks)


PHRASES: dict[str, Phrase] = {
    p.key: p
    for p in (
        _phrase("boot_start", "radiance boot", r"radiance boot\b(?::?\s*(?P<name>\S+))?",
                "I radiance boot: {name}", seed=False),
        _phrase("flag", "--", r"(?:^|\s)I +--(?P<flag>[a-z][a-z0-9-]*+) +(?P<value>\S++)\s*+$",
                "I   --{flag:<24}{value}",
                reserve={
                    "--vram-weights-mib": _mark("pair", "--vram-weights-mib, a member of the pair"),
                    "--vram-kv-mib": _mark("pair", "--vram-kv-mib, a member of the pair"),
                    "--gpu-headroom-mib": _mark("engine floor", "--gpu-headroom-mib, part of the engine floor"),
                    "--host-pool-mib": _mark("not VRAM", "--host-pool-mib, the pinned host pool (host RAM)"),
                }),
        # Section 1: the VRAM budget table, one per card.
        _phrase("budget_header", "VRAM budget, card", r"VRAM budget, card (?P<card>\d+)\b",
                "I VRAM budget, card {card}", seed=False),
        _phrase("card_total", "card total", r"card total (?P<size>{SIZE})",
                "I   card total          {size}",
                reserve={"size": _mark("card totals", "the card total")}),
        _phrase("vram_weights", "vram_weights", r"vram_weights (?P<size>{SIZE})",
                "I   vram_weights        {size}   stated by --vram-weights-mib",
                reserve={"size": _mark("pair", "vram_weights, a member of the pair")}),
        _phrase("vram_kv", "vram_kv", r"vram_kv (?P<size>{SIZE})",
                "I   vram_kv             {size}   stated by --vram-kv-mib",
                reserve={"size": _mark("pair", "vram_kv, a member of the pair")}),
        _phrase("unclaimed", "unclaimed", r"unclaimed (?P<size>{SIZE})",
                "I   unclaimed           {size}   the headroom, the unusable above, rounding",
                reserve={"size": _mark("may serve", "the unclaimed row")}),
        _phrase("budgets_total", "VRAM budgets total",
                r"VRAM budgets total (?P<budgets>{SIZE}) of the card's (?P<total>{SIZE}), so "
                r"(?P<unaccounted>{SIZE}) is neither budgeted nor accounted",
                "W VRAM budgets total {budgets} of the card's {total}, so {unaccounted} is neither "
                "budgeted nor accounted. The driver's context, the activation arena and "
                "--gpu-headroom-mib come out of it; anything past those is throughput on the floor",
                reserve={
                    "budgets": _mark("card totals", "the VRAM budgets total (the pair)"),
                    "total": _mark("card totals", "the card total"),
                    "unaccounted": _mark("card totals", "what the budgets leave of the card"),
                }),
        _phrase("settled", "settled at",
                r"card (?P<card>\d+) settled at (?P<free>{SIZE}) free against (?P<floor>{SIZE})"
                r"(?: \(the (?P<headroom>{SIZE}) --gpu-headroom-mib and (?P<static>{SIZE}) kept "
                r"for the static region\))?",
                "W card {card} settled at {free} free against {floor} (the {headroom} "
                "--gpu-headroom-mib and {static} kept for the static region)",
                reserve={
                    "free": _mark("ceiling input", "the settled free memory"),
                    "floor": _mark("engine floor", "the engine floor"),
                    "headroom": _mark("engine floor", "--gpu-headroom-mib, part of the engine floor"),
                    "static": _mark("engine floor", "the static region, part of the engine floor"),
                }),
        # Section 6: the step-shape ledger.
        _phrase("activation_arena", "activation arena",
                r"activation arena (?P<size>{SIZE})(?: \(--max-num-batched-tokens (?P<mnbt>{NUM})\))?",
                "I activation arena {size} (--max-num-batched-tokens {mnbt})",
                reserve={"size": _mark("before claimable", "the activation arena")}),
        _phrase("claimable", "claimable", r"\bclaimable (?P<size>{SIZE})", "I claimable {size}",
                reserve={"size": _mark("card totals", "claimable (the card less the arena)")}),
        _phrase("weights_by_tier", "weights by tier",
                r"weights by tier: VRAM (?P<vram>{SIZE}), host pool (?P<host>{SIZE}), "
                r"container-on-disk (?P<disk>{SIZE})",
                "I weights by tier: VRAM {vram}, host pool {host}, container-on-disk {disk}",
                reserve={
                    "vram": _mark("pair", "the weights in VRAM (vram_weights, a member of the pair)"),
                    "host": _mark("not VRAM", "the weights in the host pool (pinned host RAM)"),
                    "disk": _mark("not VRAM", "the weights on the container-on-disk tier"),
                }),
        _phrase("kv_backing", "full-length sessions",
                r"kv cache (?P<size>{SIZE})(?:(?!kv cache).)*?(?P<percent>{NUM})% backing of the (?P<seqs>{NUM}) x "
                r"(?P<tokens>{NUM}) worst case: (?P<sessions>{NUM}) full-length sessions",
                "{level} kv cache {size} ({dtype}, {rate} B/token/rank): {percent}% backing of the "
                "{seqs} x {tokens} worst case: {sessions} full-length sessions",
                reserve={"size": _mark("pair", "the KV cache the boot funded (vram_kv, a member of the pair)")}),
        _phrase("startup_stopped", "startup stopped", r"startup stopped: (?P<reason>\S(?:.*\S)?)",
                "E startup stopped: {reason}"),
        _phrase("expert_prefetch", "expert prefetch", r"expert prefetch (?P<size>{SIZE})",
                "I expert prefetch {size}{lender}",
                reserve={"size": _mark("pair", "the expert prefetch, lent out of the KV cache (inside vram_kv)")}),
        _phrase("no_lender", "no lender", r"no lender", "I expert prefetch 0 B, no lender"),
        _phrase("fix_text", "lower --max-num-batched-tokens",
                r"(?P<text>lower --max-num-batched-tokens \(the arena(?:.*\S)?)",
                "E vram_budget.cpp:117: lower --max-num-batched-tokens (the arena {arena} leaves "
                "{kv} for the KV cache)"),
        # Section 5: lines to verify a deploy by.
        _phrase("backs", "backs", r"backs (?P<seqs>{NUM}) sequences all at (?P<tokens>{NUM}) tokens at once",
                "I backs {seqs} sequences all at {tokens} tokens at once"),
        _phrase("slab_slots", "slab slots",
                r"slab slots (?P<slots>{NUM})(?: resident)?(?:, host pool (?P<host>{NUM}))?",
                "I slab slots {slots} resident, host pool {host}"),
        _phrase("ledger_mover", "ledger mover",
                r"ledger mover: (?P<slots>{NUM}) slots can be lent out of the KV cache \((?P<size>{SIZE})\)",
                "I ledger mover: {slots} slots can be lent out of the KV cache ({size})",
                reserve={"size": _mark("pair", "the KV memory the ledger mover lends (inside vram_kv)")}),
        _phrase("sampler", "sampler:",
                r"sampler:(?: (?P<seqs>{NUM}) seqs x \(1 \+ (?P<spec>{NUM}) spec\) =)?"
                r"(?:(?!sampler:).)*?(?P<rows>{NUM}) rows",
                "I sampler: {seqs} seqs x (1 + {spec} spec) = {rows} rows, inside the 25-row wht6 "
                "exactness bound"),
        _phrase("serving", "serving on", r"serving on (?P<address>\S+)", "I serving on {address}",
                seed=False),
    )
}

KEYWORDS: tuple[str, ...] = tuple(dict.fromkeys(p.keyword for p in PHRASES.values()))
"""Every line a tool may need holds one of these; a remote read may send only such lines."""
BOOT_MARKER = PHRASES["boot_start"].keyword
RADIANCE_WORDS = tuple(PHRASES[key].keyword for key in ("boot_start", "settled", "vram_kv", "budget_header"))
"""Words of radiance's ledger that vLLM, SGLang and llama.cpp never print: a text holding one is radiance's."""


def holds_radiance_words(text: str) -> bool:
    """Whether text holds one of RADIANCE_WORDS: radiance's ledger, told without another engine's dialect."""
    return any(word in text for word in RADIANCE_WORDS)


def render(key: str, **fields: object) -> str:
    """Write one ledger line the way radiance prints it (used by the simulator)."""
    return PHRASES[key].template.format(**fields)


# ---------------------------------------------------------------------------------------
# Records


def boot_state(hits: Sequence[Hit]) -> tuple[BootState, tuple[Refusal, ...]]:
    """Whether the boot settled or refused, and its refusals: the one rule by which every tool judges a
    radiance boot (the reader puts it in ``Boot.state``).

    Refused: a 'startup stopped' line, or, with no settled line, a 'kv cache' line that backs
    less than one full-length session (the engine's out-of-memory refusal, also where the
    'startup stopped' line was cut off); the engine's fix text belongs to the refusal. Settled: a
    'card N settled at' line. Else unsettled.
    """
    by_key: dict[str, list[Hit]] = {}
    for hit in hits:
        by_key.setdefault(hit.key, []).append(hit)
    stopped, settled = by_key.get("startup_stopped", []), by_key.get("settled", [])
    short_kv = [hit for hit in by_key.get("kv_backing", []) if _backs_no_session(hit)]
    if stopped or (short_kv and not settled):
        kinds: tuple[tuple[RefusalKind, list[Hit]], ...] = (
            ("kv_backs_no_session", short_kv), ("engine_fix_text", by_key.get("fix_text", [])),
            ("startup_stopped", stopped))
        refusals = {hit.line.number: Refusal(kind, hit.line, _REFUSED[kind]) for kind, found in kinds for hit in found}
        ordered = tuple(refusals[n] for n in sorted(refusals))
        return BootState("refused", tuple(r.line for r in ordered)), ordered
    if settled:
        return BootState("settled", tuple(hit.line for hit in settled)), ()
    return UNSETTLED, ()


_REFUSED: dict[RefusalKind, str] = {
    "kv_backs_no_session": "the KV cache backs less than one full-length session",
    "engine_fix_text": "the engine's fix for the refusal",
    "startup_stopped": "startup stopped",
}


def _backs_no_session(hit: Hit) -> bool:
    try:
        return parse_number(str(hit.fields.get("sessions"))) < 1
    except LedgerError:
        return False


# ---------------------------------------------------------------------------------------
# Reading


def clean(raw: str) -> str:
    """Remove ANSI codes and the line end; prefixes stay (phrases are searched, not anchored)."""
    return _ANSI.sub("", raw).rstrip("\r\n")


def match_line(line: Line) -> list[Hit]:
    """Every phrase the line holds (a line can hold more than one, e.g. 'expert prefetch ... no lender')."""
    hits = []
    for phrase in PHRASES.values():
        if phrase.keyword in line.text:
            found = phrase.pattern.search(line.text)
            if found:
                hits.append(Hit(phrase.key, line, found.groupdict()))
    return hits


WATCHED_PHRASES = ("settled", "card_total", "vram_weights", "vram_kv", "unclaimed")
"""Budget phrases whose words on a line that does not match are worth naming (Boot.near_misses)."""
MAX_NEAR_MISSES = 16


def parse_boot(
    lines: Iterable[Line], *, source: str, index: int, boots_seen: int | None, skipped_long_lines: int = 0,
    checkpoint: StopCheck = never_stop,
) -> Boot:
    """Match the lines of one boot (already cut out of its log) against the phrase table."""
    hits: list[Hit] = []
    near_misses: list[tuple[str, Line]] = []
    first = last = 0
    for line in lines:
        checkpoint()
        first = first or line.number
        last = line.number
        found = match_line(line)
        hits.extend(found)
        if len(near_misses) < MAX_NEAR_MISSES:
            matched = {hit.key for hit in found}
            near_misses += [(key, line) for key in WATCHED_PHRASES
                            if key not in matched and PHRASES[key].keyword in line.text]
    if not hits:
        raise LedgerError(
            f"{source}: no radiance ledger phrase in boot {index} (lines {first}-{last}); "
            f"none of {', '.join(repr(k) for k in KEYWORDS[:6])}, ... appears. "
            "Point the tool at the radiance service's boot log."
        )
    state, refusals = boot_state(hits)
    return Boot(source, index, boots_seen, first, last, tuple(hits), skipped_long_lines,
                tuple(near_misses[:MAX_NEAR_MISSES]), state=state, refusals=refusals, phrases=PHRASES)


def _boot_starts(lines: list[Line]) -> list[int]:
    """Indexes of the lines that start a boot.

    A boot starts at each 'radiance boot' line. A log without that line starts a boot at each
    run of echoed flags (each boot echoes its flags once; a run is judged by consecutive line
    numbers, so it holds on prefiltered lines too); a log with neither is one boot.
    """
    starts = [i for i, line in enumerate(lines) if BOOT_MARKER in line.text]
    if starts:
        return starts
    flag = PHRASES["flag"].pattern
    previous_flag_number = -2
    for i, line in enumerate(lines):
        if flag.search(line.text):
            if line.number != previous_flag_number + 1:
                starts.append(i)
            previous_flag_number = line.number
    return starts or [0]


def select_boot(boot: int, count: int, source: str, starts: str = "") -> int:
    """The 0-based position of the requested boot; -1 is the newest, 1 the oldest (every engine's rule: starts
    says where another engine's boot begins)."""
    if count == 0:
        raise LedgerError(f"{source}: the log is empty; nothing was booted or the wrong file was named")
    if boot == 0 or not -count <= boot <= count:
        use = "use -1 or 1 (its one boot)" if count == 1 else f"use -1 (newest) to -{count}, or 1 (oldest) to {count}"
        raise LedgerError(f"{source}: boot={boot} but the log holds {count} boot(s){starts}; {use}", boots_held=count)
    return boot - 1 if boot > 0 else count + boot


def read_text(text: str, *, source: str, boot: int = -1, checkpoint: StopCheck = never_stop) -> Boot:
    """Read one boot (the newest by default) of a ledger given as text."""
    # Lines end at '\n' only, as in read_file: str.splitlines() would also break at '\x85', '\x0c',
    # '\u2028' and a lone '\r', so the same ledger pasted inline would get other line numbers.
    raw_lines = text.split("\n")
    if raw_lines[-1] == "":
        raw_lines.pop()
    lines = []
    for number, raw in enumerate(raw_lines, 1):
        checkpoint()
        if not _overlong(raw):
            lines.append(Line(number, clean(raw)))
    return parse_lines(lines, source=source, boot=boot, skipped=len(raw_lines) - len(lines),
                            checkpoint=checkpoint)


def _overlong(raw: str) -> bool:
    """Over MAX_LINE_BYTES in UTF-8, as read_file counts (a character is at most 4 bytes)."""
    if len(raw) <= MAX_LINE_BYTES // 4:
        return False
    return len(raw) > MAX_LINE_BYTES or len(raw.encode("utf-8", "surrogatepass")) > MAX_LINE_BYTES


def parse_lines(lines: list[Line], *, source: str, boot: int, skipped: int, checkpoint: StopCheck) -> Boot:
    if not any(line.text.strip() for line in lines):
        note = f" ({skipped} line(s) over {MAX_LINE_BYTES} bytes skipped)" if skipped else ""
        raise LedgerError(f"{source}: the log is empty{note}; pass the radiance service's boot log")
    starts = _boot_starts(lines)
    position = select_boot(boot, len(starts), source)
    end = starts[position + 1] if position + 1 < len(starts) else len(lines)
    return parse_boot(
        lines[starts[position] : end],
        source=source,
        index=position + 1,
        boots_seen=len(starts),
        skipped_long_lines=skipped,
        checkpoint=checkpoint,
    )
