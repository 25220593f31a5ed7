"""The records every engine's boot ledger is read into: one of each, for radiance, vLLM, SGLang and llama.cpp.

Pure: no I/O. A ``Line`` is one line of a log as read; a ``Figure`` is a number with its unit and
the lines it comes from (read off one line, or derived from several with the arithmetic written
out); ``Missing`` names a figure the procedure needs that the boot did not print, and how to get
it; a ``Refusal`` is a line where the engine refused to start or to serve.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from typing import Literal

from radiance_mcp.core.constants import LedgerEngine
from radiance_mcp.core.errors import LedgerError, PhraseNotFound
from radiance_mcp.core.units import Size, parse_number, parse_size


@dataclass(frozen=True)
class Line:
    number: int
    """1-based line number in the source."""
    text: str
    """The line as read, ANSI codes and line end removed."""


KEPT_LINE_BYTES = 700
"""A kept line's cost beside its text: its Line, and in a parse its Hit and fields (27 lines of the example
parsed and kept: 18.5 KiB measured with tracemalloc, 1.5 KiB of it text)."""


def lines_bytes(lines: Iterable[Line]) -> int:
    """The estimated memory of kept lines (a read's cut, a parse kept for the next read): their text and
    KEPT_LINE_BYTES each."""
    return sum(len(line.text) + KEPT_LINE_BYTES for line in lines)


def quoted(line: Line) -> str:
    """A ledger line as an error quotes it: stripped, at most 200 characters, repr'd."""
    text = line.text.strip()
    return repr(text if len(text) <= 200 else text[:200] + "...")


@dataclass(frozen=True)
class Figure:
    """A figure and where it comes from: read off one line, or derived from the lines named."""

    value: Decimal
    unit: str
    """``MiB``, ``tokens``, ``B/token``, ``sequences``, ``slots`` or ``fraction``."""
    lines: tuple[Line, ...]
    resolution: Decimal = Decimal(0)
    """The printed figure is known to +- resolution / 2 (0 for counts and echoed flags)."""
    arithmetic: str = ""
    """Empty for a figure read off its line; the sum for a derived one."""
    printed: str = ""
    """The figure as the line prints it ('2.01 GiB'), where that is kept; empty for a derived one."""

    @classmethod
    def of_size(cls, size: Size, line: Line) -> Figure:
        """A size read off one line: exact MiB of the printed figure, and its resolution."""
        return cls(size.mib, "MiB", (line,), size.resolution_mib, printed=size.text)

    @property
    def line(self) -> Line:
        """The line the figure was read off (the first, for a derived one)."""
        return self.lines[0]

    @property
    def count(self) -> int:
        """The figure as a whole number: tokens, sequences or slots (a fraction of a sequence is cut)."""
        return int(self.value)

    def agrees_with(self, other: Decimal) -> bool:
        """True when other rounds to the printed figure (within half its last digit)."""
        return abs(self.value - other) <= self.resolution / 2

    def cite(self, source: str) -> str:
        """``source:line: 'text'``, the line the figure was read off."""
        return f"{source}:{self.line.number}: {self.line.text.strip()!r}"


@dataclass(frozen=True)
class Missing:
    """A figure the procedure needs that this boot's log does not print."""

    figure: str
    printed_in: str
    """The line the engine prints it in."""
    remedy: str
    """How to get it: the flag, the log level, or the other figure to supply."""

    @property
    def why(self) -> str:
        """Why it is missing and what to do, without the figure's name: 'not printed (...); remedy'."""
        return f"not printed (the engine prints it as {self.printed_in}); {self.remedy}"

    def __str__(self) -> str:
        return f"{self.figure}: {self.why}"


_RANK = re.compile(r"(.*?)(\d+)")


def rank_span(ranks: Sequence[str]) -> str:
    """Ranks as a reader counts them: a run of one name's consecutive numbers as a range ('TP0-TP7'), the others
    listed in their order ('DP0 TP0, DP1 TP1', 'CUDA0-CUDA2, CUDA4, CUDA5')."""
    runs: list[list[str]] = []
    for rank in ranks:
        if runs and _follows(runs[-1][-1], rank):
            runs[-1].append(rank)
        else:
            runs.append([rank])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(run) for run in runs)


