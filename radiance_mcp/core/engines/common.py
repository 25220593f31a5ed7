"""What the engine dialects share: the phrase record, the typed view and the boot reader.

Pure: text in, records out. Each dialect (vllm.py, sglang.py, llamacpp.py) owns its phrase
table and turns the phrase hits of one boot into a `Boot`: one `RankView` per card or
rank, every figure with the line it was read from (or, for a derived figure, the lines and
the arithmetic), the figures the engine did not print named with how to get them, and the
boot's refusals with their lines. Nothing is estimated: a figure the log does not hold is
`None` and listed in `missing`.

Patterns are linear-time: possessive quantifiers and no two unbounded quantifiers that can
trade characters, so a hostile line costs time in proportion to its length.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import ROUND_DOWN, Decimal
from typing import Literal

from radiance_mcp.core.boot import (
    UNSETTLED,
    Boot,
    BootState,
    Figure,
    Hit,
    Line,
    Missing,
    Phrase,
    RankView,
    Refusal,
    StopCheck,
    never_stop,
    quoted,
)
from radiance_mcp.core.constants import MIB
from radiance_mcp.core.errors import LedgerError
from radiance_mcp.core.ledger import clean, select_boot
from radiance_mcp.core.units import UNIT_MIB, fmt_mib

EngineName = Literal["vllm", "sglang", "llama.cpp"]

NUM = r"(?:\d{1,3}(?:,\d{3})++|\d++)(?:\.\d++)?"
"""A printed number, thousands separators optional (possessive: never backtracks)."""
MAX_LINE_CHARS = 16 * 1024
"""A longer line is no ledger line of any engine: skipped unread (and counted)."""


def phrase(key: str, keyword: str, pattern: str, says: str) -> Phrase:
    """A line an engine prints, as ledger.Phrase (one record for every engine's phrases).

    A space in `pattern` stands for a run of blanks, " ?" for an optional one; {NUM} for a
    number. `says` is the line as the engine prints it, named in messages.
    """
    regex = pattern.replace("{NUM}", NUM).replace(" ?", r"\s*+").replace(" ", r"\s++")
    return Phrase(key, keyword, regex, says, True)  # compiled on first use, ASCII digits only


# ---------------------------------------------------------------------------------------
# Records


# ---------------------------------------------------------------------------------------
# Reading figures


def count(hit: Hit, name: str, unit: str = "tokens") -> Figure:
    return Figure(hit.number(name), unit, (hit.line,))


def size(hit: Hit, name: str, unit_word: str, gb_means: str = "GiB") -> Figure:
    """A size in MiB. `gb_means` names what the engine's "GB" is (vLLM and SGLang divide by 2**30)."""
    unit = gb_means if unit_word == "GB" else unit_word
    if unit not in UNIT_MIB:
        raise LedgerError(f"line {hit.line.number}: unknown unit {unit_word!r} in {hit.line.text!r}")
    number = hit.number(name)
    exponent = number.as_tuple().exponent
    assert isinstance(exponent, int)
    return Figure(number * UNIT_MIB[unit], "MiB", (hit.line,), Decimal(1).scaleb(exponent) * UNIT_MIB[unit])


def total(figures: Sequence[Figure], what: str) -> Figure:
    """The sum of several figures (a device's buffers, K and V), every line kept."""
    value = sum((f.value for f in figures), Decimal(0))
    lines = tuple(line for f in figures for line in f.lines)
    shown = " + ".join(fmt_mib(f.value, 2) for f in figures)
    return Figure(value, figures[0].unit, lines, sum((f.resolution for f in figures), Decimal(0)),
                  f"{what}: {shown} = {fmt_mib(value, 2)} {figures[0].unit}" if len(figures) > 1 else "")


def share(hit: Hit, value: Decimal, name: str, engine: str, flag: str) -> None:
    """A share of the card the engine printed (vLLM's utilization, SGLang's static fraction): 0 < F <= 1, which the
    engine itself refuses otherwise. A line with another is no boot that engine printed, and the free memory or
    floor worked from it ((1 - F) of the card) would be below 0: refused with the line, as a radiance card that
    settles above its total is."""
    if not 0 < value <= 1:
        raise LedgerError(
            f"line {hit.line.number}: {name} {value} is no share of the card ({engine} takes 0 < {flag} <= 1; "
            f"(1 - {value}) of the card would be below 0 or all of it): {quoted(hit.line)}; this is not a boot "
            f"{engine} printed: read the service's own log")


def difference(minuend: Figure, subtrahend: Figure, what: str) -> Figure:
    value = minuend.value - subtrahend.value
    return Figure(value, "MiB", minuend.lines + subtrahend.lines, minuend.resolution + subtrahend.resolution,
                  f"{what}: {fmt_mib(minuend.value, 2)} - {fmt_mib(subtrahend.value, 2)} = {fmt_mib(value, 2)} MiB")


def bytes_per_token(kv: Figure, tokens: Figure) -> Figure:
    """KV bytes / KV tokens: the rate the engine's own pair implies, with its rounding carried."""
    if tokens.value <= 0:
        raise LedgerError(f"line {tokens.lines[0].number}: KV tokens {tokens.value} cannot give a rate")
    rate = (kv.value * MIB / tokens.value).quantize(Decimal("0.01"))
    resolution = (kv.resolution * MIB / tokens.value).quantize(Decimal("0.01"))
    return Figure(rate, "B/token", tuple(dict.fromkeys(kv.lines + tokens.lines)), resolution,
                  f"{fmt_mib(kv.value, 2)} MiB x {MIB:,} B / {fmt_mib(tokens.value)} tokens = "
                  f"{fmt_mib(rate, 2)} B/token")


def sequences(tokens: Figure, window: Figure) -> Figure:
    """KV tokens / window, rounded down to 0.01: full-length sequences the cache backs at once."""
    if window.value <= 0:
        raise LedgerError(f"line {window.lines[0].number}: a window of {window.value} tokens")
    ratio = (tokens.value / window.value).quantize(Decimal("0.01"), rounding=ROUND_DOWN)
    return Figure(ratio, "sequences", tuple(dict.fromkeys(tokens.lines + window.lines)), Decimal(0),
                  f"{fmt_mib(tokens.value)} tokens / {fmt_mib(window.value)} tokens = "
                  f"{fmt_mib(ratio, 2)} full-length sequences")


def derive(view: RankView, gaps: Iterable[Missing], *, rate_from_pair: bool = True) -> RankView:
    """Fill bytes per token and full-length sequences from the view's pairs; list what is missing.

    `rate_from_pair` False: the view's KV memory and tokens are not one pair (caches of
    different sizes), so no rate is made of them.
    """
    rate = view.kv_bytes_per_token
    if rate is None and rate_from_pair and view.kv_mib is not None and view.kv_tokens is not None:
        rate = bytes_per_token(view.kv_mib, view.kv_tokens)
    seqs = view.full_length_sequences
    if seqs is None and view.kv_tokens is not None and view.window_tokens is not None:
        seqs = sequences(view.kv_tokens, view.window_tokens)
    filled = replace(view, kv_bytes_per_token=rate, full_length_sequences=seqs)
    return replace(filled, missing=tuple(g for g in gaps if getattr(filled, g.figure) is None))


# ---------------------------------------------------------------------------------------
# Lines, boots and hits


def match(phrases: Iterable[Phrase], line: Line, rank_of: Callable[[str], str | None]) -> list[Hit]:
    hits = []
    for p in phrases:
        if p.keyword in line.text:
            found = p.pattern.search(line.text)
            if found:
                hits.append(Hit(p.key, line, found.groupdict(), rank_of(line.text)))
    return hits


def lines_of(text: str) -> tuple[list[Line], int]:
    """Numbered, cleaned lines (split at '\\n' only, as a file reader counts), and how many were too long."""
    raw = text.split("\n")
    if raw and raw[-1] == "":
        raw.pop()
    kept = [Line(n, clean(r)) for n, r in enumerate(raw, 1) if len(r) <= MAX_LINE_CHARS]
    return kept, len(raw) - len(kept)


def select(boot: int, count_: int, source: str, marker: str) -> int:
    """0-based position of the requested boot; -1 is the newest, 1 the oldest (core.ledger.select_boot)."""
    return select_boot(boot, count_, source, f" (each starts at a {marker!r} line)")


@dataclass(frozen=True)
class Built:
    """A dialect's reading of one boot's hits."""

    ranks: tuple[RankView, ...]
    refusals: tuple[Refusal, ...] = ()
    settings: Mapping[str, Figure] = field(default_factory=dict)


@dataclass(frozen=True)
class LedgerDialect:
    """What common.read needs of an engine module."""

    engine: EngineName
    phrases: tuple[Phrase, ...]
    marker: Phrase
    """The line each boot starts with."""
    once: frozenset[str]
    """Phrases a boot prints once per rank: seen twice without a marker, the log holds several boots."""
    rank_of: Callable[[str], str | None]
    build: Callable[[list[Hit]], Built]
    host_words: tuple[str, ...] = ()
    """Plain words standing in for the empty keyword of a phrase (the marker): every line its pattern
    matches holds one of them. A host sends only the lines holding a word (grep_words)."""
    finished: frozenset[str] = frozenset()
    """Phrases whose line ends a boot's start-up (a ready line, llama.cpp's last buffers): see boot_state."""
    sizes_kv: frozenset[str] = frozenset()
    """Phrases whose line sizes the KV cache (its memory, tokens or blocks): see boot_state."""


def grep_words(dialect: LedgerDialect) -> tuple[str, ...]:
    """The plain words a line of this engine's ledger holds, one at least: its keywords and its host words.

    A host greps an engine's log for these and sends only those lines, so every phrase needs
    one: a phrase without a keyword is covered by the dialect's host words.
    """
    if any(not p.keyword for p in dialect.phrases) and not dialect.host_words:
        raise RuntimeError(f"{dialect.engine}: a phrase with no keyword needs the dialect's host_words")
    return tuple(dict.fromkeys([*dialect.host_words, *(p.keyword for p in dialect.phrases if p.keyword)]))


def read(dialect: LedgerDialect, text: str, *, source: str, boot: int = -1,
         checkpoint: StopCheck = never_stop) -> Boot:
    """Read one boot (the newest by default) of an engine's log into its typed view.

    checkpoint runs per line (a caller's cancel, time limit or turn for other calls).
    """
    lines, skipped = lines_of(text)
    if not any(line.text.strip() for line in lines):
        raise LedgerError(f"{source}: the log is empty; pass the {dialect.engine} server's start-up log")
    return read_lines(dialect, lines, source=source, boot=boot, last_line=len(lines) + skipped, skipped=skipped,
                      checkpoint=checkpoint)


def read_lines(dialect: LedgerDialect, lines: Sequence[Line], *, source: str, boot: int = -1, last_line: int,
               skipped: int = 0, dropped: int = 0, checkpoint: StopCheck = never_stop) -> Boot:
    """Read one boot from numbered lines: every line of a log, or only those holding a word (a host's grep).

    Lines a host did not send hold no phrase, so the boots and their figures are the whole log's;
    last_line is the log's last line (the newest boot's span ends there). dropped > 0: the host
    sent only the newest of the lines holding a word (dropped older ones): boots are then
    counted from the end (index -1, -2, ...; boots_seen None), and a boot that may have lost its
    first lines is refused (_position).
    """
    hits_by_line = []
    for line in lines:
        checkpoint()
        hits_by_line.append(match(dialect.phrases, line, dialect.rank_of))
    if not any(hits_by_line):
        if dropped:  # the start-up's lines were among those left on the host
            _position(dialect, boot, 0, source, dropped, False)
        raise _no_ledger(dialect, source, 1, last_line)
    starts = _boot_starts(dialect, hits_by_line)
    position = _position(dialect, boot, len(starts), source, dropped, starts[0] > 0)
    end = starts[position + 1] if position + 1 < len(starts) else len(lines)
    marked = any(hit.key == dialect.marker.key for hit in hits_by_line[starts[position]])
    first_line = lines[starts[position]].number if marked else 1
    last = lines[end].number - 1 if end < len(lines) else last_line
    hits = [hit for found in hits_by_line[starts[position]:end] for hit in found]
    if not hits:
        raise _no_ledger(dialect, source, first_line, last)
    if not marked:
        _refuse_unmarked_boots(dialect, hits, source)
    try:
        built = dialect.build(hits)
    except LedgerError as exc:  # a malformed figure: name the source beside its line
        raise LedgerError(f"{source}: {exc}") from exc
    index, seen = (position + 1, len(starts)) if not dropped else (position - len(starts), None)
    state = boot_state(dialect, built, hits, newest=position + 1 == len(starts))
    return Boot(source, index, seen, first_line, last, tuple(hits), skipped, engine=dialect.engine,
                state=state, refusals=built.refusals, settings=built.settings,
                ranks=placed(built.ranks),
                phrases={phrase.key: phrase for phrase in dialect.phrases})


def placed(ranks: Sequence[RankView]) -> tuple[RankView, ...]:
    """Each card or rank numbered by its place, 0 first; a view named 'all' that totals the devices beside it
    (llama.cpp's) is no card of its own: -1."""
    total = len(ranks) > 1 and any(r.rank == "all" for r in ranks)
    cards = iter(range(len(ranks)))
    return tuple(replace(r, card=-1 if total and r.rank == "all" else next(cards)) for r in ranks)


def boot_state(dialect: LedgerDialect, built: Built, hits: Sequence[Hit], *, newest: bool) -> BootState:
    """An open engine's boot: refused when one of its refusals is final (one it did not recover from); else
    settled when it printed its finished line (the state's lines), when a later boot follows it (it printed all it
    will), or when it printed a line that sizes its KV cache (an excerpt that ends before the finished line, as
    pasted logs do, is read as far as it goes); else unsettled: the log's newest boot, still starting (or cut)
    before its KV cache, whose missing figures may yet be printed."""
    final = tuple(r.line for r in built.refusals if r.final)
    if final:
        return BootState("refused", final)
    ends = tuple(hit.line for hit in hits if hit.key in dialect.finished)
    if ends:
        return BootState("settled", ends)
    if not newest or any(hit.key in dialect.sizes_kv for hit in hits):
        return SERVED
    return UNSETTLED


SERVED = BootState("settled", ())
"""Settled with no finished line: by a later boot, or by the KV cache figures it holds (boot_state)."""


def _no_ledger(dialect: LedgerDialect, source: str, first_line: int, last_line: int) -> LedgerError:
    return LedgerError(
        f"{source}: no line of {dialect.engine}'s start-up ledger in lines {first_line}-{last_line}"
        f" (looked for {', '.join(repr(p.template) for p in dialect.phrases[1:5])}, ...); pass the log of the "
        f"{dialect.engine} server's start-up, with its INFO lines"
    )


def _position(dialect: LedgerDialect, boot: int, count_: int, source: str, dropped: int, sent_before: bool) -> int:
    """select's position; on a cut answer (dropped lines), only a boot from the end whose start was sent.

    The oldest boot among the lines sent counts as whole when lines were sent before its first
    line (the cut fell before them); when the lines sent begin with it, it may have lost its first lines.
    """
    if not dropped:
        return select(boot, count_, source, dialect.marker.template)
    whole = count_ if sent_before else max(count_ - 1, 0)
    if boot < 0 and boot >= -whole:
        return count_ + boot
    which = f"boot=-1 to -{whole} can be read" if whole > 1 else "boot=-1 can be read" if whole else "none can be read"
    raise LedgerError(
        f"{source}: boot={boot} cannot be read: the log holds more {dialect.engine} lines than one read sends, so the "
        f"host sent the newest and left the {dropped:,} older ones there, and boots are counted from the newest among "
        f"those sent ({which}; the oldest of them may have lost its first lines). Read a newer boot, or a log that "
        "holds the start-up you need (rotate the log, or cut that start-up out of it)"
    )


def _boot_starts(dialect: LedgerDialect, hits_by_line: list[list[Hit]]) -> list[int]:
    """Where each boot starts: at a marker line, unless no figure was printed since the last start.

    Engines print more than one marker line per start-up (vLLM's server version and engine
    lines, llama.cpp's device and model-loader lines); those run together into one boot.
    """
    starts: list[int] = []
    figures_since = True
    for i, found in enumerate(hits_by_line):
        if any(hit.key == dialect.marker.key for hit in found):
            if figures_since:
                starts.append(i)
            figures_since = False
        elif found:
            figures_since = True
    return starts or [0]


def _refuse_unmarked_boots(dialect: LedgerDialect, hits: list[Hit], source: str) -> None:
    """Without a boot marker a boot cannot be cut out; two boots' summaries would be mixed. Refuse."""
    seen: dict[tuple[str, str | None], Hit] = {}
    for hit in hits:
        if hit.key in dialect.once:
            earlier = seen.setdefault((hit.key, hit.rank), hit)
            if earlier is not hit:
                raise LedgerError(
                    f"{source}: lines {earlier.line.number} and {hit.line.number} both print {hit.key} "
                    f"({earlier.line.text!r}, {hit.line.text!r}), so the text holds more than one start-up, "
                    f"and no {dialect.marker.template!r} line marks where each begins. Pass one start-up's log, "
                    "or the whole log with its boot lines, so the newest boot can be told apart"
                )


def by_rank(hits: Iterable[Hit]) -> tuple[list[str], dict[str | None, dict[str, list[Hit]]]]:
    """Hits grouped by rank (None: lines that name no rank) and key; ranks in order of first mention."""
    grouped: dict[str | None, dict[str, list[Hit]]] = {}
    order: list[str] = []
    for hit in hits:
        grouped.setdefault(hit.rank, {}).setdefault(hit.key, []).append(hit)
        if hit.rank is not None and hit.rank not in order:
            order.append(hit.rank)
    return sorted(order, key=natural), grouped


def natural(name: str) -> tuple[str, int]:
    """Sort key: CUDA2 before CUDA10, TP2 before TP10."""
    digits = re.search(r"\d++$", name, re.ASCII)
    return (name[: digits.start()], int(digits[0])) if digits else (name, -1)


def first(groups: Sequence[Mapping[str, list[Hit]]], key: str) -> Hit | None:
    """The first hit of `key` in the first group that has one (a rank's own lines before shared ones)."""
    for group in groups:
        if group.get(key):
            return group[key][0]
    return None


def last(groups: Sequence[Mapping[str, list[Hit]]], key: str) -> Hit | None:
    for group in groups:
        if group.get(key):
            return group[key][-1]
    return None
