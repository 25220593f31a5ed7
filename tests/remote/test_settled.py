"""A warm read of a settled log over SSH: its stat answers when it is unchanged, and only then.

The host sends the file's stat (device, inode, size, mtime, ctime) when a read of the newest boot stops at
the file's end and the file's inode last changed (ctime) 2 s or more before (an F line). The next read that finds the
same stat sends the last answer back without reading a byte; a file grown since is read on from where the
last read stopped; one rewritten in place at the same size, rotated or cut shorter is read afresh. The
oracle is the local reader (ledger.read_text): the boot, its line numbers and every figure's text.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from remote_hosts import FILLER, ledger, payloads
from ssh_hosts import LoopbackHost

from radiance_mcp.core.boot import Boot
from radiance_mcp.core.ledger import read_text
from radiance_mcp.sources.ledgers import RemoteFileSource
from radiance_mcp.sources.remote import SSHPool

READERS = ("tail", "head", "grep", "awk", "cksum", "wc", "stat", "ls")
"""The host's tools that read a log (or its stat), recorded by the shims on the host's PATH."""
HOUR_AGO_S = 3600


def seen(boot: Boot) -> tuple[object, ...]:
    """What a user sees of a boot: which one, its lines, and each figure's line and text."""
    return (boot.index, boot.boots_seen, boot.first_line, boot.last_line,
            [(h.key, h.line.number, dict(h.fields)) for h in boot.hits])


def settle(path: Path, age_s: int = HOUR_AGO_S) -> None:
    """A log nobody wrote to for age_s seconds: its mtime set that far back, and the host's clock (a `date` shim
    first on its PATH) that far ahead, since the host tells a settled file by its ctime, which only the kernel
    sets (the file's ctime is now)."""
    when = time.time() - age_s
    os.utime(path, (when, when))
    root = next(p for p in path.parents if (p / "bin").is_dir())
    real = shutil.which("date", path="/usr/bin:/bin")
    shim = root / "bin" / "date"
    shim.write_text(f'#!/bin/sh\nif [ "$1" = +%s ]; then echo $(( $({real} +%s) + {age_s} )); else exec {real} "$@"; '
                    'fi\n')
    shim.chmod(0o755)


@pytest.fixture(autouse=True)
def _host_clock(asyncssh_host: LoopbackHost) -> Iterator[None]:
    """The host's clock as it is, after each test (settle may have set it ahead)."""
    yield
    (asyncssh_host.root / "bin" / "date").unlink(missing_ok=True)


@pytest.fixture
def ran(asyncssh_host: LoopbackHost) -> Iterator[Path]:
    """Shims for the host's readers, first on its PATH, each writing its name and arguments to a file."""
    record = asyncssh_host.root / "ran.log"
    shims = []
    for name in READERS:
        real = shutil.which(name, path="/usr/bin:/bin")
        assert real is not None
        shim = asyncssh_host.root / "bin" / name
        shim.write_text(f"#!/bin/sh\nprintf '%s\\n' \"{name} $*\" >> {record}\nexec {real} \"$@\"\n")
        shim.chmod(0o755)
        shims.append(shim)
    try:
        yield record
    finally:
        for shim in shims:
            shim.unlink()
        record.unlink(missing_ok=True)


def commands(record: Path) -> list[str]:
    """The readers the host ran since the last look (and forget them)."""
    found = record.read_text().splitlines() if record.exists() else []
    record.unlink(missing_ok=True)
    return found


def source_for(host: LoopbackHost, pool: SSHPool, text: str) -> tuple[RemoteFileSource, Path]:
    path = host.write_log(text)
    settle(path)
    return RemoteFileSource(host.target(), str(path), pool, (str(host.logs),)), path


async def read_once(host: LoopbackHost, pool: SSHPool, text: str) -> tuple[RemoteFileSource, Path]:
    """The log written and settled on the host, and read once over SSH as the local reader reads it."""
    source, path = source_for(host, pool, text)
    assert seen(await source.read()) == seen(read_text(text, source=source.label))
    return source, path


async def test_an_unchanged_settled_log_costs_one_stat(asyncssh_host: LoopbackHost, pool: SSHPool,
                                                       example_text: str, ran: Path) -> None:
    """The second read of an unchanged log reads no byte of it: one stat, and the same answer."""
    text = ledger(example_text, boots=3, filler=60)
    source, _ = source_for(asyncssh_host, pool, text)
    first = await source.read()
    assert seen(first) == seen(read_text(text, source=source.label))
    assert any(c.startswith(("grep ", "awk ")) for c in commands(ran))  # the first read cut the boot
    for _ in range(2):
        again = await source.read()
        assert seen(again) == seen(first)
        assert [c.split()[0] for c in commands(ran)] == ["stat"]


