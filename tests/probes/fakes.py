"""Recorded engine answers served through httpx.MockTransport, with the count filled in.

Each fake answers a generation request above its window with its engine's recorded refusal
wording (tests/fixtures/engines), a tokenize request with a count, and a request that fits
with a completion whose usage says what it cost; it records every request it sees.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx

from radiance_mcp.sim import count_tokens
from radiance_mcp.sources.config import Fleet, Service

WORD = re.compile(r"\w+|[^\w\s]")


def word_tokens(text: str) -> int:
    """A periodic tokenizer: a BOS and one token per word or mark (the fox unit is 10)."""
    return 1 + len(WORD.findall(text))


@dataclass
class Seen:
    path: str
    prompt_tokens: int | None
    body: dict[str, Any]


@dataclass
class FakeEngine:
    dialect: str = "radiance"
    window: int = 2_000
    tokenizer: str = "sim"
    status_override: int | None = None
    raw_override: str | None = None
    seen: list[Seen] = field(default_factory=list)

    def count(self, text: str) -> int:
        return count_tokens(text) if self.tokenizer == "sim" else word_tokens(text)

    def fleet(self) -> Fleet:
        return Fleet(services={"fake": Service(endpoint="http://fake.test:8000")})

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    @property
    def generation_prompts(self) -> list[int]:
        return [s.prompt_tokens for s in self.seen if s.path.startswith("/v1/") and s.prompt_tokens is not None]

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        path = request.url.path
        if path in ("/tokenize", "/extras/tokenize/count"):
            text = body.get("content") or body.get("input") or body.get("prompt") or body["messages"][0]["content"]
            tokens = self.count(text)
            self.seen.append(Seen(path, None, body))
            if self.dialect == "llama-cpp-python":
                return httpx.Response(200, json={"count": tokens})
            if self.dialect == "vllm":
                return httpx.Response(200, json={"count": tokens, "max_model_len": self.window, "tokens": []})
            return httpx.Response(200, json={"tokens": list(range(tokens))})
        text = body.get("prompt") if "prompt" in body else body["messages"][0]["content"]
        tokens = self.count(text)
        self.seen.append(Seen(path, tokens, body))
        if self.status_override is not None:
            return httpx.Response(self.status_override, text=self.raw_override or "")
        max_tokens = int(body.get("max_tokens") or 16)
        if tokens > self.window or (self.dialect != "radiance" and tokens >= self.window):
            return self.refuse(tokens, max_tokens, path)
        return httpx.Response(
            200,
            json={
                "choices": [{"message": {"content": "ok"}, "text": "ok", "finish_reason": "length"}],
                "usage": {"prompt_tokens": tokens, "completion_tokens": max_tokens},
            },
        )

    def refuse(self, tokens: int, max_tokens: int, path: str) -> httpx.Response:
        window = self.window
        if self.dialect == "radiance":
            message = f"prompt: {tokens:,} prompt tokens does not fit the {window} token context"
            error = {"code": 400, "message": message, "type": "invalid_request_error"}
            return httpx.Response(400, json={"error": error})
        if self.dialect == "llama.cpp":
            message = f"request ({tokens} tokens) exceeds the available context size ({window} tokens), try increasing"
            error = {"code": 400, "message": message, "type": "exceed_context_size_error", "n_prompt_tokens": tokens,
                     "n_ctx": window}
            return httpx.Response(400, json={"error": error})
        if self.dialect == "llama-cpp-python":
            if path.endswith("chat/completions"):
                message = (f"This model's maximum context length is {window} tokens. However, you requested "
                           f"{tokens + max_tokens} tokens ({tokens} in the messages, {max_tokens} in the completion). "
                           "Please reduce the length of the messages or completion.")
            else:
                message = (f"This model's maximum context length is {window} tokens, however you requested "
                           f"{tokens + max_tokens} tokens ({tokens} in your prompt; {max_tokens} for the completion). "
                           "Please reduce your prompt; or completion length.")
            error = {"message": message, "type": "invalid_request_error", "param": "messages",
                     "code": "context_length_exceeded"}
            return httpx.Response(400, json={"error": error})
        if self.dialect == "vllm":
            # Current vLLM stops tokenizing at the limit: a bound.
            bound = window - max_tokens + 1
            message = (f"This model's maximum context length is {window} tokens. However, you requested {max_tokens} "
                       f"output tokens and your prompt contains at least {bound} input tokens, for a total of at least "
                       f"{bound + max_tokens} tokens. Please reduce the length of the input prompt or the number of "
                       "requested output tokens.")
            return httpx.Response(400, json={"error": {"message": message, "type": "BadRequestError", "code": 400}})
        raise AssertionError(self.dialect)
