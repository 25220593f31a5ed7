"""Every recorded refusal body is read as its engine's dialect, with the count it names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from radiance_mcp.core.wording.refusals import (
    CONSERVATIVE,
    DIALECTS,
    RADIANCE_PROMPT_REFUSAL,
    parse_refusal,
)
from radiance_mcp.sim.serving import OVER_WINDOW

FIXTURES = Path(__file__).parent.parent / "fixtures" / "engines"
RECORDED = sorted(FIXTURES.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_recorded_body_is_read_as_its_engine(path: Path) -> None:
    fixture = load(path)
    refusal, note = parse_refusal(fixture["status"], fixture["body"])
    assert refusal is not None, fixture["source"]
    assert note is None
    expect = fixture["expect"]
    assert refusal.dialect == fixture["dialect"]
    assert refusal.kind == expect["kind"]
    assert refusal.prompt_tokens == expect["prompt_tokens"]
    assert refusal.exact == expect["exact"]
    assert refusal.window_tokens == expect["window_tokens"]
    assert refusal.message


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_selecting_the_right_dialect_reads_the_same(path: Path) -> None:
    fixture = load(path)
    chosen, note = parse_refusal(fixture["status"], fixture["body"], fixture["dialect"])
    detected, _ = parse_refusal(fixture["status"], fixture["body"])
    assert chosen == detected
    assert note is None


def test_every_dialect_has_a_recorded_body() -> None:
    recorded = {load(p)["dialect"] for p in RECORDED}
    assert recorded == set(DIALECTS)


def test_a_wrong_selection_is_noted_and_the_engine_words_win() -> None:
    fixture = load(FIXTURES / "llamacpp_server_exceed_context.json")
    refusal, note = parse_refusal(400, fixture["body"], "radiance")
    assert refusal is not None and refusal.dialect == "llama.cpp"
    assert note is not None and "'radiance' was selected" in note and "llama.cpp" in note


def test_llama_cpp_python_chat_wording_is_not_taken_for_vllm() -> None:
    # vLLM <= 0.10 used the same sentence; llama-cpp-python's code field tells them apart.
    lcp = load(FIXTURES / "llama_cpp_python_chat.json")
    vllm = load(FIXTURES / "vllm_legacy_messages_completion.json")
    assert parse_refusal(400, lcp["body"])[0].dialect == "llama-cpp-python"  # type: ignore[union-attr]
    assert parse_refusal(400, vllm["body"])[0].dialect == "vllm"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "body",
    [
        '{"error": {"message": "internal error", "type": "server_error"}}',
        "<html>502 Bad Gateway</html>",
        "",
        '{"detail": "Not Found"}',
        "prompt tokens does not fit",  # the words without figures
    ],
)
def test_answers_that_are_no_refusal_are_not_read_as_one(body: str) -> None:
    assert parse_refusal(400, body) == (None, None)


def test_the_simulator_writes_the_words_the_parser_reads() -> None:
    # One home for radiance's words: the simulator's template and ours agree, and round-trip.
    assert OVER_WINDOW == RADIANCE_PROMPT_REFUSAL
    refusal, _ = parse_refusal(400, RADIANCE_PROMPT_REFUSAL.format(prompt_tokens=1_234_567, window=200000))
    assert refusal is not None and (refusal.prompt_tokens, refusal.window_tokens) == (1_234_567, 200000)


# The edge rule of each engine, at the edge: (dialect, prompt, window, max_tokens, refused).
EDGES = [
    ("radiance", 200_000, 200_000, 512, False),  # prompt alone > window; max_tokens never counts
    ("radiance", 200_001, 200_000, 1, True),
    ("llama.cpp", 4096, 4096, 1, True),  # n_tokens >= n_ctx
    ("llama.cpp", 4095, 4096, 512, False),  # no total check: generation stops at the edge
    ("llama-cpp-python", 2048, 2048, 1, True),
    ("llama-cpp-python", 2000, 2048, 512, False),  # max_tokens silently lowered to 48
    ("vllm", 32_767, 32_768, 1, False),  # 32767 + 1 = 32768, not > 32768
    ("vllm", 32_768, 32_768, 1, True),
    ("vllm", 32_000, 32_768, 769, True),  # 32000 + 769 > 32768
    ("sglang", 8192, 8192, 1, True),  # input >= context_len
    ("tgi", 4095, 4096, 1, False),  # 4095 + 1 <= 4096
    ("tgi", 4096, 4096, 1, True),
]


@pytest.mark.parametrize(("name", "prompt", "window", "max_tokens", "refused"), EDGES)
def test_edge_rules(name: str, prompt: int, window: int, max_tokens: int, refused: bool) -> None:
    assert DIALECTS[name].refuses(prompt, window, max_tokens) is refused  # type: ignore[index]


# max_model_len - gen, less the tokens each engine loses at the edge.
BOUNDARY = [
    ("radiance", 200_000, 512, 199_488),
    ("llama.cpp", 4096, 64, 4031),  # stops when n_tokens + 1 >= n_ctx
    ("llama-cpp-python", 2048, 64, 1984),
    ("vllm", 32_768, 512, 32_256),
    ("sglang", 8192, 64, 8128),
    ("tgi", 4096, 64, 4032),
]


@pytest.mark.parametrize(("name", "window", "gen", "prompt"), BOUNDARY)
def test_boundary_prompt_fits_and_leaves_room(name: str, window: int, gen: int, prompt: int) -> None:
    dialect = DIALECTS[name]  # type: ignore[index]
    assert dialect.max_prompt_tokens(window, gen) == prompt
    assert not dialect.refuses(prompt, window, gen)


def test_the_unknown_engine_is_the_strictest() -> None:
    # Above the window for every engine means > window; at the boundary, one token of reserve.
    assert not CONSERVATIVE.refuses(200_000, 200_000, 200_000)
    assert CONSERVATIVE.refuses(200_001, 200_000, 1)
    for dialect in DIALECTS.values():
        for prompt in (199_999, 200_000, 200_001):
            assert dialect.refuses(prompt, 200_000, 1) or not CONSERVATIVE.refuses(prompt, 200_000, 1)
    assert CONSERVATIVE.max_prompt_tokens(200_000, 512) == min(
        d.max_prompt_tokens(200_000, 512) for d in DIALECTS.values()
    )
    for dialect in DIALECTS.values():
        assert dialect.edge_rule()
