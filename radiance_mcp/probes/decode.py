"""decode_probe: prefill and decode rates of one cold request at a given context."""

from __future__ import annotations

import asyncio
import time
from typing import Literal

import httpx

from radiance_mcp.config import Fleet
from radiance_mcp.constants import MIN_DECODE_TOKENS
from radiance_mcp.errors import GuardRailError, InputError, ProbeError
from radiance_mcp.models.probes import DecodeProbeInput, DecodeProbeOutput
from radiance_mcp.probes.client import ProbeClient
from radiance_mcp.probes.dialects import parse_refusal, quote
from radiance_mcp.probes.engine import Engine, ExtensionCounter
from radiance_mcp.probes.payloads import (
    Timings,
    Usage,
    content_of,
    finish_reason_of,
    generation,
    reasoning_of,
    timings_of,
    usage_of,
)
from radiance_mcp.probes.prompts import Prompt, decode_prompt, units_for_tokens
from radiance_mcp.probes.shape import LedgerShape, checked_window
from radiance_mcp.probes.verdicts import check_decode_tokens, stream_rates

Source = Literal["timings", "stream", "none"]


async def decode_probe(
    fleet: Fleet,
    args: DecodeProbeInput,
    *,
    shape: LedgerShape | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> DecodeProbeOutput:
    """Run one cold streamed request and read its rates; see the tool's docstring for the traps.

    The window (the ledger's --max-model-len, else max_model_len) is checked before anything
    is sent; with neither, a context above max_window_tokens is refused, and one below it that
    the engine's window does not hold is refused by the engine before any prefill.
    """
    check_decode_tokens(args.gen_tokens)
    window, window_source = checked_window(shape, args.max_model_len)
    if window is not None and args.context_tokens + args.gen_tokens > window:
        raise InputError(
            f"context_tokens={args.context_tokens:,} + gen_tokens={args.gen_tokens:,} exceed the window of "
            f"{window:,} tokens ({window_source}); nothing was sent. Lower context_tokens to at most "
            f"{max(window - args.gen_tokens, 0):,}"
        )
    if window is None and args.context_tokens > args.max_window_tokens:
        raise InputError(
            f"context_tokens={args.context_tokens:,} is above max_window_tokens={args.max_window_tokens:,}, the "
            "largest window assumed, and the service's window is unknown (no ledger, no max_model_len); nothing "
            "was sent. Pass max_model_len, or a context the engine can hold"
        )
    prompt = decode_prompt(units_for_tokens(args.context_tokens, args.chars_per_token))
    route, body = generation(args.api, prompt.text(), args.gen_tokens, args.model, stream=True, force_length=True)
    try:
        async with asyncio.timeout(args.total_timeout_s):
            async with ProbeClient.for_service(fleet, args.service, args.timeout_s, transport) as client:
                out = await _run(client, args, route, body, prompt)
                return out.model_copy(update={"window_tokens": window, "window_source": window_source})
    except TimeoutError as exc:
        raise ProbeError(
            f"decode_probe on {args.service!r}: not done within total_timeout_s={args.total_timeout_s:g} s"
        ) from exc


async def _run(
    client: ProbeClient, args: DecodeProbeInput, route: str, body: dict[str, object], prompt: Prompt
) -> DecodeProbeOutput:
    notes: list[str] = []
    token_times: list[float] = []
    finish: str | None = None
    usage: Usage | None = None
    timings: Timings | None = None
    sent = time.perf_counter()
    streamed = False
    async with client.stream_events(route, body) as (status, events):
        async for event in events:
            if status != 200:
                refusal, _ = parse_refusal(status, event.raw, args.dialect)
                said = refusal.message if refusal else quote(event.raw)
                remedy = ""
                if refusal is not None and refusal.window_tokens is not None:
                    remedy = (f"; the engine's window is {refusal.window_tokens:,} tokens: lower context_tokens to "
                              f"at most {max(refusal.window_tokens - args.gen_tokens, 0):,}")
                raise ProbeError(
                    f"service {args.service!r} ({client.endpoint}) POST {route}: HTTP {status}, {said}{remedy}"
                )
            data = event.data
            if not event.raw:
                streamed = True
                if content_of(data) or reasoning_of(data):  # a reasoning token is a generated token too
                    token_times.append(event.at_s)
            finish = finish_reason_of(data) or finish
            usage = usage_of(data) or usage
            timings = timings_of(data) or timings
    if not streamed:
        notes.append("the engine answered without streaming: no time to first token or inter-token times")

    prompt_tokens = usage.prompt_tokens if usage and usage.prompt_tokens else None
    if prompt_tokens is None and timings and timings.prompt_n:
        prompt_tokens = timings.prompt_n + (timings.cache_n or 0)
    if prompt_tokens is None and args.count_prompt:
        prompt_tokens = await _count_after(client, args, prompt, notes)
    generated = usage.completion_tokens if usage and usage.completion_tokens is not None else None
    if generated is None and timings and timings.predicted_n:
        generated = timings.predicted_n
    if generated is None and token_times:
        generated = len(token_times)
        notes.append("generated tokens counted as streamed chunks (no usage in the answer)")

    timings_state: Literal["full", "null_rates", "missing"] = "missing"
    if timings is not None:
        rates_null = timings.prompt_per_second is None or timings.predicted_per_second is None
        timings_state = "null_rates" if rates_null else "full"
    if timings_state == "null_rates":
        notes.append("timings carry null rates: rates computed from their token counts and milliseconds where given")
    elif timings_state == "missing":
        notes.append("the answer has no timings: rates measured on the stream")

    rates = stream_rates(sent, token_times, generated)
    prefill = timings.prefill_rate() if timings else None
    prefill_source: Source = "timings" if prefill else "none"
    if prefill is None and rates.ttft_s and prompt_tokens:
        prefill = prompt_tokens / rates.ttft_s
        prefill_source = "stream"
        notes.append("prefill rate = prompt tokens / time to first token (includes queueing and the first step)")
    decode = timings.decode_rate() if timings else None
    decode_source: Source = "timings" if decode else "none"
    if decode is None and rates.decode_tokens_per_s:
        decode = rates.decode_tokens_per_s
        decode_source = "stream"

    cached = usage.cached_tokens if usage and usage.cached_tokens else None
    if cached is None and timings and timings.cache_n:
        cached = timings.cache_n
    if cached is None and timings and timings.prompt_n and prompt_tokens and timings.prompt_n < prompt_tokens:
        cached = prompt_tokens - timings.prompt_n
    cold = not cached
    if not cold:
        notes.append(
            f"{cached:,} prompt tokens came from the prefix cache despite the nonce at the head: the prefill rate "
            "is not a cold figure (a warm 197k prefill in ~10 s looks like 60,000 t/s)"
        )
    valid = generated is not None and generated >= MIN_DECODE_TOKENS
    if not valid:
        notes.append(
            f"only {generated} tokens generated (finish_reason {finish}): under {MIN_DECODE_TOKENS} the inter-token "
            "time is first-token noise, so no decode rate is reported"
        )
        decode = None
        decode_source = "none"
    return DecodeProbeOutput(
        service=args.service,
        endpoint=client.endpoint,
        api=args.api,
        prompt_tokens=prompt_tokens,
        prompt_tokens_estimate=args.context_tokens,
        generated_tokens=generated,
        asked_tokens=args.gen_tokens,
        finish_reason=finish,
        ttft_s=_round(rates.ttft_s),
        prefill_tokens_per_s=_round(prefill, 1),
        prefill_source=prefill_source,
        decode_tokens_per_s=_round(decode, 1),
        decode_source=decode_source,
        inter_token_s_mean=_round(rates.inter_token_s_mean, 5),
        inter_token_s_median=_round(rates.inter_token_s_median, 5),
        timings=timings_state,
        cached_tokens=cached,
        cold=cold,
        valid=valid,
        window_tokens=None,
        window_source=None,
        requests_sent=client.requests_sent,
        notes=notes,
    )


async def _count_after(client: ProbeClient, args: DecodeProbeInput, prompt: Prompt, notes: list[str]) -> int | None:
    """The answer did not say how many prompt tokens it prefilled: count them now, without prefill."""
    engine = Engine(client, args.dialect, args.model, args.max_model_len, max_window_tokens=args.max_window_tokens)
    counter = ExtensionCounter(engine, args.api)
    try:
        tokens = await counter.count(prompt)
    except (ProbeError, GuardRailError) as exc:
        notes.append(f"the answer names no prompt token count and counting it failed: {exc}")
        return None
    exactness = "exactly" if counter.uncertainty_tokens == 0 else f"to +-{counter.uncertainty_tokens}"
    notes.append(
        f"the answer names no prompt token count: counted afterwards {exactness} ({counter.method}, no prefill)"
    )
    return tokens


def _round(value: float | None, digits: int = 3) -> float | None:
    return round(value, digits) if value is not None else None
