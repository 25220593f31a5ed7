"""Hostile transport input (issue 10, defects 4, 6 and 8): real HTTP requests and raw stdio bytes.

- DNS rebinding: bound to any loopback spelling (127.0.0.2, 127.0.0.1, ::1 and its long form),
  a request naming another host, or sent from another site's page, is refused with no data
  (the app `serve --http` serves, in this process; the flags and the token through a
  `radiance-mcp serve --http` process).
- The token: from --token, --token-file or RADIANCE_MCP_TOKEN (a flag wins); an empty,
  multi-line or unreadable one is refused naming its source (issue 22). Slow clients and the
  connection caps: test_http_slow_clients.py.
- Sessions: initialize requests never closed cost the server nothing, and a new client is
  served after them; progress still reaches an HTTP client.
- stdio: a line that is not a JSON-RPC message gets a JSON-RPC error at once, and the
  server reads on.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from bounds import HANG_S, until_hung
from cli_run import CliRunner
from http_process import serve_http
from mcp import Client

from radiance_mcp.app.cli import TOKEN_ENV
from radiance_mcp.app.server import build_server, http_app
from radiance_mcp.sim import Shape, SimEndpoint
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet, Service, load
from radiance_mcp.sources.runtime import Runtime

EXAMPLE_LOG = str(EXAMPLES_DIR / "frank-archon.log")
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
OLDER_PROTOCOL = "2025-06-18"  # an initialize-handshake revision: the stateful path of the SDK


def _initialize(request_id: int = 1) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {
        "protocolVersion": OLDER_PROTOCOL, "capabilities": {}, "clientInfo": {"name": "rebinder", "version": "0"}}}


def _ceiling_call(request_id: int = 2) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "compute_ceiling", "arguments": {"log": EXAMPLE_LOG}}}


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


def _free_port(bind: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET) as sock:
        sock.bind((bind, 0))
        return int(sock.getsockname()[1])


def _url_host(bind: str) -> str:
    return f"[{bind}]" if ":" in bind else bind


@contextmanager
def _cli_server(bind: str, *extra: str, config: Path | None = None) -> Iterator[tuple[str, int]]:
    """`radiance-mcp serve --http --host bind` as a subprocess; yields (url, port) once it listens."""
    port = _free_port(bind)
    args = [sys.executable, "-m", "radiance_mcp", "serve", "--http", "--host", bind, "--port", str(port), *extra]
    if config is not None:
        args += ["--config", str(config)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in until_hung():
            if proc.poll() is not None:
                raise AssertionError(f"server exited: {proc.stderr.read() if proc.stderr else b''!r}")
            try:
                with socket.create_connection((bind, port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            raise AssertionError("server did not listen")
        yield f"http://{_url_host(bind)}:{port}/mcp", port
    finally:
        proc.terminate()
        proc.wait(timeout=HANG_S)
        if proc.stderr:
            proc.stderr.close()


def _post(url: str, body: dict[str, object], **headers: str) -> httpx.Response:
    return httpx.post(url, json=body, headers={**HEADERS, "mcp-protocol-version": OLDER_PROTOCOL, **headers},
                      timeout=30)


@asynccontextmanager
async def _served(runtime: Runtime, bind: str = "127.0.0.2") -> AsyncIterator[str]:
    """build_server's HTTP app for bind (as `serve --http --host bind` makes it) on uvicorn in this process."""
    sock = socket.create_server((bind, 0), family=socket.AF_INET6 if ":" in bind else socket.AF_INET)
    server = uvicorn.Server(uvicorn.Config(http_app(build_server(runtime), bind=bind), log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        yield f"http://{_url_host(bind)}:{sock.getsockname()[1]}/mcp"
    finally:
        server.should_exit = True
        await task
        sock.close()


LOOPBACK_BINDS = [
    "127.0.0.2",
    "127.0.0.1",
    pytest.param("::1", marks=pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here")),
    pytest.param("0:0:0:0:0:0:0:1", marks=pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here")),
]


@pytest.mark.slow
@pytest.mark.parametrize("bind", LOOPBACK_BINDS)
async def test_a_rebinding_page_gets_no_data_on_any_loopback_bind(bind: str) -> None:
    """The app `serve --http --host bind` serves (no config: load(None)), on uvicorn in this process."""
    async with _served(Runtime(load(None)), bind) as url, httpx.AsyncClient(timeout=30) as http:
        port = httpx.URL(url).port

        async def post(body: dict[str, object], **headers: str) -> httpx.Response:
            return await http.post(url, json=body,
                                   headers={**HEADERS, "mcp-protocol-version": OLDER_PROTOCOL, **headers})

        # The attack: the page's domain now resolves to this machine; Host and Origin are its own.
        attacked = await post(_initialize(), host=f"evil.example:{port}", origin=f"http://evil.example:{port}")
        assert attacked.status_code == 421, attacked.text
        assert "serverInfo" not in attacked.text
        called = await post(_ceiling_call(), host=f"evil.example:{port}")
        assert called.status_code == 421 and "30969" not in called.text.replace(",", "")
        # The right Host, but posted by another site's page.
        cross = await post(_ceiling_call(), origin="http://evil.example")
        assert cross.status_code == 403 and "30969" not in cross.text.replace(",", "")
        # A client that names the server as it is bound (no Origin, or its own page) is served.
        own = await post(_initialize())
        assert own.status_code == 200 and "serverInfo" in own.text
        page = await post(_initialize(), origin=f"http://{_url_host(bind)}:{port}")
        assert page.status_code == 200 and "serverInfo" in page.text


@pytest.mark.slow
@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here")
def test_the_cli_serves_the_long_form_of_the_ipv6_loopback_with_its_checks() -> None:
    """`serve --http --host 0:0:0:0:0:0:0:1` binds that spelling and answers to it, and only to it."""
    bind = "0:0:0:0:0:0:0:1"
    with _cli_server(bind) as (url, port):
        assert _post(url, _initialize(), host=f"evil.example:{port}").status_code == 421
        own = _post(url, _initialize())
        assert own.status_code == 200 and "serverInfo" in own.text


@pytest.mark.slow
def test_allowed_hosts_from_the_flag_and_the_config(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text('[server]\nallowed_hosts = ["gpu-box.internal:9443"]\n', encoding="utf-8")
    with _cli_server("127.0.0.2", "--allowed-host", "mcp.lab.test", config=config) as (url, port):
        named = _post(url, _ceiling_call(), host=f"mcp.lab.test:{port}", origin=f"https://mcp.lab.test:{port}")
        assert named.status_code == 200 and "30969" in named.text.replace(",", "")
        proxied = _post(url, _initialize(), host="gpu-box.internal:9443")  # behind a proxy, on its port
        assert proxied.status_code == 200
        assert _post(url, _initialize(), host="gpu-box.internal:80").status_code == 421  # not that port
        assert _post(url, _initialize(), host=f"mcp.lab.test.evil.example:{port}").status_code == 421
        assert _post(url, _initialize(), host=f"evil.example:{port}").status_code == 421


@pytest.mark.slow
def test_a_token_does_not_switch_the_host_check_off() -> None:
    with _cli_server("127.0.0.2", "--token", "lab-token-7f3a") as (url, port):
        bearer = "Bearer lab-token-7f3a"
        attacked = _post(url, _ceiling_call(), host=f"evil.example:{port}", authorization=bearer)
        assert attacked.status_code == 421 and "30969" not in attacked.text.replace(",", "")
        assert _post(url, _ceiling_call(), host=f"evil.example:{port}").status_code == 401  # no token: 401 first
        served = _post(url, _ceiling_call(), authorization=bearer)
        assert served.status_code == 200 and "30969" in served.text.replace(",", "")


def _bearer_status(url: str, token: str | None) -> int:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return _post(url, _initialize(), **headers).status_code


@pytest.mark.slow
def test_the_token_comes_from_a_file_or_the_environment_and_a_flag_wins(tmp_path: Path) -> None:
    """`ps` shows a process's arguments to every user: the token may come from a file or the environment."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), TOKEN_ENV: "env-token-5c1d"}
    with serve_http(env=env) as url:
        assert _bearer_status(url, None) == 401
        assert _bearer_status(url, "env-token-5c1d") == 200
    token_file = tmp_path / "token"
    token_file.write_bytes(b"file-token-9e2b\r\n")  # the line ending is not part of the token
    token_file.chmod(0o600)
    with serve_http("--token-file", str(token_file), env=env) as url:
        assert _bearer_status(url, "file-token-9e2b") == 200
        assert _bearer_status(url, "env-token-5c1d") == 401  # the flag wins over the environment


NOT_HERE = "203.0.113.7"
"""A documentation address (TEST-NET-3), of no machine: a serve that gets past its token binds it and fails."""


@pytest.mark.parametrize(("content", "flags", "env", "said"), [
    (None, ["--token-file", "{dir}/missing"], {}, "--token-file {dir}/missing: No such file or directory; name a "
     "readable file that holds the token"),
    (b"", ["--token-file", "{file}"], {}, "--token-file {file} is empty: give the token, or none of --token, "
     f"--token-file and {TOKEN_ENV}"),
    (b"\n", ["--token-file", "{file}"], {}, "--token-file {file} is empty"),
    (b"one\ntwo\n", ["--token-file", "{file}"], {}, "--token-file {file}: the token holds a line break"),
    (b"x" * 5000, ["--token-file", "{file}"], {}, "--token-file {file}: longer than 4096 bytes, so not a token file"),
    (b"\xff\xfe", ["--token-file", "{file}"], {}, "--token-file {file}: not UTF-8 text"),
    (b"tok", ["--token-file", "{file}", "--token", "tok"], {}, "give --token or --token-file, not both"),
    (None, ["--token", ""], {}, "--token is empty"),
    (None, [], {TOKEN_ENV: " padded "}, f"{TOKEN_ENV}: the token holds a line break, a control character or a "
     "space at an end"),
], ids=["missing", "empty", "newline-only", "two-lines", "too-long", "not-utf8", "both-flags", "empty-flag",
        "padded-env"])
def test_a_bad_token_is_refused_naming_its_source(tmp_path: Path, cli: CliRunner, content: bytes | None,
                                                  flags: list[str], env: dict[str, str], said: str) -> None:
    token_file = tmp_path / "token"
    if content is not None:
        token_file.write_bytes(content)
        token_file.chmod(0o600)
    names = {"dir": tmp_path, "file": token_file}
    proc = cli("serve", "--http", "--host", NOT_HERE, "--port", "8000", *(f.format(**names) for f in flags),
               env=env)
    assert proc.returncode == 1, proc.stderr
    assert said.format(**names) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_token_file_others_may_read_is_used_with_a_warning(tmp_path: Path, cli: CliRunner) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("shared-token\n", encoding="utf-8")
    token_file.chmod(0o644)
    proc = cli("serve", "--http", "--host", NOT_HERE, "--port", "8000", "--token-file", str(token_file),
               env={"XDG_CACHE_HOME": str(tmp_path / "cache")})  # the server is built before the bind
    assert f"warning: --token-file {token_file} may be read by other users (mode 0644): chmod 600" in proc.stderr
    # The token was taken: the bind of an address that is not loopback was tried (and fails here).
    assert proc.returncode == 1 and "not an address of this machine" in proc.stderr, proc.stderr


@pytest.mark.parametrize("bad", ["*", "http://mcp.lab.test", "mcp.lab.test:99999", "mcp lab"])
def test_a_bad_allowed_host_is_refused_with_the_rule(bad: str, cli: CliRunner) -> None:
    proc = cli("serve", "--http", "--allowed-host", bad, "--port", "1")
    assert proc.returncode == 1, proc.stderr
    assert f"--allowed-host {bad!r} is not a host name or address" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------------------
# Sessions


ABANDONED_PER_LANE = 2
"""50 lanes of 2: 100 clients that initialize and walk away, 50 at once. The property is that the server
holds nothing for them (no session id in any answer) and still serves a new client; a server
that held sessions fails on the first answer. The SDK's old cap (10,000 held sessions, then
503 for every new client) was never reached by the 2,000 this test sent before either; the
memory at 10,000 is measured by bench/bench_sessions.py."""


@pytest.mark.slow
async def test_abandoned_sessions_hold_nothing_and_leave_new_clients_served() -> None:
    tls = ssl.create_default_context()  # unused on http://, but each client would load the CA file for one

    async def initialize_and_walk_away(first_id: int) -> None:
        # One connection of its own, so the 50 at once cost the test's HTTP client no pool search.
        async with httpx.AsyncClient(headers={**HEADERS, "mcp-protocol-version": OLDER_PROTOCOL},
                                     timeout=120, verify=tls) as http:
            for request_id in range(first_id, first_id + ABANDONED_PER_LANE):
                answer = await http.post(url, json=_initialize(request_id))
                assert answer.status_code == 200, answer.text
                assert "mcp-session-id" not in answer.headers  # nothing is held for it

    async with _served(Runtime(Fleet())) as url:
        # Clients that initialize, then walk away (no DELETE), 50 at a time.
        await asyncio.gather(*(initialize_and_walk_away(lane * ABANDONED_PER_LANE) for lane in range(50)))
        async with Client(url) as client:
            result = await client.call_tool("compute_ceiling", {"log": EXAMPLE_LOG})
        assert result.structured_content is not None and result.structured_content["ceiling_mib"] == 30_969


async def test_progress_reaches_an_http_client_without_a_session() -> None:
    async with SimEndpoint(Shape(), time_scale=0.001) as ep:
        runtime = Runtime(Fleet(services={"sim": Service(endpoint=ep.url)}))
        async with _served(runtime) as url, Client(url) as client:
            seen: list[tuple[float, float | None]] = []

            async def progress(done: float, total: float | None, message: str | None) -> None:
                seen.append((done, total))

            result = await client.call_tool(
                "boundary_probe", {"service": "sim", "n": 2, "max_model_len": 200_000, "execute": True},
                progress_callback=progress,
            )
    assert not result.is_error and result.structured_content is not None
    assert result.structured_content["verdict"] == "2/2 retrieved"
    assert sorted(seen) == [(1, 2), (2, 2)]


# ---------------------------------------------------------------------------------------
# stdio: raw bytes


class _Stdio:
    """The stdio server as a subprocess, fed raw bytes; answers read line by line with a deadline."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "radiance_mcp", "serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._buffer = b""

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw)
        self.proc.stdin.flush()

    def answer(self, deadline_s: float = 30.0) -> dict[str, object]:
        """The next message; a generous deadline so a dropped line fails here instead of hanging."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + deadline_s
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                raise AssertionError(f"no answer within {deadline_s} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise AssertionError("the server closed stdout")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return dict(json.loads(line))

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def stdio() -> Iterator[_Stdio]:
    """One initialized server for every test below: each sends its garbage to the server the
    tests before it left, so it also shows the server reading on after all of theirs."""
    server = _Stdio()
    try:
        server.send(json.dumps(_initialize()).encode() + b"\n")
        assert "result" in server.answer()
        server.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        yield server
    finally:
        server.close()


GARBAGE = [
    pytest.param(b"this line is not json at all\n", id="not-json"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"x": "\\udc80"}}\n', id="lone-surrogate"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"x": "\xed\xb2\x80\xff"}}\n',
                 id="raw-surrogate-bytes"),
    pytest.param(b'{"jsonrpc": "2.0", "id": ' + b"7" * 5_000 + b', "method": "ping"}\n', id="5000-digit-id"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"n": 1' + b"0" * 5_000 + b"}}\n",
                 id="5000-digit-param"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 7, "method": "ping"\n', id="truncated"),
]


@pytest.mark.slow
@pytest.mark.parametrize("garbage", GARBAGE)
def test_garbage_on_stdio_is_answered_and_the_server_reads_on(stdio: _Stdio, garbage: bytes) -> None:
    stdio.send(garbage)
    reply = stdio.answer()
    if "result" in reply:
        # Bytes that are not UTF-8 read as U+FFFD, which leaves a valid message: answered as one.
        assert reply["id"] == 7
    else:
        assert reply["id"] is None and reply["jsonrpc"] == "2.0"
        error = reply["error"]
        assert isinstance(error, dict) and error["code"] == -32700, error
        assert "Parse error" in error["message"] and "one JSON-RPC message per line" in error["message"]
    stdio.send(json.dumps(_ceiling_call(8)).encode() + b"\n")
    after = stdio.answer()
    assert after["id"] == 8
    result = after["result"]
    assert isinstance(result, dict) and result["structuredContent"]["ceiling_mib"] == 30_969


@pytest.mark.slow
def test_json_that_is_not_a_message_is_an_invalid_request(stdio: _Stdio) -> None:
    for line in (b"[1, 2, 3]\n", b'{"jsonrpc": "2.0", "id": 3}\n', b'"ping"\n'):
        stdio.send(line)
        reply = stdio.answer()
        error = reply["error"]
        assert reply["id"] is None and isinstance(error, dict) and error["code"] == -32600, (line, reply)
    stdio.send(b'{"jsonrpc": "2.0", "id": 4, "method": "ping"}\n')
    assert stdio.answer() == {"jsonrpc": "2.0", "id": 4, "result": {}}
