"""The registry: each tool declared beside its code, its models and its wish for the request context
read off its signature (the Progress annotation, whatever the parameter is called)."""

from __future__ import annotations

from radiance_mcp.models.fleet import ListFleetInput, ListFleetOutput
from radiance_mcp.models.probes import BoundaryProbeInput, BoundaryProbeOutput
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools import FAMILIES, TOOLS, arms, audit, deploy, family, fleet, gates, ledger, plan, probes
from radiance_mcp.tools.registry import Progress, ToolFamily


def test_the_decorator_reads_models_name_and_context_off_the_signature() -> None:
    family = ToolFamily()

    @family.tool("Plain", open_world=True)
    async def plain(runtime: Runtime, args: ListFleetInput) -> ListFleetOutput:
        raise NotImplementedError

    @family.tool("Asks by type", name="asks", read_only=False, idempotent=False)
    async def asks_for_it(runtime: Runtime, args: BoundaryProbeInput,
                          request: Progress | None = None) -> BoundaryProbeOutput:
        raise NotImplementedError

    @family.tool("Named ctx, not typed so")
    async def named_only(runtime: Runtime, args: ListFleetInput, ctx: int = 0) -> ListFleetOutput:
        raise NotImplementedError

    first, second, third = family
    assert (first.name, first.input_model, first.output_model, first.context_param) == (
        "plain", ListFleetInput, ListFleetOutput, None)
    assert (first.read_only, first.open_world, first.idempotent) == (True, True, True)
    assert (second.name, second.run, second.input_model, second.context_param) == (
        "asks", asks_for_it, BoundaryProbeInput, "request")
    assert (second.read_only, second.idempotent) == (False, False)
    assert third.context_param is None  # a parameter called ctx is not asked for by name


def test_every_family_is_registered_once_in_declaration_order() -> None:
    families = [ledger.FAMILY, audit.FAMILY, probes.FAMILY, fleet.FAMILY, arms.FAMILY, plan.FAMILY, gates.FAMILY,
                deploy.FAMILY]
    assert TOOLS == [spec for each in families for spec in each]
    # FAMILIES tells the CLI which one module to import for a command: it names what each declares.
    assert {module: tuple(spec.name for spec in family(module)) for module in FAMILIES} == FAMILIES
    assert [spec.name for spec in TOOLS] == [
        "read_budget_table", "compute_ceiling", "check_pool_contract",
        "audit_step_shape", "check_serve_script", "compare_dry_run",
        "token_count_probe", "boundary_probe", "decode_probe",
        "list_fleet",
        "compare_arms", "plan_free_vram",
        "render_gates", "verify_deploy",
    ]
    # The boundary probe reports progress, and so do the tools that wait for a boot to settle (wait_s): only they
    # ask for the request's context.
    waits = ("read_budget_table", "compute_ceiling", "check_pool_contract", "verify_deploy")
    assert {spec.name: spec.context_param for spec in TOOLS if spec.context_param} == {
        "boundary_probe": "ctx", **dict.fromkeys(waits, "ctx")}
