"""token_count_probe against recorded engine answers (httpx.MockTransport)."""

from __future__ import annotations

import httpx
import pytest

from radiance_mcp.core.errors import GuardRailError, ProbeError
from radiance_mcp.models.probes import TokenCountProbeInput
from radiance_mcp.probes import token_count_probe
from radiance_mcp.probes.client import ProbeClient
from radiance_mcp.probes.engine import Engine
from radiance_mcp.sim import count_tokens

from .fakes import FakeEngine, word_tokens

CORPUS = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. "


def args(text: str, **kw: object) -> TokenCountProbeInput:
    return TokenCountProbeInput.model_validate({"service": "fake", "text": text, **kw})


async def test_a_text_certainly_above_the_window_is_counted_by_one_refusal() -> None:
    fake = FakeEngine(window=2_000)
    text = CORPUS * 420  # 34,440 chars: more than 16 chars a token over 2,000 tokens
    result = await token_count_probe(fake.fleet(), args(text, window_tokens=2_000), transport=fake.transport())
    assert (result.method, result.count_kind, result.exact) == ("refusal", "exact", True)
    assert result.tokens == count_tokens(text)
    assert result.requests_sent == 1 and result.prefill_tokens_paid == 0
    assert result.dialect == "radiance" and result.refusals[0].text.startswith("prompt: ")
    assert result.chars_per_token == pytest.approx(2.7617, abs=1e-3)  # the seed's corpus ratio


async def test_a_text_that_may_fit_is_measured_as_a_difference_both_above_the_window() -> None:
    fake = FakeEngine(window=2_000)
    text = CORPUS * 12  # 984 chars, about 356 tokens: below the window
    result = await token_count_probe(fake.fleet(), args(text, window_tokens=2_000), transport=fake.transport())
    assert result.method == "refusal_difference" and result.count_kind == "difference" and not result.exact
    assert abs(result.tokens - count_tokens(text)) <= result.uncertainty_tokens == 2
    assert result.requests_sent == 2 and result.prefill_tokens_paid == 0
    assert result.chars_per_token_low <= result.chars_per_token <= result.chars_per_token_high
    # The guard rail: every generation request was above the window.
    assert len(fake.generation_prompts) == 2 and min(fake.generation_prompts) > 2_000


async def test_an_unknown_window_is_named_by_the_first_refusal() -> None:
    fake = FakeEngine(window=2_000)
    text = CORPUS * 12
    result = await token_count_probe(fake.fleet(), args(text, max_window_tokens=8_000), transport=fake.transport())
    assert result.window_tokens == 2_000 and result.window_source == "refusal"
    assert result.requests_sent == 2 and min(fake.generation_prompts) > 8_000
    assert abs(result.tokens - count_tokens(text)) <= 2


async def test_a_window_larger_than_assumed_is_caught_and_its_prefill_reported() -> None:
    fake = FakeEngine(window=50_000)
    accepted = r"accepted a prompt sized above the window \(it reports [\d,]+ prompt tokens\)"
    with pytest.raises(ProbeError, match=accepted):
        await token_count_probe(fake.fleet(), args("hello", max_window_tokens=2_000), transport=fake.transport())


async def test_a_periodic_tokenizer_gives_the_exact_difference() -> None:
    fake = FakeEngine(dialect="llama.cpp", window=2_048, tokenizer="words")
    text = "Alpha beta gamma, delta."
    result = await token_count_probe(
        fake.fleet(), args(text, window_tokens=2_048, use_tokenize_endpoint=False), transport=fake.transport()
    )
    # The difference excludes the BOS both requests carry: 5 words and marks + the seam's none.
    assert result.method == "refusal_difference" and result.tokens == word_tokens(text) - 1


@pytest.mark.parametrize(
    ("dialect", "path"), [("llama-cpp-python", "/extras/tokenize/count"), ("llama.cpp", "/tokenize")]
)
async def test_a_selected_dialect_with_a_tokenize_endpoint_uses_it(dialect: str, path: str) -> None:
    fake = FakeEngine(dialect=dialect, window=2_048, tokenizer="words")
    text = CORPUS * 3
    result = await token_count_probe(fake.fleet(), args(text, dialect=dialect), transport=fake.transport())
    assert result.method == "tokenize_endpoint" and result.exact and result.tokens == word_tokens(text)
    assert [s.path for s in fake.seen] == [path] and result.requests_sent == 1


