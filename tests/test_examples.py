"""The example ledgers the package ships are what the simulator prints, and read as the README says."""

from __future__ import annotations

import re
from pathlib import Path

from radiance_mcp.core import ledger
from radiance_mcp.sim.engine import EngineModel
from radiance_mcp.sim.fleet import _campaign
from radiance_mcp.sources.config import EXAMPLES_DIR

CONTAINER_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}\+00:00 ")
"""The `podman logs -t` prefix the campaign example carries on every line."""


def test_the_campaign_example_is_the_simulators_proven_boot_then_its_refused_wider_step() -> None:
    text = (EXAMPLES_DIR / "qwen38-bf16.log").read_text()
    lines = text.splitlines()
    assert all(CONTAINER_STAMP.match(line) for line in lines)
    expected = [*EngineModel(_campaign(1024)).ledger_lines("0.0.0.0:8001"),
                *EngineModel(_campaign(65536)).ledger_lines("0.0.0.0:8001")]
    assert [CONTAINER_STAMP.sub("", line) for line in lines] == expected


def test_the_campaign_example_reads_as_two_boots_the_newest_refused() -> None:
    text = (EXAMPLES_DIR / "qwen38-bf16.log").read_text()
    proven = ledger.read_text(text, source="example", boot=-2)
    refused = ledger.read_text(text, source="example", boot=-1)
    assert (proven.index, refused.index, refused.boots_seen) == (1, 2, 2)
    assert proven.state.status == "settled"
    state = refused.state
    assert state.status == "refused" and "startup stopped: out of memory" in state.lines[-1].text
    # The refusal the step-shape procedure quotes: 271.25 MiB of KV, 0.0 full-length sessions of 8 x 32,768.
    kv = refused.first("kv_backing")
    assert kv is not None and kv.fields["size"] == "271.25 MiB" and kv.fields["sessions"] == "0.0"


def test_a_boot_of_any_engine_has_one_state_and_its_refusals_as_records() -> None:
    """One Boot for every engine: radiance's refusal lines are Refusal records as vLLM's are, and the state's
    lines are the refusals' lines, in log order."""
    from radiance_mcp.core.engines import read_engine_boot

    refused = ledger.read_text((EXAMPLES_DIR / "qwen38-bf16.log").read_text(), source="example", boot=-1)
    # lines 52-54: 'kv cache 271.25 MiB ... 0.0 full-length sessions', the engine's fix, 'startup stopped'
    assert [(r.kind, r.line.number) for r in refused.refusals] == [
        ("kv_backs_no_session", 52), ("engine_fix_text", 53), ("startup_stopped", 54)]
    assert refused.state.lines == tuple(r.line for r in refused.refusals) and refused.refused
    settled = ledger.read_text((EXAMPLES_DIR / "frank-archon.log").read_text(), source="example")
    assert settled.state.status == "settled" and settled.refusals == () and not settled.refused
    fixture = Path(__file__).parent / "fixtures/ledgers/vllm/v1_fp8_221k_refused.log"
    vllm = read_engine_boot(fixture.read_text(), source="v.log")
    assert (vllm.engine, vllm.state.status) == ("vllm", "refused")
    assert [r.kind for r in vllm.refusals] == ["window_exceeds_kv"]
    assert vllm.state.lines == tuple(r.line for r in vllm.refusals if r.final)
    # One boot reference: the other engine is named, radiance (the home engine) is not.
    assert vllm.where() == "v.log (vllm boot 1 of 1, lines 1-1)"
    assert settled.where().startswith("example (boot 1 of 1, lines ")
