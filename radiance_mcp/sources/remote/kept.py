"""What the pool keeps from one read of a host's log for the next: per host entry, and within a memory bound.

A warm read of a whole fleet (1,000 services on 125 hosts) re-read every log whose last read had
been forgotten: one bound of 256 logs in all covered a quarter of it. Each store now keeps, per host
entry, the MAX_CHECKPOINTS logs read most recently, and in all at most MAX_KEPT_BYTES (estimated by
core.boot.lines_bytes: the kept lines' text plus KEPT_LINE_BYTES a line), the least recently kept going first. The host
entries are the operator's (the fleet config), so a fleet keeps every service's log while their
lines fit the bytes: a boot of the example's size (27 phrase lines) is counted as 20 KiB, so a store
holds about 3,200 of them; the two stores of a 1,000-service fleet, 40 MiB at most.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from radiance_mcp.sources.remote.targets import SSHTarget

MAX_CHECKPOINTS = 64
"""Logs of one host entry whose last read is kept; the least recently read go first."""
MAX_KEPT_BYTES = 64 * 1024 * 1024
"""Bytes one store keeps in all (its values' estimated sizes summed over every host entry)."""

V = TypeVar("V")
Key = tuple[SSHTarget, str]
"""A host entry and a log's path (or a read's label) on it."""


class Kept(Generic[V]):
    """Values per (host entry, path): at most MAX_CHECKPOINTS per host entry and MAX_KEPT_BYTES in all."""

    def __init__(self, per_host: int = MAX_CHECKPOINTS, max_bytes: int = MAX_KEPT_BYTES) -> None:
        self.per_host = per_host
        self.max_bytes = max_bytes
        self._values: dict[Key, tuple[V, int]] = {}
        """Every value and its size, the least recently kept first."""
        self._hosts: dict[SSHTarget, dict[str, None]] = {}
        """Each host entry's paths, the least recently kept first."""
        self.size = 0

    def __contains__(self, key: Key) -> bool:
        return key in self._values

    def __getitem__(self, key: Key) -> V:
        return self._values[key][0]

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: Key) -> V | None:
        found = self._values.get(key)
        return None if found is None else found[0]

    def keep(self, key: Key, value: V, size: int = 0) -> None:
        """Keep value as the most recent; then drop the host's oldest past per_host, and the oldest of all
        past max_bytes (the new value too, if it alone is over)."""
        self.pop(key)
        self._values[key] = (value, size)
        self.size += size
        paths = self._hosts.setdefault(key[0], {})
        paths[key[1]] = None
        while len(paths) > self.per_host:
            self.pop((key[0], next(iter(paths))))
        while self.size > self.max_bytes:
            self.pop(next(iter(self._values)))

    def pop(self, key: Key) -> None:
        found = self._values.pop(key, None)
        if found is None:
            return
        self.size -= found[1]
        paths = self._hosts[key[0]]
        del paths[key[1]]
        if not paths:
            del self._hosts[key[0]]
