"""What this process remembers of each ledger file (I/O): its identity, index and last read.

Kept for the MAX_FILES most recent files, keyed by path. A file is known again (``_known``)
while it is the same file (device and inode), not shorter, and its sampled bytes are unchanged:
same size and mtime read at least RACY_NS after the mtime is unchanged; longer is grown
(appended). Anything else was rotated or rewritten and is read and indexed afresh. Reads run in
several threads: one lock guards the table, and an index counted further meanwhile is kept.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from io import BufferedReader

from radiance_mcp.ledger_file.blocks import SAMPLE_BYTES, Keep, _Cut
from radiance_mcp.ledger_file.file_index import FileIndex

RACY_NS = 2_000_000_000
"""A file modified this close to a read may change again within its mtime's granularity (2 s on some
file systems): its next read does not trust an unchanged size and mtime."""
SAMPLE_PLACES = 1024
"""Places a grown file is compared at with what was read of it (a few ms on a 1 GiB file): an append
leaves them all as they were, a rewrite in place that grew past the old size changes one of them
(a file of at most SAMPLE_PLACES x SAMPLE_BYTES, 4 MiB, is compared whole)."""
MAX_FILES = 64
"""Files whose index and last read are kept (a few KiB each, plus 32 bytes per MiB); least recent go first."""



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
    """A digest of the bytes the file held at its sampled places when it was last read."""
    index: FileIndex
    marker: bytes
    last: _LastRead | None = None


_files: OrderedDict[str, _FileState] = OrderedDict()
_files_lock = threading.Lock()


def forget_files() -> None:
    """Drop every file's index and last read (tests; the next read starts afresh)."""
    with _files_lock:
        _files.clear()


@dataclass(frozen=True)
class _Samples:
    """The file as last read, at SAMPLE_PLACES places of SAMPLE_BYTES: evenly spread, and at given offsets."""

    windows: tuple[tuple[int, int], ...]
    """(offset, length) of each place; together the whole file when it is at most SAMPLE_PLACES x SAMPLE_BYTES."""
    digest: bytes


def _samples(stream: BufferedReader, size: int, places: Sequence[int]) -> _Samples:
    """The file's bytes at places (the start, the newest boot, the end) and at SAMPLE_PLACES evenly spread:
    a file of at most 4 MiB is compared whole, a larger one at every 1/SAMPLE_PLACES of its length."""
    stride = max(SAMPLE_BYTES, -(-size // SAMPLE_PLACES))
    starts = sorted({max(0, min(p, size - SAMPLE_BYTES)) for p in (*range(0, size, stride), *places)})
    windows = tuple((start, min(SAMPLE_BYTES, size - start)) for start in starts)
    return _Samples(windows, _digest(stream, windows))


def _digest(stream: BufferedReader, windows: Sequence[tuple[int, int]]) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for place, length in windows:
        stream.seek(place)
        h.update(stream.read(length))
    return h.digest()


def _same_bytes(stream: BufferedReader, samples: _Samples) -> bool:
    return _digest(stream, samples.windows) == samples.digest


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


def _keep_index(key: str, state: _FileState | None, fresh: _FileState) -> None:
    """Remember fresh.index, counted on from state (None: the file was new or changed); fresh, the file
    as counted, is kept if nothing is. A read may have kept a newer state meanwhile: it gets the index."""
    index, now = fresh.index, fresh.identity
    with _files_lock:
        current = _files.get(key)
        if state is None or current is None:
            _files[key] = fresh
        elif current is state:
            _files[key] = replace(state, index=index)
        elif current.identity.inode == now.inode and current.index.last.offset < index.last.offset <= now.size:
            _files[key] = replace(current, index=index)
