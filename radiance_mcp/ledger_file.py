"""Reading a boot out of a ledger file from its end: bounded memory, cost that follows the boot (I/O).

The pure reader (radiance_mcp.ledger) takes text; this module feeds it from a file without
holding the file. The newest boot is found by searching backwards from the end for the last
boot marker, in blocks, and only that boot is scanned: of its lines only those that can hold a
phrase are decoded (found by `grep -F` in a child process in a span of GREP_FROM_BYTES or
more, else here). So a first read costs the newest boot, not the file.

Provenance stays exact. Line numbers are the file's own when they are known cheaply: the bytes
before the boot are at most COUNT_BEFORE_BYTES (then they are counted), or this process has
indexed them (FileIndex: newline and marker counts every INDEX_STEP_BYTES, kept per file and
extended as the file grows). Otherwise the boot's lines count from 1 at its marker line, and
``Boot.lines_from_byte`` is that line's byte offset: line n is
``tail -c +<offset + 1> FILE | sed -n <n>p``; ``Boot.index`` is then -1 (-2 ... for an older
boot) and ``boots_seen`` None. ``index_file`` fills the index (sources.py runs it in the
background after such a read), and later reads of that file give the file's line numbers.

A repeat read of an unchanged file (same device, inode, size and mtime, the mtime RACY_NS older
than the last read) parses the lines kept from the last read; a file that grew (the same bytes
at three sampled places) is read only from where the last read stopped; a file that shrank, or
was replaced or rewritten (rotated), is read and indexed afresh. Costs:

- the newest boot (``boot=-1``): the bytes from its marker to the end, twice in C (the search
  back, then the scan); a repeat read, the bytes added since;
- ``boot=-k``: the bytes from the k-th marker from the end to the end (search), and that boot;
- ``boot=k`` (counted from the oldest): one pass over the whole file the first time (it counts
  every marker, and leaves the file indexed), then that boot;
- a file with no boot marker: one pass over the whole file.

Memory: a block (CHUNK_BYTES), a partial line of at most MAX_LINE_BYTES, the lines of one boot
the caller keeps, and 32 bytes of index per INDEX_STEP_BYTES of file, whatever the file holds (a
1 GiB line without a newline, a file of nothing but markers); grep is given no line over
MAX_LINE_BYTES. The caller's checkpoint (a cancel, a time
limit) runs per block. The boot marker and the phrase keywords are parameters of ``cut_boot``,
so another engine's marker can be searched the same way. Imports point one way: this module
reads ledger, never the reverse.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import os
import shutil
import subprocess
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from io import BufferedReader
from pathlib import Path

from radiance_mcp.errors import LedgerError
from radiance_mcp.ledger import (
    BOOT_MARKER,
    KEYWORDS,
    MAX_LINE_BYTES,
    PHRASES,
    WATCHED_PHRASES,
    Boot,
    Checkpoint,
    Line,
    clean,
    match_line,
    no_checkpoint,
    parse_boot,
    parse_lines,
    select_boot,
)

CHUNK_BYTES = 1024 * 1024
"""A file is read in blocks of this size; the reader's checkpoint (a cancel, a time limit, a turn
for other calls) runs per block, so a block is small enough to read in a few ms."""
COUNT_BEFORE_BYTES = 16 * 1024 * 1024
"""A boot whose preceding bytes are at most this many (beyond what is indexed) gets the file's line
numbers at once: counting them costs a few ms. Past that its lines count from its marker line."""
INDEX_STEP_BYTES = 1024 * 1024
"""The per-file index keeps its counts every this many bytes: finding a line number costs at most this much reading."""
SAMPLE_BYTES = 4096
"""Bytes compared at each sampled place to tell a file that only grew from one that was rewritten."""
RACY_NS = 2_000_000_000
"""A file modified this close to a read may change again within its mtime's granularity (2 s on some
file systems): its next read does not trust an unchanged size and mtime."""
MAX_FILES = 64
"""Files whose index and last read are kept (a few KiB each, plus 32 bytes per MiB); least recent go first."""

DEFAULT_NEEDLES: tuple[bytes, ...] = tuple(dict.fromkeys([*(k.encode() for k in KEYWORDS), b"\x1b"]))
"""A line can hold a phrase only if it holds a keyword, or an ANSI escape (which may split one)."""


# ---------------------------------------------------------------------------------------
# Finding the lines that can hold a phrase, in one block of complete lines


_HIT_S = 0.4e-6
"""Python time per hit of a one-byte search (find, then compare the needle around it)."""
_FIND_BYTES_PER_S_PER_CHAR = 130e6
"""bytes.find of an n-byte needle scans about n times this many bytes a second (two-way with a skip table)."""


@dataclass(frozen=True)
class _Plan:
    by_byte: dict[bytes, list[tuple[bytes, int]]]
    """A rare byte -> the needles anchored on it, with its place in each: found by memchr, then compared."""
    whole: list[bytes]
    """Needles searched whole (no byte of them is rare in the block)."""


def _plan(data: bytes | bytearray, end: int, needles: Sequence[bytes]) -> _Plan:
    """How to find each needle in data[:end] most cheaply, judged on two samples of the block.

    A needle with a byte rare in the block is found by memchr on that byte (C speed, then one
    comparison per hit); one whose bytes are all common is searched whole. Either way every
    occurrence is found: the plan changes the cost, never the result.
    """
    half = min(SAMPLE_BYTES * 2, end // 2)
    sample = data[:half] + data[end - half : end] if half else data[:end]
    by_byte: dict[bytes, list[tuple[bytes, int]]] = {}
    whole = []
    counts: dict[int, int] = {}
    for needle in needles:
        for byte in set(needle):
            if byte not in counts:
                counts[byte] = sample.count(byte)
        rarest = min(needle, key=counts.__getitem__)
        hits = counts[rarest] * end / max(len(sample), 1)
        if len(needle) == 1 or hits * _HIT_S < end / (_FIND_BYTES_PER_S_PER_CHAR * max(len(needle), 6)):
            by_byte.setdefault(bytes([rarest]), []).append((needle, needle.index(rarest)))
        else:
            whole.append(needle)
    return _Plan(by_byte, whole)


def _line_starts(data: bytes | bytearray, end: int, needles: Sequence[bytes]) -> set[int]:
    """Start offsets of the lines of data[:end] that hold a needle."""
    plan = _plan(data, end, needles)
    starts: set[int] = set()
    for byte, members in plan.by_byte.items():
        at = data.find(byte, 0, end)
        while at >= 0:
            for needle, place in members:
                begin = at - place
                if begin >= 0 and data.startswith(needle, begin, end):
                    starts.add(data.rfind(b"\n", 0, begin) + 1)
            at = data.find(byte, at + 1, end)
    for needle in plan.whole:
        at = data.find(needle, 0, end)
        while at >= 0:
            starts.add(data.rfind(b"\n", 0, at) + 1)
            at = data.find(needle, data.find(b"\n", at, end) + 1, end)
    return starts


def _overlong_lines(data: bytes | bytearray, end: int) -> list[tuple[int, int]]:
    """(start, newline) of the lines over MAX_LINE_BYTES in data[:end] (which ends with a newline), in
    about end / MAX_LINE_BYTES steps."""
    spans, start = [], 0
    while end - start > MAX_LINE_BYTES:
        newline = data.rfind(b"\n", start, start + MAX_LINE_BYTES + 1)
        if newline >= 0:  # every line starting before it is short; the next may not be
            start = newline + 1
            continue
        newline = data.find(b"\n", start + MAX_LINE_BYTES + 1, end)
        spans.append((start, newline))
        start = newline + 1
    return spans


class _Grep:
    """The needles searched by `grep -F` in a child process, which runs on another core.

    The scan writes it its complete lines, a line over MAX_LINE_BYTES as an empty one (so grep
    never holds a long line, and its line numbers stay the file's); a thread reads its matches.
    grep finds several fixed strings at once (Commentz-Walter / Aho-Corasick), where Python
    searches one needle at a time: on a boot of request-log filler it is several times faster.
    """

    def __init__(self, grep: str, needles: Sequence[bytes], first_number: int, keep: Keep | None) -> None:
        argv = [grep.encode(), b"-a", b"-n", b"-F"]
        for needle in needles:
            argv += [b"-e", needle]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "LC_ALL": "C"})
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        with contextlib.suppress(ImportError, OSError, AttributeError):  # a larger pipe: fewer wake-ups (Linux)
            import fcntl

            fcntl.fcntl(self.stdin.fileno(), fcntl.F_SETPIPE_SZ, CHUNK_BYTES)
        self.lines: list[Line] = []
        self.shift, self.keep = first_number - 1, keep
        self.reader = threading.Thread(target=self._collect, daemon=True)
        self.reader.start()

    def _collect(self) -> None:
        for raw in self.stdout:
            number, _, text = raw.partition(b":")
            line = Line(self.shift + int(number), clean(text.decode("utf-8", "replace")))
            if self.keep is None or self.keep(line):
                self.lines.append(line)

    def write(self, data: bytes | bytearray, end: int, overlong: list[tuple[int, int]]) -> None:
        view, start = memoryview(data), 0
        for begin, newline in overlong:
            self.stdin.write(view[start:begin])
            self.stdin.write(b"\n")
            start = newline + 1
        self.stdin.write(view[start:end])

    def finish(self) -> list[Line]:
        """The lines found, once grep has read everything written."""
        self.stdin.close()
        self.reader.join()
        self.stdout.close()
        if self.proc.wait() > 1:  # 0: lines found, 1: none
            raise OSError(f"grep stopped with status {self.proc.returncode}")
        return self.lines

    def stop(self) -> None:
        """End grep early (the read was stopped)."""
        self.proc.kill()
        with contextlib.suppress(OSError):
            self.stdin.close()
        self.reader.join()
        self.stdout.close()
        self.proc.wait()


GREP = shutil.which("grep")
"""grep, for the needle search of large spans; None: Python searches them (same lines, slower)."""
GREP_FROM_BYTES = 4 * 1024 * 1024
"""A span this large is searched by grep (a process start costs a few ms; a smaller span is searched here)."""


# ---------------------------------------------------------------------------------------
# Scanning a span of lines forward


Keep = Callable[[Line], bool]
"""Which of the lines that hold a needle a cut keeps (a reader keeps those it can use: memory follows them)."""


@dataclass(frozen=True)
class _Tail:
    """Where a scan stopped: the start of its last, unfinished line (the next scan goes on there)."""

    offset: int
    """Start of the line in progress (the span's end when it ends with a newline)."""
    number: int
    """That line's number."""
    overlong_to: int | None = None
    """The line in progress is over MAX_LINE_BYTES and was read up to here: the next scan skips to here."""


@dataclass(frozen=True)
class _Cut:
    """The phrase lines of a span, its finished lines apart from the unfinished last one."""

    lines: tuple[Line, ...]
    """Lines that can hold a phrase, among the finished lines."""
    skipped: int
    """Finished lines over MAX_LINE_BYTES."""
    tail: _Tail
    partial: Line | None = None
    """The unfinished last line, if it can hold a phrase."""
    partial_overlong: bool = False
    partial_present: bool = False

    def all_lines(self) -> list[Line]:
        return [*self.lines, self.partial] if self.partial else list(self.lines)

    def all_skipped(self) -> int:
        return self.skipped + self.partial_overlong

    def last_number(self) -> int:
        return self.tail.number if self.partial_present else self.tail.number - 1


def _scan(
    stream: BufferedReader, start: _Tail, end: int | None, needles: Sequence[bytes], checkpoint: Checkpoint,
    keep: Keep | None = None,
) -> _Cut:
    """Numbered, cleaned lines that hold a needle (and that keep keeps), from start to end (None: the
    end of the file).

    Lines with no needle are counted, never decoded: a boot's request-log filler costs a few
    C-speed scans per block, not a Python step per line. Holds one buffer of a block and at most
    MAX_LINE_BYTES of a partial line, so a 1 GiB line without a newline costs no more.
    """
    lines: list[Line] = []
    skipped = 0
    number = start.number  # the number of the line starting at data[0]
    line_at = start.offset  # the file offset of data[0]
    position = start.offset if start.overlong_to is None else start.overlong_to
    overlong = start.overlong_to is not None  # inside a line already over MAX_LINE_BYTES: dropped up to its newline
    stream.seek(position)
    data = bytearray(MAX_LINE_BYTES + CHUNK_BYTES)
    view = memoryview(data)
    kept = 0  # data[:kept]: the partial line carried over from the last block
    span = (os.fstat(stream.fileno()).st_size if end is None else end) - position
    grep = None
    if GREP and span >= GREP_FROM_BYTES:
        with contextlib.suppress(OSError):  # grep gone since the server started: searched here instead
            grep = _Grep(GREP, needles, number, keep)
    try:
        while end is None or position < end:
            size = stream.readinto(
                view[kept : kept + (CHUNK_BYTES if end is None else min(CHUNK_BYTES, end - position))])
            if not size:
                break
            checkpoint()
            position += size
            filled = kept + size
            if overlong:
                newline = data.find(b"\n", 0, filled)
                if newline < 0:
                    continue
                skipped += 1
                number += 1
                overlong = False
                data[: filled - newline - 1] = data[newline + 1 : filled]
                filled -= newline + 1
                line_at = position - filled
                if grep:
                    grep.write(b"\n", 1, [])
            stop = data.rfind(b"\n", 0, filled) + 1
            if stop:
                overlong_lines = _overlong_lines(data, stop)
                skipped += len(overlong_lines)
                if grep:
                    grep.write(data, stop, overlong_lines)
                    number += data.count(b"\n", 0, stop)
                else:
                    number = _found_lines(data, stop, number, needles, keep, lines)
                line_at += stop
            kept = filled - stop
            if kept > MAX_LINE_BYTES:
                overlong, kept = True, 0
            elif stop:
                data[:kept] = data[stop:filled]
        if grep:
            lines = grep.finish()
            grep = None
    finally:
        if grep:
            grep.stop()
    if overlong:
        return _Cut(tuple(lines), skipped, _Tail(line_at, number, position), None, True, True)
    pending = bytes(data[:kept])
    partial = None
    if pending and any(needle in pending for needle in needles):
        partial = Line(number, clean(pending.decode("utf-8", "replace")))
        if keep is not None and not keep(partial):
            partial = None
    return _Cut(tuple(lines), skipped, _Tail(line_at, number), partial, False, bool(pending))


def _found_lines(
    data: bytearray, stop: int, number: int, needles: Sequence[bytes], keep: Keep | None, lines: list[Line]
) -> int:
    """Append the lines of data[:stop] that hold a needle (the first is line `number`) to lines; the
    number of the line after them."""
    counted_to = 0
    for begin in sorted(_line_starts(data, stop, needles)):
        number += data.count(b"\n", counted_to, begin)
        counted_to = begin
        line_end = data.find(b"\n", begin, stop)
        if line_end - begin <= MAX_LINE_BYTES:
            line = Line(number, clean(data[begin:line_end].decode("utf-8", "replace")))
            if keep is None or keep(line):
                lines.append(line)
    return number + data.count(b"\n", counted_to, stop)


# ---------------------------------------------------------------------------------------
# Searching back for a boot marker


def _line_start(stream: BufferedReader, at: int, checkpoint: Checkpoint) -> int:
    """The offset of the start of the line holding byte `at` (blocks read backwards; memrchr speed)."""
    block = bytearray(CHUNK_BYTES)
    view = memoryview(block)
    position = at
    while position > 0:
        low = max(0, position - CHUNK_BYTES)
        stream.seek(low)
        size = stream.readinto(view[: position - low])
        checkpoint()
        newline = block.rfind(b"\n", 0, size)
        if newline >= 0:
            return low + newline + 1
        position = low
    return 0


def _fits(stream: BufferedReader, line_start: int, at: int) -> bool:
    """Whether the line starting at line_start, which holds byte `at`, is at most MAX_LINE_BYTES long
    (a longer line is no ledger line: ledger.read_text skips it, and a marker on it starts no boot)."""
    if at - line_start > MAX_LINE_BYTES:
        return False
    stream.seek(at)
    window = stream.read(line_start + MAX_LINE_BYTES + 1 - at)
    return b"\n" in window or len(window) < line_start + MAX_LINE_BYTES + 1 - at  # a newline, or the file's end


def last_marker_line(
    stream: BufferedReader, marker: bytes, *, search_from: int, end: int, checkpoint: Checkpoint = no_checkpoint
) -> int | None:
    """The start of the line holding the last marker that starts in [search_from, end) and ends by
    end, on a line of at most MAX_LINE_BYTES; None if there is none. Blocks are read backwards from
    end, so the cost is the bytes from that marker to end (and back to its line's start). A marker
    split across two blocks is found: each block reads len(marker) - 1 bytes of the one after it."""
    overlap = len(marker) - 1
    block = bytearray(CHUNK_BYTES + overlap)
    view = memoryview(block)
    position = end
    while position > search_from:
        low = max(search_from, position - CHUNK_BYTES)
        stream.seek(low)
        size = stream.readinto(view[: min(end, position + overlap) - low])
        checkpoint()
        hit = block.rfind(marker, 0, size)
        if hit < 0:
            position = low
            continue
        newline = block.rfind(b"\n", 0, hit)
        line_start = low + newline + 1 if newline >= 0 else _line_start(stream, low, checkpoint)
        if _fits(stream, line_start, low + hit):
            return line_start
        position = end = line_start  # an overlong line: every marker on it is passed over
    return None


# ---------------------------------------------------------------------------------------
# The per-file index: newline and marker counts at steps, extended as the file grows


@dataclass(frozen=True)
class _Position:
    """The forward count at one offset: enough to go on counting from there."""

    offset: int
    newlines: int
    """Newlines in [0, offset)."""
    boots: int
    """Marker lines whose first marker ends at or before offset."""
    line_start: int
    """Start of the line in progress at offset."""
    marked: bool
    """That line holds a marker ending at or before offset (it was counted)."""


@dataclass(frozen=True)
class FileIndex:
    """Counts of one file's bytes [0, indexed): at every INDEX_STEP_BYTES, as a _Position each.

    Never changed once made (reads run in several threads): extending it makes a new one.
    """

    steps: tuple[array[int], ...] = field(default_factory=lambda: tuple(array("q") for _ in range(4)))
    """newlines, boots, line_start, marked at each step, a column each (offset: step number x INDEX_STEP_BYTES)."""
    last: _Position = _Position(0, 0, 0, 0, False)
    """The count at the end of what is indexed."""

    def at_step(self, k: int) -> _Position:
        newlines, boots, line_start, marked = (column[k] for column in self.steps)
        return _Position(k * INDEX_STEP_BYTES, newlines, boots, line_start, bool(marked))

    def nearest(self, offset: int) -> _Position:
        """The last counted position at or before offset (which is at most last.offset)."""
        k = offset // INDEX_STEP_BYTES
        return self.last if k >= len(self.steps[0]) or self.last.offset <= offset else self.at_step(k)


def _count_forward(
    stream: BufferedReader, start: _Position, end: int, marker: bytes, checkpoint: Checkpoint,
    record: list[_Position] | None = None, stop_at_boot: int | None = None,
) -> tuple[_Position, int | None]:
    """Count newlines and marker lines from start to end, in blocks that end at index steps.

    A marker line is counted at its newline, if it is at most MAX_LINE_BYTES long (a longer line
    starts no boot, as ledger.read_text skips it); a line holding the marker twice is one boot.
    record: where to put the position at each step crossed. stop_at_boot: stop at the marker line
    that is boot number stop_at_boot (1-based) and return its start too. Works with find/count in
    C on one reused buffer, so a 1 GiB log is counted in about a second.
    """
    overlap = len(marker) - 1
    newlines, boots, line_start, marked = start.newlines, start.boots, start.line_start, start.marked
    base = start.offset
    # joined[:shift]: the bytes before base, for a marker split across it (none can end there: too short);
    # then the block. One buffer, reused.
    joined = bytearray(overlap + CHUNK_BYTES)
    view = memoryview(joined)
    stream.seek(max(0, base - overlap))
    shift = stream.readinto(view[: base - max(0, base - overlap)])
    while base < end:
        step_end = min(end, (base // INDEX_STEP_BYTES + 1) * INDEX_STEP_BYTES)
        size = stream.readinto(view[shift : shift + min(CHUNK_BYTES, step_end - base)])
        if not size:
            break
        checkpoint()
        filled = shift + size
        origin = base - shift  # the file offset of joined[0]
        search_from = 0
        if marked:  # the marker line in progress ends at the block's first newline
            search_from = filled
            newline = joined.find(b"\n", shift, filled)
            if newline >= 0:
                marked, search_from = False, newline + 1
                if origin + newline - line_start <= MAX_LINE_BYTES:
                    boots += 1
                    if boots == stop_at_boot:
                        return _Position(origin + newline, newlines, boots, line_start, False), line_start
        while (hit := joined.find(marker, search_from, filled)) >= 0:
            newline_before = joined.rfind(b"\n", 0, hit)
            found_start = origin + newline_before + 1 if newline_before >= 0 else line_start
            newline = joined.find(b"\n", hit + len(marker), filled)
            if newline < 0:  # counted at its newline, in a later block
                marked, line_start, search_from = True, found_start, filled
                continue
            search_from = newline + 1
            if origin + newline - found_start <= MAX_LINE_BYTES:
                boots += 1
                if boots == stop_at_boot:
                    return _Position(origin + newline, newlines, boots, found_start, False), found_start
        newlines += joined.count(b"\n", shift, filled)
        last_newline = joined.rfind(b"\n", shift, filled)
        if last_newline >= 0 and not marked:
            line_start = origin + last_newline + 1
        keep = min(overlap, filled)
        joined[:keep] = joined[filled - keep : filled]
        shift = keep
        base += size
        if record is not None and base % INDEX_STEP_BYTES == 0:
            record.append(_Position(base, newlines, boots, line_start, marked))
    return _Position(base, newlines, boots, line_start, marked), None


def _extended(index: FileIndex, stream: BufferedReader, end: int, marker: bytes, checkpoint: Checkpoint) -> FileIndex:
    """index counted on up to end (a new FileIndex; index is left as it was)."""
    if index.last.offset >= end:
        return index
    steps = tuple(array("q", column) for column in index.steps)
    if not steps[0]:
        _append(steps, index.last)
    recorded: list[_Position] = []
    last, _ = _count_forward(stream, index.last, end, marker, checkpoint, record=recorded)
    for position in recorded:
        _append(steps, position)
    return FileIndex(steps, last)


def _append(steps: tuple[array[int], ...], position: _Position) -> None:
    for column, value in zip(steps, (position.newlines, position.boots, position.line_start, position.marked),
                             strict=True):
        column.append(int(value))


# ---------------------------------------------------------------------------------------
# What this process remembers of each file


@dataclass(frozen=True)
class _Identity:
    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, stream: BufferedReader) -> _Identity:
        st = os.fstat(stream.fileno())
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class _LastRead:
    """The newest boot as the last read cut it, to go on from where it stopped."""

    marker: bytes
    needles: tuple[bytes, ...]
    keep: Keep | None
    start: int
    """Byte offset of the boot's marker line; the cut's line numbers count from 1 there."""
    cut: _Cut
    size: int
    """The file's size when it was cut."""


@dataclass(frozen=True)
class _FileState:
    identity: _Identity
    seen_ns: int
    """Wall clock just before the file was last read."""
    samples: tuple[tuple[int, bytes], ...]
    """(offset, bytes) at the start, at the newest boot and before the end, as last read."""
    index: FileIndex
    marker: bytes
    last: _LastRead | None = None


_files: OrderedDict[str, _FileState] = OrderedDict()
_files_lock = threading.Lock()


def forget_files() -> None:
    """Drop every file's index and last read (tests; the next read starts afresh)."""
    with _files_lock:
        _files.clear()


def _samples(stream: BufferedReader, size: int, places: Sequence[int]) -> tuple[tuple[int, bytes], ...]:
    out = []
    for place in dict.fromkeys(max(0, min(p, size - SAMPLE_BYTES)) for p in places):
        stream.seek(place)
        out.append((place, stream.read(SAMPLE_BYTES)))
    return tuple(out)


def _same_bytes(stream: BufferedReader, samples: tuple[tuple[int, bytes], ...]) -> bool:
    for place, data in samples:
        stream.seek(place)
        if stream.read(len(data)) != data:
            return False
    return True


def _known(key: str, stream: BufferedReader, now: _Identity, marker: bytes) -> _FileState | None:
    """What is kept of the file if it still holds: same file, not shorter, sampled bytes unchanged.

    Same size and mtime read at least RACY_NS after the mtime: unchanged. Longer: grown, if the
    samples still match. Anything else (shorter, another inode, other bytes) was rotated or
    rewritten: forgotten, read afresh.
    """
    with _files_lock:
        state = _files.get(key)
    if state is None or state.marker != marker:
        return None
    old = state.identity
    if (old.device, old.inode) != (now.device, now.inode) or now.size < old.size:
        return None
    if now.size == old.size:
        unchanged = now.mtime_ns == old.mtime_ns and state.seen_ns - old.mtime_ns >= RACY_NS
        return state if unchanged else None
    return state if _same_bytes(stream, state.samples) else None


def _keep(key: str, state: _FileState, read_from: _FileState | None) -> None:
    """Remember state for the file. read_from: the state the read began with (None: the file was new or
    changed); an index counted further since then (in the background, of the same file) is kept."""
    with _files_lock:
        old = _files.get(key)
        if (read_from is not None and old is not None and old is not read_from
                and old.identity.inode == state.identity.inode
                and state.index.last.offset < old.index.last.offset <= state.identity.size):
            state = replace(state, index=old.index)
        _files[key] = state
        _files.move_to_end(key)
        while len(_files) > MAX_FILES:
            _files.popitem(last=False)


# ---------------------------------------------------------------------------------------
# Reading


@dataclass(frozen=True)
class CutBoot:
    """One boot cut out of a file: its phrase lines, and where it lies."""

    lines: tuple[Line, ...]
    index: int
    """1 = the oldest; or, when the boots before were not counted, -1 = the newest."""
    boots_seen: int | None
    first_line: int
    last_line: int
    skipped_long_lines: int
    lines_from_byte: int | None
    """None: line numbers are the file's. Else they count from 1 at the line starting at this offset."""


def cut_boot(
    path: Path, *, boot: int = -1, marker: bytes = BOOT_MARKER.encode(), needles: Sequence[bytes] = DEFAULT_NEEDLES,
    keep: Keep | None = None, source: str, checkpoint: Checkpoint = no_checkpoint,
) -> CutBoot | None:
    """The lines of boot `boot` of the file that hold a needle and that keep keeps (None: all of them),
    the boot's marker line always; None if the file holds no marker.

    The boot starts at a line holding marker; any engine's marker and keywords can be passed.
    """
    needles = tuple(dict.fromkeys([marker, *needles]))
    key = str(path)
    with path.open("rb") as stream:
        seen_ns = time.time_ns()
        now = _Identity.of(stream)
        if now.size == 0:
            raise LedgerError(f"{source}: the log is empty; nothing was booted or the wrong file was named")
        state = _known(key, stream, now, marker)
        index = state.index if state else FileIndex()
        last = state.last if state and state.last and (state.last.needles, state.last.keep) == (needles, keep) else None
        reader = _Reader(stream, now.size, marker, needles, keep, index, checkpoint)
        if boot == -1:
            start, cut = reader.newest(last)
            kept = _LastRead(marker, needles, keep, start, cut, now.size) if start is not None and cut else None
        else:
            start, cut = reader.older(boot, source)
            kept = last
        found = None if start is None or cut is None else reader.numbered(start, cut)
        _keep(key, _FileState(now, seen_ns, _samples(stream, now.size, (0, start or 0, now.size)), reader.index,
                              marker, kept), state)
        return found


def _keep_line(marker: str, keep: Keep, line: Line) -> bool:
    return marker in line.text or keep(line)


class _Reader:
    """One read of one open file: the index as it grows during the read, and the steps of a read."""

    def __init__(self, stream: BufferedReader, size: int, marker: bytes, needles: tuple[bytes, ...], keep: Keep | None,
                 index: FileIndex, checkpoint: Checkpoint) -> None:
        self.stream, self.size, self.marker, self.needles = stream, size, marker, needles
        self.keep = None if keep is None else functools.partial(_keep_line, marker.decode("utf-8", "replace"), keep)
        self.index, self.checkpoint = index, checkpoint
        self.boots_after = 0
        """Markers found after the boot read (boot=-k: k - 1)."""

    def newest(self, last: _LastRead | None) -> tuple[int | None, _Cut | None]:
        """The newest boot: the last read's lines, and only what was added since if no marker was."""
        search_from = 0
        if last is not None and last.start < last.cut.tail.offset:  # (else its marker line was unfinished)
            if last.size == self.size:
                return last.start, last.cut
            # The last read's search back found no marker after its boot's: search only what was added.
            search_from = max(last.cut.tail.offset, last.size - len(self.marker) + 1)
        start = last_marker_line(self.stream, self.marker, search_from=search_from, end=self.size,
                                 checkpoint=self.checkpoint)
        if start is None and last is not None:
            more = _scan(self.stream, last.cut.tail, None, self.needles, self.checkpoint, self.keep)
            return last.start, replace(more, lines=last.cut.lines + more.lines, skipped=last.cut.skipped + more.skipped)
        if start is None:
            return None, None
        return start, _scan(self.stream, _Tail(start, 1), None, self.needles, self.checkpoint, self.keep)

    def older(self, boot: int, source: str) -> tuple[int | None, _Cut | None]:
        """Any boot but the newest: counted back from the end (-k), or on the whole file's index (k)."""
        if boot < -1:
            start = stop = self.size
            for found in range(-boot):
                before = last_marker_line(self.stream, self.marker, search_from=0, end=start,
                                          checkpoint=self.checkpoint)
                if before is None:
                    if found:
                        select_boot(boot, found, source)  # raises: the file holds fewer boots
                    return None, None
                stop, start = start, before
            self.boots_after = -boot - 1
            return start, _scan(self.stream, _Tail(start, 1), stop, self.needles, self.checkpoint, self.keep)
        self.index = _extended(self.index, self.stream, self.size, self.marker, self.checkpoint)
        last = self.index.last  # its line in progress is the file's last, unfinished: a boot if it fits
        total = last.boots + (last.marked and self.size - last.line_start <= MAX_LINE_BYTES)
        if total == 0:
            return None, None
        position = select_boot(boot, total, source)
        start = self._boot_start(position + 1)
        end = self._boot_start(position + 2) if position + 1 < total else None
        self.boots_after = total - position - 1
        return start, _scan(self.stream, _Tail(start, 1), end, self.needles, self.checkpoint, self.keep)

    def _boot_start(self, number: int) -> int:
        """The line start of boot `number` (1-based), from the index's nearest step before it."""
        if number > self.index.last.boots:  # the file's last line, unfinished
            return self.index.last.line_start
        k = max(0, bisect.bisect_left(self.index.steps[1], number) - 1)
        begin = self.index.at_step(k) if self.index.steps[0] else FileIndex().last
        _, start = _count_forward(self.stream, begin, self.size, self.marker, self.checkpoint, stop_at_boot=number)
        assert start is not None
        return start

    def numbered(self, start: int, cut: _Cut) -> CutBoot:
        """The cut with the file's line numbers where they come cheap (see the module's docstring)."""
        lines, last_line = cut.all_lines(), cut.last_number()
        if start - self.index.last.offset <= COUNT_BEFORE_BYTES:
            self.index = _extended(self.index, self.stream, start, self.marker, self.checkpoint)
        if start > self.index.last.offset:
            index = -1 - self.boots_after
            return CutBoot(tuple(lines), index, None, 1, last_line, cut.all_skipped(), start)
        before, _ = _count_forward(self.stream, self.index.nearest(start), start, self.marker, self.checkpoint)
        shift = before.newlines
        numbered = tuple(Line(line.number + shift, line.text) for line in lines)
        return CutBoot(numbered, before.boots + 1, before.boots + 1 + self.boots_after, 1 + shift, last_line + shift,
                       cut.all_skipped(), None)


def index_file(path: Path, *, marker: bytes = BOOT_MARKER.encode(), checkpoint: Checkpoint = no_checkpoint) -> None:
    """Count the file's lines and boots up to the newest boot this process read of it (or to its end).

    One pass over the bytes not yet indexed; later reads of the file give the file's own line
    numbers. sources.py runs it in the background after a read that had to count from the boot.
    """
    key = str(path)
    with path.open("rb") as stream:
        seen_ns = time.time_ns()
        now = _Identity.of(stream)
        state = _known(key, stream, now, marker)
        index = state.index if state else FileIndex()
        end = state.last.start if state and state.last else now.size
        index = _extended(index, stream, end, marker, checkpoint)
        fresh = _FileState(now, seen_ns, _samples(stream, now.size, (0, now.size)), index, marker)
    with _files_lock:  # a read may have kept a newer state meanwhile: give it the index
        current = _files.get(key)
        if state is None or current is None:
            _files[key] = fresh
        elif current is state:
            _files[key] = replace(state, index=index)
        elif current.identity.inode == now.inode and current.index.last.offset < index.last.offset <= now.size:
            _files[key] = replace(current, index=index)


def read_file(path: Path, *, source: str, boot: int = -1, checkpoint: Checkpoint = no_checkpoint) -> Boot:
    """Read one boot of a ledger file from its end: memory bounded whatever the file's size."""
    cut = cut_boot(path, boot=boot, keep=_usable, source=source, checkpoint=checkpoint)
    if cut is None:
        return _read_unmarked(path, source=source, boot=boot, checkpoint=checkpoint)
    parsed = parse_boot(cut.lines, source=source, index=cut.index, boots_seen=cut.boots_seen, checkpoint=checkpoint)
    return replace(parsed, last_line=cut.last_line, skipped_long_lines=cut.skipped_long_lines,
                   lines_from_byte=cut.lines_from_byte)


def _usable(line: Line) -> bool:
    """A line parse_boot keeps something of: a phrase, or a budget phrase's words (a near miss)."""
    return bool(match_line(line)) or any(PHRASES[key].keyword in line.text for key in WATCHED_PHRASES)


def _read_unmarked(path: Path, *, source: str, boot: int, checkpoint: Checkpoint) -> Boot:
    """A file with no boot marker: the phrase lines of the whole file, split at runs of echoed flags."""
    with path.open("rb") as stream:
        cut = _scan(stream, _Tail(0, 1), None, DEFAULT_NEEDLES, checkpoint)
    kept = cut.all_lines()
    if not kept:
        note = f" ({cut.all_skipped()} line(s) over {MAX_LINE_BYTES} bytes skipped)" if cut.all_skipped() else ""
        raise LedgerError(f"{source}: no radiance ledger phrase in the file{note}; point the tool at the boot log")
    return parse_lines(kept, source=source, boot=boot, skipped=cut.all_skipped(), checkpoint=checkpoint)
