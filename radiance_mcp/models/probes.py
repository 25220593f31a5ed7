"""The probes' tool inputs and outputs (pydantic, flat where possible)."""

from typing import Annotated, Literal, Self

from pydantic import Field

from radiance_mcp.core.constants import CHARS_PER_TOKEN_FOX, MAX_PROBE_TEXT_CHARS, PREFERRED_DECODE_TOKENS
from radiance_mcp.core.rules.probe_verdicts import Verdict, collapse_alike, min_boundary_tokens
from radiance_mcp.core.wording.payloads import Api
from radiance_mcp.core.wording.refusals import ApiChoice
from radiance_mcp.models.base import Flag, Input, Int, MaxChars, Name, Number, Output, Seconds, Tokens

DEFAULT_MAX_WINDOW_TOKENS = 1_048_576
"""While the window is unknown, the first probe is sized above this many tokens."""


class Repeated(Output):
    text: str = Field(description="The first of texts alike but for their figures.")
    count: int = Field(description="How many there were.")

    @classmethod
    def collapse(cls, texts: list[str]) -> list[Self]:
        return [cls(text=text, count=count) for text, count in collapse_alike(texts)]


# The probes' shared arguments are worded once, in the server's instructions (app/server.py PROBE_ARGUMENTS).
_SERVICE = Field()
_DIALECT: ApiChoice = Field("auto")
_MODEL = Field(None)
_MAX_WINDOW = Field(DEFAULT_MAX_WINDOW_TOKENS, ge=16, le=4_194_304)
_WINDOW = "The window: the ledger's (omitted: read from it)."
"""A probe's window argument (checked_window holds the rule)."""
MAX_BOUNDARY_N = 64
"""The most concurrent requests one boundary probe sends."""


class TokenCountProbeInput(Input):
    service: Name = _SERVICE
    text: Annotated[str, MaxChars(MAX_PROBE_TEXT_CHARS)] = Field(
        min_length=1, description="The text to count."
    )
    window_tokens: Tokens | None = Field(None, ge=16, description=_WINDOW)
    max_window_tokens: Int = _MAX_WINDOW
    dialect: ApiChoice = _DIALECT
    use_tokenize_endpoint: Flag = Field(True)
    model: Name | None = _MODEL
    timeout_s: Seconds = Field(120, le=3600)
    total_timeout_s: Seconds = Field(600, le=7200)


class TokenCountProbeOutput(Output):
    service: str
    endpoint: str
    dialect: str = Field(description="The dialect the answers were read as ('unknown' when none was needed).")
    method: Literal["tokenize_endpoint", "refusal", "refusal_difference"] = Field(
        description="tokenize_endpoint: the engine's tokenizer; refusal: the count a refusal of the text "
        "names; refusal_difference: text+filler minus filler, both above the window."
    )
    tokens: int = Field(description="The token count (see count_kind).")
    count_kind: Literal["exact", "lower_bound", "difference"]
    exact: bool
    uncertainty_tokens: int = Field(description="+- tokens: 0 when exact; merges at the text/filler seam otherwise.")
    chars: int
    chars_per_token: float
    chars_per_token_low: float
    chars_per_token_high: float
    window_tokens: int | None
    window_source: str | None = Field(description="ledger (its line), input, refusal or tokenize_endpoint.")
    requests_sent: int
    prefill_tokens_paid: int = Field(description="Prompt tokens the engine prefilled for this probe: 0.")
    refusals: list[Repeated] = Field(description="The refusals' own words, alike ones counted once.")
    edge_rule: str
    notes: list[str]


class BoundaryProbeInput(Input):
    service: Name = _SERVICE
    n: Int = Field(
        ge=1, le=MAX_BOUNDARY_N, description="Concurrent requests: at most the sequences the ledger backs."
    )
    gen_tokens: Int = Field(
        64, ge=1, le=8192, description=f"Tokens each request generates (>= {min_boundary_tokens(MAX_BOUNDARY_N)})."
    )
    max_model_len: Tokens | None = Field(None, ge=64, description=_WINDOW)
    execute: Flag = Field(False, description="true: send the requests; false: plan only.")
    over_shape: Flag = Field(
        False, description="Allow n above the sequences the ledger backs.",
    )
    dialect: ApiChoice = _DIALECT
    api: Api = Field("chat")
    chars_per_token: Number = Field(
        CHARS_PER_TOKEN_FOX, gt=0.5, le=16, allow_inf_nan=False
    )
    max_window_tokens: Int = _MAX_WINDOW
    model: Name | None = _MODEL
    timeout_s: Seconds = Field(900, le=7200)
    total_timeout_s: Seconds = Field(3600, le=14400)


