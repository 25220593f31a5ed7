"""Slow clients: time to an authenticated initialize while N sockets dribble request heads (issue 22).

`radiance-mcp serve --http` (its token from RADIANCE_MCP_TOKEN) runs as a subprocess on 127.0.0.1; N sockets from one
other loopback address (127.0.0.2, a single attacker; or from --sources addresses) each send one byte of a request head
every --interval seconds and never finish it. While they are held, the SDK's HTTP client
(from 127.0.0.1) connects with the bearer token and initializes; the clock runs from its
connect to initialize's answer, --repeat times. Then how long one partial head is kept open.

    .venv/bin/python bench/bench_slow_clients.py [--n 300] [--interval 10] [--repeat 5] [--sources 1]
        [--nofile N] [-- more serve flags]

Prints figures; asserts nothing. A server with no head bound or connection caps may never
answer: each initialize gives up after --give-up seconds and prints that.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import subprocess
import sys
import time

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

TOKEN = "bench-slow-clients-token"
HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + b"X-Pad: a" * 1000


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _source(i: int, sources: int) -> str:
    """The address of slow socket i: 127.0.0.2 for one source, else 127.0.1.x, one of sources."""
    return "127.0.0.2" if sources == 1 else f"127.0.1.{i % sources + 1}"


async def _dribble(port: int, source: str, stop: asyncio.Event, interval_s: float, held: list[int]) -> None:
    """One slow socket: a byte of HEAD every interval_s until stop or the server closes it."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    except OSError:
        return
    held[0] += 1
    try:
        for byte in HEAD:
            writer.write(bytes([byte]))
            await writer.drain()
            try:
                if await asyncio.wait_for(reader.read(1), timeout=interval_s) == b"":
                    break  # the server closed it
                break  # the server answered (503, 408): it is not held
            except TimeoutError:
                pass
            if stop.is_set():
                break
    except OSError:
        pass
    finally:
        held[0] -= 1
        writer.close()


async def _initialize(url: str, give_up_s: float) -> str:
    """The seconds to initialize's answer, or why there was none."""
    http = create_mcp_http_client(headers={"authorization": f"Bearer {TOKEN}"})
    started = time.perf_counter()
    try:
        async with asyncio.timeout(give_up_s), Client(streamable_http_client(url, http_client=http)):
            return f"{time.perf_counter() - started:.3f} s"
    except TimeoutError:
        return f"no answer in {give_up_s:g} s"
    except Exception as exc:  # a refusal (503) or a connection the server could not accept
        leaf = exc
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        return f"failed after {time.perf_counter() - started:.3f} s: {type(leaf).__name__}: {leaf}"


async def _partial_head_open_s(port: int, give_up_s: float) -> float | None:
    """Seconds until the server closes a connection that sent half a head and nothing more."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.3", 0))
    writer.write(HEAD[:40])
    started = time.perf_counter()
    try:
        async with asyncio.timeout(give_up_s):
            while await reader.read(4096):
                pass
        return time.perf_counter() - started
    except (TimeoutError, OSError):
        return None
    finally:
        writer.close()


async def _measure(url: str, port: int, args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    held = [0]
    slow = [asyncio.create_task(_dribble(port, _source(i, args.sources), stop, args.interval, held))
            for i in range(args.n)]
    await asyncio.sleep(2)  # every socket connected and sent its first byte
    print(f"{args.n} slow sockets opened from {args.sources} address(es), {held[0]} held by the server "
          f"(one byte every {args.interval:g} s)")
    for _ in range(args.repeat):
        print(f"  initialize: {await _initialize(url, args.give_up)} ({held[0]} slow sockets open)")
    stop.set()
    for task in slow:
        task.cancel()
    await asyncio.gather(*slow, return_exceptions=True)
    print(f"initialize with no slow sockets: {await _initialize(url, args.give_up)}")
    kept = await _partial_head_open_s(port, args.give_up)
    print("one partial head kept open: " + (f"{kept:.1f} s" if kept is not None else f"past {args.give_up:g} s"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between one socket's bytes")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--give-up", type=float, default=60.0, help="seconds an initialize is waited for")
    parser.add_argument("--sources", type=int, default=1, help="addresses the slow sockets come from")
    parser.add_argument("--nofile", type=int, default=None, help="the server's limit on open files (RLIMIT_NOFILE)")
    parser.add_argument("--tail", type=int, default=3, help="the server's last stderr lines to print")
    parser.add_argument("serve_flags", nargs="*", help="more flags for serve --http (after --)")
    args = parser.parse_args()
    port = _port()
    serve = [sys.executable, "-m", "radiance_mcp", "serve", "--http", "--port", str(port), *args.serve_flags]

    def set_limit() -> None:
        if args.nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))

    proc = subprocess.Popen(serve, env={**os.environ, "RADIANCE_MCP_TOKEN": TOKEN}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, preexec_fn=set_limit)
    try:
        while proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            print(f"the server exited with status {proc.returncode}")
            return
        asyncio.run(_measure(f"http://127.0.0.1:{port}/mcp", port, args))
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
        lines = err.decode(errors="replace").splitlines()
        print(f"server stderr: {len(lines)} lines" + "".join(f"\n  {line}" for line in lines[-args.tail:]))


if __name__ == "__main__":
    main()
