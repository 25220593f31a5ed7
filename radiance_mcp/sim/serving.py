"""What the simulated radiance does with one request, pure: the decisions, not the HTTP.

``plan_request`` turns a parsed request body into either a refusal (status and message) or a
plan: the prompt's tokens, what the prefix cache holds of it, the tokens to generate and the
simulated seconds each phase takes. ``endpoint.py`` carries the plan out over HTTP. The
behaviours follow PHRASEBOOK section 7; ``Behaviour`` switches each one, including engines that
misbehave.

- The over-window refusal names the prompt's token count before any prefill:
  ``prompt: 202,777 prompt tokens does not fit the 200000 token context`` (HTTP 400). It fires
  on the prompt alone (prompt tokens > max_model_len), never on prompt + max_tokens: the
  generation is cut at the window instead (finish_reason "length").
- A KV pool that fails its contract (capacity.pool_contract) serves short requests and answers
  any prompt at or past its per-seat share (the contract's max_window_at_seqs) with HTTP 400
  ``does not fit the 200000 token context, which leaves nothing to generate into``.
- Chat requests think first (THINKING_TOKENS of reasoning) unless
  ``chat_template_kwargs.enable_thinking`` is false or the behaviour turns thinking off; a
  max_tokens inside the thinking gives empty content and finish_reason "stop". Completions
  have no chat template and do not think.
- The model never stops by itself: it answers the first line of its prompt (where a probe puts
  its marker) and continues with filler words until max_tokens, the window or its seat's share.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

from radiance_mcp.core.constants import (
    COLD_PREFILL_S,
    COLD_PREFILL_TOKENS,
    CONCURRENT_STREAMS,
    CONCURRENT_TOKENS_PER_S,
    DECODE_SOLO_TOKENS_PER_S,
    MIB,
    PREFIX_CACHE_MIB,
    WARM_PREFILL_TOKENS_PER_S,
)
from radiance_mcp.core.rules.capacity import REFUSAL
from radiance_mcp.core.wording.refusals import RADIANCE_PROMPT_REFUSAL
from radiance_mcp.sim.calibration import ANSWER_HEAD_CHARS, PREFIX_BLOCK_CHARS, THINKING_TOKENS
from radiance_mcp.sim.engine import BootFigures
from radiance_mcp.sim.tokenizer import FOX_SENTENCE, count_tokens, keep_tail

TimingsMode = Literal["full", "null_rates", "missing"]
OVER_WINDOW = RADIANCE_PROMPT_REFUSAL
"""The over-window refusal (seed), from the probes' radiance dialect, the words its parser reads;
REFUSAL (capacity) is the failed pool contract's."""
DEFAULT_MAX_TOKENS = 256
"""assumption: max_tokens when a request gives none."""
COLD_PREFILL_TOKENS_PER_S = COLD_PREFILL_TOKENS / COLD_PREFILL_S


@dataclass
class Behaviour:
    """Switches for the simulated engine; mutable, so a test can flip one while it serves.

    Defaults are radiance's own behaviour; the misbehaving engines are opt-in.
    """

    thinking_default: bool = True
    """Chat requests think unless chat_template_kwargs.enable_thinking=false."""
    timings: TimingsMode = "full"
    """'full': rates given; 'null_rates': rates are null; 'missing': no timings key at all."""
    prefix_cache: bool = True
    """A repeated head is read from the (restart-surviving) prefix cache instead of prefilled."""
    truncate_head: bool = False
    """Misbehaving: drop the prompt's head silently instead of refusing a prompt that does not fit."""
    shrink_max_tokens: int | None = None
    """Misbehaving: silently generate at most this many tokens, whatever max_tokens asks."""
    fail_status: int | None = None
    """Misbehaving: answer every generation request with this HTTP status (e.g. 500)."""
    hang: bool = False
    """Misbehaving: accept generation requests and never answer (until the endpoint stops)."""
    gather: int = 0
    """A test's seam, not an engine's behaviour: each seated request waits until this many are in flight (at most
    GATHER_WAIT_S), so a test of a client that sends n at once sees them at once however loaded the machine is
    (at a test's time scale a 22 s prefill is 22 ms: a slow client's last request could arrive after the first
    ended). 0: no wait."""


GATHER_WAIT_S = 60.0
"""How long Behaviour.gather holds a request: a client that sends one at a time fails its test then, never hangs it."""


