"""The reads callers make of a ledger file (I/O): one boot cut out, parsed, or the file indexed.

``cut_boot`` cuts boot k's phrase lines out of a file (any engine's marker and keywords),
``read_file`` parses them into a core.boot.Boot, ``index_file`` counts a file's lines up to its
newest boot; each opens the file with ``open_ledger`` (a regular file, never waited on; a checked
path with no symlink followed). A read goes on from what file_state remembers of the file,
searches and scans with blocks, and numbers the lines with file_index (see the package's
docstring for the costs).
Tests patch COUNT_BEFORE_BYTES and ``_scan`` here.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import replace
from io import BufferedReader
from pathlib import Path

from radiance_mcp.core.boot import Boot, CutBoot, Line, StopCheck, never_stop
from radiance_mcp.core.errors import LedgerError
from radiance_mcp.core.ledger import (
    BOOT_MARKER,
    MAX_LINE_BYTES,
    PHRASES,
    WATCHED_PHRASES,
    match_line,
    parse_boot,
    parse_lines,
    select_boot,
)
from radiance_mcp.sources.ledger_file.blocks import DEFAULT_NEEDLES, Keep, _Cut, _scan, _Tail, last_marker_line
from radiance_mcp.sources.ledger_file.file_index import FileIndex, _boot_start, _counted_to, _extended
from radiance_mcp.sources.ledger_file.file_state import (
    _FileState,
    _Identity,
    _keep,
    _keep_index,
    _known,
    _LastRead,
    _samples,
)

COUNT_BEFORE_BYTES = 16 * 1024 * 1024
"""A boot whose preceding bytes are at most this many (beyond what is indexed) gets the file's line
numbers at once: counting them costs a few ms. Past that its lines count from its marker line."""


_WALK_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""A directory on a path opened with no symlink followed (O_PATH: it needs no read permission, as a lookup)."""


