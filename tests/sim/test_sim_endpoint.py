"""The simulated endpoint through real HTTP (httpx against the server on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radiance_mcp.core.constants import CHARS_PER_TOKEN_CORPUS, CHARS_PER_TOKEN_FOX, DEFAULT_MODEL
from radiance_mcp.core.rules.capacity import REFUSAL, pool_contract
from radiance_mcp.sim import Behaviour, Shape, SimEndpoint, count_tokens, fox_filler
from radiance_mcp.sim.calibration import THINKING_TOKENS
from radiance_mcp.sim.fleet import DEFAULT_SERVICES
from radiance_mcp.sources import ledger_file

SHAPES = {spec.name: spec.shape for spec in DEFAULT_SERVICES}
WINDOW = Shape().max_model_len  # 200,000


@pytest.fixture
async def ep() -> AsyncIterator[SimEndpoint]:
    async with SimEndpoint(Shape(), time_scale=0.0001) as endpoint:
        yield endpoint


@pytest.fixture
async def client(ep: SimEndpoint) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=ep.url, timeout=30) as c:
        yield c


def _prompt(marker: str, tokens: int) -> str:
    """A marker line at the head, then fox filler, for a prompt of exactly `tokens` tokens."""
    return fox_filler(tokens, head=f"{marker}\n")


async def _complete(client: httpx.AsyncClient, prompt: str, **extra: Any) -> httpx.Response:
    return await client.post("/v1/completions", json={"prompt": prompt, **extra})


# ---------------------------------------------------------------------------------------
# The tokenizer


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("a" * 552_340, 200_000),  # 552,340 / 2.7617 chars per token (corpus)
        ("The quick brown fox jumps over the lazy dog. " * 11_429, 200_010),  # 514,305 / 2.5714 = 200,010.3 (fox)
        ("hello world", 4),  # 11 / 2.7617 = 3.98
    ],
)
def test_count_tokens_uses_the_seed_ratios(text: str, tokens: int) -> None:
    assert count_tokens(text) == tokens


@pytest.mark.parametrize("tokens", [1, 100, 1_024, 200_000, 202_777])
def test_fox_filler_is_exact_and_at_the_fox_ratio(tokens: int) -> None:
    text = fox_filler(tokens)
    assert count_tokens(text) == tokens
    assert abs(len(text) / tokens - CHARS_PER_TOKEN_FOX) < 3 / tokens + 1e-4
    assert CHARS_PER_TOKEN_FOX < CHARS_PER_TOKEN_CORPUS


# ---------------------------------------------------------------------------------------
# Section 7: the window and the pool contract


async def test_over_window_refusal_names_the_count_before_any_prefill(
    ep: SimEndpoint, client: httpx.AsyncClient
) -> None:
    response = await _complete(client, fox_filler(202_777), max_tokens=8)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "prompt: 202,777 prompt tokens does not fit the 200000 token context"
    record = ep.requests[-1]
    assert (record.prompt_tokens, record.prefill_tokens, record.prefill_s) == (202_777, 0, 0.0)


async def test_no_refusal_on_prompt_plus_max_tokens(ep: SimEndpoint, client: httpx.AsyncClient) -> None:
    # 199,990 + 100 > 200,000: accepted, pays the prefill, generation stops at the window.
    response = await _complete(client, _prompt("MARKER-7", 199_990), max_tokens=100)
    assert response.status_code == 200
    body = response.json()
    assert body["usage"] == {"prompt_tokens": 199_990, "completion_tokens": 10, "total_tokens": 200_000}
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["choices"][0]["text"].startswith("MARKER-7")
    assert ep.requests[-1].prefill_tokens == 199_990


async def test_a_pool_below_its_contract_serves_short_and_refuses_long() -> None:
    shape = SHAPES["lowpool"]  # 3,000 MiB pool, 2 x 200,000 fp8 needs 3,524.45
    share = pool_contract(Decimal(3_000), 2, 200_000, "fp8", DEFAULT_MODEL).max_window_at_seqs
    assert share < 200_000
    async with SimEndpoint(shape, time_scale=0.0001) as ep, httpx.AsyncClient(base_url=ep.url, timeout=30) as c:
        short = await c.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
        assert short.status_code == 200
        long = await _complete(c, fox_filler(share), max_tokens=16)
        assert long.status_code == 400
        assert long.json()["error"]["message"] == REFUSAL.format(window=200_000)
        assert long.json()["error"]["message"] == (
            "does not fit the 200000 token context, which leaves nothing to generate into"
        )
        fits = await _complete(c, fox_filler(share - 100), max_tokens=16)
        assert fits.status_code == 200


# ---------------------------------------------------------------------------------------
# timings, thinking, the marker


async def test_timings_modes_switch_live(ep: SimEndpoint, client: httpx.AsyncClient) -> None:
    full = (await _complete(client, "MARK a", max_tokens=4)).json()
    assert full["timings"]["prompt_per_second"] > 0 and full["timings"]["predicted_per_second"] > 0
    assert full["timings"]["predicted_n"] == 4
    ep.behaviour.timings = "null_rates"
    nulls = (await _complete(client, "MARK b", max_tokens=4)).json()["timings"]
    assert nulls["prompt_per_second"] is None and nulls["predicted_per_second"] is None
    assert nulls["predicted_per_token_ms"] is None and nulls["predicted_n"] == 4
    ep.behaviour.timings = "missing"
    assert "timings" not in (await _complete(client, "MARK c", max_tokens=4)).json()


@pytest.mark.parametrize(
    ("behaviour", "kwargs", "max_tokens", "content_starts", "finish"),
    [
        (Behaviour(), None, 8, "", "stop"),  # thinking on by default: empty content, 'stop'
        (Behaviour(), {"enable_thinking": False}, 8, "MARKER-1", "length"),
        (Behaviour(), None, THINKING_TOKENS + 8, "MARKER-1", "length"),  # room after the thinking
        (Behaviour(thinking_default=False), None, 8, "MARKER-1", "length"),
        (Behaviour(thinking_default=False), {"enable_thinking": True}, 8, "", "stop"),
    ],
)
async def test_thinking(
    behaviour: Behaviour, kwargs: dict[str, bool] | None, max_tokens: int, content_starts: str, finish: str
) -> None:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "MARKER-1 say it back"}], "max_tokens": max_tokens}
    if kwargs is not None:
        body["chat_template_kwargs"] = kwargs
    async with SimEndpoint(Shape(), behaviour=behaviour, time_scale=0.0001) as ep:
        async with httpx.AsyncClient(base_url=ep.url) as c:
            answer = (await c.post("/v1/chat/completions", json=body)).json()
    choice = answer["choices"][0]
    assert choice["finish_reason"] == finish
    assert choice["message"]["content"].startswith(content_starts)
    if not content_starts:
        assert choice["message"]["content"] == ""
    assert answer["usage"]["completion_tokens"] == max_tokens


async def test_the_model_answers_the_marker_at_the_head(client: httpx.AsyncClient) -> None:
    body = (await _complete(client, _prompt("MARKER-c0ffee nonce-42", 5_000), max_tokens=3)).json()
    assert body["choices"][0]["text"] == "MARKER-c0ffee nonce-42 The"


# ---------------------------------------------------------------------------------------
# The prefix cache


async def test_prefix_cache_serves_a_repeated_head_and_survives_restarts(
    ep: SimEndpoint, client: httpx.AsyncClient
) -> None:
    prompt = _prompt("MARKER-9", 50_000)
    cold = (await _complete(client, prompt, max_tokens=1)).json()
    warm = (await _complete(client, prompt, max_tokens=1)).json()
    await ep.restart()
    after_restart = (await _complete(client, prompt, max_tokens=1)).json()
    nonce = (await _complete(client, "nonce-8d1f " + prompt, max_tokens=1)).json()
    cold_r, warm_r, restart_r, nonce_r = ep.requests[-4:]
    assert cold_r.cached_tokens == 0 and cold_r.prefill_tokens == 50_000
    assert warm_r.cached_tokens > 49_000 and warm_r.prefill_tokens < 1_000
    assert restart_r.boot == 2 and restart_r.cached_tokens == warm_r.cached_tokens
    assert nonce_r.cached_tokens == 0  # a nonce at the head makes it cold
    # The simulated clock: a warm prefill is fast and its rate looks like a miracle.
    assert warm["timings"]["prompt_ms"] < cold["timings"]["prompt_ms"] / 4
    assert warm["timings"]["prompt_per_second"] > 5 * cold["timings"]["prompt_per_second"]
    assert after_restart["timings"]["cache_n"] == warm_r.cached_tokens
    assert nonce["timings"]["cache_n"] == 0


async def test_prefix_cache_can_be_switched_off(ep: SimEndpoint, client: httpx.AsyncClient) -> None:
    ep.behaviour.prefix_cache = False
    prompt = _prompt("MARKER-3", 20_000)
    for _ in range(2):
        await _complete(client, prompt, max_tokens=1)
    assert [r.cached_tokens for r in ep.requests[-2:]] == [0, 0]


# ---------------------------------------------------------------------------------------
# Seats


async def test_at_most_max_num_seqs_requests_are_served_at_once() -> None:
    # Each request prefills 20,000 tokens (2.2 simulated s, 0.55 s of wall time at this scale),
    # so four sent together arrive while the first are still prefilling; two seats serve them,
    # the others queue.
    prompts = [_prompt(f"MARKER-{i}", 20_000) for i in range(4)]
    async with SimEndpoint(Shape(), time_scale=0.25) as ep, httpx.AsyncClient(base_url=ep.url, timeout=60) as c:
        answers = await asyncio.gather(*(_complete(c, p, max_tokens=1) for p in prompts))
    assert [a.status_code for a in answers] == [200] * 4
    assert ep.peak_in_flight == Shape().seqs == 2
    assert sum(r.queued for r in ep.requests) >= 1


# ---------------------------------------------------------------------------------------
# Misbehaving engines


async def test_truncate_head_drops_the_marker_silently(ep: SimEndpoint, client: httpx.AsyncClient) -> None:
    ep.behaviour.truncate_head = True
    response = await _complete(client, _prompt("MARKER-lost", 201_000), max_tokens=16)
    assert response.status_code == 200
    body = response.json()
    assert "MARKER-lost" not in body["choices"][0]["text"]
    assert body["usage"]["prompt_tokens"] == 201_000  # says nothing of the cut
    assert ep.requests[-1].truncated


async def test_shrink_max_tokens_generates_fewer_than_asked(ep: SimEndpoint, client: httpx.AsyncClient) -> None:
    ep.behaviour.shrink_max_tokens = 16
    body = (await _complete(client, "MARKER-s", max_tokens=128)).json()
    assert body["usage"]["completion_tokens"] == 16
    assert body["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("status", [500, 503])
async def test_fail_status(ep: SimEndpoint, client: httpx.AsyncClient, status: int) -> None:
    ep.behaviour.fail_status = status
    response = await _complete(client, "MARKER-f", max_tokens=4)
    assert response.status_code == status
    assert "simulated engine failure" in response.json()["error"]["message"]


async def test_hang_never_answers_until_the_endpoint_stops() -> None:
    endpoint = SimEndpoint(Shape(), behaviour=Behaviour(hang=True), time_scale=0.0001)
    await endpoint.start()
    async with httpx.AsyncClient(base_url=endpoint.url) as c:
        with pytest.raises(httpx.ReadTimeout):
            await c.post("/v1/completions", json={"prompt": "MARKER-h", "max_tokens": 4}, timeout=0.3)
        pending = asyncio.create_task(c.post("/v1/completions", json={"prompt": "x"}, timeout=30))
        await asyncio.sleep(0.05)
        await endpoint.stop()
        released = await pending
    assert released.status_code == 503


# ---------------------------------------------------------------------------------------
# Streaming, models, lifecycle


def _events(text: str) -> list[Any]:
    data = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(d) for d in data[:-1]]


async def test_completions_stream_one_event_per_token(ep: SimEndpoint, client: httpx.AsyncClient) -> None:
    async with client.stream("POST", "/v1/completions",
                             json={"prompt": "MARKER-s1 go", "max_tokens": 130, "stream": True}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _events((await response.aread()).decode())
    tokens = [e for e in events if e["choices"][0]["finish_reason"] is None]
    assert len(tokens) == 130
    assert "".join(e["choices"][0]["text"] for e in tokens).startswith("MARKER-s1 go")
    last = events[-1]
    assert last["choices"][0]["finish_reason"] == "length"
    assert last["usage"]["completion_tokens"] == 130 and last["timings"]["predicted_n"] == 130
    assert ep.requests[-1].stream and ep.requests[-1].status == 200


async def test_chat_stream_thinks_first(client: httpx.AsyncClient) -> None:
    body = {"messages": [{"role": "user", "content": "MARKER-s2"}], "max_tokens": THINKING_TOKENS + 2, "stream": True}
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        events = _events((await response.aread()).decode())
    deltas = [e["choices"][0]["delta"] for e in events[:-1]]
    assert sum("reasoning_content" in d for d in deltas) == THINKING_TOKENS
    assert "".join(d.get("content", "") for d in deltas) == "MARKER-s2 The"


async def test_models_and_bad_bodies(client: httpx.AsyncClient) -> None:
    models = (await client.get("/v1/models")).json()
    assert models["data"][0]["id"] == DEFAULT_MODEL.name
    assert models["data"][0]["max_model_len"] == WINDOW
    bad = await client.post("/v1/completions", content=b"{not json")
    assert bad.status_code == 400 and "invalid JSON" in bad.json()["error"]["message"]
    no_prompt = await client.post("/v1/completions", json={"max_tokens": 4})
    assert no_prompt.status_code == 400 and "prompt" in no_prompt.json()["error"]["message"]


async def test_a_refused_boot_writes_its_ledger_and_serves_nothing(tmp_path: Path) -> None:
    log = tmp_path / "qwen38_bf16_wide.log"
    async with SimEndpoint(SHAPES["qwen38-wide"], ledger_path=log) as ep:
        assert not ep.serving
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient() as c:
                await c.get(f"{ep.url}/health")
    assert "E startup stopped: out of memory" in log.read_text()


async def test_restart_with_a_new_shape_appends_a_boot(tmp_path: Path) -> None:
    log = tmp_path / "frank_archon.log"
    async with SimEndpoint(Shape(), ledger_path=log, time_scale=0.0001) as ep:
        port = ep.port
        await ep.restart(replace(Shape(), vram_kv_mib=6_969, seqs=4))
        assert ep.port == port and ep.serving
        async with httpx.AsyncClient(base_url=ep.url) as c:
            assert (await c.get("/health")).status_code == 200
    newest = ledger_file.read_file(log, source=str(log))
    assert newest.boots_seen == 2
    assert newest.flags["vram-kv-mib"].fields["value"] == "6969"
    assert f"serving on 127.0.0.1:{port}" in log.read_text()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 250_000), st.text(max_size=40).map(lambda t: t.replace("\n", " ") + "\n"))
def test_fox_filler_hits_every_count(tokens: int, head: str) -> None:
    text = fox_filler(tokens, head=head)
    assert text.startswith(head)
    assert count_tokens(text) == max(tokens, count_tokens(head))


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300), st.text(min_size=1, max_size=5))
def test_appending_never_removes_tokens_nor_adds_more_than_one_a_character(text: str, more: str) -> None:
    before, after = count_tokens(text), count_tokens(text + more)
    assert before <= after <= before + len(more) + 1
