"""A large engine log on a host: only its word lines move, and a flood of them keeps the newest.

The oracle is the local reader of the boot's own text: a start-up at the top of 100+ MiB of
request lines (which hold none of the engine's words) reads with the same figures and lines,
the span ending at the log's last line, while the answer stays a few KiB. A log whose request
lines repeat a word (llama-server's per-request `n_ctx_slot`) overflows one read's cap: the host
keeps the newest lines, says how many it left, and a boot whose start may be among those is
refused with the reason, never read short.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from ssh_hosts import LoopbackHost
from test_engine_remote import MARKER, facts, text_of

from radiance_mcp.core.engines import read_engine_boot
from radiance_mcp.core.errors import LedgerError
from radiance_mcp.sources.engine_logs import remote_boot
from radiance_mcp.sources.ledgers import RemoteFileSource
from radiance_mcp.sources.remote import Limits, SSHPool

LEDGERS = Path(__file__).parent.parent / "fixtures" / "ledgers"
MIB = 1024 * 1024
# vLLM's access and metrics lines: no vLLM word ('GPU KV cache usage' is not 'KV cache size:').
VLLM_REQUESTS = (
    'INFO:     172.17.0.{n}:5{n:04d} - "POST /v1/completions HTTP/1.1" 200 OK\n'
    "INFO 12-01 09:{m:02d}:{s:02d} [loggers.py:116] Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg generation "
    "throughput: 97.1 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 4.{n}%, Prefix cache hit "
    "rate: 61.0%\n"
)


def filler(total_bytes: int, start: int = 0) -> Iterator[bytes]:
    """Blocks of about 1 MiB of vLLM request lines, total_bytes in all (whole lines)."""
    block = "".join(VLLM_REQUESTS.format(n=n % 10_000, m=n % 60, s=n * 7 % 60) for n in range(start, start + 4_000))
    data = block.encode()
    written = 0
    while written < total_bytes:
        yield data
        written += len(data)


def write_big(path: Path, head: bytes, filler_bytes: int, tail: bytes = b"") -> int:
    """head, filler_bytes of request lines, tail; the file's line count."""
    lines = 0
    with path.open("wb") as stream:
        for part in (head, *filler(filler_bytes), tail):
            stream.write(part)
            lines += part.count(b"\n")
    return lines


@pytest.fixture
def big_log(asyncssh_host: LoopbackHost) -> Iterator[Path]:
    path = asyncssh_host.logs / "vllm-big.log"
    yield path
    path.unlink(missing_ok=True)


async def test_a_boot_before_100_mib_of_requests_moves_a_few_kib(asyncssh_host: LoopbackHost, pool: SSHPool,
                                                                  big_log: Path) -> None:
    boot = text_of(LEDGERS / "vllm/v0.6_llama3.1-8b_20k.log")
    lines = write_big(big_log, boot.encode(), 105 * MIB)
    assert big_log.stat().st_size > 105 * MIB
    source = RemoteFileSource(asyncssh_host.target(), str(big_log), pool, (str(asyncssh_host.logs),))
    view = await remote_boot(source, "vllm", -1)
    local = read_engine_boot(boot, source=source.label, engine="vllm")
    assert view is not None and facts(view)[:4] == facts(local)[:4] and facts(view)[5:] == facts(local)[5:]
    assert view.last_line == lines  # the boot's span runs to the log's end, counted on the host
    # kv_cache_size=3.81GiB of the profiling line (line 2): 3.81 x 1,024 = 3,901.44 MiB; the window is 20,000
    (rank,) = view.ranks
    assert rank.kv_mib is not None and rank.kv_mib.value == Decimal("3901.44") and rank.kv_mib.lines[0].number == 2
    assert rank.window_tokens is not None and rank.window_tokens.value == 20_000
    # 106 MiB on the host, a few hundred bytes back (measured: 519 B, against the 4 KiB program sent)
    assert pool.transfer.received_bytes < 16 * 1024 and pool.transfer.commands == 1


