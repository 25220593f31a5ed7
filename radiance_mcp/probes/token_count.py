"""token_count_probe: the exact prompt-token count of a text, and its chars/token, with no prefill."""

from __future__ import annotations

import asyncio
import math

import httpx

from radiance_mcp.core.errors import ProbeError
from radiance_mcp.core.rules.probe_shape import NO_LEDGER, ProbeShape, checked_window
from radiance_mcp.core.wording.refusals import ContextRefusal
from radiance_mcp.models.probes import Repeated, TokenCountProbeInput, TokenCountProbeOutput
from radiance_mcp.probes.client import ProbeClient
from radiance_mcp.probes.engine import Engine
from radiance_mcp.probes.prompts import (
    MAX_TEXT_CHARS_PER_TOKEN,
    SEAM_UNCERTAINTY_TOKENS,
    filler,
    text_certainly_above,
    units_certainly_above,
    with_filler,
)
from radiance_mcp.sources.config import Fleet


async def token_count_probe(
    fleet: Fleet,
    args: TokenCountProbeInput,
    *,
    shape: ProbeShape | None = None,
    no_ledger_reason: str = NO_LEDGER,
    transport: httpx.AsyncBaseTransport | None = None,
) -> TokenCountProbeOutput:
    """Count a text's prompt tokens from a refusal above the window (or a tokenize endpoint).

    shape: the service's newest boot as the ledger tells it; window_tokens is checked against its window
    before anything is sent (checked_window), and the ledger's is used when it is left out. None: no ledger
    (no_ledger_reason says why): window_tokens is used unchecked, and the notes say so, or a refusal names it.
    """
    window, window_source = checked_window(shape, args.window_tokens, "window_tokens")
    try:
        async with asyncio.timeout(args.total_timeout_s):
            async with ProbeClient.for_service(fleet, args.service, args.timeout_s, transport) as client:
                engine = Engine(
                    client, args.dialect, args.model, window, window_source=window_source,
                    max_window_tokens=args.max_window_tokens,
                )
                if window_source == "input":
                    why = no_ledger_reason if shape is None else f"{shape.source} states no window"
                    engine.note(f"window_tokens={window:,} is used as given, unchecked: {why}")
                return await _count(engine, args)
    except TimeoutError as exc:
        raise ProbeError(
            f"token_count_probe on {args.service!r}: not done within total_timeout_s={args.total_timeout_s:g} s"
        ) from exc


async def _count(engine: Engine, args: TokenCountProbeInput) -> TokenCountProbeOutput:
    text = args.text
    use_tokenize = args.use_tokenize_endpoint
    if use_tokenize and engine.can_tokenize("completions"):
        try:
            return _output(engine, args, "tokenize_endpoint", await engine.tokenize("completions", text), "exact")
        except ProbeError as exc:
            # A server may run with its tokenize route off: fall back to refusals.
            engine.note(f"the tokenize endpoint failed ({exc}); counted from refusals instead")
            use_tokenize = False

    filler_units: int | None = None
    filler_refusal: ContextRefusal | None = None
    if engine.window_tokens is None:
        # One refusal of filler sized above the largest window assumed names the window.
        filler_units = units_certainly_above(engine.max_window_tokens)
        filler_refusal = await engine.refusal("completions", filler(filler_units).text(), engine.max_window_tokens + 1)
        if use_tokenize and engine.can_tokenize("completions"):
            return _output(engine, args, "tokenize_endpoint", await engine.tokenize("completions", text), "exact")
    window = engine.window_tokens
    if window is None:  # pragma: no cover - learn-window refusals always name one or raise
        raise ProbeError("the window is unknown and the refusal did not name it; pass window_tokens")

    if text_certainly_above(len(text), window):
        # More than chars / 16 tokens, so at least the next whole number of them.
        refusal = await engine.refusal("completions", text, math.floor(len(text) / MAX_TEXT_CHARS_PER_TOKEN) + 1)
        if refusal.prompt_tokens is not None and refusal.exact:
            return _output(engine, args, "refusal", refusal.prompt_tokens, "exact")
        if use_tokenize and engine.can_tokenize("completions"):
            engine.note("the refusal names only a bound; counted with the tokenize endpoint instead")
            return _output(engine, args, "tokenize_endpoint", await engine.tokenize("completions", text), "exact")
        if refusal.prompt_tokens is not None:
            return _output(engine, args, "refusal", refusal.prompt_tokens, "lower_bound")
        engine.exact_count(refusal, "the text")

    # The text may fit: measure filler alone and text + filler, both above the window.
    if filler_units is None or filler_refusal is None:
        filler_units = units_certainly_above(window)
        filler_refusal = await engine.refusal("completions", filler(filler_units).text(), window + 1)
    if not filler_refusal.exact and use_tokenize and engine.can_tokenize("completions"):
        engine.note("the refusal names only a bound; counted with the tokenize endpoint instead")
        return _output(engine, args, "tokenize_endpoint", await engine.tokenize("completions", text), "exact")
    filler_tokens = engine.exact_count(filler_refusal, "the filler")
    combined = await engine.refusal("completions", with_filler(text, filler_units).text(), filler_tokens)
    combined_tokens = engine.exact_count(combined, "the text and filler")
    engine.note(
        "refusal_difference: (text + filler) - filler, both above the window; the difference is the text inside a "
        f"prompt (without the BOS a prompt of its own adds), +-{SEAM_UNCERTAINTY_TOKENS} for merges at the seam"
    )
    return _output(engine, args, "refusal_difference", combined_tokens - filler_tokens, "difference")


def _output(
    engine: Engine, args: TokenCountProbeInput, method: str, tokens: int, kind: str
) -> TokenCountProbeOutput:
    if tokens <= 0:
        raise ProbeError(f"{method} gave {tokens} tokens for a text of {len(args.text)} characters; nothing to report")
    uncertainty = SEAM_UNCERTAINTY_TOKENS if kind == "difference" else 0
    chars = len(args.text)
    low_tokens = max(1, tokens - uncertainty)
    high_tokens = tokens + uncertainty
    ratio_low = chars / high_tokens
    ratio_high = chars / low_tokens
    if kind == "lower_bound":
        ratio_high = chars / tokens
        ratio_low = 0.0
        engine.note("the count is a lower bound (the engine stopped counting at its limit): chars/token is at most")
    return TokenCountProbeOutput.model_validate(
        {
            "service": engine.client.service,
            "endpoint": engine.client.endpoint,
            "dialect": engine.dialect_name,
            "method": method,
            "tokens": tokens,
            "count_kind": kind,
            "exact": kind == "exact",
            "uncertainty_tokens": uncertainty,
            "chars": chars,
            "chars_per_token": round(chars / tokens, 4),
            "chars_per_token_low": round(ratio_low, 4),
            "chars_per_token_high": round(ratio_high, 4),
            "window_tokens": engine.window_tokens,
            "window_source": engine.window_source,
            "requests_sent": engine.client.requests_sent,
            "prefill_tokens_paid": engine.prefill_tokens_paid,
            "refusals": Repeated.collapse(engine.refusals),
            "edge_rule": engine.dialect.edge_rule(),
            "notes": engine.notes,
        }
    )
