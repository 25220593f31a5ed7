"""Engine dialects: how each serving engine words a context refusal, and its edge rules.

Pure: status and body text in, a ``ContextRefusal`` out. Every engine the probes talk to has one
entry of ``DIALECTS``; it holds the refusal patterns, the rule by which the engine refuses a
prompt at the edge of its window (``>`` or ``>=``, prompt alone or prompt + max_tokens), the
tokens the engine loses at the edge when generating, and its tokenize endpoint if it has one.
The wording of every pattern was read from the engine's own source or its recorded answers;
tests/fixtures/engines/ holds one recorded body per wording with a note of where it comes from.

    radiance          ``prompt: 202,777 prompt tokens does not fit the 200000 token context``
                      (HTTP 400, names the exact count before any prefill). The same words with
                      ``, which leaves nothing to generate into`` are the pool contract failing:
                      a pool too small for the shape, not a count.
    llama.cpp         ``exceed_context_size_error`` with ``n_prompt_tokens`` and ``n_ctx`` (the
                      per-slot window); refuses at prompt >= n_ctx; ``POST /tokenize``.
    llama-cpp-python  ``context_length_exceeded``; the count sits inside the message, worded one
                      way for /v1/completions and another for /v1/chat/completions; refuses at
                      prompt >= n_ctx and silently shrinks max_tokens to fit;
                      ``POST /extras/tokenize/count``.
    vllm              older releases name the exact count; current ones say ``at least N input
                      tokens`` or tokenize only up to the limit + 1, which is a bound, and a
                      character pre-check names no token count at all: use ``POST /tokenize``.
    sglang            ``The input (N tokens) is longer than the model's context length (M
                      tokens).``, refusing at prompt >= M.
    tgi               HTTP 422, ``Given: N`` after ``must have less than`` or ``must be <=``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from radiance_mcp.core.wording.payloads import chat_tokenize

ApiName = Literal["radiance", "llama.cpp", "llama-cpp-python", "vllm", "sglang", "tgi"]
ApiChoice = Literal["auto", "radiance", "llama.cpp", "llama-cpp-python", "vllm", "sglang", "tgi"]
ContextRefusalKind = Literal["prompt_over_window", "total_over_window", "characters_over_bound", "pool_contract"]

BODY_QUOTE_CHARS = 300
"""How much of an answer an error quotes."""

RADIANCE_PROMPT_REFUSAL = "prompt: {prompt_tokens:,} prompt tokens does not fit the {window} token context"
"""radiance's words when the prompt alone exceeds the window (seed); the simulator writes it from here."""

_NUM = r"\d{1,3}(?:,\d{3})+|\d+"


def _int(text: str) -> int:
    return int(text.replace(",", ""))


@dataclass(frozen=True)
class ContextRefusal:
    """A context refusal read from an engine's answer."""

    dialect: ApiName
    kind: ContextRefusalKind
    prompt_tokens: int | None
    """The count the refusal names; None when it names none (pool contract, characters)."""
    exact: bool
    """False: prompt_tokens is only a lower bound (the engine stopped counting)."""
    window_tokens: int | None
    """The window the refusal names, when it names one."""
    message: str
    """The refusal's own words (the error message, or the body's start)."""


@dataclass(frozen=True)
class TokenizeSpec:
    """A tokenize endpoint: counts a prompt with no generation and no prefill."""

    path: str
    build: Callable[[str, str | None], dict[str, Any]]
    """(text, model) -> request body."""
    count: Callable[[Any], int | None]
    """Response JSON -> token count, None when the answer holds none."""
    window: Callable[[Any], int | None]
    """Response JSON -> the window, when the endpoint reports it."""
    note: str
    build_chat: Callable[[str, str | None], dict[str, Any]] | None = None
    """(user content, model) -> a request counting the chat prompt as served; None: raw text only."""


