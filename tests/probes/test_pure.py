"""The pure parts: prompts, request bodies, null-safe answer readers, verdicts."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from radiance_mcp.core.constants import CHARS_PER_TOKEN_FOX, MIN_DECODE_TOKENS, PREFERRED_DECODE_TOKENS
from radiance_mcp.core.errors import GuardRailError
from radiance_mcp.core.rules.probe_verdicts import (
    check_boundary_tokens,
    check_decode_tokens,
    judge_boundary,
    min_boundary_tokens,
    stream_rates,
)
from radiance_mcp.core.wording.payloads import (
    content_of,
    finish_reason_of,
    generation,
    timings_of,
    usage_of,
)
from radiance_mcp.probes.prompts import (
    FOX_UNIT,
    MAX_FILLER_CHARS_PER_TOKEN,
    Prompt,
    boundary_prompt,
    decode_prompt,
    marker,
    nonce,
    text_certainly_above,
    units_certainly_above,
    units_for_tokens,
)

# --- prompts ---------------------------------------------------------------------------


def test_a_200k_window_of_fox_filler_is_about_514k_characters() -> None:
    # 200,000 tokens * 2.5714 chars/token = 514,280 characters = 11,429 units of 45.
    units = units_for_tokens(200_000, CHARS_PER_TOKEN_FOX)
    assert units == 11_429
    assert 514_280 <= units * len(FOX_UNIT) < 514_280 + len(FOX_UNIT)


@given(st.integers(min_value=1, max_value=2_000_000))
def test_certainly_above_is_above_at_the_coarsest_ratio(tokens: int) -> None:
    units = units_certainly_above(tokens)
    assert units * len(FOX_UNIT) / MAX_FILLER_CHARS_PER_TOKEN > tokens


def test_text_certainly_above_needs_16_chars_a_token() -> None:
    assert not text_certainly_above(552_286, 200_000)  # the seed's corpus window: may fit
    assert text_certainly_above(3_200_017, 200_000)


@given(st.text(max_size=40), st.integers(min_value=1, max_value=500), st.text(max_size=40), st.integers(0, 50))
def test_prompt_text_is_head_units_tail(head: str, units: int, tail: str, extra: int) -> None:
    prompt = Prompt(head, units, tail)
    text = prompt.text(extra)
    assert text == head + FOX_UNIT * (units + extra) + tail
    assert len(text) == prompt.chars(extra)
    assert prompt.resized(0).units == 1


def test_boundary_prompts_carry_a_unique_marker_and_a_nonce_at_the_head() -> None:
    built = [boundary_prompt(i, 3) for i in range(8)]
    marks = [m for _, m in built]
    assert len(set(marks)) == 8
    for prompt, mark in built:
        first_line = prompt.text().split("\n", 1)[0]
        assert mark in first_line and "NONCE" in first_line
        assert "MARKER" in prompt.tail
    heads = {p.head for p, _ in built}
    assert len(heads) == 8
    assert marker(0).startswith("PROBE-01-") and len(nonce()) == 16


def test_decode_prompts_are_cold_each_time() -> None:
    first, second = decode_prompt(10), decode_prompt(10)
    assert first.text().startswith("NONCE ") and first.head != second.head


# --- request bodies --------------------------------------------------------------------


def test_chat_requests_turn_thinking_off() -> None:
    route, body = generation("chat", "hi", 64, None)
    assert route == "/v1/chat/completions"
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["temperature"] == 0 and "model" not in body


def test_completions_requests_and_forced_length() -> None:
    route, body = generation("completions", "hi", 512, "m", stream=True, force_length=True)
    assert route == "/v1/completions" and body["prompt"] == "hi" and body["model"] == "m"
    assert body["stream_options"] == {"include_usage": True}
    assert body["min_tokens"] == 512 and body["ignore_eos"] is True


# --- null-safe readers -----------------------------------------------------------------

FULL = {
    "prompt_n": 51_500,
    "prompt_ms": 11_800.0,
    "prompt_per_second": 4_364.4,
    "predicted_n": 512,
    "predicted_ms": 4_125.7,
    "predicted_per_second": 124.1,
    "cache_n": 0,
}


@pytest.mark.parametrize(
    ("data", "prefill", "decode"),
    [
        ({"timings": FULL}, 4_364.4, 124.1),
        # Null rates: computed from n and ms (512 / 4.1257 s = 124.1 t/s).
        ({"timings": {**FULL, "prompt_per_second": None, "predicted_per_second": None}}, 4364.4, 124.1),
        ({"timings": {"prompt_per_second": None, "predicted_per_second": None}}, None, None),
        ({"timings": {"prompt_n": None, "prompt_ms": 0, "predicted_n": 5, "predicted_ms": None}}, None, None),
    ],
)
def test_timings_rates_are_read_null_safely(data: dict[str, Any], prefill: float | None, decode: float | None) -> None:
    timings = timings_of(data)
    assert timings is not None
    assert timings.prefill_rate() == pytest.approx(prefill, rel=1e-3) if prefill else timings.prefill_rate() is None
    assert timings.decode_rate() == pytest.approx(decode, rel=1e-3) if decode else timings.decode_rate() is None


@pytest.mark.parametrize("data", [{}, {"timings": None}, {"timings": "n/a"}, None, [], {"choices": []}])
def test_missing_timings_are_none(data: Any) -> None:
    assert timings_of(data) is None


def test_answer_readers_tolerate_every_shape() -> None:
    chat = {
        "choices": [{"message": {"content": "PROBE-01"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}},
    }
    assert content_of(chat) == "PROBE-01" and finish_reason_of(chat) == "stop"
    usage = usage_of(chat)
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (10, 3, 4)
    assert content_of({"choices": [{"text": "x"}]}) == "x"
    assert content_of({"choices": [{"delta": {"content": "y"}}]}) == "y"
    for junk in (None, {}, {"choices": None}, {"choices": ["x"]}, {"usage": "x"}, {"usage": {"prompt_tokens": "9"}}):
        assert content_of(junk) == "" and finish_reason_of(junk) is None
        found = usage_of(junk)
        assert found is None or found.prompt_tokens is None


# --- verdicts --------------------------------------------------------------------------


def answer(content: str, finish: str = "length", prompt: int = 1000, generated: int = 64) -> dict[str, Any]:
    return {
        "choices": [{"message": {"content": content}, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": generated},
    }


def judge(data: dict[str, Any], status: int = 200, text: str = "", margin: int = 0) -> Any:
    return judge_boundary(status, text, data, "PROBE-01-ABCDEF", 1000, 64, "auto", margin)


def test_the_marker_back_is_retrieved() -> None:
    verdict = judge(answer("MARKER PROBE-01-ABCDEF NONCE 1234"))
    assert verdict.verdict == "retrieved" and verdict.retrieved


def test_a_silently_shrunk_max_tokens_fails_the_probe_even_with_the_marker() -> None:
    verdict = judge(answer("PROBE-01-ABCDEF", "length", generated=16))
    assert verdict.verdict == "shrunk_max_tokens" and not verdict.retrieved
    assert "16 of the 64" in (verdict.note or "")


def test_a_short_natural_stop_is_not_a_shrink() -> None:
    assert judge(answer("PROBE-01-ABCDEF", "stop", generated=9)).verdict == "retrieved"


def test_a_truncated_head_fails_the_probe() -> None:
    verdict = judge(answer("The quick brown fox", prompt=900))
    assert verdict.verdict == "truncated_head" and "900 of the 1,000" in (verdict.note or "")
    assert judge(answer("PROBE-01-ABCDEF", prompt=998), margin=2).verdict == "retrieved"


def test_the_thinking_trap_is_named() -> None:
    verdict = judge(answer("", "stop", generated=64))
    assert verdict.verdict == "empty_answer" and "thinking" in (verdict.note or "")


def test_refusals_and_the_pool_contract_per_request() -> None:
    pool = '{"error": {"message": "does not fit the 200000 token context, which leaves nothing to generate into"}}'
    verdict = judge({}, 400, pool)
    assert verdict.verdict == "pool_contract" and "leaves nothing to generate into" in (verdict.refusal or "")
    over = '{"error": {"message": "prompt: 200,001 prompt tokens does not fit the 200000 token context"}}'
    assert judge({}, 400, over).verdict == "refused"
    failed = judge({}, 500, "Internal Server Error")
    assert failed.verdict == "refused" and "HTTP 500" in (failed.note or "")


@pytest.mark.parametrize("tokens", [0, 8, 9, MIN_DECODE_TOKENS - 1])
def test_decode_under_128_tokens_is_refused_as_noise(tokens: int) -> None:
    with pytest.raises(GuardRailError, match=f"at least {MIN_DECODE_TOKENS}.*{PREFERRED_DECODE_TOKENS} preferred"):
        check_decode_tokens(tokens)
    check_decode_tokens(MIN_DECODE_TOKENS)


@pytest.mark.parametrize("n", [1, 9, 10, 64])
def test_the_boundary_minimum_is_the_longest_markers_characters_and_a_space(n: int) -> None:
    # PROBE-NN-XXXXXX as the probe builds it: 15 ASCII characters, at most one token each, and the space an
    # answer may open with: 16 tokens.
    longest = max((marker(i) for i in range(n)), key=len)
    assert min_boundary_tokens(n) == 1 + len(longest) == 16
    check_boundary_tokens(16, n)
    with pytest.raises(GuardRailError, match=r"gen_tokens=15: .*whole marker \(PROBE-\d\d-XXXXXX, 15 characters\)"
                       r".*pass gen_tokens=16 or more$") as refused:
        check_boundary_tokens(15, n)
    assert refused.value.rule == "boundary_tokens"


def test_stream_rates() -> None:
    # First token 0.5 s after sending, then 10 tokens 0.01 s apart: (11 - 1) / 0.1 s = 100 t/s.
    times = [10.5 + 0.01 * i for i in range(11)]
    rates = stream_rates(10.0, times, 11)
    assert rates.ttft_s == pytest.approx(0.5)
    assert rates.decode_tokens_per_s == pytest.approx(100.0)
    assert rates.inter_token_s_median == pytest.approx(0.01)
    assert stream_rates(0.0, [], None).ttft_s is None
