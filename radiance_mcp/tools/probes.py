"""The probe tools: token_count_probe, boundary_probe, decode_probe.

Each docstring is the tool's description for agents: the rule and the traps, with the seed's
numbers from radiance_mcp.constants (tests/probes/test_docstrings.py checks they agree).
"""

from __future__ import annotations

from radiance_mcp.models.probes import (
    BoundaryProbeInput,
    BoundaryProbeOutput,
    DecodeProbeInput,
    DecodeProbeOutput,
    TokenCountProbeInput,
    TokenCountProbeOutput,
)
from radiance_mcp.probes.shape import LedgerShape, ledger_shape
from radiance_mcp.runtime import Runtime
from radiance_mcp.sources import service_source
from radiance_mcp.tools.registry import Progress, ToolFamily

FAMILY = ToolFamily()

NO_LEDGER = "the service has no ledger (log or container) in the fleet config"


async def service_shape(runtime: Runtime, service: str) -> LedgerShape | None:
    """The shape the service's newest boot states, read from its configured ledger; None without one."""
    entry = runtime.fleet.service(service)
    if entry.log is None and entry.container is None:
        return None
    boot = await service_source(runtime, service).read()
    return ledger_shape(boot, runtime.fleet.model_constants(service))


# Sends only prompts above the window (refused before prefill) or tokenize calls.
@FAMILY.tool("Count prompt tokens from a refusal (no prefill)", name="token_count_probe", open_world=True)
async def run_token_count_probe(runtime: Runtime, args: TokenCountProbeInput) -> TokenCountProbeOutput:
    """Count a text's tokens on the service's tokenizer without prefill: from the refusal of a prompt
    above the window, or a tokenize endpoint.

    When: to size prompts or calibrate chars per token. Rule: never sends a prompt that might fit
    the window. Next: boundary_probe.
    """
    from radiance_mcp.probes.token_count import token_count_probe  # httpx loads on first use, not at start-up

    return await token_count_probe(runtime.fleet, args)


# execute=true spends N full-window prefills.
@FAMILY.tool("Boundary probe: N prompts at max_model_len - gen", name="boundary_probe", read_only=False,
             open_world=True, idempotent=False)
async def run_boundary_probe(
    runtime: Runtime, args: BoundaryProbeInput, ctx: Progress | None = None
) -> BoundaryProbeOutput:
    """Send n concurrent window-filling prompts, each with a unique marker at its head; check every
    marker comes back.

    When: after a deploy, to prove the shape the ledger promises. Rule: n may not exceed the
    sequences the ledger backs; nothing is sent unless execute=true. Next: decode_probe.
    """
    from radiance_mcp.probes.boundary import boundary_probe

    progress = ctx.report_progress if ctx is not None else None
    shape = await service_shape(runtime, args.service)
    return await boundary_probe(runtime.fleet, args, shape=shape, no_ledger_reason=NO_LEDGER, progress=progress)


@FAMILY.tool("Prefill and decode rates of a cold request", name="decode_probe", read_only=False, open_world=True,
             idempotent=False)
async def run_decode_probe(runtime: Runtime, args: DecodeProbeInput) -> DecodeProbeOutput:
    """Measure prefill and decode rates of one cold request (nonce at its head, thinking off) at a
    given context.

    When: for any throughput figure. Rule: at least 128 generated tokens; context plus generation
    must fit the window. Next: compare_arms.
    """
    from radiance_mcp.probes.decode import decode_probe

    return await decode_probe(runtime.fleet, args, shape=await service_shape(runtime, args.service))