class PrefixCache:
    """The disk prefix cache: chained hashes of PREFIX_BLOCK_CHARS-character blocks, LRU.

    Its capacity is PREFIX_CACHE_MIB (64 GiB) of KV at the given rate. It belongs to the
    endpoint, not to an engine process, so it survives restarts.
    """

    def __init__(self, rate_bytes_per_token: int) -> None:
        block_tokens = count_tokens(FOX_SENTENCE * (PREFIX_BLOCK_CHARS // len(FOX_SENTENCE) + 1))
        self.capacity_blocks = max(1, PREFIX_CACHE_MIB * MIB // (block_tokens * rate_bytes_per_token))
        self._blocks: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    @staticmethod
    def _chain(text: str) -> list[str]:
        keys, digest = [], hashlib.sha256()
        for start in range(0, len(text) - PREFIX_BLOCK_CHARS + 1, PREFIX_BLOCK_CHARS):
            digest.update(text[start : start + PREFIX_BLOCK_CHARS].encode())
            keys.append(digest.copy().hexdigest())
        return keys

    def cached_chars(self, text: str) -> int:
        """How many leading characters of text the cache holds (whole blocks)."""
        held = 0
        for key in self._chain(text):
            if key not in self._blocks:
                break
            self._blocks.move_to_end(key)
            held += PREFIX_BLOCK_CHARS
        return held

    def store(self, text: str) -> None:
        for key in self._chain(text):
            self._blocks[key] = None
            self._blocks.move_to_end(key)
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)

    def clear(self) -> None:
        self._blocks.clear()


@dataclass(frozen=True)
class ErrorAnswer:
    status: int
    message: str
    prompt_tokens: int | None = None

    def body(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"code": self.status, "message": self.message, "type": kind}}


@dataclass(frozen=True)
class Plan:
    """One accepted request, decided before any prefill."""

    kind: Literal["completion", "chat"]
    prompt: str
    """The prompt as the engine sees it (after a misbehaving head truncation)."""
    prompt_tokens: int
    """Tokens of the prompt as sent (the usage figure)."""
    kept_tokens: int
    """Tokens prefilled or read from the cache (fewer than prompt_tokens only when truncated)."""
    max_tokens: int
    """As asked (or the default)."""
    generate_tokens: int
    """What will be generated: max_tokens, cut by a shrinking engine, the window or the seat's share."""
    thinking: bool
    thinking_tokens: int
    stream: bool
    truncated: bool


def prompt_of(body: dict[str, Any], kind: Literal["completion", "chat"]) -> str:
    """The prompt text of a request body; a chat's messages are joined by newlines."""
    if kind == "completion":
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise ValueError("prompt must be a string (or a list of one string)")
        return prompt
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    parts = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise ValueError("each message needs a string content (or a list of text parts)")
        parts.append(content)
    return "\n".join(parts)


def _positive_int(body: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer")
        return value
    return None


def plan_request(
    body: dict[str, Any], kind: Literal["completion", "chat"], boot: BootFigures, behaviour: Behaviour
) -> Plan | ErrorAnswer:
    """Decide a request before any prefill: a refusal, or what to prefill and generate."""
    try:
        prompt = prompt_of(body, kind)
        asked = _positive_int(body, "max_tokens", "max_completion_tokens")
    except ValueError as exc:
        return ErrorAnswer(400, str(exc))
    max_tokens = DEFAULT_MAX_TOKENS if asked is None else asked
    window = boot.shape.max_model_len
    share = share_tokens(boot)
    prompt_tokens = count_tokens(prompt)
    kept, kept_tokens, truncated = prompt, prompt_tokens, False

    limit = min(window, share)
    if behaviour.truncate_head and prompt_tokens + max_tokens > limit:
        # A misbehaving engine: it makes room by cutting the head (where the marker is) and says nothing.
        kept = keep_tail(prompt, max(1, limit - max_tokens))
        kept_tokens, truncated = count_tokens(kept), True
    elif prompt_tokens > window:
        return ErrorAnswer(400, OVER_WINDOW.format(prompt_tokens=prompt_tokens, window=window), prompt_tokens)
    elif not boot.contract.ok and prompt_tokens >= share:
        return ErrorAnswer(400, REFUSAL.format(window=window), prompt_tokens)

    generate = min(max_tokens, max(0, limit - kept_tokens))
    if behaviour.shrink_max_tokens is not None:
        generate = min(generate, behaviour.shrink_max_tokens)
    thinking = False
    if kind == "chat":
        kwargs = body.get("chat_template_kwargs")
        wanted = kwargs.get("enable_thinking") if isinstance(kwargs, dict) else None
        thinking = behaviour.thinking_default if wanted is None else bool(wanted)
    return Plan(
        kind=kind,
        prompt=kept,
        prompt_tokens=prompt_tokens,
        kept_tokens=kept_tokens,
        max_tokens=max_tokens,
        generate_tokens=generate,
        thinking=thinking,
        thinking_tokens=min(THINKING_TOKENS, generate) if thinking else 0,
        stream=bool(body.get("stream", False)),
        truncated=truncated,
    )


def prefill_s(cached_tokens: int, paid_tokens: int) -> float:
    """Simulated prefill time: cached tokens at the warm rate, the rest at the cold rate."""
    return cached_tokens / WARM_PREFILL_TOKENS_PER_S + paid_tokens / COLD_PREFILL_TOKENS_PER_S


def decode_tokens_per_s(dtype: str, streams: int) -> float:
    """Per-stream decode rate with so many streams decoding: solo by KV dtype, then shared.

    Solo: 124.1 t/s fp8, 94.1 bf16 (seed); the share factor makes 3 streams about 6 t/s each.
    """
    solo = DECODE_SOLO_TOKENS_PER_S[dtype]
    share = (solo / CONCURRENT_TOKENS_PER_S - 1) / (CONCURRENT_STREAMS - 1)
    return solo / (1 + share * (max(1, streams) - 1))


def head_line(prompt: str) -> str:
    """What the model answers with: the first line of its prompt, up to ANSWER_HEAD_CHARS."""
    return prompt.lstrip().split("\n", 1)[0][:ANSWER_HEAD_CHARS].strip()


def pieces(plan: Plan) -> tuple[list[str], list[str]]:
    """The generated tokens as text pieces: (reasoning, content)."""
    filler = FOX_SENTENCE.split()
    reasoning = [("" if i == 0 else " ") + filler[i % len(filler)] for i in range(plan.thinking_tokens)]
    answer_words = head_line(plan.prompt).split() or ["(empty)"]
    content_count = plan.generate_tokens - plan.thinking_tokens
    if plan.thinking and plan.generate_tokens <= THINKING_TOKENS:
        content_count = 0  # still thinking when max_tokens ran out: empty content
    content = []
    for i in range(content_count):
        word = answer_words[i] if i < len(answer_words) else filler[(i - len(answer_words)) % len(filler)]
        content.append(word if i == 0 else " " + word)
    return reasoning, content


def finish_reason(plan: Plan) -> str:
    """'stop' when thinking used up max_tokens (the seed's trap), else 'length' (no EOS)."""
    if plan.thinking and plan.generate_tokens <= THINKING_TOKENS:
        return "stop"
    return "length"


def timings(mode: TimingsMode, *, prompt_tokens: int, cached_tokens: int, prefill: float, generated: int,
            decode: float) -> dict[str, Any] | None:
    """The response's timings (simulated engine clock, in ms); None when the mode drops them."""
    if mode == "missing":
        return None
    null = mode == "null_rates"

    def rate(count: int, seconds: float) -> float | None:
        return None if null or count == 0 or seconds <= 0 else round(count / seconds, 3)

    def per_token(count: int, seconds: float) -> float | None:
        return None if null or count == 0 else round(1000 * seconds / count, 3)

    return {
        "cache_n": cached_tokens,
        "prompt_n": prompt_tokens,
        "prompt_ms": round(1000 * prefill, 3),
        "prompt_per_token_ms": per_token(prompt_tokens, prefill),
        "prompt_per_second": rate(prompt_tokens, prefill),
        "predicted_n": generated,
        "predicted_ms": round(1000 * decode, 3),
        "predicted_per_token_ms": per_token(generated, decode),
        "predicted_per_second": rate(generated, decode),
    }


def share_tokens(boot: BootFigures) -> int:
    """Tokens each seat may hold: the window, or less when the pool fails its contract."""
    return boot.shape.max_model_len if boot.contract.ok else boot.contract.max_window_at_seqs

