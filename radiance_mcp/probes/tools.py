"""The three probe tools as the MCP layer registers them (``PROBE_TOOLS``).

Each docstring is the tool's description for agents: the rule and the traps, with the seed's
numbers from radiance_mcp.constants (tests/probes/test_docstrings.py checks they agree).
"""

from __future__ import annotations

from typing import Any

from radiance_mcp.probes.models import (
    BoundaryProbeInput,
    BoundaryProbeOutput,
    DecodeProbeInput,
    DecodeProbeOutput,
    TokenCountProbeInput,
    TokenCountProbeOutput,
)
from radiance_mcp.probes.shape import LedgerShape, ledger_shape
from radiance_mcp.runtime import Runtime, ToolSpec, ledger_source

NO_LEDGER = "the service has no ledger (log or container) in the fleet config"


async def service_shape(runtime: Runtime, service: str) -> LedgerShape | None:
    """The shape the service's newest boot states, read from its configured ledger; None without one."""
    entry = runtime.fleet.service(service)
    if entry.log is None and entry.container is None:
        return None
    source = ledger_source(runtime, service=service, log=None, log_text=None)
    return ledger_shape(await source.read(), runtime.fleet.model_constants(service))


async def run_token_count_probe(runtime: Runtime, args: TokenCountProbeInput) -> TokenCountProbeOutput:
    """Count a text's prompt tokens, and its chars/token, without paying any prefill.

    radiance's /v1/completions refuses a prompt whose tokens alone exceed the window and names
    the count before any prefill ("prompt: 202,777 prompt tokens does not fit the 200000 token
    context"); it does not fire on prompt + max_tokens. Below the window the request is accepted
    and pays real prefill (about 22 s for ~200k tokens), so this tool never sends a prompt that
    may fit: a text certainly longer than the window is sent alone (one request, exact); a
    shorter one is measured as (text + filler) minus filler, both above the window (two
    requests, +-2 tokens for merges at the seam). With the window unknown, the first refusal
    names it. Where the engine has a tokenize endpoint (llama.cpp, llama-cpp-python, vLLM, TGI)
    it is used; vLLM's current refusals name only a bound ("at least N"), so there it is needed.
    Measured on radiance: 2.7617 chars/token for the corpus, 2.5714 for the fox filler, so a
    200,000-token window is about 514,286 to 552,286 characters. The result says the method,
    exact or bound, the requests sent and the prefill paid (0).
    """
    from radiance_mcp.probes.token_count import token_count_probe  # httpx loads on first use, not at start-up

    return await token_count_probe(runtime.fleet, args)


async def run_boundary_probe(runtime: Runtime, args: BoundaryProbeInput, ctx: Any = None) -> BoundaryProbeOutput:
    """Boundary probe: N concurrent prompts at max_model_len - gen, each asked for its head marker.

    Expect N/N retrieved. Before anything is sent, n and the window are checked against the
    service's boot ledger (its log or container in the fleet config): n above the sequences
    the ledger backs at once ("backs N sequences all at M tokens at once", --max-num-seqs) is
    refused unless over_shape=true, since extra requests only queue and a pass then says
    nothing about the shape; a max_model_len other than the ledger's --max-model-len is
    refused, and so is any probe while the newest boot refused to start (nothing serves it:
    the error names the refusal's lines; call audit_step_shape). The plan states the verdict
    the ledger predicts, the prefill it will cost, and any check that could not be made (no
    ledger configured). Each prompt carries a unique marker and a random nonce at its head,
    is sized from a calibrated ratio (2.5714
    chars/token for the fox filler on radiance) and counted before sending (a refusal of the
    same prompt pushed over the window, or a tokenize endpoint: no prefill), and is sent with
    thinking off (chat_template_kwargs.enable_thinking=false: with thinking on, a small
    max_tokens gives empty content and finish_reason stop on a healthy server). By default it
    only plans: N, tokens per prompt and the total prefill it would cost; execute=true sends.
    Per request: status, the refusal text (a pool that fails its contract answers "does not
    fit the 200000 token context, which leaves nothing to generate into"), finish_reason,
    tokens generated against those asked (an engine that silently shrinks max_tokens or
    truncates the head fails the probe, and the result says so), latency. Each engine's edge
    rule is applied (llama.cpp stops one token before its window). Progress is
    reported as requests complete; cancelling cancels the requests in flight.
    """
    from radiance_mcp.probes.boundary import boundary_probe

    progress = ctx.report_progress if ctx is not None else None
    shape = await service_shape(runtime, args.service)
    return await boundary_probe(runtime.fleet, args, shape=shape, no_ledger_reason=NO_LEDGER, progress=progress)


async def run_decode_probe(runtime: Runtime, args: DecodeProbeInput) -> DecodeProbeOutput:
    """Prefill and decode rates of one cold request at a given context.

    Generates at least 128 tokens (512 by default, as radiance was measured at 124.1 t/s fp8
    and 94.1 t/s bf16 with 512 tokens); fewer is refused, since at 8-9 tokens the inter-token
    time is first-token noise. A random nonce sits at the prompt's head because radiance's disk prefix
    cache (64 GiB) survives restarts: a warm 197k prefill returns in about 10 s and looks like
    60,000 t/s. Thinking is off (chat_template_kwargs.enable_thinking=false). Rates come from
    the answer's timings, read null-safely (radiance's timings can carry null rates, or be
    missing), else from the stream: time to first token and inter-token times. Paid: one
    prefill of context_tokens. A context_tokens + gen_tokens above the window is refused before
    anything is sent: the window is the ledger's --max-model-len when the service has a ledger
    (log or container), else max_model_len; with neither, a context above max_window_tokens is
    refused, and the engine refuses one above its window before any prefill.
    """
    from radiance_mcp.probes.decode import decode_probe

    return await decode_probe(runtime.fleet, args, shape=await service_shape(runtime, args.service))


PROBE_TOOLS: list[ToolSpec] = [
    # Sends only prompts above the window (refused before prefill) or tokenize calls.
    ToolSpec("token_count_probe", "Count prompt tokens from a refusal (no prefill)", TokenCountProbeInput,
             TokenCountProbeOutput, run_token_count_probe, read_only=True, open_world=True, idempotent=True),
    # execute=true spends N full-window prefills.
    ToolSpec("boundary_probe", "Boundary probe: N prompts at max_model_len - gen", BoundaryProbeInput,
             BoundaryProbeOutput, run_boundary_probe, read_only=False, open_world=True, idempotent=False),
    ToolSpec("decode_probe", "Prefill and decode rates of a cold request", DecodeProbeInput, DecodeProbeOutput,
             run_decode_probe, read_only=False, open_world=True, idempotent=False),
]