@dataclass(frozen=True)
class ApiDialect:
    name: ApiName | Literal["unknown"]
    refuses_at: Literal[">", ">="]
    """Prompt-alone refusal edge: '>' refuses prompt > window, '>=' refuses prompt >= window."""
    checks_total: bool
    """True: the engine also refuses prompt + max_tokens > window (so max_tokens counts)."""
    edge_reserve_tokens: int
    """Tokens lost at the edge: llama.cpp stops generating when prompt + generated + 1 reaches n_ctx."""
    shrinks_max_tokens: bool
    """True: the engine silently lowers max_tokens to what fits rather than refusing."""
    tokenize: TokenizeSpec | None
    parse: Callable[[int, str, Any], ContextRefusal | None]
    source: str
    """Where the wording was read."""

    def refuses(self, prompt_tokens: int, window_tokens: int, max_tokens: int) -> bool:
        """Whether this engine refuses a prompt of this size (the edge rule)."""
        if self.refuses_at == ">" and prompt_tokens > window_tokens:
            return True
        if self.refuses_at == ">=" and prompt_tokens >= window_tokens:
            return True
        return self.checks_total and prompt_tokens + max_tokens > window_tokens

    def max_prompt_tokens(self, window_tokens: int, gen_tokens: int) -> int:
        """The longest prompt that still leaves room to generate gen_tokens: max_model_len - gen."""
        return window_tokens - gen_tokens - self.edge_reserve_tokens

    def edge_rule(self) -> str:
        total = ", and prompt + max_tokens > window" if self.checks_total else " (max_tokens not checked)"
        rule = f"refuses prompt {self.refuses_at} window{total}"
        if self.edge_reserve_tokens:
            rule += f"; stops generating {self.edge_reserve_tokens} token before the window"
        if self.shrinks_max_tokens:
            rule += "; silently shrinks max_tokens to what fits"
        return rule


# --------------------------------------------------------------------------------------
# Reading an answer's message


def decode_json(body: str) -> Any:
    try:
        return json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        return None


def error_message(body: str, data: Any) -> str:
    """The error's own words: error.message, message, error (a string), detail; else the body."""
    if isinstance(data, Mapping):
        error = data.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])
        for key in ("message", "error", "detail"):
            if isinstance(data.get(key), str):
                return str(data[key])
    return body.strip()


def _error_object(data: Any) -> Mapping[str, Any]:
    if isinstance(data, Mapping):
        error = data.get("error")
        if isinstance(error, Mapping):
            return error
        return data
    return {}


def quote(body: str) -> str:
    """The start of a body, for an error message (never the prompt: only answers are quoted)."""
    text = body.strip().replace("\r", " ").replace("\n", " ")
    return repr(text[:BODY_QUOTE_CHARS] + ("..." if len(text) > BODY_QUOTE_CHARS else ""))


# --------------------------------------------------------------------------------------
# One parser per engine


def _words(pattern: str) -> re.Pattern[str]:
    # A literal space stands for any run of blanks, as in the ledger's phrase table.
    return re.compile(pattern.replace(" ", r"\s+"))


_RADIANCE_POOL = _words(rf"does not fit the (?P<window>{_NUM}) token context, which leaves nothing to generate into")
_RADIANCE_PROMPT = _words(
    rf"prompt:\s*(?P<prompt>{_NUM}) prompt tokens does not fit the (?P<window>{_NUM}) token context"
)


def _parse_radiance(status: int, body: str, data: Any) -> ContextRefusal | None:
    message = error_message(body, data)
    # The pool-contract words are checked first: the same sentence with its tail is not a count.
    pool = _RADIANCE_POOL.search(message) or _RADIANCE_POOL.search(body)
    if pool:
        return ContextRefusal("radiance", "pool_contract", None, False, _int(pool["window"]), message)
    match = _RADIANCE_PROMPT.search(message) or _RADIANCE_PROMPT.search(body)
    if match:
        return ContextRefusal("radiance", "prompt_over_window", _int(match["prompt"]), True, _int(match["window"]),
                              message)
    return None


_LLAMACPP_MESSAGES = (
    re.compile(r"request \((?P<prompt>\d+) tokens\) exceeds the available context size \((?P<window>\d+) tokens\)"),
    re.compile(r"input \((?P<prompt>\d+) tokens\) is larger than the max context size \((?P<window>\d+) tokens\)"),
)


