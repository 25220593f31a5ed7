"""The example ledgers the package ships are what the simulator prints, and read as the README says."""

from __future__ import annotations

import re

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
    assert ledger.boot_state(proven).status == "settled"
    state = ledger.boot_state(refused)
    assert state.status == "refused" and "startup stopped: out of memory" in state.lines[-1].text
    # The refusal the step-shape procedure quotes: 271.25 MiB of KV, 0.0 full-length sessions of 8 x 32,768.
    kv = refused.first("kv_backing")
    assert kv is not None and kv.fields["size"] == "271.25 MiB" and kv.fields["sessions"] == "0.0"
