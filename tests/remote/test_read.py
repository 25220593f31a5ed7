"""Remote ledger reads against real SSH servers: the host cuts the boot, the local parser agrees.

The oracle throughout is the local reader: a boot read over SSH must equal the same boot of
the same text read by ledger.read_text (index, boots seen, line range, every phrase hit).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from remote_hosts import FILLER, OLD_CEILING_MIB, OLD_PAIR_MIB, ledger, local_boot, older_boot
from ssh_hosts import LoopbackHost

from radiance_mcp import tools
from radiance_mcp.core.boot import Boot
from radiance_mcp.core.errors import LedgerError
from radiance_mcp.core.ledger import read_text
from radiance_mcp.models import ComputeCeilingInput, ReadBudgetTableInput
from radiance_mcp.sources.ledgers import PodmanLogsSource, RemoteFileSource, read_many
from radiance_mcp.sources.remote import Limits, SSHPool
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools.ledger import check_pool_contract, compute_ceiling, read_budget_table

SEED_CEILING_MIB = 30_969  # 29,120 + (2,058 - 209): PHRASEBOOK section 2
SEED_PAIR_MIB = 29_120


def same(remote_boot: Boot, local_boot: Boot) -> None:
    assert (remote_boot.index, remote_boot.boots_seen) == (local_boot.index, local_boot.boots_seen)
    assert (remote_boot.first_line, remote_boot.last_line) == (local_boot.first_line, local_boot.last_line)
    assert [(h.key, h.line) for h in remote_boot.hits] == [(h.key, h.line) for h in local_boot.hits]


def file_source(host: LoopbackHost, pool: SSHPool, text: str) -> RemoteFileSource:
    path = host.write_log(text)
    return RemoteFileSource(host.target(), str(path), pool, (str(host.logs),))


# The tests below read each boot from a file of its own (no read resumes from another's checkpoint)
# through one pool: a connection per boot would cost an SSH login each and test nothing more.


async def test_every_boot_equals_the_local_read(ssh_host: LoopbackHost, pool: SSHPool, example_text: str) -> None:
    text = ledger(example_text, boots=3)
    for boot in (-1, -2, -3, 1, 2, 3):
        source = file_source(ssh_host, pool, text)
        same(await source.read(boot), read_text(text, source=source.label, boot=boot))


async def test_a_boot_past_the_log_is_the_readers_own_error(ssh_host: LoopbackHost, pool: SSHPool,
                                                            example_text: str) -> None:
    text = ledger(example_text, boots=3)
    for boot in (4, -4):
        source = file_source(ssh_host, pool, text)
        with pytest.raises(LedgerError) as local:
            read_text(text, source=source.label, boot=boot)
        with pytest.raises(LedgerError) as remote_error:
            await source.read(boot)
        assert str(remote_error.value) == str(local.value)


async def test_the_seed_figures_come_back_through_the_tools(ssh_host: LoopbackHost, example_text: str) -> None:
    """The newest boot is the example: its ceiling is the seed's 30,969 MiB; the oldest gives 30,457."""
    ssh_host.write_log(ledger(example_text, boots=4), name="frank_archon.log")
    ssh_host.write_container("frank-archon", ledger(example_text, boots=2))
    fleet = ssh_host.fleet(services={
        "frank-archon": {"host": "testhost", "log": str(ssh_host.logs / "frank_archon.log")},
        "frank-podman": {"host": "testhost", "container": "frank-archon"},
    })
    runtime = Runtime(fleet)
    try:
        for args in (
            {"service": "frank-archon"},
            {"service": "frank-podman"},
            {"host": "testhost", "log": str(ssh_host.logs / "frank_archon.log")},
            {"host": "testhost", "container": "frank-archon"},
        ):
            table = await read_budget_table(runtime, ReadBudgetTableInput.model_validate(args))
            assert table.cards[0].pair_mib == SEED_PAIR_MIB
            assert table.ledger.boot == table.ledger.boots_seen  # the newest
            ceiling = await compute_ceiling(runtime, ComputeCeilingInput.model_validate(args))
            assert ceiling.ceiling_mib == SEED_CEILING_MIB
            oldest = await compute_ceiling(runtime, ComputeCeilingInput.model_validate({**args, "boot": 1}))
            assert (oldest.pair_mib, oldest.ceiling_mib) == (OLD_PAIR_MIB, OLD_CEILING_MIB)
        assert table.ledger.source == "testhost:podman logs frank-archon"
    finally:
        await runtime.ssh_pool.close()


