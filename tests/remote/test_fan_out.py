"""Many services on one host read at once: one connection, one command, one read per file (issue 15)."""

from __future__ import annotations

import asyncio

from mcp import Client
from remote_hosts import OLD_PAIR_MIB, ledger, older_boot
from ssh_hosts import LoopbackHost

from radiance_mcp.app.server import build_server
from radiance_mcp.core.errors import SourceError
from radiance_mcp.core.ledger import read_text
from radiance_mcp.models import ReadBudgetTableInput
from radiance_mcp.sources.ledgers import RemoteFileSource
from radiance_mcp.sources.remote import MAX_BATCH, SSHPool
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools.ledger import read_budget_table

SEED_PAIR_MIB = 29_120
SERVICES = 32


def services_on_one_host(host: LoopbackHost, logs: list[str]) -> dict[str, dict[str, str]]:
    return {f"svc-{n:02d}": {"host": "testhost", "log": log} for n, log in enumerate(logs)}


async def test_32_services_naming_one_file_cost_one_read(ssh_host: LoopbackHost, pool: SSHPool,
                                                         example_text: str) -> None:
    path = str(ssh_host.write_log(ledger(example_text, boots=3)))
    runtime = Runtime(ssh_host.fleet(services=services_on_one_host(ssh_host, [path] * SERVICES)),
                            ssh_pool=pool)
    calls = [ReadBudgetTableInput.model_validate({"service": f"svc-{n:02d}"}) for n in range(SERVICES)]
    for round_ in ("cold", "warm"):
        before = pool.transfer.commands
        tables = await asyncio.gather(*(read_budget_table(runtime, call) for call in calls))
        assert [t.cards[0].pair_mib for t in tables] == [SEED_PAIR_MIB] * SERVICES, round_
        assert all(t.ledger.source.endswith(path) for t in tables)
        assert pool.transfer.commands - before == 1, round_  # one command, the file read once
        assert pool.open_connections() == 1


async def test_32_services_with_a_log_each_share_one_connection(ssh_host: LoopbackHost, pool: SSHPool,
                                                             example_text: str) -> None:
    """Odd services' newest boot is the older shape (28,096 MiB pair): each answer is its own file's."""
    logs = [str(ssh_host.write_log(ledger(example_text if n % 2 == 0 else older_boot(example_text), boots=2)))
            for n in range(SERVICES)]
    runtime = Runtime(ssh_host.fleet(services=services_on_one_host(ssh_host, logs)),
                            ssh_pool=pool)
    calls = [ReadBudgetTableInput.model_validate({"service": f"svc-{n:02d}"}) for n in range(SERVICES)]
    tables = await asyncio.gather(*(read_budget_table(runtime, call) for call in calls))
    assert [t.cards[0].pair_mib for t in tables] == [SEED_PAIR_MIB if n % 2 == 0 else OLD_PAIR_MIB
                                                     for n in range(SERVICES)]
    # MAX_BATCH logs per command, the commands side by side on the one connection.
    assert pool.transfer.commands == SERVICES // MAX_BATCH and pool.open_connections() == 1


async def test_a_bad_service_in_the_batch_fails_alone(ssh_host: LoopbackHost, pool: SSHPool,
                                                      example_text: str) -> None:
    good = str(ssh_host.write_log(ledger(example_text, boots=2)))
    missing = str(ssh_host.logs / "no-such.log")
    runtime = Runtime(ssh_host.fleet(services=services_on_one_host(ssh_host, [good, missing, good])),
                            ssh_pool=pool)
    calls = [ReadBudgetTableInput.model_validate({"service": f"svc-{n:02d}"}) for n in range(3)]
    results = await asyncio.gather(*(read_budget_table(runtime, call) for call in calls),
                                   return_exceptions=True)
    assert isinstance(results[1], SourceError) and "no such file" in str(results[1])
    assert "no-such.log" in str(results[1])
    for table in (results[0], results[2]):
        assert not isinstance(table, BaseException) and table.cards[0].pair_mib == SEED_PAIR_MIB
    assert pool.transfer.commands == 1


async def test_a_cancelled_caller_does_not_cancel_the_shared_read(ssh_host: LoopbackHost, pool: SSHPool,
                                                                  example_text: str) -> None:
    text = ledger(example_text, boots=3)
    source = RemoteFileSource(ssh_host.target(), str(ssh_host.write_log(text)), pool, (str(ssh_host.logs),))
    first = asyncio.create_task(source.read())
    second = asyncio.create_task(source.read())
    await asyncio.sleep(0)  # both joined the one read
    first.cancel()
    boot = await second
    assert first.cancelled()
    local = read_text(text, source=source.label)
    assert [(h.key, h.line) for h in boot.hits] == [(h.key, h.line) for h in local.hits]
    assert pool.transfer.commands == 1
    # Every caller cancelled, before or after the read began: it is dropped, and the next runs afresh.
    for turns in (0, 1, 2, 3):
        third = asyncio.create_task(source.read())
        for _ in range(turns):
            await asyncio.sleep(0)
        third.cancel()
        await asyncio.gather(third, return_exceptions=True)
        assert third.cancelled()
        assert (await source.read()).index == 3
    assert not pool._inflight and not pool._pending  # nothing left waiting


async def test_an_agent_reading_32_services_at_once_over_mcp(asyncssh_host: LoopbackHost, pool: SSHPool,
                                                             example_text: str) -> None:
    """The MCP client's 32 parallel calls: each answer right, one connection to the host."""
    path = str(asyncssh_host.write_log(ledger(example_text, boots=2)))
    runtime = Runtime(asyncssh_host.fleet(services=services_on_one_host(asyncssh_host, [path] * SERVICES)),
                            ssh_pool=pool)
    async with Client(build_server(runtime)) as client:
        results = await asyncio.gather(*(client.call_tool("read_budget_table", {"service": f"svc-{n:02d}"})
                                         for n in range(SERVICES)))
        assert pool.open_connections() == 1  # (the server closes it when it stops)
    for result in results:
        assert not result.is_error and result.structured_content is not None
        assert result.structured_content["cards"][0]["pair_mib"] == SEED_PAIR_MIB
    assert pool.transfer.commands < SERVICES  # concurrent identical reads share one answer
