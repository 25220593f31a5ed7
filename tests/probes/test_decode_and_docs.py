"""decode_probe on recorded streams (warm cache, early stop, no stream), and the tool docstrings."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from radiance_mcp.core import constants
from radiance_mcp.core.errors import ProbeError
from radiance_mcp.models.probes import DecodeProbeInput
from radiance_mcp.probes import decode_probe
from radiance_mcp.sources.config import Fleet, Service
from radiance_mcp.tools.probes import FAMILY

FLEET = Fleet(services={"svc": Service(endpoint="http://engine.test:8080")})


def sse(chunks: list[dict[str, Any]]) -> httpx.Response:
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})


def delta(text: str) -> dict[str, Any]:
    return {"choices": [{"delta": {"content": text}, "finish_reason": None}]}


def last(finish: str, prompt: int, generated: int, timings: dict[str, Any] | None) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "choices": [{"delta": {}, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": generated},
    }
    if timings is not None:
        chunk["timings"] = timings
    return chunk


async def run(response: httpx.Response, **kw: Any) -> Any:
    return await run_with(lambda request: response, **kw)


async def run_with(handler: Any, **kw: Any) -> Any:
    transport = httpx.MockTransport(handler)
    return await decode_probe(FLEET, DecodeProbeInput.model_validate({"service": "svc", **kw}), transport=transport)


async def test_a_warm_prefix_is_named_not_taken_for_a_cold_rate() -> None:
    # llama.cpp's timings: 196,000 of 197,000 prompt tokens from the cache; 1,000 prefilled.
    timings = {"cache_n": 196_000, "prompt_n": 1_000, "prompt_ms": 100.0, "prompt_per_second": 10_000.0,
               "predicted_n": 512, "predicted_ms": 4_125.7, "predicted_per_second": 124.1}
    response = sse([delta("x")] * 512 + [last("length", 197_000, 512, timings)])
    result = await run(response, context_tokens=197_000)
    assert not result.cold and result.cached_tokens == 196_000
    assert any("prefix cache" in note for note in result.notes)
    assert result.decode_tokens_per_s == pytest.approx(124.1)


async def test_an_early_stop_gives_no_decode_rate() -> None:
    # The model stopped after 9 tokens: the inter-token time is first-token noise.
    response = sse([delta("x")] * 9 + [last("stop", 4_096, 9, None)])
    result = await run(response)
    assert not result.valid and result.decode_tokens_per_s is None and result.decode_source == "none"
    assert result.generated_tokens == 9 and result.timings == "missing"
    assert any(f"under {constants.MIN_DECODE_TOKENS}" in note for note in result.notes)


async def test_an_answer_that_is_not_streamed_still_gives_timings_rates() -> None:
    body = {
        "choices": [{"message": {"content": "x" * 100}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 4_096, "completion_tokens": 512},
        "timings": {"prompt_n": 4_096, "prompt_ms": 450.0, "prompt_per_second": None,
                    "predicted_n": 512, "predicted_ms": 5_441.0, "predicted_per_second": None},
    }
    result = await run(httpx.Response(200, json=body))
    assert result.ttft_s is None and result.timings == "null_rates"
    assert result.prefill_tokens_per_s == pytest.approx(9_102.2, abs=0.1)  # 4,096 / 0.450 s
    assert result.decode_tokens_per_s == pytest.approx(94.1, abs=0.1)  # 512 / 5.441 s
    assert any("without streaming" in note for note in result.notes)


def test_annotations() -> None:
    flags = {spec.name: (spec.read_only, spec.open_world) for spec in FAMILY}
    assert flags == {
        "token_count_probe": (True, True),
        "boundary_probe": (False, True),
        "decode_probe": (False, True),
    }


async def test_reasoning_tokens_are_timed_with_the_rest_of_the_stream() -> None:
    # An engine that thinks despite enable_thinking=false and gives no timings: 100 reasoning chunks
    # then 156 content chunks, 2 ms apart, usage 256 tokens. The stream rate divided all 256 tokens by
    # the span of the content chunks alone, about 1.6x the real rate; the rate and the mean inter-token
    # time must describe the same tokens.
    async def chunks() -> Any:
        for i in range(256):
            key = "reasoning_content" if i < 100 else "content"
            yield f"data: {json.dumps({'choices': [{'delta': {key: 'x'}, 'finish_reason': None}]})}\n\n".encode()
            await asyncio.sleep(0.002)
        yield f"data: {json.dumps(last('length', 4_096, 256, None))}\n\ndata: [DONE]\n\n".encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=chunks())

    result = await run_with(handler, gen_tokens=256)
    assert result.decode_source == "stream" and result.valid and result.generated_tokens == 256
    assert result.decode_tokens_per_s * result.inter_token_s_mean == pytest.approx(1.0, rel=0.02)


async def test_a_refusal_sent_as_an_event_stream_is_still_an_error() -> None:
    # A 400 under a text/event-stream content type has no 'data:' lines: the probe read no events,
    # never looked at the status, and returned a result for a request that was refused.
    refusal = {"error": {"message": "prompt: 250,001 prompt tokens does not fit the 200000 token context"}}
    response = httpx.Response(400, text=json.dumps(refusal), headers={"content-type": "text/event-stream"})
    with pytest.raises(ProbeError, match="HTTP 400, prompt: 250,001 prompt tokens does not fit"):
        await run(response, gen_tokens=128)