def _parse_llamacpp(status: int, body: str, data: Any) -> ContextRefusal | None:
    error = _error_object(data)
    message = error_message(body, data)
    if error.get("type") != "exceed_context_size_error" and "exceeds the available context size" not in message:
        return None
    prompt = error.get("n_prompt_tokens")
    window = error.get("n_ctx")
    if not isinstance(prompt, int) or not isinstance(window, int):
        for pattern in _LLAMACPP_MESSAGES:
            match = pattern.search(message)
            if match:
                prompt, window = int(match["prompt"]), int(match["window"])
                break
    if not isinstance(prompt, int):
        return None
    named_window = window if isinstance(window, int) else None
    return ContextRefusal("llama.cpp", "prompt_over_window", prompt, True, named_window, message)


_LCP_COMPLETION = re.compile(
    r"maximum context length is (?P<window>\d+) tokens, however you requested (?P<total>\d+) tokens "
    r"\((?P<prompt>\d+) in your prompt; (?P<gen>\w+) for the completion\)"
)
_LCP_CHAT = re.compile(
    r"maximum context length is (?P<window>\d+) tokens\. However, you requested (?P<total>\d+) tokens "
    r"\((?P<prompt>\d+) in the messages, (?P<gen>\w+) in the completion\)"
)


def _parse_llama_cpp_python(status: int, body: str, data: Any) -> ContextRefusal | None:
    error = _error_object(data)
    if error.get("code") != "context_length_exceeded":
        return None
    message = error_message(body, data)
    match = _LCP_COMPLETION.search(message) or _LCP_CHAT.search(message)
    if not match:
        return None
    return ContextRefusal(
        "llama-cpp-python", "prompt_over_window", int(match["prompt"]), True, int(match["window"]), message
    )


# vLLM has worded the refusal many ways; each entry: pattern, kind, exact.
_VLLM_PATTERNS: tuple[tuple[re.Pattern[str], ContextRefusalKind, bool], ...] = (
    # current: the tokenizer stops at the limit, so the count may be "at least".
    (
        re.compile(
            r"maximum context length is (?P<window>\d+) tokens\. However, you requested (?P<gen>\d+) output "
            r"tokens and your prompt contains (?P<atleast>at least )?(?P<prompt>\d+) input tokens"
        ),
        "total_over_window",
        True,
    ),
    # newest: "You passed N input tokens" after tokenizing up to the input limit + 1: a bound.
    (
        re.compile(
            r"You passed (?P<prompt>\d+) input tokens and requested (?P<gen>\d+) output tokens\. However, the "
            r"model's context length is only (?P<window>\d+) tokens"
        ),
        "total_over_window",
        False,
    ),
    # character pre-check: no token count at all.
    (
        re.compile(
            r"You passed (?P<chars>\d+) input characters and requested (?P<gen>\d+) output tokens\. However, the "
            r"model's context length is only (?P<window>\d+) tokens"
        ),
        "characters_over_bound",
        False,
    ),
    (
        re.compile(
            r"maximum context length is (?P<window>\d+) tokens\. However, you requested (?P<gen>\d+) output "
            r"tokens and your prompt contains (?P<chars>\d+) characters"
        ),
        "characters_over_bound",
        False,
    ),
    # older releases: exact counts.
    (
        re.compile(
            r"maximum context length is (?P<window>\d+) tokens\. However, your request has (?P<prompt>\d+) input"
        ),
        "prompt_over_window",
        True,
    ),
    (
        re.compile(
            r"maximum context length is (?P<window>\d+) tokens\. However, you requested (?P<total>\d+) tokens "
            r"\((?P<prompt>\d+) in the messages, (?P<gen>\d+) in the completion\)"
        ),
        "total_over_window",
        True,
    ),
    (
        re.compile(
            r"maximum context length is (?P<window>\d+) tokens\. However, you requested (?P<prompt>\d+) tokens in "
            r"the messages"
        ),
        "prompt_over_window",
        True,
    ),
    (
        re.compile(
            r"is too large: (?P<gen>\d+)\. This model's maximum context length is (?P<window>\d+) tokens and your "
            r"request has (?P<prompt>\d+) input tokens"
        ),
        "total_over_window",
        True,
    ),
)


