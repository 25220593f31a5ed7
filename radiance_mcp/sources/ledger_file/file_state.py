"""What this process remembers of each ledger file (I/O): its identity, index and last read.

Kept for the MAX_FILES most recent files within MAX_KEPT_BYTES in all, keyed by path (a fleet of
1,000 local ledgers re-read every one on every call when 64 files were kept). A file is known again (``_known``)
while it is the same file (device and inode), not shorter, and its sampled bytes are unchanged:
same size and mtime read at least RACY_NS after the mtime is unchanged; longer is grown
(appended). Anything else was rotated or rewritten and is read and indexed afresh. Reads run in
several threads: one lock guards the table, and an index counted further meanwhile is kept.
"""

from __future__ import annotations

import os
import threading
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from io import BufferedReader

from radiance_mcp.core.boot import lines_bytes
from radiance_mcp.sources.ledger_file.blocks import SAMPLE_BYTES, Keep, _Cut
from radiance_mcp.sources.ledger_file.file_index import FileIndex

RACY_NS = 2_000_000_000
"""A file modified this close to a read may change again within its mtime's granularity (2 s on some
file systems): its next read does not trust an unchanged size and mtime."""
WHOLE_BYTES = 4 * 1024 * 1024
"""A grown file is an append if the bytes it had are as they were: compared whole up to this size
(about 1 ms a MiB), beyond it at SAMPLE_PLACES places (about 3 ms on a 1 GiB file)."""
SAMPLE_PLACES = 1024
"""Places of SAMPLE_BYTES a larger grown file is compared at: an append leaves them all as they were, a
rewrite in place that grew past the old size changes those after its first changed byte, unless it
keeps every byte's offset."""
MAX_FILES = 4096
"""Files whose index and last read are kept at most: every ledger of a fleet of a few thousand services; the least
recently read go first."""
MAX_KEPT_BYTES = 64 * 1024 * 1024
"""The estimated memory of all that is kept (``_state_bytes``); past it the least recently read go first. A
boot of the example's size (27 phrase lines) is about 21 KiB: about 3,000 files fit."""
STATE_BYTES = 2048
"""A kept file's cost beside its last read's lines and its index: its identity, samples and records."""



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
    samples: _Samples
    """The bytes the file held when it was last read (a CRC of them, whole or sampled)."""
    index: FileIndex
    marker: bytes
    last: _LastRead | None = None


_files: OrderedDict[str, _FileState] = OrderedDict()
_files_lock = threading.Lock()
_kept_bytes = 0
"""_state_bytes summed over _files."""


def forget_files() -> None:
    """Drop every file's index and last read (tests; the next read starts afresh)."""
    global _kept_bytes
    with _files_lock:
        _files.clear()
        _kept_bytes = 0


def _state_bytes(state: _FileState) -> int:
    """The estimated memory of what is kept of one file: its last read's lines (core.boot.lines_bytes), 32 bytes
    per index step, STATE_BYTES for the rest."""
    lines = lines_bytes(state.last.cut.all_lines()) if state.last is not None else 0
    return STATE_BYTES + lines + 32 * len(state.index.steps[0])


def _put(key: str, state: _FileState) -> None:
    """Keep state as the file's, the most recent; then drop the least recent past MAX_FILES or MAX_KEPT_BYTES
    (under _files_lock)."""
    global _kept_bytes
    old = _files.pop(key, None)
    _kept_bytes += _state_bytes(state) - (_state_bytes(old) if old is not None else 0)
    _files[key] = state
    while len(_files) > MAX_FILES or (_kept_bytes > MAX_KEPT_BYTES and len(_files) > 1):
        _kept_bytes -= _state_bytes(_files.popitem(last=False)[1])


@dataclass(frozen=True)
class _Samples:
    """The file as last read: the whole of it up to WHOLE_BYTES, else SAMPLE_PLACES evenly spread places
    of SAMPLE_BYTES and the given ones (its start, its newest boot, its end)."""

    size: int
    places: tuple[int, ...]
    """The given places (a few): the windows follow from them and the size, so a kept file holds no list of them."""
    crc: int
    """zlib.crc32 of their bytes, in order: a test of change, not a seal (who can write the file can write anything)."""

    @property
    def windows(self) -> tuple[tuple[int, int], ...]:
        """(offset, length) of each place."""
        if self.size <= WHOLE_BYTES:
            return ((0, self.size),)
        stride = -(-self.size // SAMPLE_PLACES)
        starts = sorted({max(0, min(p, self.size - SAMPLE_BYTES))
                         for p in (*range(0, self.size, stride), *self.places)})
        return tuple((start, min(SAMPLE_BYTES, self.size - start)) for start in starts)


def _samples(stream: BufferedReader, size: int, places: Sequence[int], known: _FileState | None) -> _Samples:
    """The file's samples now: known's if the file is as known read it (same size), else taken afresh."""
    if known is not None and known.identity.size == size:
        return known.samples
    fresh = _Samples(size, tuple(places), 0)
    return replace(fresh, crc=_crc(stream, fresh.windows))


def _crc(stream: BufferedReader, windows: Sequence[tuple[int, int]]) -> int:
    crc, fd = 0, stream.fileno()
    for place, length in windows:
        crc = zlib.crc32(os.pread(fd, length, place), crc)
    return crc


def _same_bytes(stream: BufferedReader, samples: _Samples) -> bool:
    return _crc(stream, samples.windows) == samples.crc


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
        _put(key, state)


def _keep_index(key: str, state: _FileState | None, fresh: _FileState) -> None:
    """Remember fresh.index, counted on from state (None: the file was new or changed); fresh, the file
    as counted, is kept if nothing is. A read may have kept a newer state meanwhile: it gets the index."""
    index, now = fresh.index, fresh.identity
    with _files_lock:
        current = _files.get(key)
        if state is None or current is None:
            _put(key, fresh)
        elif current is state:
            _put(key, replace(state, index=index))
        elif current.identity.inode == now.inode and current.index.last.offset < index.last.offset <= now.size:
            _put(key, replace(current, index=index))
