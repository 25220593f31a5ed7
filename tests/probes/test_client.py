"""The client: endpoints from the config only, caps, timeouts, httpx errors translated, no prompt logged."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from radiance_mcp.core.errors import ConfigError, ProbeError
from radiance_mcp.probes.client import ProbeClient, redact, resolve_endpoint
from radiance_mcp.sources.config import Fleet, Service


def fleet(endpoint: str | None) -> Fleet:
    return Fleet(services={"svc": Service(endpoint=endpoint)})


@pytest.mark.parametrize(
    ("endpoint", "base"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
        ("https://gw.lan/radiance/v1/", "https://gw.lan/radiance"),
    ],
)
def test_endpoint_from_the_config(endpoint: str, base: str) -> None:
    assert resolve_endpoint(fleet(endpoint), "svc") == base


@pytest.mark.parametrize(
    ("endpoint", "match"),
    [
        (None, "has no endpoint"),
        ("ftp://host/x", "not an http"),
        ("localhost:8000", "not an http"),
        ("http://", "host"),
        # A port no socket takes, or not a number, or a broken IPv6 bracket: these escaped as
        # ValueError, httpx.InvalidURL or an OverflowError inside an ExceptionGroup.
        ("http://127.0.0.1:99999", "port"),
        ("http://host:abc", "port"),
        ("http://u:pw@host:abc/", "port"),
        ("http://[::1:8000", "not an http"),
    ],
)
def test_bad_endpoints_are_config_errors(endpoint: str | None, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        resolve_endpoint(fleet(endpoint), "svc")


def test_a_bad_port_names_the_service_without_its_credentials() -> None:
    with pytest.raises(ConfigError, match="service 'svc'") as caught:
        resolve_endpoint(fleet("http://u:pw@host:abc/"), "svc")
    assert "pw" not in str(caught.value)


def test_unknown_service_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="known services: svc"):
        resolve_endpoint(fleet("http://h:1"), "other")


def test_credentials_are_not_shown() -> None:
    assert redact("http://user:pw@host:8000/x") == "http://host:8000/x"


async def test_bodies_are_capped() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=b"x" * (3 << 20)))
    async with ProbeClient("svc", "http://h", 5.0, transport, max_body_bytes=1 << 20) as client:
        answer = await client.get_json("/big")
    assert answer.truncated and len(answer.text) == 1 << 20 and answer.data is None


async def test_a_hung_request_times_out_as_a_probe_error() -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return httpx.Response(200)

    async with ProbeClient("svc", "http://h", 0.05, httpx.MockTransport(hang)) as client:
        with pytest.raises(ProbeError, match=r"no answer within timeout_s=0\.05 s") as caught:
            await client.post_json("/v1/completions", {"prompt": "x"})
    assert isinstance(caught.value.__cause__, TimeoutError)
    assert client.requests_sent == 1


@pytest.mark.parametrize(
    ("error", "match"),
    [
        (httpx.ConnectError("refused"), "cannot connect"),
        (httpx.RemoteProtocolError("eof"), "closed the connection"),
        (httpx.ReadTimeout("slow"), "no answer within"),
    ],
)
async def test_httpx_errors_are_translated(error: httpx.HTTPError, match: str) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise error

    async with ProbeClient("svc", "http://h:9", 1.0, httpx.MockTransport(fail)) as client:
        with pytest.raises(ProbeError, match=match) as caught:
            await client.post_json("/v1/completions", {"prompt": "x"})
    assert caught.value.__cause__ is error
    assert "service 'svc' (http://h:9) POST /v1/completions" in str(caught.value)


async def test_prompts_are_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(400, json={"error": {"message": "no"}}))
    caplog.set_level(logging.DEBUG)
    async with ProbeClient("svc", "http://h", 1.0, transport) as client:
        await client.post_json("/v1/completions", {"prompt": "TOP-SECRET-PROMPT " * 50})
    assert "POST /v1/completions" in caplog.text
    assert "TOP-SECRET" not in caplog.text


async def test_redirects_are_not_followed() -> None:
    seen: list[str] = []

    def redirect(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(307, headers={"location": "http://elsewhere.test/steal"})

    async with ProbeClient("svc", "http://h", 1.0, httpx.MockTransport(redirect)) as client:
        answer = await client.post_json("/v1/completions", {"prompt": "x"})
    assert answer.status == 307 and seen == ["http://h/v1/completions"]