async def test_vllm_bounds_send_the_probe_to_its_tokenize_endpoint() -> None:
    fake = FakeEngine(dialect="vllm", window=4_096, tokenizer="words")
    text = CORPUS * 2
    result = await token_count_probe(fake.fleet(), args(text, window_tokens=4_096), transport=fake.transport())
    assert result.dialect == "vllm" and result.method == "tokenize_endpoint" and result.exact
    assert result.tokens == word_tokens(text)
    assert any("at least" in r.text for r in result.refusals)
    assert any("only a bound" in n for n in result.notes)


async def test_an_unparseable_refusal_quotes_the_body_start_never_the_prompt() -> None:
    fake = FakeEngine(status_override=500, raw_override="upstream exploded: segfault in tokenizer " + "x" * 900)
    secret = "SECRET-PROMPT-TEXT " * 200
    with pytest.raises(ProbeError) as caught:
        await token_count_probe(fake.fleet(), args(secret, window_tokens=2_000), transport=fake.transport())
    message = str(caught.value)
    assert "HTTP 500" in message and "upstream exploded" in message and "SECRET" not in message
    assert len(message) < 900


async def test_a_pool_that_fails_its_contract_is_named_not_counted() -> None:
    body = '{"error":{"message":"does not fit the 200000 token context, which leaves nothing to generate into"}}'
    fake = FakeEngine(status_override=400, raw_override=body)
    with pytest.raises(ProbeError, match="pool fails its contract"):
        await token_count_probe(fake.fleet(), args(CORPUS, window_tokens=2_000), transport=fake.transport())


async def test_the_guard_rail_never_sends_a_prompt_that_may_fit() -> None:
    fake = FakeEngine(window=2_000)
    async with ProbeClient.for_service(fake.fleet(), "fake", 5.0, fake.transport()) as client:
        engine = Engine(client, "auto", window_tokens=2_000)
        with pytest.raises(GuardRailError, match="pays real prefill"):
            await engine.refusal("completions", "short text", 2_000)
        engine_unknown = Engine(client, "auto", max_window_tokens=1_048_576)
        with pytest.raises(GuardRailError, match="max_window_tokens"):
            await engine_unknown.refusal("completions", "x", 500_000)
    assert fake.seen == []


@pytest.mark.slow
async def test_a_missing_tokenize_route_falls_back_to_refusals() -> None:
    fake = FakeEngine(dialect="llama.cpp", window=2_048, tokenizer="words")
    handle = fake.handle

    def no_tokenize(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/tokenize":
            return httpx.Response(404, text="Not Found")
        return handle(request)

    fake.handle = no_tokenize  # type: ignore[method-assign]
    transport = fake.transport()
    result = await token_count_probe(fake.fleet(), args(CORPUS, dialect="llama.cpp"), transport=transport)
    assert result.method == "refusal_difference" and abs(result.tokens - (word_tokens(CORPUS) - 1)) <= 2
    assert any("tokenize endpoint failed" in note for note in result.notes)


async def test_a_text_just_over_16_chars_a_token_of_the_window_is_sent_not_refused_by_the_guard() -> None:
    # 264 chars / 16 = 16.5 > 16: certainly more than 16 tokens, so at least 17; the bound sent to the
    # guard was int(16.5) = 16, which the radiance edge (prompt > window) does not refuse, and the
    # probe raised a GuardRailError on a text it had itself judged certainly above the window.
    fake = FakeEngine(window=16)
    text = ("x" * 15 + " ") * 16 + "y" * 8
    assert len(text) == 264
    result = await token_count_probe(fake.fleet(), args(text, window_tokens=16), transport=fake.transport())
    assert (result.method, result.count_kind) == ("refusal", "exact")
    assert result.tokens == count_tokens(text) and result.requests_sent == 1
