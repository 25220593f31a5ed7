"""Issue 10, defect 2: a hostile input in flight does not hold up other calls, and stops.

Eight reads of a large sparse file under a log root made a 1.5 KB read wait 94 s, a 20 KB
log_text froze another session's tools/list for 14 s, and cancelling did not stop the reads.
Driven through the SDK's MCP client (in memory: the server shares the test's event loop, so
anything that blocks the loop shows in the unrelated call's latency).

Timed (the issue's own target): an unrelated call may be delayed at most 100 ms by the
hostile ones; measured here 40-55 ms. The bound asserted, DELAY_BOUND_S, is five times that
target. Delays are counted on this process's own CPU clock (time.process_time: every thread,
user and system), not the wall clock: on two cores shared with other work the process waits
for a core now and then, which stretched a 50 ms pause past the bound without the server doing
anything (load average 9). A loop held by the hostile work still counts in full, as the CPU
the work burns meanwhile, on the loop or in a thread that keeps the GIL. Before the fix the
delay was the whole hostile work: over a minute for the reads, a second and more for the
log_text (with the linear patterns; 170 s per line without).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from radiance_mcp.app.server import build_server
from radiance_mcp.core.constants import MAX_LEDGER_TEXT_CHARS, WORKED_CEILING_MIB
from radiance_mcp.core.ledger import BOOT_MARKER, MAX_LINE_BYTES, PHRASES
from radiance_mcp.sources import offload
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet, ServerSettings
from radiance_mcp.sources.runtime import Runtime

DELAY_BOUND_S = 0.5
PAUSE_S = 0.05
HOSTILE_READS = 8
SPARSE_BYTES = 64 << 30
"""64 GiB of holes: reading it takes minutes here (the kernel hands over zeros at about 0.2 GB/s)."""


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLES_DIR / "frank-archon.log", tmp_path / "small.log")  # 1,543 bytes
    with open(tmp_path / "sparse.log", "wb") as stream:
        stream.truncate(SPARSE_BYTES)
    return tmp_path


def _client(roots: Path) -> Client:
    """The SDK's client on the server, in memory, with roots as the one log root."""
    return Client(build_server(Runtime(Fleet(server=ServerSettings(log_roots=(str(roots),))))))


def _open_on(path: Path) -> int:
    """How many of this process's file descriptors are open on path (a running read holds one)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == str(path)
        except OSError:
            continue
    return count


async def _latency_s(call: Callable[[], Awaitable[Any]]) -> float:
    """The call's latency on this process's CPU clock (see the module's docstring)."""
    start = time.process_time()
    await call()
    return time.process_time() - start


async def _wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


@pytest.mark.slow
async def test_unrelated_calls_are_not_held_up_and_cancelled_reads_stop(roots: Path) -> None:
    async with _client(roots) as client:
        await _hold_up_and_cancel(client, roots / "sparse.log", str(roots / "small.log"))


async def _hold_up_and_cancel(client: Client, sparse: Path, small: str) -> None:

    async def small_read() -> None:
        result = await client.call_tool("compute_ceiling", {"log": small})
        assert not result.is_error and result.structured_content is not None
        assert result.structured_content["ceiling_mib"] == WORKED_CEILING_MIB  # 30,969: the read is real

    calls: dict[str, Callable[[], Awaitable[Any]]] = {"tools/list": client.list_tools, "a 1.5 KB read": small_read}
    quiet = {name: min([await _latency_s(call) for _ in range(3)]) for name, call in calls.items()}

    hostile = [asyncio.create_task(client.call_tool("read_budget_table", {"log": str(sparse)}))
               for _ in range(HOSTILE_READS)]
    assert await _wait_until(lambda: _open_on(sparse) == HOSTILE_READS, 10), "the hostile reads did not start"
    for _ in range(3):
        for name, call in calls.items():
            delay_s = await _latency_s(call) - quiet[name]
            assert delay_s <= DELAY_BOUND_S, f"{name} waited {delay_s:.2f} s behind {HOSTILE_READS} hostile reads"
    assert _open_on(sparse) == HOSTILE_READS and not any(task.done() for task in hostile)

    for task in hostile:
        task.cancel()
    await asyncio.gather(*hostile, return_exceptions=True)
    # A cancelled call stops its read at the next chunk: every descriptor on the file closes.
    assert await _wait_until(lambda: _open_on(sparse) == 0, 10), f"{_open_on(sparse)} reads still running"
    await small_read()  # and the server goes on serving, every worker's turn handed back
    assert offload._slots._free == offload.CPU_SLOTS and not offload._slots.waiting()


@pytest.mark.slow
async def test_a_hostile_log_text_does_not_freeze_tools_list(roots: Path) -> None:
    # The frozen session, grown: 12 calls of log_text at its cap (1 Mi characters: 15 lines
    # of the 64 KiB line cap), each line holding every phrase's keyword but the boot marker (so all
    # are one boot) and a long digit run. Parsing the twelve takes seconds even with linear
    # patterns: on the event loop, that long a freeze.
    keywords = " ".join(phrase.keyword for phrase in PHRASES.values() if phrase.keyword != BOOT_MARKER)
    line = f"E {keywords} {'1' * (MAX_LINE_BYTES - 500)} full-length sessions"
    text = "\n".join([line] * (MAX_LEDGER_TEXT_CHARS // (len(line) + 1)))
    assert len(text) <= MAX_LEDGER_TEXT_CHARS  # inside the schema's cap: the parser, not the cap, meets it
    async with _client(roots) as client:
        quiet = min([await _latency_s(client.list_tools) for _ in range(3)])
        hostile = asyncio.gather(*(client.call_tool("read_budget_table", {"log_text": text}) for _ in range(12)))
        delays_s = []
        while not hostile.done():  # for as long as the hostile calls run: a pause, then tools/list
            # The server shares this event loop: a loop held by parsing shows as a late pause.
            start = time.process_time()
            await asyncio.sleep(PAUSE_S)
            await client.list_tools()
            delays_s.append(time.process_time() - start - PAUSE_S - quiet)
        results = hostile.result()
    assert all(result.is_error for result in results)  # no budget table in it, said as such
    assert len(delays_s) > 1 and max(delays_s) <= DELAY_BOUND_S, (
        f"tools/list waited up to {max(delays_s):.2f} s behind 12 hostile log_text ({len(delays_s)} calls)"
    )


@pytest.mark.slow
async def test_a_read_past_the_time_limit_stops_with_the_file_and_the_remedy(
    roots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(offload, "READ_TIMEOUT_S", 1.0)
    sparse = roots / "sparse.log"
    async with _client(roots) as client:
        result = await client.call_tool("read_budget_table", {"log": str(sparse)})
    assert result.is_error
    message = result.content[0].text  # type: ignore[union-attr]
    assert str(sparse) in message
    assert "stopped after the 1 s limit" in message
    assert "name the radiance service's boot log" in message
    assert await _wait_until(lambda: _open_on(sparse) == 0, 5)
