"""Settling (issue 25 item 2), over the SDK's MCP client in memory: a boot that has not finished starting is
unsettled, and the ledger tools wait past the boot they read before for the next one to finish.

The finding: llama-cpp-python's server appends every boot to one log; right after a restart,
read_budget_table returned the old boot (no warning), then the half-written new boot with every
figure null and the remedy 'needs verbose=True', then the right one 1.4 s later. Here the test
writes that log in steps (the recorded server start-up, then the first lines of the next one,
then its rest) and each wait is bounded; no assertion depends on how fast the machine is (the
rest of a boot is written once the tool has reported that it waits).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_call import call

from radiance_mcp.app.server import build_server
from radiance_mcp.sim import SimFleet
from radiance_mcp.sources.config import Fleet, ServerSettings, Service, load
from radiance_mcp.sources.runtime import Runtime

LEDGERS = Path(__file__).parent.parent / "fixtures" / "ledgers"
SERVER_LOG = (LEDGERS / "llamacpp" / "recorded_llama-cpp-python-0.3.36_gemma3-270m_server.log").read_text()
BOOT = SERVER_LOG.splitlines(keepends=True)
HALF = 5
"""The new boot's first lines, to its model buffers: no context, no KV cache yet (the finding's half-written boot)."""
BOUND_S = 60
"""Every wait's bound: generous, so only a hang reaches it."""


@asynccontextmanager
async def served(log: Path) -> AsyncIterator[Client]:
    fleet = Fleet(services={"llama": Service(log=str(log), engine="llama.cpp")},
                  server=ServerSettings(log_roots=(str(log.parent),)))
    async with Client(build_server(Runtime(fleet))) as client:
        yield client


def append(log: Path, lines: list[str]) -> None:
    with log.open("a") as out:
        out.write("".join(lines))


async def waiting_call(client: Client, tool: str, steps: list[Callable[[], None]],
                       **arguments: Any) -> tuple[bool, Any, int]:
    """(is_error, answer, progress reports) of a call that waits; steps[k] runs at its k-th report that it waits."""
    reports: list[str | None] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        if len(reports) < len(steps):
            steps[len(reports)]()
        reports.append(message)

    result = await client.call_tool(tool, arguments, progress_callback=progress)
    answer = result.content[0].text if result.is_error else result.structured_content  # type: ignore[union-attr]
    return result.is_error, answer, len(reports)


