"""The compacted schemas accept what the full ones accept: a smaller tools/list, the same contract."""

from __future__ import annotations

from typing import Annotated, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field, Strict
from shared_server import empty_fleet_server

from radiance_mcp.app.schemas import compact, shallow


class _Ref(BaseModel):
    line: int
    text: str


class _In(BaseModel):
    title: str = Field(max_length=8, description="a property that happens to be called title")
    mib: float | None = Field(None, ge=0, le=100)
    kind: Literal["fp8", "bf16"] = "fp8"
    refs: list[_Ref] = Field(default_factory=list, max_length=2)


class _Out(BaseModel):
    ok: bool
    status: Literal["settled", "refused"] | None
    ref: _Ref | None
    refs: list[_Ref]
    note: str


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ({"title": "x"}, True),
        ({"title": "x", "mib": None}, True),
        ({"title": "x", "mib": 50, "kind": "bf16", "refs": [{"line": 1, "text": "t"}]}, True),
        ({"title": "123456789"}, False),  # maxLength kept
        ({"title": "x", "mib": 101}, False),  # bound kept
        ({"title": "x", "kind": "fp16"}, False),  # enum kept
        ({"title": "x", "refs": [{"line": 1}]}, False),  # nested required kept
        ({"title": "x", "refs": [{"line": 1, "text": "a"}] * 3}, False),  # maxItems kept
        ({}, False),  # required kept
    ],
)
def test_compact_accepts_exactly_what_the_full_schema_accepts(value: dict[str, object], valid: bool) -> None:
    full = _In.model_json_schema()
    small = compact(full)
    assert _valid(full, value) is valid
    assert _valid(small, value) is valid


def test_compact_drops_titles_and_null_defaults_but_not_a_property_called_title() -> None:
    small = compact(_In.model_json_schema())
    assert "title" not in small and "title" not in small["$defs"]["_Ref"]
    assert "title" in small["properties"] and small["properties"]["title"]["maxLength"] == 8
    assert "default" not in small["properties"]["mib"]
    assert small["properties"]["kind"]["default"] == "fp8"
    assert len(str(small)) < len(str(_In.model_json_schema()))


class _Strict(BaseModel):
    seqs: Annotated[int, Strict()] | None = Field(None, ge=1, le=64)


@pytest.mark.parametrize(("seqs", "valid"), [(None, True), (1, True), (64, True), (0, False), (65, False)])
def test_compact_names_the_bounds_pydantic_leaves_under_their_own_names(seqs: int | None, valid: bool) -> None:
    # A strict int that may be null: pydantic writes {"ge": 1, "le": 64} beside the anyOf, which
    # a JSON Schema reader ignores; the compact schema says minimum / maximum, as the model checks.
    assert "ge" in str(_Strict.model_json_schema())
    assert _valid(compact(_Strict.model_json_schema()), {"seqs": seqs}) is valid


def test_shallow_describes_the_top_level_and_every_full_output_fits_it() -> None:
    full = _Out.model_json_schema()
    top = shallow(full)
    assert "required" not in top  # every property of an output is always there: not listed twice
    # Each property by its name, an enum kept (issue 26: tools/list within 24,000 characters); the types are
    # the full schema's, served as a resource.
    assert top["properties"] == {
        "ok": {},
        "status": {"enum": ["settled", "refused", None]},
        "ref": {},
        "refs": {},
        "note": {},
    }
    for output in (
        _Out(ok=True, status=None, ref=None, refs=[], note=""),
        _Out(ok=False, status="refused", ref=_Ref(line=3, text="E startup stopped"), refs=[_Ref(line=1, text="")],
             note="n"),
    ):
        data = output.model_dump(mode="json")
        assert _valid(full, data) and _valid(top, data)
    assert not _valid(full, {"ok": "yes", "status": None, "ref": None, "refs": [], "note": ""})
    assert not _valid(top, {"ok": True, "status": "booted", "ref": None, "refs": [], "note": ""})


def _valid(schema: dict[str, object], value: object) -> bool:
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return False
    return True


def test_an_optional_argument_is_published_without_null_and_the_rest_is_kept() -> None:
    small = compact(_In.model_json_schema(), arguments=True)
    assert small["properties"]["mib"] == {"type": "number", "minimum": 0, "maximum": 100}
    assert _valid(small, {"title": "x", "mib": 50}) and not _valid(small, {"title": "x", "mib": 101})
    # Leaving an optional argument out is how to say nothing; a null is no longer advertised.
    assert not _valid(small, {"title": "x", "mib": None})
    # An output's nullable fields keep their null: outputs are not arguments.
    assert compact(_Out.model_json_schema())["properties"]["ref"]["anyOf"][1] == {"type": "null"}


async def test_the_server_still_reads_an_explicit_null_as_an_argument_left_out() -> None:
    from mcp import Client

    from radiance_mcp.sources.config import EXAMPLES_DIR

    text = (EXAMPLES_DIR / "frank-archon.log").read_text()
    async with Client(empty_fleet_server()) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        with_null = await client.call_tool("compute_ceiling", {"log_text": text, "service": None, "log": None})
        left_out = await client.call_tool("compute_ceiling", {"log_text": text})
    assert listed["compute_ceiling"].input_schema["properties"]["log"]["type"] == "string"
    assert not with_null.is_error and with_null.structured_content == left_out.structured_content
