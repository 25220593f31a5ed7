"""decode_probe: prefill and decode rates of one cold request at a given context."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Literal

import httpx

from radiance_mcp.core.constants import MIN_DECODE_TOKENS
from radiance_mcp.core.errors import GuardRailError, InputError, ProbeError
from radiance_mcp.core.rules.probe_shape import ProbeShape, checked_window
from radiance_mcp.core.rules.probe_verdicts import StreamRates, check_decode_tokens, stream_rates
from radiance_mcp.core.wording.payloads import (
    Timings,
    Usage,
    content_of,
    finish_reason_of,
    generation,
    reasoning_of,
    timings_of,
    usage_of,
)
from radiance_mcp.core.wording.refusals import parse_refusal, quote
from radiance_mcp.models.probes import DecodeProbeInput, DecodeProbeOutput
from radiance_mcp.probes.client import ProbeClient
from radiance_mcp.probes.engine import Engine, ExtensionCounter
from radiance_mcp.probes.prompts import Prompt, decode_prompt, units_for_tokens
from radiance_mcp.sources.config import Fleet

Source = Literal["timings", "stream", "none"]


async def decode_probe(
    fleet: Fleet,
    args: DecodeProbeInput,
    *,
    shape: ProbeShape | None = None,
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
    """One streamed request read, then its token counts, rates and cache use told from what it said."""
    notes: list[str] = []
    stream = await _read_stream(client, args, route, body)
    if not stream.streamed:
        notes.append("the engine answered without streaming: no time to first token or inter-token times")
    usage, timings = stream.usage, stream.timings
    prompt_tokens = _prompt_tokens(usage, timings)
    if prompt_tokens is None and args.count_prompt:
        prompt_tokens = await _count_after(client, args, prompt, notes)
    generated = _generated_tokens(stream, notes)
    timings_state = _timings_state(timings, notes)
    rates = stream_rates(stream.sent_s, stream.token_times_s, generated)
    prefill, prefill_source = _prefill_rate(timings, rates, prompt_tokens, notes)
    decode, decode_source = _decode_rate(timings, rates)
    cached = _cached_tokens(usage, timings, prompt_tokens)
    cold = not cached
    if not cold:
        notes.append(
            f"{cached:,} prompt tokens came from the prefix cache despite the nonce at the head: the prefill rate "
            "is not a cold figure (a warm 197k prefill in ~10 s looks like 60,000 t/s)"
        )
    valid = generated is not None and generated >= MIN_DECODE_TOKENS
    if not valid:
        notes.append(
            f"only {generated} tokens generated (finish_reason {stream.finish}): under {MIN_DECODE_TOKENS} the "
            "inter-token time is first-token noise, so no decode rate is reported"
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
        finish_reason=stream.finish,
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


@dataclass
class _Stream:
    """What one streamed answer said: when each token came, and the last finish, usage and timings seen."""

    sent_s: float
    token_times_s: list[float] = field(default_factory=list)
    finish: str | None = None
    usage: Usage | None = None
    timings: Timings | None = None
    streamed: bool = False


async def _read_stream(client: ProbeClient, args: DecodeProbeInput, route: str, body: dict[str, object]) -> _Stream:
    """The request sent and its events read to the end; a refusal raises, naming the window it gives."""
    stream = _Stream(time.perf_counter())
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
                stream.streamed = True
                if content_of(data) or reasoning_of(data):  # a reasoning token is a generated token too
                    stream.token_times_s.append(event.at_s)
            stream.finish = finish_reason_of(data) or stream.finish
            stream.usage = usage_of(data) or stream.usage
            stream.timings = timings_of(data) or stream.timings
    return stream


def _prompt_tokens(usage: Usage | None, timings: Timings | None) -> int | None:
    """The prompt tokens the answer says it prefilled: usage, else timings (prefilled plus cached)."""
    if usage and usage.prompt_tokens:
        return usage.prompt_tokens
    if timings and timings.prompt_n:
        return timings.prompt_n + (timings.cache_n or 0)
    return None


def _generated_tokens(stream: _Stream, notes: list[str]) -> int | None:
    """The tokens generated: usage, else timings, else the streamed chunks counted."""
    usage, timings = stream.usage, stream.timings
    if usage and usage.completion_tokens is not None:
        return usage.completion_tokens
    if timings and timings.predicted_n:
        return timings.predicted_n
    if stream.token_times_s:
        notes.append("generated tokens counted as streamed chunks (no usage in the answer)")
        return len(stream.token_times_s)
    return None


def _timings_state(timings: Timings | None, notes: list[str]) -> Literal["full", "null_rates", "missing"]:
    """Whether the answer's timings carry both rates, null rates, or are missing."""
    if timings is None:
        notes.append("the answer has no timings: rates measured on the stream")
        return "missing"
    if timings.prompt_per_second is None or timings.predicted_per_second is None:
        notes.append("timings carry null rates: rates computed from their token counts and milliseconds where given")
        return "null_rates"
    return "full"


def _prefill_rate(
    timings: Timings | None, rates: StreamRates, prompt_tokens: int | None, notes: list[str]
) -> tuple[float | None, Source]:
    """The prefill rate from the timings, else prompt tokens over the time to first token."""
    prefill = timings.prefill_rate() if timings else None
    if prefill is None and rates.ttft_s and prompt_tokens:
        notes.append("prefill rate = prompt tokens / time to first token (includes queueing and the first step)")
        return prompt_tokens / rates.ttft_s, "stream"
    return prefill, "timings" if prefill else "none"


def _decode_rate(timings: Timings | None, rates: StreamRates) -> tuple[float | None, Source]:
    """The decode rate from the timings, else from the stream's inter-token times."""
    decode = timings.decode_rate() if timings else None
    if decode is None and rates.decode_tokens_per_s:
        return rates.decode_tokens_per_s, "stream"
    return decode, "timings" if decode else "none"


def _cached_tokens(usage: Usage | None, timings: Timings | None, prompt_tokens: int | None) -> int | None:
    """Prompt tokens served from the prefix cache: usage, else timings, else prompt tokens not prefilled."""
    if usage and usage.cached_tokens:
        return usage.cached_tokens
    if timings and timings.cache_n:
        return timings.cache_n
    if timings and timings.prompt_n and prompt_tokens and timings.prompt_n < prompt_tokens:
        return prompt_tokens - timings.prompt_n
    return None


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
