"""The ledger reference's rule in one place: every tool that reads a ledger, and the fleet file,
refuse a badly named ledger with the same words; every ledger field's description is the one
declared in models.ledger_ref.FIELDS."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from radiance_mcp.models.audit import AuditStepShapeInput
from radiance_mcp.models.ledger import CheckPoolContractInput, ComputeCeilingInput, ReadBudgetTableInput
from radiance_mcp.models.ledger_ref import CONTAINER_NEEDS_HOST, FIELDS, HOST_NEEDS_SOURCE
from radiance_mcp.models.plan import PlanFreeVramInput
from radiance_mcp.sources.config import Fleet
from radiance_mcp.tools import TOOLS

LEDGER_INPUTS = [ReadBudgetTableInput, ComputeCeilingInput, CheckPoolContractInput, PlanFreeVramInput]


@pytest.mark.parametrize("model", LEDGER_INPUTS)
@pytest.mark.parametrize(
    ("arguments", "rule"),
    [
        ({"container": "vllm-qwen"}, CONTAINER_NEEDS_HOST),
        ({"host": "gpu-box-2", "log_text": "kv cache ..."}, HOST_NEEDS_SOURCE),
        ({"service": "qwen", "host": "gpu-box-2"}, HOST_NEEDS_SOURCE),
    ],
)
def test_every_ledger_tool_keeps_the_host_rule(model: type[BaseModel], arguments: dict[str, Any], rule: str) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(arguments)
    assert caught.value.errors()[0]["msg"] == f"Value error, {rule}"


@pytest.mark.parametrize(
    ("arguments", "rule"),
    [
        ({"candidate_container": "vllm-qwen", "proven_log_text": "x"}, CONTAINER_NEEDS_HOST),
        ({"container": "vllm-qwen"}, CONTAINER_NEEDS_HOST),
        ({"host": "gpu-box-2", "proven_service": "a", "candidate_service": "b"}, HOST_NEEDS_SOURCE),
    ],
)
def test_the_audit_keeps_it_on_either_side(arguments: dict[str, Any], rule: str) -> None:
    with pytest.raises(ValidationError) as caught:
        AuditStepShapeInput.model_validate(arguments)
    assert caught.value.errors()[0]["msg"] == f"Value error, {rule}"


def test_the_fleet_file_keeps_it_too() -> None:
    with pytest.raises(ValidationError, match=CONTAINER_NEEDS_HOST.replace("(", r"\(").replace(")", r"\)")):
        Fleet.model_validate({"services": {"qwen": {"container": "vllm-qwen"}}})
    # A service on a host may name no ledger at all (an endpoint only): no rule broken.
    Fleet.model_validate({"hosts": {"gpu-box-2": {}}, "services": {"qwen": {"host": "gpu-box-2"}}})


READS_A_LEDGER = ("read_budget_table", "compute_ceiling", "check_pool_contract", "audit_step_shape", "plan_free_vram",
                  "render_gates", "verify_deploy")


def test_every_ledger_field_of_every_tool_is_described_from_the_one_declaration() -> None:
    declared = {name: set(by_role.values()) for name, by_role in FIELDS.items()}
    seen = 0
    for spec in TOOLS:
        if spec.name not in READS_A_LEDGER:
            continue
        for field, info in spec.input_model.model_fields.items():
            kind = field.removeprefix("proven_").removeprefix("candidate_")
            if kind in declared:
                # "" declared: the server's instructions word it once (app/server.py LEDGER_ARGUMENTS)
                assert (info.description or "") in declared[kind], (spec.name, field)
                seen += 1
    # 6 each (service, log, log_text, host, container, boot) but audit_step_shape: 2 x 5 + 5
    assert seen == 6 * 6 + 15