async def test_a_boot_in_the_middle_keeps_the_logs_own_line_numbers(asyncssh_host: LoopbackHost, pool: SSHPool,
                                                                    big_log: Path) -> None:
    """Two boots with 8 MiB of requests before the newest: its lines are the file's, not counted from it.

    (The host numbers every line it greps, so no size changes how; the local twin of the whole file is
    read line by line four times, which at 60 MiB took 9 s of the suite.)"""
    older = MARKER["vllm"] + text_of(LEDGERS / "vllm/v0.6_llama3.1-8b_20k.log")
    newer = MARKER["vllm"] + text_of(LEDGERS / "vllm/v1_qwen3-14b_lmcache.log")
    before = write_big(big_log, older.encode(), 8 * MIB)
    with big_log.open("ab") as stream:
        stream.write(newer.encode())
        after = b"".join(filler(2 * MIB, start=9))
        stream.write(after)
    total = before + newer.count("\n") + after.count(b"\n")
    whole = older + "x\n" * (before - older.count("\n")) + newer
    source = RemoteFileSource(asyncssh_host.target(), str(big_log), pool, (str(asyncssh_host.logs),))
    for boot in (-1, -2, 1, 2):
        view = await remote_boot(source, "vllm", boot)
        local = read_engine_boot(whole, source=source.label, engine="vllm", boot=boot)
        assert view is not None and facts(view)[:4] == facts(local)[:4] and facts(view)[5:] == facts(local)[5:]
    newest = await remote_boot(source, "vllm", -1)
    assert newest is not None and newest.last_line == total
    first_of_newer = before + 1
    assert view.first_line == first_of_newer and view.ranks[0].kv_tokens is not None
    assert view.ranks[0].kv_tokens.lines[0].number > first_of_newer
    assert pool.transfer.received_bytes < 64 * 1024


SLOT_LINE = ("slot update_slots: id  {slot} | task {n} | new prompt, n_ctx_slot = 4096, n_keep = 0, "
             "n_prompt_tokens = 9\n")


def llama_server_flood(requests: int) -> str:
    return "".join(SLOT_LINE.format(slot=n % 8, n=n) + "srv  log_server_r: request: POST /completion 10.0.0.1 200\n"
                   for n in range(requests))


@pytest.fixture
async def capped_pool() -> AsyncIterator[SSHPool]:
    ssh = SSHPool(Limits(command_timeout_s=30, engine_lines_bytes=8 * 1024))
    yield ssh
    await ssh.close()


async def test_a_flood_of_word_lines_keeps_the_newest_boot_and_refuses_the_rest(
        asyncssh_host: LoopbackHost, capped_pool: SSHPool) -> None:
    older = MARKER["llama.cpp"] + text_of(LEDGERS / "llamacpp/b4701_llamasharp_kv_self.log")
    newer = MARKER["llama.cpp"] + text_of(LEDGERS / "llamacpp/b45xx_server_8_slots.log")
    text = older + llama_server_flood(2_000) + newer + llama_server_flood(20)
    path = asyncssh_host.write_log(text)
    source = RemoteFileSource(asyncssh_host.target(), str(path), capped_pool, (str(asyncssh_host.logs),))
    view = await remote_boot(source, "llama.cpp", -1)
    local = read_engine_boot(text, source=source.label, engine="llama.cpp", boot=-1)
    assert view is not None and (view.index, view.boots_seen) == (-1, None)  # older boots were not counted
    assert facts(view)[3:] == facts(local)[3:]  # same span, figures, lines and hits
    assert "boot -1, lines" in view.where()
    for boot, said in ((1, "boot=1 cannot be read"), (-2, "boot=-2 cannot be read")):
        with pytest.raises(LedgerError, match=said) as refused:
            await remote_boot(source, "llama.cpp", boot)
        assert re.search(r"left the [\d,]{5} older ones there", str(refused.value))
        assert "boot=-1 can be read" in str(refused.value)
    assert capped_pool.transfer.received_bytes < 4 * 8 * 1024


async def test_a_boot_lost_under_the_flood_is_refused_not_read_short(asyncssh_host: LoopbackHost,
                                                                     capped_pool: SSHPool) -> None:
    text = text_of(LEDGERS / "llamacpp/b45xx_server_8_slots.log") + llama_server_flood(3_000)
    source = RemoteFileSource(asyncssh_host.target(), str(asyncssh_host.write_log(text)), capped_pool,
                              (str(asyncssh_host.logs),))
    with pytest.raises(LedgerError, match=r"boot=-1 cannot be read: .*\(none can be read; .*rotate the log"):
        await remote_boot(source, "llama.cpp", -1)
