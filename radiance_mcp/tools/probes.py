"""The probe tools: token_count_probe, boundary_probe, decode_probe.

Each docstring is the tool's description for agents: the rule and the traps, with the seed's
numbers from radiance_mcp.core.constants (tests/probes/test_docstrings.py checks they agree).
"""

from __future__ import annotations

from radiance_mcp.core.rules.probe_shape import NO_LEDGER, ProbeShape, api_of, probe_shape
from radiance_mcp.core.wording.refusals import ApiChoice
from radiance_mcp.models.ledger_ref import LedgerRef
from radiance_mcp.models.probes import (
    BoundaryProbeInput,
    BoundaryProbeOutput,
    DecodeProbeInput,
    DecodeProbeOutput,
    TokenCountProbeInput,
    TokenCountProbeOutput,
)
from radiance_mcp.sources.engine_logs import read_ledger
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools.registry import Progress, ToolFamily

FAMILY = ToolFamily()


async def service_ledger(runtime: Runtime, service: str) -> tuple[ProbeShape | None, ApiChoice | None, str]:
    """The shape the service's newest boot states (None without a ledger, and why), and the probe dialect
    its configured engine speaks (None: detect it from the first refusal)."""
    entry = runtime.fleet.service(service)
    if entry.log is None and entry.container is None:
        return None, api_of(entry.engine, None), NO_LEDGER
    boot = await read_ledger(runtime, LedgerRef(service=service))  # on this machine or a host, in its dialect
    return probe_shape(boot, runtime.fleet.model_constants(service)), api_of(entry.engine, boot), NO_LEDGER


# Sends only prompts above the window (refused before prefill) or tokenize calls.
@FAMILY.tool("Count prompt tokens from a refusal (no prefill)", name="token_count_probe", open_world=True)
async def run_token_count_probe(runtime: Runtime, args: TokenCountProbeInput) -> TokenCountProbeOutput:
    """Count a text's tokens on the service's tokenizer without prefill.

    When: to size prompts or calibrate chars per token. Rule: never sends a prompt that might fit
    the window. Next: boundary_probe.
    """
    from radiance_mcp.probes.token_count import token_count_probe  # httpx loads on first use, not at start-up

    shape, dialect, reason = await service_ledger(runtime, args.service)
    if args.dialect == "auto" and dialect is not None:
        args = args.model_copy(update={"dialect": dialect})
    return await token_count_probe(runtime.fleet, args, shape=shape, no_ledger_reason=reason)


# execute=true spends N full-window prefills.
@FAMILY.tool("Boundary probe: N prompts at max_model_len - gen", name="boundary_probe", read_only=False,
             open_world=True, idempotent=False)
async def run_boundary_probe(
    runtime: Runtime, args: BoundaryProbeInput, ctx: Progress | None = None
) -> BoundaryProbeOutput:
    """Send n concurrent window-filling prompts, each marked at its head; check every marker returns.

    When: after a deploy, to prove the shape. Rule: n at most the sequences the ledger backs;
    nothing is sent unless execute=true. Next: decode_probe.
    """
    from radiance_mcp.probes.boundary import boundary_probe

    progress = ctx.report_progress if ctx is not None else None
    shape, dialect, reason = await service_ledger(runtime, args.service)
    if args.dialect == "auto" and dialect is not None:
        args = args.model_copy(update={"dialect": dialect})
    return await boundary_probe(runtime.fleet, args, shape=shape, no_ledger_reason=reason, progress=progress)


@FAMILY.tool("Prefill and decode rates of a cold request", name="decode_probe", read_only=False, open_world=True,
             idempotent=False)
async def run_decode_probe(runtime: Runtime, args: DecodeProbeInput) -> DecodeProbeOutput:
    """Measure prefill and decode rates of one cold request at a given context.

    When: for any throughput figure. Rule: at least 128 generated tokens, within the window.
    Next: compare_arms.
    """
    from radiance_mcp.probes.decode import decode_probe

    shape, dialect, _ = await service_ledger(runtime, args.service)
    if args.dialect == "auto" and dialect is not None:
        args = args.model_copy(update={"dialect": dialect})
    return await decode_probe(runtime.fleet, args, shape=shape)
