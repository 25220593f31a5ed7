"""The three probes against the simulated radiance: every trap of the seed.

The simulator is a real HTTP server on 127.0.0.1. Where a test needs the engine to change
behaviour between the probe's counting (refusals) and its real requests, ``Flip`` wraps the
real transport and flips a Behaviour switch when the first request that is not a count
(max_tokens != 1) goes out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from radiance_mcp.core.constants import CHARS_PER_TOKEN_CORPUS, MIN_DECODE_TOKENS
from radiance_mcp.core.errors import GuardRailError, ProbeError
from radiance_mcp.core.rules.probe_verdicts import judge_boundary
from radiance_mcp.core.wording.payloads import generation
from radiance_mcp.models.probes import BoundaryProbeInput, DecodeProbeInput, TokenCountProbeInput
from radiance_mcp.probes import boundary_probe, decode_probe, token_count_probe
from radiance_mcp.sim import Behaviour, Shape, SimEndpoint, count_tokens
from radiance_mcp.sources.config import Fleet, Service

CORPUS = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. "
WINDOW = 200_000  # the seed's window (Shape's default, frank-archon)


@pytest.fixture
async def ep() -> AsyncIterator[SimEndpoint]:
    async with SimEndpoint(Shape(), behaviour=Behaviour(), time_scale=0.001) as endpoint:
        yield endpoint


def fleet(endpoint: SimEndpoint) -> Fleet:
    return Fleet(services={"sim": Service(endpoint=endpoint.url)})


def boundary(**kw: Any) -> BoundaryProbeInput:
    return BoundaryProbeInput.model_validate({"service": "sim", "n": 2, "max_model_len": WINDOW, **kw})


class Flip(httpx.AsyncBaseTransport):
    """The real transport; sets behaviour.<name> = value when the first non-count request goes out."""

    def __init__(self, endpoint: SimEndpoint, name: str, value: object) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.endpoint, self.name, self.value = endpoint, name, value
        self.in_flight = 0
        self.cancelled = 0
        self.sent = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if b'"max_tokens": 1,' not in request.content:
            setattr(self.endpoint.behaviour, self.name, self.value)
            self.in_flight += 1
            self.sent.set()
        try:
            return await self.inner.handle_async_request(request)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()


# --- token_count_probe -----------------------------------------------------------------


async def test_token_count_of_a_corpus_above_the_window_costs_nothing(ep: SimEndpoint) -> None:
    text = CORPUS * 42_000  # 3,444,000 chars: certainly over 200,000 tokens
    result = await token_count_probe(fleet(ep), TokenCountProbeInput(service="sim", text=text, window_tokens=WINDOW))
    assert result.method == "refusal" and result.exact and result.tokens == count_tokens(text)
    assert result.chars_per_token == pytest.approx(CHARS_PER_TOKEN_CORPUS, abs=1e-3)
    assert result.requests_sent == 1 and result.prefill_tokens_paid == 0
    assert [(r.status, r.prefill_tokens) for r in ep.requests] == [(400, 0)]


async def test_token_count_with_the_window_unknown(ep: SimEndpoint) -> None:
    text = CORPUS * 6_700  # 549,400 chars, the seed's ~200k-token corpus sample: it may fit
    result = await token_count_probe(fleet(ep), TokenCountProbeInput(service="sim", text=text))
    assert result.window_tokens == WINDOW and result.window_source == "refusal" and result.dialect == "radiance"
    assert result.method == "refusal_difference" and abs(result.tokens - count_tokens(text)) <= 2
    assert result.requests_sent == 2 and result.prefill_tokens_paid == 0
    assert all(r.status == 400 and r.prefill_tokens == 0 and (r.prompt_tokens or 0) > WINDOW for r in ep.requests)


# --- boundary_probe --------------------------------------------------------------------


async def test_boundary_plan_sends_nothing(ep: SimEndpoint) -> None:
    result = await boundary_probe(fleet(ep), boundary())
    assert not result.executed and result.passed is None and result.requests_sent == 0
    # Auto: the strictest edge until the engine answers: 200,000 - 64 - 1 tokens each.
    assert result.plan.tokens_per_prompt == 199_935 and result.plan.total_prefill_tokens == 2 * 199_935
    assert ep.requests == []


async def test_boundary_two_of_two_at_the_window(ep: SimEndpoint) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def report(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    result = await boundary_probe(fleet(ep), boundary(execute=True), progress=report)
    assert result.verdict == "2/2 retrieved" and result.passed and result.plan.dialect == "radiance"
    served = [r for r in ep.requests if r.status == 200]
    assert len(served) == 2
    # Both requests came out alike: one entry with their count (issue 11), the figures the first's.
    (request,) = result.requests
    assert request.count == 2 and request.indices == [0, 1] and request.verdict == "retrieved"
    for record in served:
        # Sized to max_model_len - gen: prompt + 64 fits the 200,000 window, within one filler unit.
        assert WINDOW - 64 - 20 <= (record.prompt_tokens or 0) <= WINDOW - 64
        assert record.completion_tokens == 64 and not record.thinking and not record.cached
    first = next(r for r in served if request.marker in (r.answer_head or ""))
    assert abs((first.prompt_tokens or 0) - request.prompt_tokens) <= 2
    assert result.prefill_tokens_paid == sum(r.prompt_tokens or 0 for r in served)
    assert [p[:2] for p in progress] == [(1, 2), (2, 2)]
    assert all(r.status == 400 and r.prefill_tokens == 0 for r in ep.requests if r.status != 200)


async def test_boundary_eight_at_once_on_a_shape_serving_eight() -> None:
    shape = Shape(seqs=8, max_model_len=32_768, spec=2)  # 8 x (1 + 2) = 24 sampler rows
    async with SimEndpoint(shape, time_scale=0.001) as endpoint:
        result = await boundary_probe(
            fleet(endpoint), boundary(n=8, max_model_len=32_768, gen_tokens=128, execute=True)
        )
        assert result.verdict == "8/8 retrieved"
        assert [(r.count, r.indices) for r in result.requests] == [(8, list(range(8)))]
        # Eight distinct markers went out and came back, one per request.
        assert len({(r.answer_head or "").split()[1] for r in endpoint.requests if r.status == 200}) == 8
        assert sum(r.status == 200 for r in endpoint.requests) == 8


async def test_boundary_learns_the_window_from_a_refusal(ep: SimEndpoint) -> None:
    result = await boundary_probe(fleet(ep), boundary(max_model_len=None, execute=True, max_window_tokens=400_000))
    assert result.passed and result.plan.max_model_len == WINDOW and result.plan.window_source == "refusal"


async def test_boundary_fails_on_a_silently_shrunk_max_tokens() -> None:
    async with SimEndpoint(Shape(), behaviour=Behaviour(shrink_max_tokens=8), time_scale=0.001) as endpoint:
        result = await boundary_probe(fleet(endpoint), boundary(execute=True))
    assert result.verdict == "0/2 retrieved" and not result.passed
    assert {r.verdict for r in result.requests} == {"shrunk_max_tokens"}
    assert all(r.tokens_generated == 8 and r.tokens_asked == 64 for r in result.requests)
    assert "silently shrank max_tokens" in (result.requests[0].note or "")


async def test_boundary_shows_a_pool_that_fails_its_contract() -> None:
    # 3,000 MiB of KV backs 2 x 163,279 tokens, not 2 x 200,000 (the contract needs 3,524.45 MiB).
    async with SimEndpoint(Shape(vram_kv_mib=3_000), time_scale=0.001) as endpoint:
        result = await boundary_probe(fleet(endpoint), boundary(execute=True))
    assert result.verdict == "0/2 retrieved"
    assert {r.verdict for r in result.requests} == {"pool_contract"}
    assert "which leaves nothing to generate into" in (result.requests[0].refusal or "")


@pytest.mark.slow
async def test_boundary_fails_when_the_engine_truncates_the_head() -> None:
    # The pool backs 163,279 tokens a seat; an engine that cuts the head to fit loses the marker.
    async with SimEndpoint(Shape(vram_kv_mib=3_000), time_scale=0.001) as endpoint:
        flip = Flip(endpoint, "truncate_head", True)
        result = await boundary_probe(fleet(endpoint), boundary(execute=True), transport=flip)
        assert [r.truncated for r in endpoint.requests if r.status == 200] == [True, True]
    assert not result.passed and {r.verdict for r in result.requests} <= {"marker_missing", "truncated_head"}
    assert all(not r.retrieved and r.status == 200 for r in result.requests)


async def test_an_engine_that_truncates_instead_of_refusing_cannot_be_counted() -> None:
    async with SimEndpoint(Shape(), behaviour=Behaviour(truncate_head=True), time_scale=0.001) as endpoint:
        with pytest.raises(ProbeError, match="accepted a prompt sized above the window.*silently truncates"):
            args = TokenCountProbeInput(service="sim", text="x", window_tokens=WINDOW)
            await token_count_probe(fleet(endpoint), args)


async def test_a_500_per_request_is_reported(ep: SimEndpoint) -> None:
    flip = Flip(ep, "fail_status", 500)
    result = await boundary_probe(fleet(ep), boundary(execute=True), transport=flip)
    assert not result.passed and {r.status for r in result.requests} == {500}
    assert "HTTP 500" in (result.requests[0].note or "")


async def test_a_500_while_counting_is_an_error_quoting_the_answer() -> None:
    async with SimEndpoint(Shape(), behaviour=Behaviour(fail_status=500), time_scale=0.001) as endpoint:
        with pytest.raises(ProbeError, match="HTTP 500 that no dialect's refusal wording matches.*simulated engine"):
            await boundary_probe(fleet(endpoint), boundary(execute=True))


# The hang tests run on a small window. The timeouts also bound the probe's counting requests,
# which go out before the flip makes the engine hang: at 200,000 tokens each count carries
# ~550 KB the simulator tokenizes, and on a loaded 2-core machine that alone ran past 0.3 s.
# At 8,192 tokens a count takes milliseconds, so the budgets below (10x and more what the
# counting needs under load) are spent on the hang alone; the size of the window is not the point.
HANG_WINDOW = 8_192


@pytest.fixture
async def small_ep() -> AsyncIterator[SimEndpoint]:
    async with SimEndpoint(Shape(max_model_len=HANG_WINDOW), behaviour=Behaviour(), time_scale=0.001) as endpoint:
        yield endpoint


async def test_a_hang_times_out_per_request(small_ep: SimEndpoint) -> None:
    flip = Flip(small_ep, "hang", True)
    result = await boundary_probe(
        fleet(small_ep), boundary(execute=True, max_model_len=HANG_WINDOW, timeout_s=0.5), transport=flip
    )
    assert flip.in_flight == 2  # both real requests went out, and hung
    assert {r.verdict for r in result.requests} == {"timeout"} and not result.passed
    assert "no answer within timeout_s=0.5 s" in (result.requests[0].note or "")


async def test_a_hang_past_the_total_timeout_cancels_everything(small_ep: SimEndpoint) -> None:
    flip = Flip(small_ep, "hang", True)
    with pytest.raises(ProbeError, match="total_timeout_s=1 s.*cancelled"):
        await boundary_probe(
            fleet(small_ep), boundary(execute=True, max_model_len=HANG_WINDOW, total_timeout_s=1), transport=flip
        )
    assert flip.cancelled == 2


async def test_cancelling_the_probe_cancels_the_requests_in_flight(ep: SimEndpoint) -> None:
    # With the engine hung, both requests are in flight at once (they are sent concurrently).
    flip = Flip(ep, "hang", True)
    task = asyncio.create_task(boundary_probe(fleet(ep), boundary(execute=True), transport=flip))
    await asyncio.wait_for(flip.sent.wait(), 30)
    while flip.in_flight < 2:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert flip.cancelled == 2


async def test_the_thinking_trap_is_why_probes_turn_thinking_off(ep: SimEndpoint) -> None:
    # The same request without enable_thinking=false: empty content, finish_reason stop.
    route, body = generation("chat", "MARKER PROBE-01-ABCDEF\nQuestion: the marker?", 64, None)
    del body["chat_template_kwargs"]
    async with httpx.AsyncClient(base_url=ep.url) as client:
        answer = await client.post(route, json=body)
    verdict = judge_boundary(answer.status_code, answer.text, answer.json(), "PROBE-01-ABCDEF", 13, 64, "radiance")
    assert verdict.verdict == "empty_answer" and "thinking" in (verdict.note or "")
    assert ep.requests[-1].thinking


# --- decode_probe ----------------------------------------------------------------------


async def test_decode_rates_from_timings_cold(ep: SimEndpoint) -> None:
    result = await decode_probe(fleet(ep), DecodeProbeInput(service="sim", context_tokens=51_500))
    assert result.valid and result.cold and result.generated_tokens == 512
    assert result.decode_source == "timings" and result.decode_tokens_per_s == pytest.approx(124.1)  # fp8, solo
    assert result.prefill_source == "timings" and result.prefill_tokens_per_s == pytest.approx(9_090.9, abs=0.1)
    assert result.timings == "full" and result.ttft_s is not None
    record = ep.requests[-1]
    assert record.stream and not record.thinking and record.cached_tokens == 0


async def test_decode_stays_cold_across_a_restart_thanks_to_the_nonce(ep: SimEndpoint) -> None:
    args = DecodeProbeInput(service="sim", context_tokens=20_000, gen_tokens=128)
    await decode_probe(fleet(ep), args)
    await ep.restart()  # the disk prefix cache survives restarts
    again = await decode_probe(fleet(ep), args)
    assert again.cold and again.cached_tokens is None
    assert [r.cached_tokens for r in ep.requests] == [0, 0]


@pytest.mark.parametrize(("mode", "prefill_source", "decode_source"), [
    ("null_rates", "timings", "timings"),  # rates null: computed from prompt_n/prompt_ms, predicted_n/predicted_ms
    ("missing", "stream", "stream"),  # no timings: time to first token and inter-token times
])
async def test_decode_with_null_or_missing_timings(
    ep: SimEndpoint, mode: str, prefill_source: str, decode_source: str
) -> None:
    ep.behaviour.timings = mode  # type: ignore[assignment]
    result = await decode_probe(fleet(ep), DecodeProbeInput(service="sim", context_tokens=8_000, gen_tokens=128))
    assert result.timings == mode and result.valid
    assert (result.prefill_source, result.decode_source) == (prefill_source, decode_source)
    assert result.prefill_tokens_per_s is not None and result.decode_tokens_per_s is not None
    assert result.inter_token_s_median is not None and result.prompt_tokens is not None


async def test_decode_refuses_first_token_noise(ep: SimEndpoint) -> None:
    with pytest.raises(GuardRailError, match=f"at least {MIN_DECODE_TOKENS}"):
        await decode_probe(fleet(ep), DecodeProbeInput(service="sim", gen_tokens=9))
    assert ep.requests == []


async def test_decode_over_the_window_is_a_probe_error_with_the_refusal(ep: SimEndpoint) -> None:
    with pytest.raises(ProbeError, match="does not fit the 200000 token context"):
        await decode_probe(fleet(ep), DecodeProbeInput(service="sim", context_tokens=250_000, gen_tokens=128))