async def test_a_log_rewritten_in_place_at_the_same_size_is_read_afresh(
    asyncssh_host: LoopbackHost, pool: SSHPool, example_text: str, ran: Path
) -> None:
    """A figure changed in the newest boot, the anchor and the last 4 KiB as they were: the new figure."""
    text = ledger(example_text, boots=2, filler=60)
    source, path = await read_once(asyncssh_host, pool, text)
    at = text.rindex("settled at 2.01 GiB")
    assert at > text.rindex("radiance boot") and len(text.encode()) - at > 4096
    text = text[:at] + "settled at 2.11 GiB" + text[at + len("settled at 2.01 GiB"):]
    path.write_text(text)
    settle(path, HOUR_AGO_S // 2)
    commands(ran)
    boot = await source.read()
    assert seen(boot) == seen(read_text(text, source=source.label))
    assert any("2.11" in (value or "") for hit in boot.hits for value in hit.fields.values())
    assert any(c.startswith("grep ") for c in commands(ran))


async def test_a_grown_log_is_read_on_from_where_the_last_read_stopped(
    asyncssh_host: LoopbackHost, pool: SSHPool, example_text: str, ran: Path
) -> None:
    """Appended lines (a phrase line among them) are read from the last stop on; then unchanged again."""
    text = ledger(example_text, boots=2, filler=60)
    source, path = await read_once(asyncssh_host, pool, text)
    stop, anchor = len(text.encode()), pool.checkpoints[(source.target, source.path)].offset
    text += FILLER.format(n=1) * 3 + "W card 0 settled at 1.50 GiB free against 209.19 MiB\n" + FILLER.format(n=2)
    path.write_text(text)
    settle(path, HOUR_AGO_S // 2)
    commands(ran)
    continued = pool.transfer.continued
    grown = await source.read()
    assert seen(grown) == seen(read_text(text, source=source.label))
    assert pool.transfer.continued == continued + 1
    # The new bytes were read from the last stop; before it only the anchor's line and the 4 KiB before the stop.
    starts = [int(c.split("+")[1]) - 1 for c in commands(ran) if c.startswith("tail -c +")]
    assert stop in starts
    assert all(start == anchor or start >= stop - 4096 for start in starts)
    again = await source.read()
    assert seen(again) == seen(grown)
    assert [c.split()[0] for c in commands(ran)] == ["stat"]


@pytest.mark.parametrize("how", ["rotated", "shorter", "touched"])
async def test_a_rotated_shortened_or_touched_log_is_read_afresh(
    asyncssh_host: LoopbackHost, pool: SSHPool, example_text: str, how: str
) -> None:
    """Another file at the path (same size and mtime), the same file cut and rewritten shorter, or the same
    bytes with a new mtime: each read equals the local read of what the file now holds."""
    text = ledger(example_text, boots=3, filler=60)
    source, path = await read_once(asyncssh_host, pool, text)
    stat = path.stat()
    if how == "rotated":  # the same size, other boots, at the same mtime: only the inode tells
        path.rename(path.with_suffix(".1"))
        text = ledger(example_text, boots=2, filler=60)
        text += "x" * (stat.st_size - len(text.encode()) - 1) + "\n"
        path.write_text(text)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    elif how == "shorter":
        text = ledger(example_text, boots=1, filler=60)
        with path.open("r+") as handle:
            handle.truncate(0)
            handle.write(text)
        settle(path, HOUR_AGO_S // 2)
    else:
        settle(path, HOUR_AGO_S // 2)
    assert seen(await source.read()) == seen(read_text(text, source=source.label))
    assert seen(await source.read()) == seen(read_text(text, source=source.label))


async def test_a_hosts_unchanged_logs_cost_one_stat_in_all(asyncssh_host: LoopbackHost, pool: SSHPool,
                                                           example_text: str, ran: Path) -> None:
    """Logs named like injections, read at once twice: the second command runs one stat for all of them,
    and each answer is its own file's (the names reach the host quoted, the check and stat as files)."""
    texts, sources = [], []
    for n, payload in enumerate(payloads(asyncssh_host)):
        if "/" in payload or "\n" in payload or "\x00" in payload or payload == "..":
            continue
        text = ledger(example_text, boots=1 + n % 3, filler=60 + n)
        path = asyncssh_host.write_log(text, name=f"x{payload}.log")
        settle(path)
        texts.append(text)
        sources.append(RemoteFileSource(asyncssh_host.target(), str(path), pool, (str(asyncssh_host.logs),)))
    assert len(sources) >= 4
    for turn in range(2):
        commands(ran)
        sent = pool.transfer.commands
        boots = await asyncio.gather(*(source.read() for source in sources))
        for boot, text, source in zip(boots, texts, sources, strict=True):
            assert seen(boot) == seen(read_text(text, source=source.label))
        assert pool.transfer.commands == sent + 1
        if turn:
            assert [c.split()[0] for c in commands(ran)] == ["stat"]
    asyncssh_host.assert_untouched()
