"""The probes' only network code: one httpx client per probe, aimed at a configured endpoint.

Safety, and the threat each rule stops:
- The endpoint comes only from the fleet config (``Fleet.service(name).endpoint``) or the
  simulated fleet, never from a tool argument: an agent cannot aim a probe, and the long
  prompts it carries, at an arbitrary host (server-side request forgery).
- Redirects are not followed and proxy settings from the environment are ignored
  (``trust_env=False``): a prompt goes to the configured host and nowhere else.
- Every request has a timeout (``timeout_s``) and the caller wraps the whole probe in its total
  timeout; a response body is read up to ``max_body_bytes`` (a streamed one up to
  ``MAX_STREAM_BYTES``) and no further, so a hostile or broken server cannot exhaust memory.
- Prompts are never logged: log lines carry the method, path, sizes, status and latency.
- httpx exceptions become ``ProbeError`` naming the service, endpoint and path (``raise ... from``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from radiance_mcp.core.errors import ConfigError, ProbeError
from radiance_mcp.core.wording.refusals import decode_json
from radiance_mcp.sources.config import Fleet

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20
"""An answer (a refusal, a completion) is read up to 1 MiB."""
MAX_STREAM_BYTES = 16 << 20
"""A streamed answer is read up to 16 MiB."""
CONNECT_TIMEOUT_S = 10.0


def resolve_endpoint(fleet: Fleet, service: str) -> str:
    """The service's endpoint from the config, checked: http(s), a host, no credentials shown."""
    endpoint = fleet.service(service).endpoint
    where = f" in {fleet.path}" if fleet.path else ""
    if not endpoint:
        raise ConfigError(f"service {service!r}{where} has no endpoint; add endpoint = \"http://host:port\"")
    try:
        parts = urlsplit(endpoint)
        _ = parts.port  # a port out of 0-65535 or not a number raises ValueError here, not mid-probe
    except ValueError as exc:
        raise ConfigError(
            f"service {service!r}{where}: endpoint {redact(endpoint)!r} is not an http(s) URL with a host ({exc}); "
            "write it as http://host:port"
        ) from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"service {service!r}{where}: endpoint {redact(endpoint)!r} is not an http(s) URL with a host"
        )
    path = parts.path.rstrip("/")
    # Routes are added below: "/v1/completions" and root routes such as "/tokenize".
    path = path.removesuffix("/v1")
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


_CREDENTIALS = re.compile(r"^([^:/?#]+://)[^/?#]*@")
"""user:password@ at the head of a URL's authority (up to its last '@')."""


def redact(url: str) -> str:
    """The URL without user:password, for messages; a malformed URL is redacted too, never parsed."""
    return _CREDENTIALS.sub(r"\1", url, count=1)


@dataclass(frozen=True)
class Answer:
    status: int
    text: str
    """The body, decoded, up to the cap."""
    data: Any
    """The body as JSON, None when it is not JSON."""
    latency_s: float
    truncated: bool


