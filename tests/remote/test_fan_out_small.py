"""Many services with a small log each, on one host, read at once (issue 15, item 4).

Under the default limits a log of at most 1 MiB is read whole; the files a read found small go
to the host together next time, and the host reads them all in one awk pass. These tests hold
that path to the answers of one-by-one reads and of the local reader, and to its guards: each
path checked on the host, a bad one failing only its own service, an appended or grown file
read afresh.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from remote_hosts import FILLER, OLD_PAIR_MIB, ledger, local_boot, older_boot
from ssh_hosts import LoopbackHost

from radiance_mcp.core.errors import InputError, SourceError
from radiance_mcp.core.ledger import read_text
from radiance_mcp.models import ReadBudgetTableInput
from radiance_mcp.sources.ledgers import RemoteFileSource
from radiance_mcp.sources.remote import MAX_BATCH, Limits, SSHPool
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools.ledger import read_budget_table

SEED_PAIR_MIB = 29_120
SERVICES = 32


@pytest.fixture
async def small_pool() -> AsyncIterator[SSHPool]:
    """The default limits: logs of at most 1 MiB are read whole."""
    ssh = SSHPool()
    yield ssh
    await ssh.close()


def varied_logs(example: str) -> list[tuple[str, float]]:
    """32 logs of other shapes, each with the pair its newest boot holds: 1-4 boots, CRLF, no final newline."""
    logs = []
    for n in range(SERVICES):
        newest, pair = (example, SEED_PAIR_MIB) if n % 3 != 1 else (older_boot(example), OLD_PAIR_MIB)
        text = ledger(newest, boots=1 + n % 4, filler=n % 7)
        if n % 5 == 2:
            text = text.replace("\n", "\r\n")
        if n % 8 == 5:
            text = text.rstrip("\n")
        logs.append((text, pair))
    return logs


def fleet_of(host: LoopbackHost, paths: list[str]) -> Any:
    return host.fleet(services={f"svc-{n:02d}": {"host": "testhost", "log": p} for n, p in enumerate(paths)})


def calls() -> list[ReadBudgetTableInput]:
    return [ReadBudgetTableInput.model_validate({"service": f"svc-{n:02d}"}) for n in range(SERVICES)]


async def at_once(runtime: Runtime) -> list[Any]:
    return await asyncio.gather(*(read_budget_table(runtime, c) for c in calls()), return_exceptions=True)


def matches_local(table: Any, text: str, pair: float) -> None:
    """The table's boot is the local reader's newest boot of the same text, with its pair."""
    local = local_boot(text)  # kept: three rounds of 32 tables ask it of the same texts
    assert (table.ledger.boot, table.ledger.boots_seen) == (local.index, local.boots_seen)
    assert (table.ledger.first_line, table.ledger.last_line) == (local.first_line, local.last_line)
    assert table.cards[0].pair_mib == pair


async def test_32_small_logs_at_once_answer_as_one_by_one(ssh_host: LoopbackHost, small_pool: SSHPool,
                                                          example_text: str) -> None:
    logs = varied_logs(example_text)
    fleet = fleet_of(ssh_host, [str(ssh_host.write_log(text)) for text, _ in logs])
    alone = SSHPool()
    try:
        one_by_one = [(await read_budget_table(Runtime(fleet, ssh_pool=alone), c)).model_dump() for c in calls()]
    finally:
        await alone.close()
    runtime = Runtime(fleet, ssh_pool=small_pool)
    for round_ in ("cold", "warm", "warm again"):
        before = small_pool.transfer.commands
        tables = await at_once(runtime)
        assert [t.model_dump() for t in tables] == one_by_one, round_
        for (text, pair), table in zip(logs, tables, strict=True):
            matches_local(table, text, pair)
        # Cold, no size is known (MAX_BATCH logs a command); then the 32 small files go in one command.
        assert small_pool.transfer.commands - before == (SERVICES // MAX_BATCH if round_ == "cold" else 1), round_
    assert small_pool.open_connections() == 1


@pytest.mark.parametrize("round_", ["cold", "warm"])
async def test_a_bad_path_among_32_fails_only_its_service(ssh_host: LoopbackHost, small_pool: SSHPool,
                                                          example_text: str, round_: str) -> None:
    logs = varied_logs(example_text)
    paths = [ssh_host.write_log(text) for text, _ in logs]
    runtime = Runtime(fleet_of(ssh_host, [str(p) for p in paths]), ssh_pool=small_pool)
    if round_ == "warm":
        assert not any(isinstance(t, BaseException) for t in await at_once(runtime))
    outside = ssh_host.root / "elsewhere.log"  # a real ledger, but not under the log root
    outside.write_text(logs[0][0])
    paths[3].unlink()
    paths[11].unlink()
    paths[11].symlink_to(outside)
    paths[20].unlink()
    paths[20].mkdir()
    results = await at_once(runtime)
    assert isinstance(results[3], SourceError) and "no such file" in str(results[3])
    assert isinstance(results[11], InputError) and "outside the allowed log roots" in str(results[11])
    assert isinstance(results[20], SourceError) and "not a regular file" in str(results[20])
    for n, result in enumerate(results):
        if n in (3, 11, 20):
            assert paths[n].name in str(result)  # each message names its own log
            continue
        matches_local(result, *logs[n])


async def test_an_appended_log_among_cached_ones_is_read_again(ssh_host: LoopbackHost, small_pool: SSHPool,
                                                               example_text: str) -> None:
    logs = varied_logs(example_text)
    paths = [ssh_host.write_log(text) for text, _ in logs]
    runtime = Runtime(fleet_of(ssh_host, [str(p) for p in paths]), ssh_pool=small_pool)
    first = await at_once(runtime)
    # Service 6 gets a newer boot of the older shape; service 8's log is rewritten, same size, other pair.
    appended = logs[6][0] + older_boot(example_text) + FILLER.format(n=1)
    paths[6].write_text(appended)
    rewritten = logs[8][0].replace("5120", "4096").replace("5.00 GiB", "4.00 GiB")
    assert logs[8][1] == SEED_PAIR_MIB and len(rewritten) == len(logs[8][0])
    paths[8].write_text(rewritten)
    before = small_pool.transfer.commands
    second = await at_once(runtime)
    assert small_pool.transfer.commands - before == 1
    matches_local(second[6], appended, OLD_PAIR_MIB)
    assert second[6].ledger.last_line > first[6].ledger.last_line
    assert second[8].cards[0].pair_mib == OLD_PAIR_MIB
    for n in set(range(SERVICES)) - {6, 8}:
        assert second[n].model_dump() == first[n].model_dump()


async def test_a_small_log_grown_past_the_limit_is_read_as_a_large_one(ssh_host: LoopbackHost,
                                                                        example_text: str) -> None:
    """The host hands a queued file back when it has grown past small_file_bytes: read from no checkpoint."""
    limit = 16 * 1024
    pool = SSHPool(Limits(connect_timeout_s=10, command_timeout_s=30, small_file_bytes=limit))
    try:
        texts = [ledger(example_text, boots=2), ledger(older_boot(example_text), boots=3)]
        paths = [ssh_host.write_log(text) for text in texts]
        sources = [RemoteFileSource(ssh_host.target(), str(p), pool, (str(ssh_host.logs),)) for p in paths]
        await asyncio.gather(*(s.read() for s in sources))
        assert all((sources[0].target, str(p)) in pool.small_files for p in paths)
        grown = texts[0] + older_boot(example_text) + "".join(FILLER.format(n=n) for n in range(400))
        assert len(grown.encode()) > limit
        paths[0].write_text(grown)
        before = pool.transfer.commands
        boots = await asyncio.gather(*(s.read() for s in sources))
        assert pool.transfer.commands - before == 1
        for boot, text in zip(boots, [grown, texts[1]], strict=True):
            local = read_text(text, source=boot.source)
            assert [(h.key, h.line.number, h.line.text) for h in boot.hits] == [
                (h.key, h.line.number, h.line.text) for h in local.hits]
            assert (boot.index, boot.first_line, boot.last_line) == (local.index, local.first_line, local.last_line)
        assert (sources[0].target, str(paths[0])) not in pool.small_files
        assert (sources[0].target, str(paths[0])) in pool.checkpoints  # read as a large file: a checkpoint kept
        assert Path(paths[1]).exists() and (sources[1].target, str(paths[1])) in pool.small_files
    finally:
        await pool.close()


async def test_a_directory_symlink_turned_out_of_the_root_is_refused(ssh_host: LoopbackHost, small_pool: SSHPool,
                                                                    example_text: str) -> None:
    """The host resolves the log's directory itself: a symlink in it that now leads out fails that log only."""
    inside = ssh_host.logs / "real-dir"
    inside.mkdir()
    linked = ssh_host.logs / "linked-dir"
    linked.symlink_to(inside)
    text = ledger(example_text, boots=2)
    paths = [ssh_host.write_log(text), linked / "svc.log", ssh_host.write_log(text)]
    paths[1].write_text(text)
    sources = [RemoteFileSource(ssh_host.target(), str(p), small_pool, (str(ssh_host.logs),)) for p in paths]
    for boot in await asyncio.gather(*(s.read() for s in sources)):
        assert boot.index == 2
    assert all((sources[0].target, str(p)) in small_pool.small_files for p in paths)
    away = ssh_host.root / "away-dir"
    away.mkdir()
    (away / "svc.log").write_text(text)
    linked.unlink()
    linked.symlink_to(away)
    results = await asyncio.gather(*(s.read() for s in sources), return_exceptions=True)
    assert isinstance(results[1], InputError) and "outside the allowed log roots" in str(results[1])
    assert "linked-dir/svc.log" in str(results[1])
    assert [getattr(r, "index", None) for r in (results[0], results[2])] == [2, 2]