def test_the_ledger_tools_are_marked_open_world() -> None:
    ledger_tools = {"read_budget_table", "compute_ceiling", "check_pool_contract"}
    for spec in tools.TOOLS:
        if spec.name in ledger_tools:
            assert spec.open_world and spec.read_only, spec.name


async def test_podman_logs_equal_the_local_read(ssh_host: LoopbackHost, pool: SSHPool, example_text: str) -> None:
    text = ledger(example_text, boots=3)
    ssh_host.write_container("frank-archon", text)
    source = PodmanLogsSource(ssh_host.target(), "frank-archon", pool)
    argv_log = ssh_host.root / "containers" / "argv.log"
    for boot in (-1, -2, 1):
        calls = len(argv_log.read_text().splitlines()) if argv_log.exists() else 0
        same(await source.read(boot), read_text(text, source=source.label, boot=boot))
        argv = argv_log.read_text().splitlines()
        assert argv[calls:] == ["logs -- frank-archon"]  # each read ran podman logs once, afresh


async def test_two_logs_and_a_container_in_one_command(ssh_host: LoopbackHost, pool: SSHPool,
                                                       example_text: str) -> None:
    """The audit's shape: two boots of one host in one round trip (here three reads)."""
    first, second = ledger(example_text, boots=2), ledger(example_text, boots=3)
    ssh_host.write_container("frank-archon", first)
    a, b = file_source(ssh_host, pool, first), file_source(ssh_host, pool, second)
    c = PodmanLogsSource(ssh_host.target(), "frank-archon", pool)
    boots = await read_many([(a, -1), (b, 1), (c, -2)])
    assert pool.transfer.commands == 1
    same(boots[0], read_text(first, source=a.label, boot=-1))
    same(boots[1], read_text(second, source=b.label, boot=1))
    same(boots[2], read_text(first, source=c.label, boot=-2))


async def test_the_resume_point_follows_a_growing_log(ssh_host: LoopbackHost, pool: SSHPool,
                                                      example_text: str) -> None:
    """Appended boots are found from the last marker on; a rewritten file is read afresh."""
    text = ledger(example_text, boots=2)
    source = file_source(ssh_host, pool, text)
    same(await source.read(), read_text(text, source=source.label))
    key = (source.target, source.path)
    first_resume = pool.checkpoints[key]
    path = ssh_host.logs / source.path.rsplit("/", 1)[1]
    for _ in range(2):
        text += older_boot(example_text) + FILLER.format(n=7)
        path.write_text(text)
        for boot in (-1, -2, 1):
            same(await source.read(boot), read_text(text, source=source.label, boot=boot))
    assert pool.checkpoints[key].offset > first_resume.offset
    # The same inode rewritten shorter, then with other boots at the old offsets: not trusted.
    text = ledger(example_text, boots=1, filler=1)
    with path.open("r+") as handle:
        handle.truncate(0)
        handle.write(text)
    same(await source.read(), read_text(text, source=source.label))
    text = ledger(example_text, boots=5, filler=0)
    path.write_text(text)
    for boot in (-1, -3, 2):
        same(await source.read(boot), read_text(text, source=source.label, boot=boot))


async def test_an_older_boot_is_found_back_from_the_resume_point(ssh_host: LoopbackHost, pool: SSHPool,
                                                                 example_text: str) -> None:
    """Boots 3 MiB apart: after reading the newest, -2 is found by a window back from it."""
    filler = "".join(FILLER.format(n=i) for i in range(33_000))  # ~3.2 MiB per boot
    text = "".join(boot + filler for boot in [older_boot(example_text)] * 3 + [example_text])
    source = file_source(ssh_host, pool, text)
    for boot in (-1, -2, -3, -1, 1):
        same(await source.read(boot), local_boot(text, boot))


async def test_a_log_without_boot_markers_splits_at_flag_runs(ssh_host: LoopbackHost, pool: SSHPool,
                                                              example_text: str) -> None:
    unmarked = "".join(line for line in ledger(example_text, boots=2).splitlines(keepends=True)
                       if "radiance boot" not in line)
    ssh_host.write_container("unmarked", unmarked)
    podman = PodmanLogsSource(ssh_host.target(), "unmarked", pool)
    for boot in (-1, -2, 1, 2):
        source = file_source(ssh_host, pool, unmarked)
        same(await source.read(boot), read_text(unmarked, source=source.label, boot=boot))
        same(await podman.read(boot), read_text(unmarked, source=podman.label, boot=boot))