def _follows(before: str, rank: str) -> bool:
    """'TP1' follows 'TP0': one name, the next number."""
    a, b = _RANK.fullmatch(before), _RANK.fullmatch(rank)
    return a is not None and b is not None and a[1] == b[1] and int(b[2]) == int(a[2]) + 1


def per_rank(said: Sequence[tuple[str, str]]) -> str:
    """What ranks say, each text once with the ranks that say it (in the order first said; rank_span writes
    three or more consecutive ranks as a range): [('TP0', 'a'), ('TP1', 'a'), ('TP2', 'a'), ('TP1', 'b')] ->
    'TP0-TP2: a. TP1: b'. Every per-rank finding of a boot is worded here, so eight ranks lacking one figure cost
    one sentence, not eight."""
    ranks: dict[str, list[str]] = {}
    for rank, text in said:
        if rank not in ranks.setdefault(text, []):
            ranks[text].append(rank)
    return ". ".join(f"{rank_span(names)}: {text}" for text, names in ranks.items())


RefusalKind = Literal["window_exceeds_kv", "pool_below_window", "not_enough_memory", "allocation_failed",
                      "startup_failed", "kv_backs_no_session", "engine_fix_text", "startup_stopped"]
"""The open engines' refusals, then radiance's three (core.ledger.boot_state)."""


@dataclass(frozen=True)
class Refusal:
    """A line where the engine refused to start or to serve, with what it refused."""

    kind: RefusalKind
    line: Line
    detail: str
    """What was refused, with the figures of the line, and the flag that changes it."""
    final: bool = True
    """False where the engine recovered (llama.cpp retrying without pipeline parallelism)."""


def never_stop() -> None:
    """The default checkpoint: a reader's caller may pass one that stops it (a cancel, a time limit)."""


StopCheck = Callable[[], None]
"""Called per chunk of a file and per line of text; it raises to stop the read."""


ReserveKind = Literal[
    "may serve", "ceiling input", "engine floor", "before claimable", "pair", "card totals", "not VRAM"
]


@dataclass(frozen=True)
class ReserveMark:
    """What one figure of a phrase is to a reserve held back below the ceiling.

    ``may serve``: the figure is card memory the ceiling may count as room for the pair
    (reserves.reserve_candidates says how much of it); every other kind names why the
    ceiling already accounts for it, or why it is not card memory at all. The reasoning
    behind each kind is written once, in radiance_mcp.core.rules.reserves' docstring.
    """

    kind: ReserveKind
    what: str
    """The figure, in the reader's words: '--gpu-headroom-mib', 'the static region'."""


@dataclass(frozen=True)
class Phrase:
    key: str
    keyword: str
    """Plain substring every line of this phrase holds."""
    regex: str
    """The pattern's source. ``pattern`` compiles it on first use, so a command pays only for
    the phrases it meets (the other engines' 46 cost about 15 ms to compile). re.ASCII: the
    engine prints ASCII digits; '２,100' or '٦١٤٤' is no figure of it."""
    template: str
    """How the simulator writes the line; format fields are the pattern's groups. For another
    engine's phrase: the line as that engine prints it, named in messages."""
    seed: bool
    """True: the words are verbatim from the seed (or from the other engine's own log); False: the
    layout is assumed."""
    reserve: Mapping[str, ReserveMark] = field(default_factory=dict)
    """What each size the line prints is to a reserve, by the pattern's group name (for the
    echoed flags, by '--flag'). Every size group has a mark: a phrase cannot be added without
    deciding whether its figures can back a reserve."""

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.regex, re.ASCII)


@dataclass(frozen=True)
class CutBoot:
    """One boot cut out of a ledger, by a host (sources.remote) or from a local file (sources.ledger_file):
    its phrase lines, numbered as in the log, and where it lies."""

    index: int
    boots_seen: int | None
    lines: tuple[Line, ...]
    skipped_long_lines: int
    first_line: int
    last_line: int
    """The boot's whole span in the log, lines without a phrase included."""
    lines_from_byte: int | None = None
    """None: line numbers are the file's and index counts from its first boot. Else the lines before
    were not counted: line numbers count from 1 at the line that starts at this byte offset (line n
    is `tail -c +<offset + 1> FILE | sed -n <n>p`), index counts from the end (-1 the newest) and
    boots_seen is None."""
    first_byte: int | None = None
    """The byte offset of the boot's first line in the file (None where a host cut it)."""