def _parse_vllm(status: int, body: str, data: Any) -> ContextRefusal | None:
    message = error_message(body, data)
    for pattern, kind, exact in _VLLM_PATTERNS:
        match = pattern.search(message)
        if not match:
            continue
        groups = match.groupdict()
        prompt = int(groups["prompt"]) if groups.get("prompt") else None
        is_exact = exact and prompt is not None and not groups.get("atleast")
        return ContextRefusal("vllm", kind, prompt, is_exact, int(match["window"]), message)
    return None


_SGLANG_INPUT = re.compile(
    r"The input \((?P<prompt>\d+) tokens\) is longer than the model's context length \((?P<window>\d+) tokens\)"
)
_SGLANG_TOTAL = re.compile(
    r"maximum context length of (?P<window>\d+) tokens\. You requested a total of (?P<total>\d+) tokens: "
    r"(?P<prompt>\d+) tokens from the input messages"
)


def _parse_sglang(status: int, body: str, data: Any) -> ContextRefusal | None:
    message = error_message(body, data)
    match = _SGLANG_INPUT.search(message)
    if match:
        return ContextRefusal("sglang", "prompt_over_window", int(match["prompt"]), True, int(match["window"]), message)
    match = _SGLANG_TOTAL.search(message)
    if match:
        return ContextRefusal("sglang", "total_over_window", int(match["prompt"]), True, int(match["window"]), message)
    return None


_TGI_TOTAL = re.compile(
    r"`?inputs`? tokens \+ `?max_new_tokens`? must be <= (?P<window>\d+)\. Given: (?P<prompt>\d+) `?inputs`? tokens"
)
_TGI_INPUT = re.compile(r"`?inputs`? must have less than (?P<window>\d+) tokens\. Given: (?P<prompt>\d+)")


def _parse_tgi(status: int, body: str, data: Any) -> ContextRefusal | None:
    message = error_message(body, data)
    match = _TGI_TOTAL.search(message)
    if match:
        return ContextRefusal("tgi", "total_over_window", int(match["prompt"]), True, int(match["window"]), message)
    match = _TGI_INPUT.search(message)
    if match:
        # The window here is --max-input-tokens, the prompt limit (max total tokens - 1 by default).
        return ContextRefusal("tgi", "prompt_over_window", int(match["prompt"]), True, int(match["window"]) + 1,
                              message)
    return None


# --------------------------------------------------------------------------------------
# Tokenize endpoints


def _count_field(data: Any) -> int | None:
    if isinstance(data, Mapping):
        count = data.get("count")
        if isinstance(count, int):
            return count
        tokens = data.get("tokens")
        if isinstance(tokens, list):
            return len(tokens)
    if isinstance(data, list):
        return len(data)
    return None


def _no_window(data: Any) -> int | None:
    return None


def _vllm_window(data: Any) -> int | None:
    if isinstance(data, Mapping) and isinstance(data.get("max_model_len"), int):
        return int(data["max_model_len"])
    return None


def _with_model(body: dict[str, Any], model: str | None) -> dict[str, Any]:
    return {**body, "model": model} if model else body


_TOKENIZE: dict[ApiName, TokenizeSpec] = {
    "llama.cpp": TokenizeSpec(
        "/tokenize",
        lambda text, model: {"content": text, "add_special": True},
        _count_field,
        _no_window,
        "llama-server POST /tokenize, add_special=true so BOS counts as in a prompt",
    ),
    "llama-cpp-python": TokenizeSpec(
        "/extras/tokenize/count",
        lambda text, model: _with_model({"input": text}, model),
        _count_field,
        _no_window,
        "llama-cpp-python POST /extras/tokenize/count (BOS included, as in a prompt)",
    ),
    "vllm": TokenizeSpec(
        "/tokenize",
        lambda text, model: _with_model({"prompt": text, "add_special_tokens": True}, model),
        _count_field,
        _vllm_window,
        "vLLM POST /tokenize (count and max_model_len; takes chat messages too)",
        chat_tokenize,
    ),
    "tgi": TokenizeSpec(
        "/tokenize",
        lambda text, model: {"inputs": text},
        _count_field,
        _no_window,
        "TGI POST /tokenize (a list of tokens)",
    ),
}