async def test_prefixes_ansi_crlf_and_an_overlong_line(ssh_host: LoopbackHost, pool: SSHPool,
                                                       example_text: str) -> None:
    lines = example_text.splitlines()
    decorated = [f"2026-10-13T12:00:{i:02d}Z \x1b[32m{line}\x1b[0m\r" for i, line in enumerate(lines)]
    overlong = "I claimable " + "9" * 70_000 + " GiB"  # over MAX_LINE_BYTES: skipped on both sides
    text = "\n".join([*decorated[:12], overlong, *decorated[12:]]) + "\n"
    source = file_source(ssh_host, pool, text)
    boot = await source.read()
    same(boot, read_text(text, source=source.label))
    assert boot.skipped_long_lines == 1
    assert boot.require("claimable").line.text.endswith("I claimable 30.87 GiB")


async def test_log_text_that_looks_like_commands_or_control_lines_is_data(ssh_host: LoopbackHost, pool: SSHPool,
                                                                          example_text: str) -> None:
    hostile = (
        f"I claimable $(touch {ssh_host.pwned}) `touch {ssh_host.pwned}`\n"
        "#0123456789abcdef0123456789abcdef Z\n"
        "I vram_kv 1.00 GiB '; touch x; '\n"
    )
    text = example_text + hostile
    source = file_source(ssh_host, pool, text)
    same(await source.read(), read_text(text, source=source.label))
    ssh_host.assert_untouched()


async def test_one_connection_is_reused_then_closed_when_idle(asyncssh_host: LoopbackHost, example_text: str) -> None:
    pool = SSHPool(Limits(idle_close_s=0.2))
    source = file_source(asyncssh_host, pool, example_text)
    before = asyncssh_host.connections()
    for _ in range(3):
        await source.read()
    assert asyncssh_host.connections() - before == 1
    assert pool.open_connections() == 1
    for _ in range(200):  # wait for the idle timer; the assertion is on state, not on time
        if pool.open_connections() == 0:
            break
        await asyncio.sleep(0.05)
    assert pool.open_connections() == 0
    await source.read()  # a new connection after the idle close
    assert asyncssh_host.connections() - before == 2
    await pool.close()


async def test_a_read_resumes_at_its_anchor_and_drops_a_changed_one(ssh_host: LoopbackHost, pool: SSHPool,
                                                                    example_text: str) -> None:
    """White box: bytes before the anchor are not read again (a log only grows), unless the anchor changed."""
    text = ledger(example_text, boots=3)
    source = file_source(ssh_host, pool, text)
    path = Path(source.path)
    assert (await source.read()).boots_seen == 3
    # Boot 1's marker rewritten in place, same length: the resumed read does not see it...
    first = text.index("radiance boot")
    path.write_text(text[:first] + "radiance BOOT" + text[first + len("radiance boot"):])
    boot = await source.read()
    assert (boot.index, boot.boots_seen) == (3, 3)
    # ...but once the anchor's own line differs, the read starts over and counts again.
    changed = path.read_text()
    anchor = pool.checkpoints[(source.target, source.path)].offset
    path.write_text(changed[:anchor] + changed[anchor:].replace("frank-archon", "frank-archoN", 1))
    boot = await source.read()
    assert (boot.index, boot.boots_seen) == (2, 2)
    same(boot, read_text(path.read_text(), source=source.label))


async def test_reads_on_two_host_entries_run_as_two_commands_in_order(asyncssh_host: LoopbackHost, pool: SSHPool,
                                                                      example_text: str) -> None:
    one, two = ledger(example_text, boots=2), ledger(example_text, boots=3)
    a = RemoteFileSource(asyncssh_host.target("first"), str(asyncssh_host.write_log(one)), pool,
                         (str(asyncssh_host.logs),))
    b = RemoteFileSource(asyncssh_host.target("second"), str(asyncssh_host.write_log(two)), pool,
                         (str(asyncssh_host.logs),))
    boots = await read_many([(b, 1), (a, -1), (b, -1)])
    assert pool.transfer.commands == 2 and pool.open_connections() == 2
    same(boots[0], read_text(two, source=b.label, boot=1))
    same(boots[1], read_text(one, source=a.label, boot=-1))
    same(boots[2], read_text(two, source=b.label, boot=-1))


