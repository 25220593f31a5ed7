"""The probes' judgements of an answer (pure): what a boundary request shows, whether a decode
figure is a rate or first-token noise."""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from radiance_mcp.core.constants import (
    BOUNDARY_MARKER_FORMAT,
    BOUNDARY_MARKER_TAG_BYTES,
    MIN_DECODE_TOKENS,
    PREFERRED_DECODE_TOKENS,
)
from radiance_mcp.core.errors import GuardRailError
from radiance_mcp.core.wording.payloads import content_of, finish_reason_of, reasoning_of, usage_of
from radiance_mcp.core.wording.refusals import ApiChoice, parse_refusal, quote

Verdict = Literal[
    "retrieved",
    "refused",
    "pool_contract",
    "marker_missing",
    "empty_answer",
    "shrunk_max_tokens",
    "truncated_head",
    "timeout",
    "error",
]

ANSWER_START_CHARS = 160


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    retrieved: bool
    refusal: str | None
    finish_reason: str | None
    tokens_generated: int | None
    prompt_tokens_reported: int | None
    answer_start: str
    note: str | None


def judge_boundary(
    status: int,
    text: str,
    data: Any,
    marker: str,
    prompt_tokens: int,
    asked_tokens: int,
    dialect: ApiChoice,
    count_uncertainty_tokens: int = 0,
) -> Judgement:
    """One boundary request: retrieved only when the marker came back from the whole prompt,
    with max_tokens honoured. A shrunk max_tokens or a truncated head is a failed probe.
    prompt_tokens is the count checked before sending, +- count_uncertainty_tokens."""
    if status != 200:
        refusal, _ = parse_refusal(status, text, dialect)
        if refusal is not None and refusal.kind == "pool_contract":
            return Judgement(
                "pool_contract", False, refusal.message, None, None, None, "",
                "the KV pool fails its contract for this shape: the engine refuses long requests at request time",
            )
        if refusal is not None:
            return Judgement("refused", False, refusal.message, None, None, None, "", "refused as over the window")
        said = f"HTTP {status}: {quote(text)}"
        return Judgement("refused", False, text[:ANSWER_START_CHARS], None, None, None, "", said)
    content = content_of(data)
    finish = finish_reason_of(data)
    usage = usage_of(data)
    generated = usage.completion_tokens if usage else None
    reported = usage.prompt_tokens if usage else None
    start = content[:ANSWER_START_CHARS]
    retrieved = marker in content
    if reported is not None and reported < prompt_tokens - count_uncertainty_tokens:
        return Judgement(
            "truncated_head", False, None, finish, generated, reported, start,
            f"the engine prefilled {reported:,} of the {prompt_tokens:,} prompt tokens sent: it truncated the "
            "prompt (the head, with the marker, is gone). A failed probe.",
        )
    if finish == "length" and generated is not None and generated < asked_tokens:
        return Judgement(
            "shrunk_max_tokens", False, None, finish, generated, reported, start,
            f"stopped at {generated} of the {asked_tokens} tokens asked with finish_reason length: the engine "
            "silently shrank max_tokens. A failed probe.",
        )
    note = None
    if reported is not None and reported > prompt_tokens + count_uncertainty_tokens:
        note = f"the engine counts {reported:,} prompt tokens, {reported - prompt_tokens} more than checked"
    if retrieved:
        return Judgement("retrieved", True, None, finish, generated, reported, start, note)
    if marker in reasoning_of(data):
        note = "the marker is in the reasoning, not the answer: thinking was on despite enable_thinking=false"
        return Judgement("marker_missing", False, None, finish, generated, reported, start, note)
    if not content.strip() and finish == "stop":
        note = (
            "empty answer with finish_reason stop: on a thinking model this is thinking eating max_tokens "
            "(chat_template_kwargs.enable_thinking=false was sent)"
        )
        return Judgement("empty_answer", False, None, finish, generated, reported, start, note)
    return Judgement("marker_missing", False, None, finish, generated, reported, start, note)


_FIGURE = re.compile(r"\d[\d,.]*")


def alike(text: str | None) -> str | None:
    """A text with its figures masked: two refusals of one probe differ only in their counts."""
    return None if text is None else _FIGURE.sub("#", text)


def collapse_alike(texts: Iterable[str]) -> list[tuple[str, int]]:
    """Texts alike but for their figures, each kind once (its first text) with how many there were."""
    kinds: dict[str | None, list[str]] = {}
    for text in texts:
        kinds.setdefault(alike(text), []).append(text)
    return [(group[0], len(group)) for group in kinds.values()]


# The generated-token minimums of the probes, each asked before anything is sent.

def check_decode_tokens(gen_tokens: int) -> None:
    """Decode figures need at least 128 generated tokens (512 preferred)."""
    if gen_tokens < MIN_DECODE_TOKENS:
        raise GuardRailError(
            f"gen_tokens={gen_tokens}: a decode figure needs at least {MIN_DECODE_TOKENS} generated tokens "
            f"({PREFERRED_DECODE_TOKENS} preferred); at 8-9 tokens the inter-token time is first-token noise, "
            "and rates like 92.7 against 85.8 t/s are noise. Ask for 512.",
            rule="decode_tokens",
        )


def _longest_marker(n: int) -> str:
    """The longest marker of n boundary requests (probes.prompts.marker), its random hex shown as X."""
    return BOUNDARY_MARKER_FORMAT.format(number=n, tag="XX" * BOUNDARY_MARKER_TAG_BYTES)


def min_boundary_tokens(n: int) -> int:
    """The fewest generated tokens certain to hold the marker of each of n boundary requests: one for the
    space or newline an answer may open with, and one a character of the longest marker (an ASCII character
    is at most one token, and a tokenizer may cut random hex one character a token)."""
    return 1 + len(_longest_marker(n))


def check_boundary_tokens(gen_tokens: int, n: int) -> None:
    """A boundary request is retrieved only when its answer holds the whole marker (judge_boundary)."""
    need = min_boundary_tokens(n)
    if gen_tokens < need:
        raise GuardRailError(
            f"gen_tokens={gen_tokens}: an answer counts as retrieved only when it holds its request's whole "
            f"marker ({_longest_marker(n)}, {need - 1} characters), and it may open with a space or newline; an "
            f"ASCII character is at most one token, so {need} generated tokens are certain to hold it and fewer "
            f"may cut it: {n} full-window prefills paid for a '0/{n} retrieved' that says nothing of the shape. "
            f"Nothing was sent: pass gen_tokens={need} or more",
            rule="boundary_tokens",
        )


@dataclass(frozen=True)
class StreamRates:
    ttft_s: float | None
    decode_tokens_per_s: float | None
    inter_token_s_mean: float | None
    inter_token_s_median: float | None


def stream_rates(sent_at_s: float, token_times_s: list[float], generated_tokens: int | None) -> StreamRates:
    """Time to first token and the decode rate from the arrival times of content chunks."""
    if not token_times_s:
        return StreamRates(None, None, None, None)
    ttft = token_times_s[0] - sent_at_s
    gaps = [b - a for a, b in zip(token_times_s, token_times_s[1:], strict=False)]
    tokens = generated_tokens if generated_tokens is not None else len(token_times_s)
    span = token_times_s[-1] - token_times_s[0]
    decode = (tokens - 1) / span if span > 0 and tokens > 1 else None
    return StreamRates(
        ttft,
        decode,
        statistics.fmean(gaps) if gaps else None,
        statistics.median(gaps) if gaps else None,
    )
