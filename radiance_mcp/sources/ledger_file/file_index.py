"""The per-file index (I/O): newline and boot-marker counts every INDEX_STEP_BYTES, extended as the file grows.

Counting forward (``_count_forward``) is the one way this package learns a file's line and boot
numbers: it extends an index (``_extended``), finds where boot k starts (``_boot_start``) and
counts the lines before an offset (``_counted_to``), from the index's nearest step. A FileIndex
is never changed once made (reads run in several threads): extending it makes a new one. Tests
patch INDEX_STEP_BYTES and ``_count_forward`` here; blocks are blocks.CHUNK_BYTES.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass, field
from io import BufferedReader

from radiance_mcp.core.boot import StopCheck
from radiance_mcp.core.ledger import MAX_LINE_BYTES
from radiance_mcp.sources.ledger_file import blocks

INDEX_STEP_BYTES = 1024 * 1024
"""The per-file index keeps its counts every this many bytes: finding a line number costs at most this much reading."""



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
    stream: BufferedReader, start: _Position, end: int, marker: bytes, checkpoint: StopCheck,
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
    joined = bytearray(overlap + blocks.CHUNK_BYTES)
    view = memoryview(joined)
    stream.seek(max(0, base - overlap))
    shift = stream.readinto(view[: base - max(0, base - overlap)])
    while base < end:
        step_end = min(end, (base // INDEX_STEP_BYTES + 1) * INDEX_STEP_BYTES)
        size = stream.readinto(view[shift : shift + min(blocks.CHUNK_BYTES, step_end - base)])
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


def _extended(index: FileIndex, stream: BufferedReader, end: int, marker: bytes, checkpoint: StopCheck) -> FileIndex:
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


def _boot_start(index: FileIndex, stream: BufferedReader, size: int, marker: bytes, checkpoint: StopCheck,
                number: int) -> int:
    """The line start of boot `number` (1-based), from the index's nearest step before it."""
    if number > index.last.boots:  # the file's last line, unfinished
        return index.last.line_start
    k = max(0, bisect.bisect_left(index.steps[1], number) - 1)
    begin = index.at_step(k) if index.steps[0] else FileIndex().last
    _, start = _count_forward(stream, begin, size, marker, checkpoint, stop_at_boot=number)
    assert start is not None
    return start


def _counted_to(index: FileIndex, stream: BufferedReader, offset: int, marker: bytes,
                checkpoint: StopCheck) -> _Position:
    """The count at offset (at most index.last.offset), from the index's nearest step before it."""
    before, _ = _count_forward(stream, index.nearest(offset), offset, marker, checkpoint)
    return before