def open_ledger(path: Path, *, follow_symlinks: bool = True) -> BufferedReader:
    """path opened for reading, if it is a regular file (an OSError as open() raises it otherwise).

    Security: the file is opened without blocking and the opened file is checked, so a FIFO put
    in its place after a caller's check is never waited on (it would wait for a writer for ever).
    follow_symlinks=False, for a path resolved and checked against the log roots: each part of it
    is opened in the one before without following a symlink, so a directory on it flipped to a
    symlink out of the roots after the check is refused (ELOOP, ENOTDIR), never read through.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if follow_symlinks:
        fd = os.open(path, flags)
    else:
        parent = os.open(path.anchor or "/", _WALK_FLAGS)
        try:
            for part in path.parts[1:-1]:
                child = os.open(part, _WALK_FLAGS, dir_fd=parent)
                os.close(parent)
                parent = child
            fd = os.open(path.name, flags | os.O_NOFOLLOW, dir_fd=parent)
        finally:
            os.close(parent)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def cut_boot(
    path: Path, *, boot: int = -1, marker: bytes = BOOT_MARKER.encode(), needles: Sequence[bytes] = DEFAULT_NEEDLES,
    keep: Keep | None = None, source: str, checkpoint: StopCheck = never_stop, follow_symlinks: bool = True,
) -> CutBoot | None:
    """The lines of boot `boot` of the file that hold a needle and that keep keeps (None: all of them),
    the boot's marker line always; None if the file holds no marker.

    The boot starts at a line holding marker; any engine's marker and keywords can be passed.
    follow_symlinks: as open_ledger's.
    """
    needles = tuple(dict.fromkeys([marker, *needles]))
    key = str(path)
    with open_ledger(path, follow_symlinks=follow_symlinks) as stream:
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
        samples = _samples(stream, now.size, (0, start or 0, now.size), state)
        _keep(key, _FileState(now, seen_ns, samples, reader.index, marker, kept), state)
        return found


def _keep_line(marker: str, keep: Keep, line: Line) -> bool:
    return marker in line.text or keep(line)


class _Reader:
    """One read of one open file: the index as it grows during the read, and the steps of a read."""

    def __init__(self, stream: BufferedReader, size: int, marker: bytes, needles: tuple[bytes, ...], keep: Keep | None,
                 index: FileIndex, checkpoint: StopCheck) -> None:
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
        start_of = functools.partial(_boot_start, self.index, self.stream, self.size, self.marker, self.checkpoint)
        start = start_of(position + 1)
        end = start_of(position + 2) if position + 1 < total else None
        self.boots_after = total - position - 1
        return start, _scan(self.stream, _Tail(start, 1), end, self.needles, self.checkpoint, self.keep)

    def numbered(self, start: int, cut: _Cut) -> CutBoot:
        """The cut with the file's line numbers where they come cheap (see the package's docstring)."""
        lines, last_line = cut.all_lines(), cut.last_number()
        if start - self.index.last.offset <= COUNT_BEFORE_BYTES:
            self.index = _extended(self.index, self.stream, start, self.marker, self.checkpoint)
        if start > self.index.last.offset:
            index = -1 - self.boots_after
            return CutBoot(index, None, tuple(lines), cut.all_skipped(), 1, last_line, lines_from_byte=start,
                           first_byte=start)
        before = _counted_to(self.index, self.stream, start, self.marker, self.checkpoint)
        shift = before.newlines
        numbered = tuple(Line(line.number + shift, line.text) for line in lines)
        return CutBoot(before.boots + 1, before.boots + 1 + self.boots_after, numbered, cut.all_skipped(), 1 + shift,
                       last_line + shift, first_byte=start)


def index_file(path: Path, *, marker: bytes = BOOT_MARKER.encode(), checkpoint: StopCheck = never_stop,
               follow_symlinks: bool = True) -> None:
    """Count the file's lines and boots up to the newest boot this process read of it (or to its end).

    One pass over the bytes not yet indexed; later reads of the file give the file's own line
    numbers. sources/ledgers.py runs it in the background after a read that had to count from the boot.
    """
    key = str(path)
    with open_ledger(path, follow_symlinks=follow_symlinks) as stream:
        seen_ns = time.time_ns()
        now = _Identity.of(stream)
        state = _known(key, stream, now, marker)
        index = state.index if state else FileIndex()
        end = state.last.start if state and state.last else now.size
        index = _extended(index, stream, end, marker, checkpoint)
        fresh = _FileState(now, seen_ns, _samples(stream, now.size, (0, now.size), state), index, marker)
    _keep_index(key, state, fresh)


def read_file(path: Path, *, source: str, boot: int = -1, checkpoint: StopCheck = never_stop,
              follow_symlinks: bool = True) -> Boot:
    """Read one boot of a ledger file from its end: memory bounded whatever the file's size.

    follow_symlinks: as open_ledger's.
    """
    cut = cut_boot(path, boot=boot, keep=_usable, source=source, checkpoint=checkpoint,
                   follow_symlinks=follow_symlinks)
    if cut is None:
        return _read_unmarked(path, source=source, boot=boot, checkpoint=checkpoint, follow_symlinks=follow_symlinks)
    parsed = parse_boot(cut.lines, source=source, index=cut.index, boots_seen=cut.boots_seen, checkpoint=checkpoint)
    return replace(parsed, last_line=cut.last_line, skipped_long_lines=cut.skipped_long_lines,
                   lines_from_byte=cut.lines_from_byte, first_byte=cut.first_byte)


def _usable(line: Line) -> bool:
    """A line parse_boot keeps something of: a phrase, or a budget phrase's words (a near miss)."""
    return bool(match_line(line)) or any(PHRASES[key].keyword in line.text for key in WATCHED_PHRASES)


def _read_unmarked(path: Path, *, source: str, boot: int, checkpoint: StopCheck, follow_symlinks: bool) -> Boot:
    """A file with no boot marker: the phrase lines of the whole file, split at runs of echoed flags."""
    with open_ledger(path, follow_symlinks=follow_symlinks) as stream:
        cut = _scan(stream, _Tail(0, 1), None, DEFAULT_NEEDLES, checkpoint)
    kept = cut.all_lines()
    if not kept:
        note = f" ({cut.all_skipped()} line(s) over {MAX_LINE_BYTES} bytes skipped)" if cut.all_skipped() else ""
        raise LedgerError(f"{source}: no radiance ledger phrase in the file{note}; point the tool at the boot log")
    return parse_lines(kept, source=source, boot=boot, skipped=cut.all_skipped(), checkpoint=checkpoint)
