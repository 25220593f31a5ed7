"""The procedures over MCP: each skills/<name>/SKILL.md is a prompt and a resource, and names real tools."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

import pytest
from mcp import Client, MCPError
from pydantic import BaseModel

from radiance_mcp.app import skills
from radiance_mcp.app.server import build_server
from radiance_mcp.core.errors import ConfigError
from radiance_mcp.sources.config import load
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools import TOOLS

REPO_SKILLS = Path(__file__).parent.parent / "skills"
TOOL_NAMES = [spec.name for spec in TOOLS]
SKILLS = skills.load(TOOL_NAMES)
BY_NAME = {s.name: s for s in SKILLS}

FLEET = """
[hosts.gpu-east]
address = "gpu-east.internal"
log_roots = ["/data/ledgers"]

[services.east-coder]
host = "gpu-east"
log = "/data/ledgers/coder.log"
endpoint = "http://gpu-east.internal:7070"
serve_script = "/opt/launch/run-all.sh"
env_file = "/opt/launch/coder.env"
"""


def _field_names(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[str]:
    """Every field name of a model and of the models nested in it."""
    if model in seen:
        return set()
    seen.add(model)
    names = set(model.model_fields)
    for info in model.model_fields.values():
        stack = [info.annotation]
        while stack:
            kind = stack.pop()
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                names |= _field_names(kind, seen)
            elif isinstance(kind, types.UnionType) or typing.get_origin(kind) is not None:
                stack.extend(typing.get_args(kind))
    return names


FIELDS = set().union(*(_field_names(m, set()) for spec in TOOLS for m in (spec.input_model, spec.output_model)))


def test_the_repository_holds_the_two_procedures_and_the_package_links_to_them() -> None:
    assert [s.name for s in SKILLS] == ["radiance-kv-cache-resize", "radiance-step-shape-ledger-audit"]
    assert skills.SKILLS_DIR.resolve() == REPO_SKILLS.resolve()  # one home: the package's copy is a link
    for skill in SKILLS:
        assert skill.text == (REPO_SKILLS / skill.name / "SKILL.md").read_text(encoding="utf-8")
        assert 20 < len(skill.description) <= skills.MAX_DESCRIPTION_CHARS and "radiance" in skill.description
        assert not skill.body.startswith("---") and skill.body.startswith("# ")


@pytest.mark.parametrize("skill", SKILLS, ids=lambda s: s.name)
def test_every_tool_a_skill_names_exists(skill: skills.Skill) -> None:
    # A backticked snake_case name is a tool or an argument / result field of one; anything else is a
    # tool that does not exist (a typo, or a tool renamed under the procedure's feet).
    named = set(re.findall(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`", skill.body))
    unknown = named - set(TOOL_NAMES) - FIELDS
    assert not unknown, f"{skill.name} names {sorted(unknown)}, which are neither tools nor their fields"
    assert skill.tools and skill.tools[0] == "list_fleet"


def test_every_tool_belongs_to_a_procedure_in_the_order_it_is_used() -> None:
    assert set(TOOL_NAMES) == {t for s in SKILLS for t in s.tools}
    assert BY_NAME["radiance-kv-cache-resize"].tools == (
        # audit_step_shape: where the newest boot refused to start, step 1 sends the agent there.
        "list_fleet", "plan_free_vram", "compute_ceiling", "audit_step_shape", "check_pool_contract", "compare_arms",
        "render_gates", "verify_deploy", "read_budget_table", "token_count_probe", "boundary_probe", "decode_probe",
    )
    assert BY_NAME["radiance-step-shape-ledger-audit"].tools == (
        "list_fleet", "audit_step_shape", "check_serve_script", "compare_dry_run",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# no front matter\n", "does not open with front matter"),
        ("---\nname: my-skill\n---\n# x\n", "description must be 1 to 1024"),
        ("---\nname: My Skill\ndescription: d\n---\n", "lowercase words joined by '-'"),
        ("---\nname: other-skill\ndescription: d\n---\n", "and the folder's name"),
        ("---\nname: my-skill\ndescription: d\nthis line has no colon\n---\n", r"my-skill/SKILL.md:4: 'this line"),
        (f"---\nname: my-skill\ndescription: {'x' * 1025}\n---\n", "description must be 1 to 1024"),
    ],
)
def test_broken_front_matter_is_refused_with_the_file_and_the_rule(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        skills.parse(text, "my-skill", TOOL_NAMES)


def test_quoted_front_matter_values_and_a_missing_heading_still_parse() -> None:
    skill = skills.parse('---\nname: "my-skill"\ndescription: \'Do it: well\'\n---\nCall `list_fleet`.\n',
                         "my-skill", TOOL_NAMES)
    assert (skill.name, skill.description, skill.title, skill.tools) == ("my-skill", "Do it: well", "my-skill",
                                                                         ("list_fleet",))


async def test_an_sdk_client_lists_and_reads_the_prompts_and_resources(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text(FLEET, encoding="utf-8")
    async with Client(build_server(Runtime(load(config)))) as client:
        instructions = client.instructions or ""
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        audit = await client.get_prompt("radiance-step-shape-ledger-audit", {"service": "east-coder"})
        resize = await client.get_prompt("radiance-kv-cache-resize", {})
        read = await client.read_resource("skill://radiance-kv-cache-resize")
        unknown = r"'east_coder' is not in the fleet; known services: east-coder\. list_fleet"
        with pytest.raises(MCPError, match=unknown):
            await client.get_prompt("radiance-kv-cache-resize", {"service": "east_coder"})
    assert set(prompts) == set(BY_NAME)
    for name, prompt in prompts.items():
        assert prompt.description == BY_NAME[name].description
        assert [(a.name, a.required) for a in prompt.arguments or []] == [("service", False)]
    assert {uri: r.mime_type for uri, r in resources.items() if uri.startswith("skill://")} == {
        "skill://radiance-kv-cache-resize": "text/markdown",
        "skill://radiance-step-shape-ledger-audit": "text/markdown",
    }
    text = audit.messages[0].content.text  # type: ignore[union-attr]
    assert text.startswith(
        "Service `east-coder`: on host gpu-east; boot ledger in the log file /data/ledgers/coder.log; endpoint "
        "http://gpu-east.internal:7070; serve script /opt/launch/run-all.sh; env file /opt/launch/coder.env. "
        'Pass service="east-coder" to each tool.'
    )
    assert BY_NAME["radiance-step-shape-ledger-audit"].body in text
    assert resize.messages[0].content.text.startswith("First call `list_fleet`")  # type: ignore[union-attr]
    assert read.contents[0].text == BY_NAME["radiance-kv-cache-resize"].text  # type: ignore[union-attr]
    assert "radiance-kv-cache-resize: Resizing the KV / VRAM pair of a radiance endpoint. Tools in order: " \
        "list_fleet -> plan_free_vram -> compute_ceiling -> audit_step_shape -> check_pool_contract -> " \
        "compare_arms -> render_gates -> verify_deploy -> read_budget_table" in instructions
    assert "radiance-step-shape-ledger-audit: Auditing a serving-shape change from the boot ledger. Tools in order: " \
        "list_fleet -> audit_step_shape -> check_serve_script -> compare_dry_run." in instructions


def test_a_folder_of_skills_loads_by_name_and_an_empty_one_adds_no_instructions(tmp_path: Path) -> None:
    for name, body in (("zeta-check", "Run `compute_ceiling`, then `list_fleet`."), ("alpha-walk", "`decode_probe`")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {name} steps\n---\n{body}\n")
    (tmp_path / "notes.md").write_text("not a skill")
    loaded = skills.load(TOOL_NAMES, tmp_path)
    assert [(s.name, s.tools) for s in loaded] == [("alpha-walk", ("decode_probe",)),
                                                   ("zeta-check", ("compute_ceiling", "list_fleet"))]
    assert "- zeta-check: zeta-check. Tools in order: compute_ceiling -> list_fleet." in skills.instructions(loaded)
    assert skills.load(TOOL_NAMES, tmp_path / "absent") == [] and skills.instructions([]) == ""