class BoundaryPlan(Output):
    n: int
    max_model_len: int
    window_source: str | None
    gen_tokens: int
    tokens_per_prompt: int = Field(description="The target: max_model_len - gen_tokens - the engine's edge reserve.")
    total_prefill_tokens: int = Field(description="What executing costs: n x the prompt tokens.")
    chars_per_prompt: int = Field(description="About this many characters each, at the calibrated ratio.")
    dialect: str
    edge_rule: str
    api: Api
    route: str
    ledger: str | None = Field(description="The boot ledger the shape was read from (null: none configured).")
    backed_seqs: int | None = Field(description="N of the ledger's 'backs N sequences all at M tokens at once'.")
    max_num_seqs: int | None = Field(description="The ledger's echoed --max-num-seqs.")
    over_shape: bool
    predicted: str = Field(description="The verdict the ledger predicts, and why.")
    ledger_lines: list[str] = Field(description="The ledger lines the plan stands on (source:line: text).")
    checks_not_made: list[str] = Field(description="Checks that could not be made, and why (nothing is guessed).")


class BoundaryRequestResult(Output):
    index: int
    marker: str
    prompt_tokens: int = Field(
        description="The prompt's count, checked before sending: exact, or +- count_uncertainty_tokens."
    )
    prompt_tokens_reported: int | None = Field(description="What the engine says it prefilled (usage).")
    status: int | None
    refusal: str | None
    finish_reason: str | None
    tokens_generated: int | None
    tokens_asked: int
    latency_s: float | None
    retrieved: bool
    verdict: Verdict
    answer_start: str
    note: str | None
    count: int = Field(
        default=1, description="Requests that came out alike (verdict, status, wording but for figures); the fields "
        "are the first's."
    )
    indices: list[int] = Field(default_factory=list, description="Their 0-based indices.")
    latency_s_max: float | None = Field(default=None, description="The slowest of them.")


class BoundaryProbeOutput(Output):
    service: str
    endpoint: str
    plan: BoundaryPlan
    executed: bool
    verdict: str = Field(description="'plan only: nothing sent', or 'R/N retrieved'.")
    passed: bool | None
    retrieved: int | None
    requests: list[BoundaryRequestResult] = Field(description="One entry per kind of outcome, with its count.")
    count_method: str | None = Field(description="How each prompt was counted before sending.")
    unit_tokens: float | None = Field(description="Tokens one filler unit adds (the calibration).")
    count_uncertainty_tokens: int | None = Field(description="0: prompts counted exactly; else +- this many.")
    requests_sent: int
    prefill_tokens_paid: int
    wall_s: float | None
    refusals: list[Repeated] = Field(description="The counting refusals' words, alike ones counted once.")
    notes: list[str]


class DecodeProbeInput(Input):
    service: Name = _SERVICE
    context_tokens: Tokens = Field(4096, ge=16, description="Prompt tokens of the cold request.")
    gen_tokens: Int = Field(
        PREFERRED_DECODE_TOKENS, ge=1, le=32768, description="Tokens to generate: >= 128, 512 preferred."
    )
    max_model_len: Tokens | None = Field(None, ge=64, description=_WINDOW)
    dialect: ApiChoice = _DIALECT
    api: Api = Field("chat")
    count_prompt: Flag = Field(
        True,
        description="Count the prompt after (no prefill) if unreported.",
    )
    max_window_tokens: Int = _MAX_WINDOW
    chars_per_token: Number = Field(
        CHARS_PER_TOKEN_FOX, gt=0.5, le=16, allow_inf_nan=False
    )
    model: Name | None = _MODEL
    timeout_s: Seconds = Field(900, le=7200, description="Longest silence on the stream, seconds.")
    total_timeout_s: Seconds = Field(1800, le=14400)


class DecodeProbeOutput(Output):
    service: str
    endpoint: str
    api: Api
    prompt_tokens: int | None = Field(description="As the engine reports (usage or timings).")
    prompt_tokens_estimate: int = Field(description="What the prompt was sized to.")
    generated_tokens: int | None
    asked_tokens: int
    finish_reason: str | None
    ttft_s: float | None
    prefill_tokens_per_s: float | None
    prefill_source: Literal["timings", "stream", "none"]
    decode_tokens_per_s: float | None = Field(description="Null when fewer than 128 tokens came (first-token noise).")
    decode_source: Literal["timings", "stream", "none"]
    inter_token_s_mean: float | None
    inter_token_s_median: float | None
    timings: Literal["full", "null_rates", "missing"]
    cached_tokens: int | None
    cold: bool
    valid: bool
    window_tokens: int | None = Field(description="The window context + gen was checked against before sending.")
    window_source: str | None = Field(description="Where the window came from (the ledger line, or input).")
    requests_sent: int
    notes: list[str]