@dataclass(frozen=True)
class Hit:
    """One line that matched one phrase, with the raw text of each field (radiance's and the other
    engines' alike: radiance_mcp.core.engines reads its dialects into these records too)."""

    key: str
    line: Line
    fields: Mapping[str, str | None]
    rank: str | None = None
    """The card or rank the line names in another engine's log (``TP1``, ``CUDA0``); None for radiance."""

    def where(self, source: str | None) -> str:
        return f"{source}:{self.line.number}" if source else f"line {self.line.number}"

    def raw(self, name: str, source: str | None = None) -> str:
        value = self.fields.get(name)
        if value is None:
            raise LedgerError(f"{self.where(source)}: {self.key} line has no {name}: {self.line.text!r}")
        return value

    def size(self, name: str, source: str | None = None) -> Size:
        try:
            return parse_size(self.raw(name, source))
        except LedgerError as exc:
            raise LedgerError(f"{self.where(source)}: {exc} in line {self.line.text!r}") from exc

    def number(self, name: str, source: str | None = None) -> Decimal:
        try:
            return parse_number(self.raw(name, source))
        except LedgerError as exc:
            raise LedgerError(f"{self.where(source)}: {exc} in line {self.line.text!r}") from exc


Origin = Literal["host", "local file", "caller text"]
"""Where a ledger's text came from: read on a host over SSH, read from a file on this machine,
or given by the caller (log_text), which nothing has verified."""


@dataclass(frozen=True)
class RankView:
    """The ledger of one card or rank, in the procedures' terms."""

    rank: str
    weights_mib: Figure | None = None
    kv_mib: Figure | None = None
    kv_tokens: Figure | None = None
    kv_bytes_per_token: Figure | None = None
    """KV bytes / KV tokens, from the engine's own pair of figures."""
    activation_mib: Figure | None = None
    graph_mib: Figure | None = None
    free_mib: Figure | None = None
    """Memory the engine left free on the card after it settled."""
    window_tokens: Figure | None = None
    full_length_sequences: Figure | None = None
    """KV tokens / window: how many sequences at the full window the cache backs at once."""
    floor_mib: Figure | None = None
    """The free memory the engine keeps by design (radiance's --gpu-headroom-mib plus static region, vLLM's
    and SGLang's unclaimed share of the card, llama.cpp's --fit margin): free memory above it is memory the
    KV cache could have had."""
    missing: tuple[Missing, ...] = ()
    # What radiance prints of a card beside the figures every engine has (None for the other engines):
    card: int = 0
    """radiance: the card's number, as its lines print it; another engine: the rank's place among its cards
    (-1: a view that totals the devices beside it, llama.cpp's 'all', no card of its own)."""
    total_mib: Figure | None = None
    unclaimed_mib: Figure | None = None
    gpu_headroom_mib: Figure | None = None
    """The --gpu-headroom-mib part of the floor, as the settled line prints it."""
    static_mib: Figure | None = None
    """The static region, the floor's other part."""
    pair: Figure | None = None
    """Weights + KV as the ceiling counts them: radiance's from the echoed flags (exact), else the table rows."""
    pair_source: Literal["echoed flags", "table rows"] | None = None
    disagreements: tuple[str, ...] = ()
    """Each table row that disagrees with its echoed flag beyond the row's rounding."""

    def require(self, name: str) -> Figure:
        """The figure, or a LedgerError saying it is not printed and how to get it."""
        value = getattr(self, name)
        if isinstance(value, Figure):
            return value
        raise LedgerError(f"{self.rank}: {self.gap(name)}")

    def gap(self, name: str) -> str:
        """Why the figure is not here, and how to get it (its Missing; else that the log lacks it)."""
        return next((str(g) for g in self.missing if g.figure == name), f"{name} is not in this boot's log")


BootStatus = Literal["settled", "refused", "unsettled"]


@dataclass(frozen=True)
class BootState:
    """Whether a boot settled, refused to start, or did neither (still starting, or its log was cut)."""

    status: BootStatus
    lines: tuple[Line, ...]
    """refused: the refusals' lines in log order; settled: the settled lines (radiance's 'card N settled
    at'; the other engines' lines that end a start-up, none where they judged the boot by its KV cache
    lines or a later boot: core.engines.common.boot_state); unsettled: none."""


