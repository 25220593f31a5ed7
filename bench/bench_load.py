"""Load and soak: 50 concurrent HTTP sessions x 20 ledger-tool calls on the demo fleet; the same
while one more session sends a hostile 64 KiB line; 3,000 sequential stdio calls (RSS).

Targets (issue 10): 0 errors; p99 latency at most 1.5 s with the client on the same machine,
at most twice that with the hostile session; RSS flat after warm-up over stdio. The server is
`radiance-mcp serve --demo --http` (and `serve --demo` over stdio), driven by the SDK's client
(mcp.Client), all sessions from one client process on the same 2 cores. Every call is one of
read_budget_table, compute_ceiling and check_pool_contract on one of the demo services, and
its answer is checked (a tool error counts as an error).

    .venv/bin/python bench/bench_load.py [--sessions 50] [--calls 20] [--soak 3000]

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
SERVICES = ("frank-archon", "qwen38-proven", "twin", "lowpool")
"""The demo services that boot (qwen38-wide is refused at boot by design)."""
CALLS: tuple[tuple[str, str], ...] = (
    ("read_budget_table", "cards"),
    ("compute_ceiling", "ceiling_mib"),
    ("check_pool_contract", "required_mib"),
)
HOSTILE_LINE = "I sampler: " + "1" * (64 * 1024 - 20)
STEADY_AFTER = 3
"""A session's first calls meet the other 49 sessions connecting at once; 'steady' leaves them out."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_http() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    # Every session comes from this one address, as through a proxy: the per-client cap is raised to all.
    proc = subprocess.Popen(
        [sys.executable, "-m", "radiance_mcp", "serve", "--demo", "--http", "--port", str(port),
         "--max-connections-per-client", "256"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the server did not listen within 30 s")


async def _call(client: Client, number: int) -> tuple[float, str | None]:
    """One ledger-tool call, timed; an error's text, or None."""
    tool, key = CALLS[number % len(CALLS)]
    service = SERVICES[(number // len(CALLS)) % len(SERVICES)]
    start = time.perf_counter()
    try:
        result = await client.call_tool(tool, {"service": service})
    except Exception as exc:  # a transport error counts as an error, and the session goes on
        return time.perf_counter() - start, f"{tool}: {type(exc).__name__}: {exc}"
    elapsed = time.perf_counter() - start
    if result.is_error or not result.structured_content or key not in result.structured_content:
        return elapsed, f"{tool} {service}: {result.content[0] if result.content else result}"
    return elapsed, None


async def _session(url: str, calls: int, offset: int) -> tuple[list[float], list[str]]:
    latencies, errors = [], []
    async with Client(url) as client:
        for number in range(calls):
            elapsed, error = await _call(client, offset + number)
            latencies.append(elapsed)
            if error:
                errors.append(error)
    return latencies, errors


async def _hostile(url: str, stop: asyncio.Event) -> int:
    """One session sending the hostile line as log_text until stop; how many calls it made."""
    sent = 0
    async with Client(url) as client:
        while not stop.is_set():
            await client.call_tool("read_budget_table", {"log_text": HOSTILE_LINE})
            sent += 1
    return sent


async def _load(url: str, sessions: int, calls: int, hostile: bool, server_pid: int | None = None) -> dict[str, Any]:
    stop = asyncio.Event()
    hostile_task = asyncio.create_task(_hostile(url, stop)) if hostile else None
    if hostile_task:
        await asyncio.sleep(0.5)  # the hostile session is in flight before the load starts
    start = time.perf_counter()
    cpu = (_cpu_s(os.getpid()), _cpu_s(server_pid) if server_pid else 0.0)
    results = await asyncio.gather(*(_session(url, calls, s) for s in range(sessions)))
    wall = time.perf_counter() - start
    client_cpu_s = _cpu_s(os.getpid()) - cpu[0]
    server_cpu_s = _cpu_s(server_pid) - cpu[1] if server_pid else None
    stop.set()
    hostile_calls = await hostile_task if hostile_task else 0
    latencies = sorted(x for lat, _ in results for x in lat)
    errors = [e for _, errs in results for e in errs]
    cuts = statistics.quantiles(latencies, n=100)
    steady = statistics.quantiles([x for lat, _ in results for x in lat[STEADY_AFTER:]], n=100)
    return {"calls": len(latencies), "errors": errors, "p50": cuts[49], "p99": cuts[98], "max": latencies[-1],
            "steady_p99": steady[98],
            "wall": wall, "hostile_calls": hostile_calls, "client_cpu_s": client_cpu_s, "server_cpu_s": server_cpu_s}


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_rss_kib(command_part: str) -> int:
    """VmRSS of this process's child whose command line holds command_part."""
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if command_part in cmdline:
                for line in Path(f"/proc/{child}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
    raise SystemExit(f"no child process runs {command_part!r}")


async def _soak(total: int, warm_up: int) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "radiance_mcp", "serve", "--demo"],
                                   cwd=str(ROOT))
    errors, rss = 0, {}
    async with Client(params) as client:
        start = time.perf_counter()
        for number in range(total):
            if number == warm_up:
                rss["after warm-up"] = _children_rss_kib("radiance_mcp serve --demo")
            errors += (await _call(client, number))[1] is not None
        rss["at the end"] = _children_rss_kib("radiance_mcp serve --demo")
        wall = time.perf_counter() - start
    return {"errors": errors, "rss_kib": rss, "wall": wall}


def _print_load(title: str, figures: dict[str, Any], target_s: float) -> None:
    print(f"{title}: {figures['calls']} calls in {figures['wall']:.1f} s, {len(figures['errors'])} errors")
    print(f"  p50 {figures['p50']:.3f} s   p99 {figures['p99']:.3f} s (target <= {target_s:.1f} s)   "
          f"max {figures['max']:.3f} s")
    print(f"  p99 after each session's first {STEADY_AFTER} calls: {figures['steady_p99']:.3f} s")
    if figures["server_cpu_s"] is not None:
        per_call_ms = 1000 / figures["calls"]
        print(f"  CPU per call: server {figures['server_cpu_s'] * per_call_ms:.1f} ms, "
              f"client {figures['client_cpu_s'] * per_call_ms:.1f} ms (both on the same cores)")
    if figures["hostile_calls"]:
        print(f"  the hostile session sent {figures['hostile_calls']} x 64 KiB meanwhile")
    for error in figures["errors"][:5]:
        print(f"  error: {error}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--soak", type=int, default=3000)
    parser.add_argument("--warm-up", type=int, default=300)
    parser.add_argument("--url", help="an HTTP server already running `serve --demo --http` (e.g. under py-spy)")
    options = parser.parse_args()

    proc, url = (None, options.url) if options.url else _start_http()
    try:
        pid = proc.pid if proc else None
        await _load(url, 5, 2 * STEADY_AFTER, hostile=False)  # warm-up: imports, first reads
        plain = await _load(url, options.sessions, options.calls, hostile=False, server_pid=pid)
        _print_load(f"{options.sessions} sessions x {options.calls} calls over HTTP", plain, 1.5)
        hostile = await _load(url, options.sessions, options.calls, hostile=True, server_pid=pid)
        _print_load("the same, with one session sending a hostile 64 KiB line", hostile, 2 * plain["p99"])
        print(f"  p99 ratio hostile / plain: {hostile['p99'] / plain['p99']:.2f}x (target <= 2x)")
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=10)
    if options.soak:
        soak = await _soak(options.soak, options.warm_up)
        before, after = soak["rss_kib"]["after warm-up"], soak["rss_kib"]["at the end"]
        print(f"stdio soak: {options.soak} sequential calls in {soak['wall']:.1f} s, {soak['errors']} errors; "
              f"server RSS {before / 1024:.1f} MiB after {options.warm_up} calls, {after / 1024:.1f} MiB at the end "
              f"({(after - before) / 1024:+.1f} MiB)")


if __name__ == "__main__":
    asyncio.run(main())
