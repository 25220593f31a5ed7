"""A boot counted from the end is found by searching back from the end of the file (issue 15).

The oracle is the local reader on the same text. Where the host did not count the lines before
the boot (a pool told to count none), the boot says so (lines_from_byte, index -1, no boots
seen) and every line number plus the lines before that byte offset is the local reader's number:
the provenance stays exact, only its origin moves.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from remote_hosts import FILLER, ledger, local_boot, older_boot
from ssh_hosts import LoopbackHost

from radiance_mcp.core.boot import Boot
from radiance_mcp.core.errors import LedgerError
from radiance_mcp.core.ledger import read_text
from radiance_mcp.sources.ledgers import RemoteFileSource
from radiance_mcp.sources.remote import Limits, SSHPool

MIB = 1024 * 1024


@pytest.fixture
async def uncounting() -> AsyncIterator[SSHPool]:
    """A pool that never counts the lines before a boot found from the end."""
    ssh = SSHPool(Limits(connect_timeout_s=10, command_timeout_s=30, count_before_bytes=0, small_file_bytes=0))
    yield ssh
    await ssh.close()


def agrees(remote: Boot, text: str, boot: int) -> None:
    """remote is the local reader's boot, line for line, in the file's numbering or from its byte offset."""
    local = local_boot(text, boot)
    data = text.encode()
    if remote.lines_from_byte is None:
        assert (remote.index, remote.boots_seen) == (local.index, local.boots_seen)
        before = 0
    else:
        base = remote.lines_from_byte
        assert base == 0 or data[base - 1:base] == b"\n", "the offset starts a line"
        assert (remote.index, remote.boots_seen) == (boot, None)
        before = data[:base].count(b"\n")
        # What the offset promises: `tail -c +<offset+1> FILE | sed -n <n>p` is line n.
        tail_lines = data[base:].split(b"\n")
        for hit in remote.hits:
            assert tail_lines[hit.line.number - 1].decode().rstrip("\r").endswith(hit.line.text.rstrip()[-20:])
    assert (remote.first_line + before, remote.last_line + before) == (local.first_line, local.last_line)
    assert [(h.key, h.line.number + before, h.line.text) for h in remote.hits] == [
        (h.key, h.line.number, h.line.text) for h in local.hits]


def source_for(host: LoopbackHost, pool: SSHPool, text: str) -> RemoteFileSource:
    path = host.write_log(text)
    return RemoteFileSource(host.target(), str(path), pool, (str(host.logs),))


@functools.lru_cache(maxsize=8)
def big_old_boots(example: str, boots: int, filler_mib: float) -> str:
    """boots - 1 old boots of about filler_mib each, then the example (small, the newest).

    Kept: building megabytes of filler line by line costs more than the reads of it.
    """
    filler = "".join(FILLER.format(n=i) for i in range(int(filler_mib * MIB) // len(FILLER.format(n=0))))
    return (older_boot(example) + filler) * (boots - 1) + example + FILLER.format(n=1) * 3


async def test_a_small_newest_boot_after_huge_old_ones(ssh_host: LoopbackHost, pool: SSHPool,
                                                       uncounting: SSHPool, example_text: str) -> None:
    """3 MiB old boots: the windows grow past one; counted or not, every boot is the local reader's.

    Each boot is read from a file of its own, so no read resumes from another's checkpoint (one pool
    per kind for all the boots: a connection per boot would test nothing more).
    """
    text = big_old_boots(example_text, 3, 3)
    for boot in (-1, -2, -3, 1, 3):
        for reader in (pool, uncounting):
            got = await source_for(ssh_host, reader, text).read(boot)
            agrees(got, text, boot)
            if reader is uncounting and boot in (-1, -2):
                assert got.lines_from_byte is not None and got.index == boot
            else:
                assert got.lines_from_byte is None  # from the start, at byte 0, or few bytes before: the file's


async def test_the_newest_boot_moves_only_its_own_lines(ssh_host: LoopbackHost, uncounting: SSHPool,
                                                        example_text: str) -> None:
    text = big_old_boots(example_text, 4, 2)
    source = source_for(ssh_host, uncounting, text)
    agrees(await source.read(), text, -1)
    # The answer holds the newest boot's phrase lines only, not the 3 old boots' own.
    assert uncounting.transfer.received_bytes < 3 * len(example_text)


async def test_a_growing_file_keeps_its_numbering_from_the_anchor(ssh_host: LoopbackHost, uncounting: SSHPool,
                                                                  example_text: str) -> None:
    text = big_old_boots(example_text, 3, 2)
    source = source_for(ssh_host, uncounting, text)
    path = Path(source.path)
    agrees(await source.read(), text, -1)
    base = uncounting.checkpoints[(source.target, source.path)].base
    data = text.encode()
    assert base == data.rfind(b"\n", 0, data.rfind(b"radiance boot")) + 1  # the newest marker's line
    for appended in (FILLER.format(n=5) * 4, "W card 0 settled at 1.50 GiB free against 209.19 MiB\n",
                     older_boot(example_text) + FILLER.format(n=6), "half a line, no newline"):
        text += appended
        path.write_text(text)
        for boot in (-1, -2, -3):
            agrees(await source.read(boot), text, boot)
    assert uncounting.transfer.continued >= 2  # the newest boot's reads went on from the last stop
    # Lines still counted from the first read's anchor: no read went over the old boots to count them.
    assert uncounting.checkpoints[(source.target, source.path)].base == base
    # A boot counted from the start costs one pass over the file; that pass numbers the anchor, so
    # the newest boot's next read is in the file's own numbering.
    agrees(await source.read(2), text, 2)
    newest = await source.read()
    assert newest.lines_from_byte is None
    agrees(newest, text, -1)


async def test_a_marker_split_across_the_first_window(ssh_host: LoopbackHost, uncounting: SSHPool,
                                                      pool: SSHPool, example_text: str) -> None:
    """The 1 MiB window begins inside 'radiance boot' (3, 8 bytes in), or at the very line's start (13)."""
    for split in (3, 8, 13):
        await marker_split_at(ssh_host, (uncounting, pool), example_text, split)