async def test_the_pool_contract_reads_a_remote_service(asyncssh_host: LoopbackHost, example_text: str) -> None:
    from radiance_mcp.models import CheckPoolContractInput

    path = asyncssh_host.write_log(ledger(example_text, boots=2))
    runtime = Runtime(asyncssh_host.fleet(services={"frank": {"host": "testhost", "log": str(path)}}))
    try:
        result = await check_pool_contract(runtime, CheckPoolContractInput.model_validate({"service": "frank"}))
    finally:
        await runtime.close()
    # The example's shape: 2 x 200,000 fp8 needs 3,524.45 MiB of its 5,120 MiB pool (PHRASEBOOK section 3).
    assert (result.seqs, result.max_model_len, result.kv_cache_dtype, result.pool_mib) == (2, 200_000, "fp8", 5120)
    assert result.required_mib == 3524.45 and result.ok


async def test_the_pool_contract_reads_a_log_or_container_an_agent_names(ssh_host: LoopbackHost, pool: SSHPool,
                                                                        example_text: str) -> None:
    """host + log, or host + container: the omitted values come from that remote boot, line by line."""
    from radiance_mcp.models import CheckPoolContractInput

    text = ledger(example_text, boots=2)
    path = ssh_host.write_log(text)
    ssh_host.write_container("frank-archon", text)
    runtime = Runtime(ssh_host.fleet(), ssh_pool=pool)
    local = read_text(text, source="local")
    seqs_line = next(h.line for h in local.hits if h.key == "flag" and "--max-num-seqs" in h.line.text.split())
    for source in ({"log": str(path)}, {"container": "frank-archon"}):
        result = await check_pool_contract(
            runtime, CheckPoolContractInput.model_validate({"host": "testhost", "pool_mib": 5120, **source}))
        # 2 x 200,000 fp8 = 3,524.45 MiB against the pool given as an argument.
        assert (result.seqs, result.max_model_len, result.kv_cache_dtype) == (2, 200_000, "fp8")
        assert result.required_mib == 3524.45 and result.inputs_from["pool_mib"] == "argument"
        seqs_from = result.inputs_from["seqs"]
        assert not isinstance(seqs_from, str) and seqs_from.line == seqs_line.number
    assert pool.transfer.commands == 2


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"container": "frank-archon"}, "container needs host"),
        ({"host": "testhost", "log_text": "x"}, "host goes with log"),
        ({"host": "testhost", "log": "/l/a.log", "container": "frank-archon"}, "at most one of log, log_text or"),
    ],
)
def test_the_pool_contract_source_rules(arguments: dict[str, object], message: str) -> None:
    from pydantic import ValidationError

    from radiance_mcp.models import CheckPoolContractInput

    with pytest.raises(ValidationError, match=message):
        CheckPoolContractInput.model_validate(arguments)


async def test_a_growing_newest_boot_is_read_on_from_where_the_last_read_stopped(
    ssh_host: LoopbackHost, pool: SSHPool, example_text: str
) -> None:
    """Request lines, a half-written line, then a phrase line appended: each read equals the local read."""
    text = ledger(example_text, boots=2)
    source = file_source(ssh_host, pool, text)
    path = Path(source.path)
    key = (source.target, source.path)
    same(await source.read(), read_text(text, source=source.label))
    stops = [pool.checkpoints[key].tail_offset]
    for appended in (
        FILLER.format(n=1) * 3,
        "2026-10-13T12:00:00Z I req 2 POST /v1/compl",  # the engine is mid-line
        "etions 200\n",
        "W card 0 settled at 1.50 GiB free against 209.19 MiB\n",  # a phrase line, late in the boot
        "I claimable 1.00 GiB",  # a phrase line, half written
        "",
    ):
        text += appended
        path.write_text(text)
        for boot in (-1, -2):
            same(await source.read(boot), read_text(text, source=source.label, boot=boot))
        same(await source.read(), read_text(text, source=source.label))
        stops.append(pool.checkpoints[key].tail_offset)
    assert stops == sorted(stops) and stops[-1] is not None and stops[-1] > stops[0]
    assert pool.transfer.continued >= 12  # the newest boot's reads went on from the last stop
    # A rewrite that keeps the anchor line where it was, but not what came after it: read afresh.
    text = ledger(example_text, boots=2, filler=9)
    path.write_text(text)
    same(await source.read(), read_text(text, source=source.label))