@dataclass
class StreamEvent:
    """One server-sent event: its JSON (None for [DONE] or non-JSON) and when it arrived."""

    data: Any
    at_s: float
    done: bool = False
    raw: str = ""
    """The body itself, for an answer that is not a stream (a refusal)."""


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's own default (certifi's CA bundle, verified), built once: httpx builds it again for
    every client, loading the bundle (20 ms a probe)."""
    return httpx.create_ssl_context(trust_env=False)


@dataclass
class ProbeClient:
    """An httpx client for one service; counts every request it sends."""

    service: str
    base_url: str
    timeout_s: float
    transport: httpx.AsyncBaseTransport | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    requests_sent: int = 0
    _client: httpx.AsyncClient | None = field(default=None, repr=False)

    @classmethod
    def for_service(
        cls, fleet: Fleet, service: str, timeout_s: float, transport: httpx.AsyncBaseTransport | None = None
    ) -> ProbeClient:
        return cls(service, resolve_endpoint(fleet, service), timeout_s, transport)

    async def __aenter__(self) -> ProbeClient:
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(self.timeout_s, connect=min(CONNECT_TIMEOUT_S, self.timeout_s)),
            follow_redirects=False,
            trust_env=False,
            verify=_tls_context(),
            transport=self.transport,
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=32),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    @property
    def endpoint(self) -> str:
        return redact(self.base_url)

    def _where(self, method: str, path: str) -> str:
        return f"service {self.service!r} ({self.endpoint}) {method} {path}"

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            raise RuntimeError("ProbeClient used outside 'async with'")
        return self._client

    async def post_json(self, path: str, payload: dict[str, Any]) -> Answer:
        return await self._send("POST", path, payload)

    async def get_json(self, path: str) -> Answer:
        return await self._send("GET", path, None)

    async def _send(self, method: str, path: str, payload: dict[str, Any] | None) -> Answer:
        client = self._http()
        content = json.dumps(payload).encode() if payload is not None else None
        self.requests_sent += 1
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout_s):
                request = client.build_request(
                    method, path, content=content, headers={"content-type": "application/json"} if content else None
                )
                response = await client.send(request, stream=True)
                try:
                    body, truncated = await _read_capped(response, self.max_body_bytes)
                finally:
                    await response.aclose()
        except TimeoutError as exc:
            raise ProbeError(
                f"{self._where(method, path)}: no answer within timeout_s={self.timeout_s:g} s; the engine may "
                "be hung or still prefilling. Raise timeout_s, or check the service."
            ) from exc
        except httpx.HTTPError as exc:
            raise _translate(exc, self._where(method, path), self.timeout_s) from exc
        latency = time.perf_counter() - started
        text = body.decode("utf-8", errors="replace")
        log.info(
            "%s %s: %d bytes sent, status %d, %d bytes back in %.3f s",
            method, path, len(content or b""), response.status_code, len(body), latency,
        )
        return Answer(response.status_code, text, decode_json(text), latency, truncated)

    @asynccontextmanager
    async def stream_events(
        self, path: str, payload: dict[str, Any]
    ) -> AsyncIterator[tuple[int, AsyncIterator[StreamEvent]]]:
        """POST and yield (status, events). A non-200 answer yields its body as one event."""
        client = self._http()
        content = json.dumps(payload).encode()
        self.requests_sent += 1
        where = self._where("POST", path)
        try:
            request = client.build_request("POST", path, content=content, headers={"content-type": "application/json"})
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _translate(exc, where, self.timeout_s) from exc
        log.info("POST %s (stream): %d bytes sent, status %d", path, len(content), response.status_code)
        try:
            yield response.status_code, _events(response, where, self.timeout_s)
        finally:
            await response.aclose()


async def _read_capped(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        room = cap - size
        if len(chunk) >= room:
            chunks.append(chunk[:room])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


async def _events(response: httpx.Response, where: str, timeout_s: float) -> AsyncIterator[StreamEvent]:
    """Server-sent events (``data: {...}`` lines) or, for a plain JSON answer, that answer."""
    size = 0
    buffer = ""
    # Only a 200 is read as a stream: a refusal is one body whatever content-type it claims.
    is_sse = response.status_code == 200 and "text/event-stream" in response.headers.get("content-type", "")
    try:
        async for chunk in response.aiter_text():
            size += len(chunk)
            if size > MAX_STREAM_BYTES:
                raise ProbeError(f"{where}: the streamed answer passed {MAX_STREAM_BYTES} bytes; stopped reading")
            if not is_sse:
                buffer += chunk
                continue
            buffer += chunk
            *lines, buffer = buffer.split("\n")
            now = time.perf_counter()
            for line in lines:
                line = line.strip()
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    yield StreamEvent(None, now, done=True)
                    return
                yield StreamEvent(decode_json(payload), now)
    except httpx.HTTPError as exc:
        raise _translate(exc, where, timeout_s) from exc
    if not is_sse:
        yield StreamEvent(decode_json(buffer), time.perf_counter(), done=True, raw=buffer)


def _translate(exc: httpx.HTTPError, where: str, timeout_s: float) -> ProbeError:
    if isinstance(exc, httpx.TimeoutException):
        return ProbeError(
            f"{where}: no answer within timeout_s={timeout_s:g} s ({type(exc).__name__}); the engine may be hung "
            "or still prefilling. Raise timeout_s, or check the service."
        )
    if isinstance(exc, httpx.ConnectError):
        return ProbeError(f"{where}: cannot connect ({exc}); is the service up and the endpoint right?")
    if isinstance(exc, httpx.RemoteProtocolError):
        return ProbeError(f"{where}: the server closed the connection mid-answer ({exc})")
    return ProbeError(f"{where}: {type(exc).__name__}: {exc}")