async def test_a_marker_split_across_the_one_pass_window(ssh_host: LoopbackHost, uncounting: SSHPool,
                                                        example_text: str) -> None:
    """The newest boot of a file past count_before_bytes is found and cut in one pass over its last 2 MiB;
    when that window begins inside its marker's line, the search back finds it as before."""
    for split in (3, 13):
        await marker_split_at(ssh_host, (uncounting,), example_text, split, window=2 * MIB)


async def test_the_one_pass_window_ends_in_half_a_line(ssh_host: LoopbackHost, uncounting: SSHPool,
                                                       example_text: str) -> None:
    """A newest boot in the last 2 MiB, the file ending without a newline, then appended to."""
    text = big_old_boots(example_text, 3, 2) + "W card 0 settled at 1.25 GiB free against 209.19 MiB"
    source = source_for(ssh_host, uncounting, text)
    agrees(await source.read(), text, -1)
    text += " (cont.)\n" + FILLER.format(n=9)
    Path(source.path).write_text(text)
    agrees(await source.read(), text, -1)
    assert uncounting.transfer.continued == 1


async def marker_split_at(ssh_host: LoopbackHost, readers: tuple[SSHPool, ...], example_text: str,
                          split: int, window: int = MIB) -> None:
    head = big_old_boots(example_text, 2, 1.5)
    newest = older_boot(example_text).replace("settled at 2.51 GiB", "settled at 1.75 GiB")
    marker_at = newest.index("radiance boot")
    line_start = newest.rindex("\n", 0, marker_at) + 1 if "\n" in newest[:marker_at] else 0
    cut_at = marker_at + split if split < 13 else line_start  # where the window will begin
    pad = window - (len(newest.encode()) - len(newest[:cut_at].encode()))
    filler = "".join(FILLER.format(n=i) for i in range(pad // len(FILLER.format(n=0))))
    text = head + newest + filler + "x" * (pad - len(filler) - 1) + "\n"
    data = text.encode()
    assert len(data) - window == len((head + newest[:cut_at]).encode()), split
    for reader in readers:
        got = await source_for(ssh_host, reader, text).read()
        agrees(got, text, -1)
        assert got.require("settled").line.text.startswith("W card 0 settled at 1.75 GiB")


async def test_line_ends(ssh_host: LoopbackHost, pool: SSHPool, uncounting: SSHPool, example_text: str) -> None:
    """CRLF throughout, and a last line without its newline."""
    plain = big_old_boots(example_text, 3, 1.2)
    for text in (plain.replace("\n", "\r\n"), plain + "W card 0 settled at 1.25 GiB free against 209.19 MiB"):
        for reader in (pool, uncounting):
            for boot in (-1, -2, 1):
                agrees(await source_for(ssh_host, reader, text).read(boot), text, boot)


async def test_an_unchanged_file_gives_the_last_answer_again(ssh_host: LoopbackHost, pool: SSHPool,
                                                             uncounting: SSHPool, example_text: str) -> None:
    """Nothing appended since the last read of the newest boot: the host sends one line, the boot is the same."""
    text = big_old_boots(example_text, 3, 1.2)
    for reader in (pool, uncounting):
        source = source_for(ssh_host, reader, text)
        first = await source.read()
        received = reader.transfer.received_bytes
        again = await source.read()
        assert again == first
        agrees(again, text, -1)
        assert reader.transfer.received_bytes - received < 200  # the N line, not the boot's lines
        # One byte more, and the read goes on from where the last one stopped.
        Path(source.path).write_text(text + "I serving on 0.0.0.0:8001\n")
        agrees(await source.read(), text + "I serving on 0.0.0.0:8001\n", -1)


@pytest.fixture
async def default_pool() -> AsyncIterator[SSHPool]:
    """The default limits: a log of at most 1 MiB is cut in one pass on every read."""
    ssh = SSHPool()
    yield ssh
    await ssh.close()


def shapes(example: str) -> dict[str, str]:
    lines = example.splitlines()
    return {
        "three boots": ledger(example, boots=3),
        "no markers, runs of flags": "".join(line for line in ledger(example, boots=2).splitlines(keepends=True)
                                             if "radiance boot" not in line),
        "decorated, CRLF, an overlong line": "\n".join(
            [*(f"2026-10-13T12:00:{i:02d}Z \x1b[32m{line}\x1b[0m\r" for i, line in enumerate(lines[:12])),
             "I claimable " + "9" * 70_000 + " GiB", *lines[12:]]) + "\n",
        "no newline at the end": ledger(example, boots=2) + "I serving on 0.0.0.0:8001",
    }


async def test_a_small_file_is_cut_in_one_pass(ssh_host: LoopbackHost, default_pool: SSHPool,
                                               example_text: str) -> None:
    """Every shape, each from a file of its own, through one pool that never keeps a checkpoint."""
    for shape, text in shapes(example_text).items():
        source = source_for(ssh_host, default_pool, text)
        count = read_text(text, source="x").boots_seen or 1
        for boot in (-1, 1, -count, count, -2 if count > 1 else -1, -1):
            agrees(await source.read(boot), text, boot)
        with pytest.raises(LedgerError) as local:
            read_text(text, source=source.label, boot=count + 1)
        with pytest.raises(LedgerError) as remote:
            await source.read(-count - 1)
        assert str(remote.value) == str(local.value).replace(f"boot={count + 1}", f"boot={-count - 1}"), shape
        assert default_pool.transfer.continued == 0, shape  # no checkpoint kept, none needed
        text += older_boot(example_text)
        Path(source.path).write_text(text)
        agrees(await source.read(), text, -1)
