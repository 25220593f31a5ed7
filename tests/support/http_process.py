"""`radiance-mcp serve --http` in a process of its own, on a free loopback port, for the tests that
drive it from outside (the SDK's HTTP client, the MCP Inspector's CLI)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping

from bounds import HANG_S, until_hung


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    for _ in until_hung():
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.stderr.read() if proc.stderr else ''!r}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("server did not listen")


@contextlib.contextmanager
def serve_http(*extra: str, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """The server's MCP URL while it runs; extra: more `serve` flags (e.g. --token-file); env: variables
    set for it beside this process's (e.g. RADIANCE_MCP_TOKEN)."""
    port = free_port()
    args = [sys.executable, "-m", "radiance_mcp", "serve", "--http", "--port", str(port), *extra]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    try:
        _wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=HANG_S)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
