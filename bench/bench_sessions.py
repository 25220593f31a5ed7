"""Abandoned sessions: RSS growth after N initialize requests never closed, stateless against the SDK's default.

Issue 10, defect 6: with the SDK's stateful default, 10,000 initialize requests without a
DELETE grew the server by 370 MB and then refused every new older-protocol client with 503
for the 30-minute idle timeout. radiance-mcp serves statelessly. Both servers run as
subprocesses on 127.0.0.2 with the same tools; the client sends N initialize requests (50
at a time, protocol 2025-06-18), then one more as a new client. RSS is VmRSS from
/proc/PID/status before and after.

    .venv/bin/python bench/bench_sessions.py [--n 10000]

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

BIND = "127.0.0.2"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json",
           "mcp-protocol-version": "2025-06-18"}
SDK_DEFAULT = """\
import sys, uvicorn
from radiance_mcp.sources.config import Fleet
from radiance_mcp.app.server import build_server
from radiance_mcp.sources.runtime import Runtime
app = build_server(Runtime(Fleet())).streamable_http_app(host=sys.argv[1])  # stateful, the SDK's defaults
uvicorn.run(app, host=sys.argv[1], port=int(sys.argv[2]), log_level="warning")
"""


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _port() -> int:
    with socket.socket() as sock:
        sock.bind((BIND, 0))
        return int(sock.getsockname()[1])


def _initialize(i: int) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": i, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}


async def _flood(url: str, n: int) -> tuple[int, int]:
    """N initialize requests, 50 at a time; then one new client's: (failures among N, its status)."""
    failures = 0
    async with httpx.AsyncClient(headers=HEADERS, timeout=120) as http:
        for start in range(0, n, 50):
            answers = await asyncio.gather(*(http.post(url, json=_initialize(i))
                                             for i in range(start, min(n, start + 50))))
            failures += sum(a.status_code != 200 for a in answers)
    async with httpx.AsyncClient(headers=HEADERS, timeout=120) as fresh:
        status = (await fresh.post(url, json=_initialize(n + 1))).status_code
    return failures, status


def _run(label: str, args: list[str], port: int, n: int) -> float:
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(400):
            try:
                socket.create_connection((BIND, port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        url = f"http://{BIND}:{port}/mcp"
        asyncio.run(_flood(url, 20))  # warm-up
        before = _rss_mib(proc.pid)
        started = time.perf_counter()
        failures, status = asyncio.run(_flood(url, n))
        elapsed = time.perf_counter() - started
        after = _rss_mib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"{label:<28} RSS {before:7.1f} -> {after:7.1f} MiB (+{after - before:6.1f}); "
          f"{failures} of {n:,} refused; next new client: HTTP {status}; {n / elapsed:,.0f} initialize/s")
    return after - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=10_000)
    n = parser.parse_args().n
    port = _port()
    ours = _run("radiance-mcp (stateless)", [sys.executable, "-m", "radiance_mcp", "serve", "--http", "--host",
                                             BIND, "--port", str(port)], port, n)
    port = _port()
    sdk = _run("SDK default (stateful)", [sys.executable, "-c", SDK_DEFAULT, BIND, str(port)], port, n)
    print(f"RSS growth per {n:,} abandoned initializes: {ours:.1f} MiB against {sdk:.1f} MiB "
          f"({ours / sdk:.2f}x)" if sdk > 0 else "")


if __name__ == "__main__":
    main()