async def test_odd_bytes_in_small_logs_read_together_match_the_local_reader(ssh_host: LoopbackHost,
                                                                             small_pool: SSHPool,
                                                                             example_text: str) -> None:
    """NUL bytes, an over-long phrase line, tabs and a lone CR among the logs of one pass: each as read alone here."""
    base = ledger(example_text, boots=2)
    texts = [
        base.replace("I serving on", "I ser\x00ving on", 1),
        "noise\x00\x00 line\n" + base,
        base + "I claimable " + "7" * 70_000 + " GiB\nI serving on 0.0.0.0:8001\n",
        base.replace("  ", "\t"),
        base.replace("\n", "\r", 3),
    ]
    sources = [RemoteFileSource(ssh_host.target(), str(ssh_host.write_log(t)), small_pool, (str(ssh_host.logs),))
               for t in texts]
    for round_ in ("first", "queued"):
        boots = await asyncio.gather(*(s.read() for s in sources))
        for boot, text in zip(boots, texts, strict=True):
            local = read_text(text, source=boot.source)
            assert [(h.key, h.line.number, h.line.text) for h in boot.hits] == [
                (h.key, h.line.number, h.line.text) for h in local.hits], round_
            assert (boot.index, boot.boots_seen, boot.first_line, boot.last_line, boot.skipped_long_lines) == (
                local.index, local.boots_seen, local.first_line, local.last_line, local.skipped_long_lines), round_
