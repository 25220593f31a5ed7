"""A fleet answer's problems say the same whatever the path the ledger lies at (the demo fleet's snapshot
differed between machines: the reason was clipped after a temporary path of another length)."""

from __future__ import annotations

from radiance_mcp.core.errors import BootNotSettled
from radiance_mcp.tools.plan_fleet import DETAIL_CHARS, problems

REASON = ("this boot refused to start (line 24: 'E kv cache 271.25 MiB (bf16, 14144 B/token/rank): 0% backing of "
          "the 8 x 32768 worst case: 0.0 full-length sessions'); read its lines with read_budget_table, then resize "
          "the pair below the ceiling of the boot before it and restart it; ") * 3  # past DETAIL_CHARS


def _detail(path: str) -> str:
    exc = BootNotSettled(f"{path} (boot 1 of 1, lines 1-26): {REASON}", "refused", (24,))
    (problem,) = problems([], {"wide": exc})
    assert (problem.kind, problem.services, problem.count) == ("refused boot", ["wide"], 1)
    return problem.detail


def test_the_reason_is_clipped_alike_at_a_short_and_a_long_path() -> None:
    short, long = "/l/q.log", "/tmp/pytest-of-someone/pytest-12/popen-gw1/test_x0/hosts/dank/home/dank/logs/q.log"
    assert _detail(short).removeprefix(short) == _detail(long).removeprefix(long)
    said = _detail(short).removeprefix(f"{short} (boot 1 of 1, lines 1-26): ")
    assert len(said) == DETAIL_CHARS and said.endswith("...")
    assert said.startswith("this boot refused to start (line 24:")


def test_a_short_reason_is_kept_whole() -> None:
    exc = BootNotSettled("/l/q.log (boot 2 of 2, lines 30-41): no settled line yet", "unsettled", ())
    (problem,) = problems([], {"slow": exc})
    assert problem.detail == "/l/q.log (boot 2 of 2, lines 30-41): no settled line yet"
    assert problem.kind == "unsettled boot"
