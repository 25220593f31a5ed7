"""Reading a boot out of a ledger file: streaming, bounded, in fixed chunks (I/O).

The pure reader (radiance_mcp.ledger) takes text; this module feeds it from a file without
holding the file: one forward pass indexes where each boot starts, then only the chosen
boot's lines that can hold a phrase are decoded. Memory stays constant whatever the file's
size, and the caller's checkpoint (a cancel, a time limit) runs per chunk. Imports point one
way: this module reads ledger, never the reverse.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from radiance_mcp.errors import LedgerError
from radiance_mcp.ledger import (
    BOOT_MARKER,
    KEYWORDS,
    MAX_LINE_BYTES,
    Boot,
    Checkpoint,
    Line,
    clean,
    no_checkpoint,
    parse_boot,
    parse_lines,
    select_boot,
)

CHUNK_BYTES = 1024 * 1024
"""A file is read in chunks of this size; the reader's checkpoint (a cancel, a time limit, a turn
for other calls) runs per chunk, so a chunk is small enough to read in a few ms."""


@dataclass(frozen=True)
class _BootIndex:
    offsets: list[tuple[int, int]]
    """(byte offset, line number) of each 'radiance boot' line."""
    size_bytes: int


def _index_boots(stream: io.BufferedIOBase, checkpoint: Checkpoint) -> _BootIndex:
    """One forward pass in fixed chunks: where each boot marker line starts, and its line number.

    Works in bytes with find/count on one reused buffer (C speed, no copy of the data, constant
    memory), so a 1 GiB log of many boots is indexed in under twice the time grep takes to
    count it. A line holding the marker twice starts one boot, as read_text counts it.
    """
    marker = BOOT_MARKER.encode()
    overlap = len(marker) - 1
    offsets: list[tuple[int, int]] = []
    buffer = bytearray(CHUNK_BYTES)
    base = 0  # file offset of buffer[0]
    line_no = 1  # number of the line in progress at buffer[0]
    line_start = 0  # file offset where that line starts
    marked = False  # that line already holds a marker
    tail = b""  # the last bytes before buffer[0], for a marker split across two reads
    while size := stream.readinto(buffer):
        checkpoint()
        if not marked and tail:
            at = (tail + bytes(buffer[: min(overlap, size)])).find(marker)
            if 0 <= at < len(tail):  # starts before this block and ends in it (earlier ones were found)
                offsets.append((line_start, line_no))
                marked = True
        search_from, last_hit = 0, -1
        if marked:
            first_nl = buffer.find(b"\n", 0, size)
            search_from = size if first_nl < 0 else first_nl + 1
        counted_to, number = 0, line_no
        while (hit := buffer.find(marker, search_from, size)) >= 0:
            number += buffer.count(b"\n", counted_to, hit)
            counted_to = last_hit = hit
            nl_before = buffer.rfind(b"\n", 0, hit)
            offsets.append((base + nl_before + 1 if nl_before >= 0 else line_start, number))
            nl_after = buffer.find(b"\n", hit, size)
            search_from = size if nl_after < 0 else nl_after + 1
        line_no = number + buffer.count(b"\n", counted_to, size)
        last_nl = buffer.rfind(b"\n", 0, size)
        if last_nl >= 0:
            line_start = base + last_nl + 1
            marked = last_hit > last_nl
        else:
            marked = marked or last_hit >= 0
        tail = bytes(buffer[size - overlap : size]) if size >= overlap else (tail + bytes(buffer[:size]))[-overlap:]
        base += size
    return _BootIndex(offsets, base)


_NEEDLES: tuple[bytes, ...] = tuple(dict.fromkeys([*(k.encode() for k in KEYWORDS), b"\x1b"]))
"""A line can hold a phrase only if it holds a keyword, or an ANSI escape (which may split one)."""


@dataclass
class _Scan:
    skipped: int = 0
    """Lines over MAX_LINE_BYTES."""
    last_number: int = 0
    """Number of the last line read."""


def _count_overlong(data: bytes, end: int) -> int:
    """Lines over MAX_LINE_BYTES in data[:end] (which ends with a newline), in about end / MAX_LINE_BYTES steps."""
    count, start = 0, 0
    while end - start > MAX_LINE_BYTES:
        newline = data.rfind(b"\n", start, start + MAX_LINE_BYTES + 1)
        if newline >= 0:  # every line starting before it is short; the next may not be
            start = newline + 1
            continue
        count += 1
        start = data.find(b"\n", start + MAX_LINE_BYTES + 1, end) + 1
    return count


def _phrase_lines_of(data: bytes, end: int, number: int, scan: _Scan) -> Iterator[Line]:
    """The lines of data[:end] (complete lines; the first is line `number`) that can hold a phrase."""
    starts: set[int] = set()
    for needle in _NEEDLES:
        at = data.find(needle, 0, end)
        while at >= 0:
            starts.add(data.rfind(b"\n", 0, at) + 1)
            at = data.find(needle, data.find(b"\n", at, end) + 1, end)
    scan.skipped += _count_overlong(data, end)
    counted_to = 0
    for start in sorted(starts):
        number += data.count(b"\n", counted_to, start)
        counted_to = start
        stop = data.find(b"\n", start, end)
        if stop - start <= MAX_LINE_BYTES:
            yield Line(number, clean(data[start:stop].decode("utf-8", "replace")))


def _phrase_lines(
    stream: BinaryIO, first_number: int, end_offset: int | None, scan: _Scan, checkpoint: Checkpoint
) -> Iterator[Line]:
    """Numbered, cleaned lines that can hold a phrase, from the stream's position to end_offset.

    Lines with no keyword are counted, never decoded: a boot's request-log filler costs a few
    C-speed scans per chunk, not a Python step per line. Holds one chunk and at most
    MAX_LINE_BYTES of a partial line, so a 1 GiB line without a newline costs no more.
    """
    number = first_number  # the number of the line starting at data[0]
    position = stream.tell()
    pending = b""
    overlong = False  # inside a line already over MAX_LINE_BYTES: dropped up to its newline
    while end_offset is None or position < end_offset:
        block = stream.read(CHUNK_BYTES if end_offset is None else min(CHUNK_BYTES, end_offset - position))
        if not block:
            break
        checkpoint()
        position += len(block)
        if overlong:
            newline = block.find(b"\n")
            if newline < 0:
                continue
            scan.skipped += 1
            number += 1
            overlong, block = False, block[newline + 1 :]
        data = pending + block
        end = data.rfind(b"\n") + 1
        if end:
            yield from _phrase_lines_of(data, end, number, scan)
            number += data.count(b"\n", 0, end)
        pending = data[end:]
        if len(pending) > MAX_LINE_BYTES:
            overlong, pending = True, b""
    if overlong:
        scan.skipped += 1
    elif pending and any(needle in pending for needle in _NEEDLES):
        yield Line(number, clean(pending.decode("utf-8", "replace")))
    scan.last_number = number if overlong or pending else number - 1


def read_file(path: Path, *, source: str, boot: int = -1, checkpoint: Checkpoint = no_checkpoint) -> Boot:
    """Read one boot of a ledger file, streaming: constant memory whatever the file's size."""
    with path.open("rb") as stream:
        index = _index_boots(stream, checkpoint)
        if index.size_bytes == 0:
            raise LedgerError(f"{source}: the log is empty; nothing was booted or the wrong file was named")
        scan = _Scan()
        if not index.offsets:
            # No boot marker: split the phrase lines of the whole file at runs of echoed flags.
            stream.seek(0)
            kept = list(_phrase_lines(stream, 1, None, scan, checkpoint))
            if not kept:
                note = f" ({scan.skipped} line(s) over {MAX_LINE_BYTES} bytes skipped)" if scan.skipped else ""
                raise LedgerError(
                    f"{source}: no radiance ledger phrase in the file{note}; point the tool at the boot log"
                )
            return parse_lines(kept, source=source, boot=boot, skipped=scan.skipped, checkpoint=checkpoint)
        position = select_boot(boot, len(index.offsets), source)
        start, number = index.offsets[position]
        end = index.offsets[position + 1][0] if position + 1 < len(index.offsets) else None
        stream.seek(start)
        parsed = parse_boot(_phrase_lines(stream, number, end, scan, checkpoint), source=source, index=position + 1,
                            boots_seen=len(index.offsets), checkpoint=checkpoint)
        return replace(parsed, last_line=scan.last_number, skipped_long_lines=scan.skipped)
