"""Request bodies and answer readers for the OpenAI-style routes (pure).

Readers are null-safe: radiance's ``timings`` can carry null rates and can be missing, usage
may be absent, and a stream's last chunk may hold only usage. ``(x.get(k) or 0)`` style reads
live here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Api = Literal["chat", "completions"]

ROUTES: dict[Api, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}

THINKING_OFF: dict[str, Any] = {"enable_thinking": False}
"""With thinking on, a small max_tokens gives empty content and finish_reason stop on a healthy
server; every chat probe sends chat_template_kwargs.enable_thinking=false."""


def generation(
    api: Api,
    content: str,
    max_tokens: int,
    model: str | None,
    *,
    stream: bool = False,
    force_length: bool = False,
) -> tuple[str, dict[str, Any]]:
    """(route, body) of a greedy generation request.

    force_length asks the engine not to stop before max_tokens (``min_tokens`` and
    ``ignore_eos``, honoured by vLLM, llama.cpp and llama-cpp-python; ignored elsewhere).
    """
    body: dict[str, Any] = {"max_tokens": max_tokens, "temperature": 0, "stream": stream}
    if model:
        body["model"] = model
    if api == "chat":
        body["messages"] = [{"role": "user", "content": content}]
        body["chat_template_kwargs"] = dict(THINKING_OFF)
    else:
        body["prompt"] = content
    if stream:
        body["stream_options"] = {"include_usage": True}
    if force_length:
        body["min_tokens"] = max_tokens
        body["ignore_eos"] = True
    return ROUTES[api], body


def chat_tokenize(content: str, model: str | None) -> dict[str, Any]:
    """vLLM's POST /tokenize for a chat request, counted with its template as served."""
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": content}],
        "add_generation_prompt": True,
        "chat_template_kwargs": dict(THINKING_OFF),
    }
    if model:
        body["model"] = model
    return body


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(value: Any) -> int | None:
    number = _num(value)
    return int(number) if number is not None else None


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def first_choice(data: Any) -> Mapping[str, Any]:
    choices = _map(data).get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        return choices[0]
    return {}


def content_of(data: Any) -> str:
    """The generated text: message.content (chat), text (completions), or a stream delta."""
    choice = first_choice(data)
    for holder in (choice.get("message"), choice.get("delta")):
        if isinstance(holder, Mapping) and isinstance(holder.get("content"), str):
            return str(holder["content"])
    text = choice.get("text")
    return text if isinstance(text, str) else ""


def reasoning_of(data: Any) -> str:
    choice = first_choice(data)
    for holder in (choice.get("message"), choice.get("delta")):
        if isinstance(holder, Mapping):
            for key in ("reasoning_content", "reasoning"):
                if isinstance(holder.get(key), str):
                    return str(holder[key])
    return ""


def finish_reason_of(data: Any) -> str | None:
    reason = first_choice(data).get("finish_reason")
    return reason if isinstance(reason, str) else None


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None


def usage_of(data: Any) -> Usage | None:
    usage = _map(data).get("usage")
    if not isinstance(usage, Mapping):
        return None
    details = _map(usage.get("prompt_tokens_details"))
    return Usage(
        _int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")), _int(details.get("cached_tokens"))
    )


@dataclass(frozen=True)
class Timings:
    """The engine's own timings (llama.cpp's field names, which radiance shares)."""

    prompt_n: int | None
    prompt_ms: float | None
    prompt_per_second: float | None
    predicted_n: int | None
    predicted_ms: float | None
    predicted_per_second: float | None
    cache_n: int | None

    def prefill_rate(self) -> float | None:
        """Prompt tokens per second: the stated rate, else prompt_n over prompt_ms; None if neither."""
        if self.prompt_per_second:
            return self.prompt_per_second
        if self.prompt_n and self.prompt_ms:
            return self.prompt_n / self.prompt_ms * 1000
        return None

    def decode_rate(self) -> float | None:
        if self.predicted_per_second:
            return self.predicted_per_second
        if self.predicted_n and self.predicted_ms:
            return self.predicted_n / self.predicted_ms * 1000
        return None


def timings_of(data: Any) -> Timings | None:
    """``timings`` read null-safely; None when missing (or null, or not an object)."""
    timings = _map(data).get("timings") or None
    if not isinstance(timings, Mapping):
        return None
    return Timings(
        _int(timings.get("prompt_n")),
        _num(timings.get("prompt_ms")),
        _num(timings.get("prompt_per_second")),
        _int(timings.get("predicted_n")),
        _num(timings.get("predicted_ms")),
        _num(timings.get("predicted_per_second")),
        _int(timings.get("cache_n")),
    )