async def test_a_half_written_boot_is_unsettled_and_its_figures_are_not_yet_printed(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(SERVER_LOG + "".join(BOOT[:HALF]))
    async with served(log) as client:
        _, table = await call(client, "read_budget_table", service="llama")
        refused, message = await call(client, "compute_ceiling", service="llama")
    assert table["ledger"]["boot"] == 2 and table["boot_status"] == "unsettled"
    assert "has not finished starting" in table["notes"][0] and "wait_s" in table["notes"][0]
    missing = [gap["why"] for gap in table["missing"]]
    assert missing and not any("verbose=True" in gap for gap in missing)  # not the log level: time
    assert refused and "has not finished starting" in message and "verbose=True" not in message


async def test_the_tools_wait_past_the_old_boot_for_the_new_one_to_finish(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(SERVER_LOG)
    async with served(log) as client:
        _, old = await call(client, "read_budget_table", service="llama")
        after = {"after_line": old["ledger"]["first_line"], "after_byte": old["ledger"]["first_byte"]}
        assert after == {"after_line": 1, "after_byte": 0} and old["boot_status"] == "settled"
        # The restart has not begun: the old boot is no answer to a call that waits past it.
        error, message = await call(client, "compute_ceiling", service="llama", **after)
        assert error and "no boot after the boot at line 1, byte 0 began within wait_s=0 s" in message
        append(log, BOOT[:HALF])
        error, table, reports = await waiting_call(client, "read_budget_table", [lambda: append(log, BOOT[HALF:])],
                                                   service="llama", wait_s=BOUND_S, **after)
        _, ceiling = await call(client, "compute_ceiling", service="llama", wait_s=BOUND_S, **after)  # no wait now
    assert not error and reports >= 1
    new = table["ledger"]
    assert (new["boot"], new["first_line"], new["first_byte"]) == (2, len(BOOT) + 1, len(SERVER_LOG.encode()))
    assert table["boot_status"] == "settled" and table["notes"] == []
    assert table["cards"][0]["kv_mib"]["value"] == 36 and table["cards"][0]["activation_mib"]["value"] == 514.5
    # the new boot, settled: its ceiling needs the free memory llama-cpp-python's CPU build does not print
    assert f"boot 2 of 2, lines {len(BOOT) + 1}-" in ceiling and "free_mib: not printed" in ceiling


async def test_a_log_that_shrank_or_was_replaced_counts_its_boots_anew(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(SERVER_LOG * 2)
    async with served(log) as client:
        _, second = await call(client, "read_budget_table", service="llama")
        after = {"after_line": second["ledger"]["first_line"], "after_byte": second["ledger"]["first_byte"]}
        log.write_text(SERVER_LOG)  # copytruncate: the file starts again, with one boot
        _, truncated = await call(client, "read_budget_table", service="llama", **after)
        replaced = tmp_path / "server.log.new"
        replaced.write_text("INFO: noise of the old process\n" + SERVER_LOG)
        os.replace(replaced, log)  # rotation by rename: a new file in the old one's place
        _, renamed = await call(client, "read_budget_table", service="llama", **after)
    assert after == {"after_line": len(BOOT) + 1, "after_byte": len(SERVER_LOG.encode())}
    cut = truncated["ledger"]
    assert (cut["boot"], cut["boots_seen"], cut["first_byte"]) == (1, 1, 0)
    assert (renamed["ledger"]["first_line"], renamed["ledger"]["first_byte"]) == (2, 31)
    assert truncated["boot_status"] == renamed["boot_status"] == "settled"


async def test_a_boot_rewritten_in_place_during_the_wait_is_a_new_boot(tmp_path: Path) -> None:
    # `> server.log` on each restart: the new boot starts where the old one did (line 1, byte 0); it is told
    # apart by being shorter than the old one was a moment before, and stays new as it grows past it.
    log = tmp_path / "server.log"
    requests = [f'INFO:     127.0.0.1:{40000 + n} - "POST /v1/completions HTTP/1.1" 200 OK\n' for n in range(50)]
    log.write_text(SERVER_LOG + "".join(requests))
    steps = [lambda: log.write_text("".join(BOOT[:HALF])), lambda: append(log, BOOT[HALF:] + requests * 2)]
    async with served(log) as client:
        error, table, reports = await waiting_call(client, "read_budget_table", steps, service="llama",
                                                   wait_s=BOUND_S, after_line=1, after_byte=0)
    assert not error and reports >= 2, table
    assert table["boot_status"] == "settled" and table["ledger"]["last_line"] == len(BOOT) + 100
    assert table["cards"][0]["kv_mib"]["value"] == 36


async def test_a_cancelled_wait_stops(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(SERVER_LOG + "".join(BOOT[:HALF]))
    waiting = asyncio.Event()

    async def progress(done: float, total: float | None, message: str | None) -> None:
        waiting.set()

    async with served(log) as client:
        task = asyncio.create_task(client.call_tool("compute_ceiling", {"service": "llama", "wait_s": 600},
                                                    progress_callback=progress))
        await asyncio.wait_for(waiting.wait(), BOUND_S)
        assert _waits() == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(int(BOUND_S / 0.05)):  # the server's side of the call ends at the cancel, not at 600 s
            if not _waits():
                break
            await asyncio.sleep(0.05)
        assert _waits() == 0
        _, table = await call(client, "read_budget_table", service="llama")  # and the server goes on serving
    assert table["boot_status"] == "unsettled"


def _waits() -> int:
    """How many tasks of this loop (the in-memory server's among them) are in a wait for a boot to settle."""
    count = 0
    for task in asyncio.all_tasks():
        coro: Any = task.get_coro()
        while coro is not None:
            count += getattr(coro, "__qualname__", "") == "read_settled"
            coro = getattr(coro, "cr_await", None)
    return count


async def test_a_pasted_excerpt_without_a_finished_line_is_read_as_far_as_it_goes() -> None:
    # Most recorded logs are excerpts that end before the boot's last line: one that sized its KV cache is
    # settled (its ceiling stands on what it printed); one cut before it is unsettled, and read_budget_table
    # still shows what it holds.
    text = (LEDGERS / "vllm" / "v0.6_llama3.1-8b_20k.log").read_text()
    cut = (LEDGERS / "sglang" / "tp8_load_begin.log").read_text()
    async with served(Path("/nonexistent/server.log")) as client:
        _, ceiling = await call(client, "compute_ceiling", log_text=text)
        _, table = await call(client, "read_budget_table", log_text=cut)
        error, message = await call(client, "read_budget_table", log_text=text, wait_s=5)
    assert ceiling["ceiling_mib"] > 0
    assert table["boot_status"] == "unsettled" and len(table["cards"]) == 8
    assert error and "wait_s: log_text is the caller's text" in message


@pytest.mark.parametrize(("log", "engine", "ends"), [
    ("vllm/heldout_v0_cuda_blocks_70.67x.log", "vllm", "init engine (profile, create kv cache, warmup model) took"),
    ("sglang/heldout_v0.5.10_one_gpu_no_graphs.log", "sglang", "Uvicorn running on"),
    ("llamacpp/recorded_llama-cpp-python-0.3.36_gemma3-270m_server.log", "llama.cpp", "Uvicorn running on"),
])
def test_each_dialect_knows_the_line_that_ends_a_start_up(log: str, engine: Any, ends: str) -> None:
    from radiance_mcp.core.engines import read_engine_boot

    text = (LEDGERS / log).read_text()
    state = read_engine_boot(text, source=log, engine=engine).state
    assert state.status == "settled" and ends in state.lines[-1].text
    cut = "".join(line for line in text.splitlines(keepends=True) if ends not in line and "compute buffer" not in line)
    assert read_engine_boot(cut, source=log, engine=engine).state.lines == ()  # an excerpt: settled by its KV lines


async def test_verify_deploy_waits_past_the_planned_boot_for_the_deploy(tmp_path: Path) -> None:
    # radiance's own ledger (the simulated fleet, which appends each boot to the service's log): the deploy
    # starts once verify_deploy has reported that it waits past the boot the plan was read from.
    async with SimFleet.start(tmp_path, time_scale=0.0001) as fleet:
        async with Client(build_server(Runtime(load(fleet.config_path)))) as client:
            _, plan = await call(client, "render_gates", service="frank-archon", vram_kv_mib=6_969, seqs=4)
            shape = replace(fleet.services["frank-archon"].shape, vram_kv_mib=6_969, seqs=4)
            deploys: list[asyncio.Task[Any]] = []

            def deploy() -> None:
                deploys.append(asyncio.create_task(fleet.redeploy("frank-archon", shape)))

            planned = plan["ledger"]
            error, out, reports = await waiting_call(
                client, "verify_deploy", [deploy], service="frank-archon", env_text=plan["env_text"], wait_s=BOUND_S,
                after_line=planned["first_line"], after_byte=planned["first_byte"])
            await asyncio.gather(*deploys)
    assert planned["boot"] == 1 and planned["first_byte"] == 0 and reports >= 1
    assert not error and out["ledger"]["boot"] == 2 and out["ledger"]["first_byte"] > 0
    assert out["ok"] is True and all(c["ok"] for c in out["checks"])
