"""Searching a ledger file in blocks (I/O): the phrase lines of a span, and boot markers backwards.

A forward scan (``_scan``) reads a span of lines a block (CHUNK_BYTES) at a time and decodes
only the lines that hold a needle (a phrase keyword, the marker, an ANSI escape): found by
`grep -F` in a child process in a span of GREP_FROM_BYTES or more, else here by memchr and
bytes.find. ``last_marker_line`` searches backwards from an offset for the last boot marker
line. Both hold one block and at most MAX_LINE_BYTES of a partial line, whatever the file holds;
lines over MAX_LINE_BYTES are counted and skipped, as ledger.read_text does. Tests patch
CHUNK_BYTES, GREP and GREP_FROM_BYTES here (file_index reads CHUNK_BYTES from here too).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from io import BufferedReader

from radiance_mcp.core.boot import Line, StopCheck, never_stop
from radiance_mcp.core.ledger import KEYWORDS, MAX_LINE_BYTES, clean

CHUNK_BYTES = 1024 * 1024
"""A file is read in blocks of this size; the reader's checkpoint (a cancel, a time limit, a turn
for other calls) runs per block, so a block is small enough to read in a few ms."""
SAMPLE_BYTES = 4096
"""Bytes compared at each sampled place to tell a file that only grew from one that was rewritten
(file_state), and sampled at each end of a block to plan its needle search."""

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
        import subprocess  # here: a small ledger, read by Python alone, never loads it

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
    stream: BufferedReader, start: _Tail, end: int | None, needles: Sequence[bytes], checkpoint: StopCheck,
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


def _line_start(stream: BufferedReader, at: int, checkpoint: StopCheck) -> int:
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
    stream: BufferedReader, marker: bytes, *, search_from: int, end: int, checkpoint: StopCheck = never_stop
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
