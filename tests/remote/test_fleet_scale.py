"""A fleet larger than the old bound of 256 remembered logs, read twice over the real asyncssh server (issue 26).

40 host entries (all on the one loopback server, each its own connection, as 40 hosts would be)
of 8 services each: 320 logs. A warm read keeps every log's last read and sends one command per
host entry, as the cold one does; the bounds that replaced the old one are held per host entry and
in bytes (kept.py), which the pure tests at the end check.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from remote_hosts import ledger
from ssh_hosts import LoopbackHost

from radiance_mcp.core.boot import KEPT_LINE_BYTES, Line, lines_bytes
from radiance_mcp.models.ledger_ref import LedgerRef
from radiance_mcp.sources import ledgers
from radiance_mcp.sources.config import Fleet
from radiance_mcp.sources.ledgers import read_boot
from radiance_mcp.sources.remote import Kept, Limits, SSHPool, SSHTarget
from radiance_mcp.sources.runtime import Runtime

HOSTS = 40
PER_HOST = 8
SEED_PAIR_MIB = 29_120


def fleet_of(host: LoopbackHost, logs: list[str]) -> Fleet:
    return Fleet.model_validate({
        "hosts": {f"h{h:02d}": host.host_entry() for h in range(HOSTS)},
        "services": {f"s{n:03d}": {"host": f"h{n // PER_HOST:02d}", "log": log} for n, log in enumerate(logs)},
    })


async def read_fleet(runtime: Runtime) -> list[Any]:
    names = sorted(runtime.fleet.services)
    return await asyncio.gather(*(read_boot(runtime, LedgerRef(service=name)) for name in names))


@pytest.mark.parametrize("small_file_bytes", [0, Limits.small_file_bytes], ids=["checkpoints", "small files"])
async def test_a_fleet_of_320_logs_is_read_warm_in_one_command_per_host(
        asyncssh_host: LoopbackHost, example_text: str, small_file_bytes: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cold and warm: one connection and one command per host entry; warm, every log's last read is kept
    (a checkpoint gone on from, or the file known small) and no cut is parsed again."""
    assert asyncssh_host.commands is not None
    logs = [str(asyncssh_host.write_log(ledger(example_text, boots=2))) for _ in range(HOSTS * PER_HOST)]
    pool = SSHPool(Limits(connect_timeout_s=10, command_timeout_s=60, small_file_bytes=small_file_bytes))
    runtime = Runtime(fleet_of(asyncssh_host, logs), ssh_pool=pool)
    parsed: list[str] = []
    real_parse = ledgers.parse_boot

    def counted(*args: Any, **kwargs: Any) -> Any:
        parsed.append(kwargs["source"])
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(ledgers, "parse_boot", counted)
    try:
        connections = asyncssh_host.connections()
        for round_ in ("cold", "warm"):
            commands, continued = asyncssh_host.commands(), pool.transfer.continued
            parsed.clear()
            boots = await read_fleet(runtime)
            assert [b.index for b in boots] == [2] * len(logs), round_
            assert asyncssh_host.commands() - commands == HOSTS, round_  # one command per host entry
            assert asyncssh_host.connections() - connections == HOSTS, round_  # one connection each, kept
            if round_ == "warm":
                assert parsed == []  # every parse kept
                if small_file_bytes == 0:
                    assert pool.transfer.continued - continued == len(logs)  # every checkpoint kept
                else:
                    assert len(pool.small_files) == len(logs)
    finally:
        await pool.close()


async def test_asyncssh_says_nothing_at_info(asyncssh_host: LoopbackHost, pool: SSHPool, example_text: str,
                                             caplog: pytest.LogCaptureFixture) -> None:
    """asyncssh logs every connection and channel at INFO: a fleet's plan wrote 1,500 lines to the server's stderr."""
    caplog.set_level(logging.INFO)
    runtime = Runtime(asyncssh_host.fleet(services={"svc": {"host": "testhost",
                                                             "log": str(asyncssh_host.write_log(example_text))}}),
                      ssh_pool=pool)
    await read_boot(runtime, LedgerRef(service="svc"))
    assert pool.transfer.commands == 1
    assert [r.getMessage() for r in caplog.records if r.name.startswith("asyncssh")] == []


# ---------------------------------------------------------------------------------------
# The bounds themselves (no host needed)

def target(name: str) -> SSHTarget:
    return SSHTarget(name=name, address="127.0.0.1")


def test_kept_forgets_the_least_recent_of_the_host_past_its_count() -> None:
    kept: Kept[int] = Kept(per_host=3)
    a, b = target("a"), target("b")
    for n in range(4):
        kept.keep((b, f"/log{n}"), n)
    for n in range(3):
        kept.keep((a, f"/log{n}"), n)
    kept.keep((a, "/log0"), 10)  # read again: the most recent of a
    kept.keep((a, "/log3"), 3)
    assert [(a, f"/log{n}") in kept for n in range(4)] == [True, False, True, True]
    assert [(b, f"/log{n}") in kept for n in range(4)] == [False, True, True, True]  # b keeps its own 3
    assert kept[(a, "/log0")] == 10 and len(kept) == 6


def test_kept_holds_its_bytes_bound_over_all_hosts() -> None:
    kept: Kept[str] = Kept(per_host=100, max_bytes=1000)
    for n in range(30):
        kept.keep((target(f"h{n}"), "/log"), "x", size=100)
        assert kept.size <= 1000
    assert len(kept) == 10 and (target("h29"), "/log") in kept and (target("h19"), "/log") not in kept
    kept.keep((target("big"), "/log"), "x", size=1001)  # over the bound alone: not kept, and all else gone
    assert len(kept) == 0 and kept.size == 0
    kept.keep((target("h0"), "/log"), "y", size=10)
    kept.pop((target("h0"), "/log"))
    assert kept.get((target("h0"), "/log")) is None and kept.size == 0


def test_a_kept_line_is_counted_with_its_objects() -> None:
    assert lines_bytes([Line(1, "abc"), Line(2, "")]) == 3 + 2 * KEPT_LINE_BYTES