UNSETTLED = BootState("unsettled", ())


@dataclass(frozen=True)
class Boot:
    """One boot of a ledger, of any engine: its span, its phrase hits, its cards or ranks, its state.

    The dialect that read it fills what its engine prints: radiance's reader the hits, the near
    misses and the state (radiance's cards are read from the hits by core.budget, where a tool asks
    for them); the other engines' dialects also the ranks, the refusals and the settings.
    """

    source: str
    index: int
    """1-based, oldest first; -1, -2, ... (from the newest) when the boots before it were not counted."""
    boots_seen: int | None
    """How many boots the source holds (None where the reader did not count them)."""
    first_line: int
    last_line: int
    hits: tuple[Hit, ...] = field(repr=False)
    skipped_long_lines: int = 0
    near_misses: tuple[tuple[str, Line], ...] = ()
    """(phrase key, line) of lines that hold a budget phrase's words but not its figures in its
    form (a negative or malformed size): named when that phrase is needed."""
    origin: Origin = "caller text"
    """Where the text came from (sources set it); text of unknown origin counts as the caller's."""
    lines_from_byte: int | None = None
    """None: line numbers are the source's. Else the lines before were not counted (a remote read from
    the end): line numbers count from 1 at the line that starts at this byte offset, and index counts
    from the end (-1 the newest)."""
    first_byte: int | None = None
    """The byte offset of first_line in the file (None: not known, as for caller text or a host's lines): with
    first_line, the boot's identity, which a wait for a later boot names (sources.settling)."""
    engine: LedgerEngine = "radiance"
    state: BootState = UNSETTLED
    refusals: tuple[Refusal, ...] = ()
    """Each line where the engine refused (or, not final, recovered), in log order."""
    ranks: tuple[RankView, ...] = ()
    """The open engines' cards or ranks, each in the procedures' terms."""
    settings: Mapping[str, Figure] = field(default_factory=dict)
    """What the engine says it was set to (slots, max running requests, utilization), with lines."""
    phrases: Mapping[str, Phrase] = field(default_factory=dict, compare=False, repr=False)
    """The dialect's phrase table, by key: what ``require`` names when a phrase is missing."""
    _by_key: dict[str, list[Hit]] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        for hit in self.hits:
            self._by_key.setdefault(hit.key, []).append(hit)

    def all(self, key: str) -> list[Hit]:
        return self._by_key.get(key, [])

    def first(self, key: str) -> Hit | None:
        hits = self.all(key)
        return hits[0] if hits else None

    def require(self, key: str, why: str = "") -> Hit:
        hit = self.first(key)
        if hit is None:
            phrase = self.phrases.get(key)
            raise PhraseNotFound(key, phrase.keyword if phrase else key, self.where(), why)
        return hit

    def line(self, number: int) -> Line | None:
        for hit in self.hits:
            if hit.line.number == number:
                return hit.line
        return None

    def where(self) -> str:
        """'source (boot 2 of 3, lines 40-77)'; another engine's boot names it: 'source (vllm boot 1 of 1, ...)'."""
        seen = f" of {self.boots_seen}" if self.boots_seen is not None else ""
        counted = f" counted from byte {self.lines_from_byte:,}" if self.lines_from_byte is not None else ""
        engine = "" if self.engine == "radiance" else f"{self.engine} "  # radiance, the home engine, goes unnamed
        return f"{self.source} ({engine}boot {self.index}{seen}, lines {self.first_line}-{self.last_line}{counted})"

    @property
    def flags(self) -> dict[str, Hit]:
        """The first echo of each flag in this boot, by flag name without dashes."""
        flags: dict[str, Hit] = {}
        for hit in self.all("flag"):
            flags.setdefault(str(hit.fields["flag"]), hit)
        return flags

    @property
    def refused(self) -> bool:
        """The state says the engine refused to start (radiance's rule, or a final refusal of another engine)."""
        return self.state.status == "refused"

    def rank(self, name: str) -> RankView:
        for view in self.ranks:
            if view.rank == name:
                return view
        raise LedgerError(f"{self.where()}: no rank {name!r}; the boot shows {', '.join(r.rank for r in self.ranks)}")