DIALECTS: dict[ApiName, ApiDialect] = {
    d.name: d  # type: ignore[misc]  # every entry below is named by an ApiName
    for d in (
        ApiDialect(
            name="radiance", refuses_at=">", checks_total=False, edge_reserve_tokens=0, shrinks_max_tokens=False,
            tokenize=None, parse=_parse_radiance,
            source="seed (PHRASEBOOK section 7): /v1/completions refuses when the prompt alone exceeds the window",
        ),
        ApiDialect(
            name="llama.cpp", refuses_at=">=", checks_total=False, edge_reserve_tokens=1, shrinks_max_tokens=False,
            tokenize=_TOKENIZE["llama.cpp"], parse=_parse_llamacpp,
            source="ggml-org/llama.cpp tools/server/server-context.cpp: n_tokens >= slot.n_ctx is refused; "
            "generation stops when n_tokens + 1 >= n_ctx",
        ),
        ApiDialect(
            name="llama-cpp-python", refuses_at=">=", checks_total=False, edge_reserve_tokens=0,
            shrinks_max_tokens=True, tokenize=_TOKENIZE["llama-cpp-python"], parse=_parse_llama_cpp_python,
            source="abetlen/llama-cpp-python llama_cpp/llama.py (len(prompt_tokens) >= n_ctx raises; "
            "max_tokens is lowered to n_ctx - prompt) and llama_cpp/server/errors.py (the two wordings)",
        ),
        ApiDialect(
            name="vllm", refuses_at=">=", checks_total=True, edge_reserve_tokens=0, shrinks_max_tokens=False,
            tokenize=_TOKENIZE["vllm"], parse=_parse_vllm,
            source="vllm-project/vllm serving_engine.py (older) and vllm/renderers/params.py (current)",
        ),
        ApiDialect(
            name="sglang", refuses_at=">=", checks_total=True, edge_reserve_tokens=0, shrinks_max_tokens=False,
            tokenize=None, parse=_parse_sglang,
            source="sgl-project/sglang TokenizerManager._validate_one_request: input >= context_len is refused",
        ),
        ApiDialect(
            name="tgi", refuses_at=">=", checks_total=True, edge_reserve_tokens=0, shrinks_max_tokens=False,
            tokenize=_TOKENIZE["tgi"], parse=_parse_tgi,
            source="huggingface/text-generation-inference router/src/validation.rs (HTTP 422): input + "
            "max_new_tokens > max_total_tokens, or input > max_input_tokens (max_total_tokens - 1 by default)",
        ),
    )
}

DETECTION_ORDER: tuple[ApiName, ...] = ("radiance", "llama.cpp", "llama-cpp-python", "sglang", "tgi", "vllm")
"""llama-cpp-python before vLLM: its chat wording is vLLM's old one, told apart by code=context_length_exceeded."""

CONSERVATIVE = ApiDialect(
    name="unknown", refuses_at=">", checks_total=False, edge_reserve_tokens=1, shrinks_max_tokens=True,
    tokenize=None, parse=lambda status, body, data: None,
    source="the strictest of every dialect, used while the engine is unknown",
)
"""Edge rules while the dialect is unknown, strictest on every axis: a prompt is taken as refused
only above the window by its own tokens (radiance's rule), and the boundary keeps llama.cpp's
one token of reserve."""


def parse_refusal(status: int, body: str, dialect: ApiChoice = "auto") -> tuple[ContextRefusal | None, str | None]:
    """Read a context refusal from an answer; (refusal, note). The note says when the answer is
    another dialect's than the one selected. (None, None): no dialect recognises the answer."""
    data = decode_json(body)
    if dialect != "auto":
        refusal = DIALECTS[dialect].parse(status, body, data)
        if refusal is not None:
            return refusal, None
    for name in DETECTION_ORDER:
        if name == dialect:
            continue
        refusal = DIALECTS[name].parse(status, body, data)
        if refusal is not None:
            note = None
            if dialect != "auto":
                note = f"dialect {dialect!r} was selected but the answer is worded as {name}'s; read as {name}"
            return refusal, note
    return None, None


def dialect_for(choice: ApiChoice) -> ApiDialect:
    return CONSERVATIVE if choice == "auto" else DIALECTS[choice]
