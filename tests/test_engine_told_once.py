"""The engine of a local ledger the config does not name is told from its first 4 MiB once, while the file stays
the one it was told from (issue 26 item 2: a warm whole-fleet call read and decoded the first 4 MiB of every
service's log again, each call: 5 s of a 1,000-service call with 20 MiB logs). A log rotated, rewritten or
replaced by another engine's is told again, so the answer is always the engine that printed the file now.

Driven through the SDK's in-memory MCP client, as an agent calls compute_ceiling on a fleet of local files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from radiance_mcp.app.server import build_server
from radiance_mcp.sources import engine_logs
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet, ServerSettings, Service
from radiance_mcp.sources.runtime import Runtime

LEDGERS = Path(__file__).parent / "fixtures" / "ledgers"
RADIANCE = EXAMPLES_DIR / "frank-archon.log"  # ceiling 29,120 + (2,058 - 209) = 30,969 MiB
VLLM = LEDGERS / "vllm" / "v0.6_llama3.1-8b_20k.log"
NOISE = "".join(f"2026-12-02T10:00:{n % 60:02d}Z GET /health 200 rid={n:06x}\n" for n in range(100_000))
"""About 4.6 MiB of request lines: more than the DETECT_BYTES an engine is told from."""


@pytest.fixture
def heads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files whose first DETECT_BYTES were read to tell their engine, in order."""
    engine_logs._told.clear()
    seen: list[Path] = []
    read = engine_logs._read

    def spy(source: Any, limit: int, *, whole: bool, **kwargs: Any) -> bytes:
        if not whole:
            seen.append(source.path)
        return read(source, limit, whole=whole, **kwargs)

    monkeypatch.setattr(engine_logs, "_read", spy)
    return seen


def fleet_of(paths: list[Path]) -> Runtime:
    services = {p.stem: Service(log=str(p)) for p in paths}
    return Runtime(Fleet(services=services, server=ServerSettings()))


def settle(path: Path) -> None:
    old = path.stat().st_mtime_ns - 10**10
    os.utime(path, ns=(old, old))


def engine(result: Any) -> str:
    """Which engine's reading a ceiling is: vLLM's notes name the share of the card vLLM leaves unclaimed."""
    return "vllm" if any("vLLM" in note for note in result["notes"]) else "radiance"


async def ceilings(client: Client, names: list[str]) -> list[Any]:
    out = []
    for name in names:
        result = await client.call_tool("compute_ceiling", {"service": name})
        assert not result.is_error, result.content
        out.append(result.structured_content)
    return out


async def test_each_log_is_told_once_while_it_stays_the_same(tmp_path: Path, heads: list[Path]) -> None:
    paths = [tmp_path / f"s{n}.log" for n in range(3)]
    for path, source in zip(paths, (RADIANCE, VLLM, RADIANCE), strict=True):
        path.write_bytes(source.read_bytes())
        settle(path)
    names = [p.stem for p in paths]
    async with Client(build_server(fleet_of(paths))) as client:
        first = await ceilings(client, names)
        assert heads == paths
        again = await ceilings(client, names)
    assert heads == paths  # none read again
    assert again == first
    assert first[0]["ceiling_mib"] == 30969 and engine(first[1]) == "vllm"
    assert engine(first[0]) == engine(first[2]) == "radiance"


@pytest.mark.parametrize("how", ["replaced", "rewritten in place", "appended within the head"])
async def test_a_log_that_is_another_file_now_is_told_again(how: str, tmp_path: Path, heads: list[Path]) -> None:
    path = tmp_path / "svc.log"
    if how == "appended within the head":  # a log of noise shorter than the head: the ledger comes after
        path.write_text("2026-12-02T10:00:00Z engine starting\n", encoding="utf-8")
    else:
        path.write_bytes(RADIANCE.read_bytes())
    settle(path)
    async with Client(build_server(fleet_of([path]))) as client:
        before = await client.call_tool("compute_ceiling", {"service": "svc"})
        if how == "replaced":  # logrotate's create: another file under the name
            (tmp_path / "new.log").write_bytes(VLLM.read_bytes())
            os.replace(tmp_path / "new.log", path)
        elif how == "rewritten in place":  # copytruncate, then the engine's next start
            with path.open("r+b") as out:
                out.truncate(0)
                out.write(VLLM.read_bytes())
        else:
            with path.open("ab") as out:
                out.write(VLLM.read_bytes())
        settle(path)
        after = await client.call_tool("compute_ceiling", {"service": "svc"})
    assert len(heads) == 2  # told again
    assert not after.is_error, after.content
    assert engine(after.structured_content) == "vllm"
    if how != "appended within the head":
        assert engine(before.structured_content) == "radiance"


async def test_a_log_grown_past_the_head_is_not_told_again(tmp_path: Path, heads: list[Path]) -> None:
    """Bytes added after the first DETECT_BYTES cannot change what the head says: the engine stands."""
    path = tmp_path / "svc.log"
    path.write_text(RADIANCE.read_text(encoding="utf-8") + NOISE, encoding="utf-8")
    settle(path)
    async with Client(build_server(fleet_of([path]))) as client:
        before = await client.call_tool("compute_ceiling", {"service": "svc"})
        assert heads == [path]
        with path.open("a", encoding="utf-8") as out:
            out.write(NOISE[:10_000])
        settle(path)
        after = await client.call_tool("compute_ceiling", {"service": "svc"})
    assert heads == [path]
    assert (before.structured_content or {})["ceiling_mib"] == (after.structured_content or {})["ceiling_mib"]


async def test_a_log_rewritten_in_place_past_its_first_bytes_is_told_again(tmp_path: Path, heads: list[Path]) -> None:
    """The same size and the same first 4 KiB (a journal's noise), another engine's lines after them: told again."""
    noise = NOISE[:8192]
    radiance, vllm = RADIANCE.read_text(encoding="utf-8"), VLLM.read_text(encoding="utf-8")
    width = max(len(radiance), len(vllm))
    path = tmp_path / "svc.log"
    path.write_text(noise + radiance + "\n" * (width - len(radiance)), encoding="utf-8")
    settle(path)
    async with Client(build_server(fleet_of([path]))) as client:
        before = await client.call_tool("compute_ceiling", {"service": "svc"})
        with path.open("r+", encoding="utf-8") as out:  # in place: the same inode, the same size
            out.write(noise + vllm + "\n" * (width - len(vllm)))
        settle(path)
        after = await client.call_tool("compute_ceiling", {"service": "svc"})
    assert len(heads) == 2
    assert engine(before.structured_content) == "radiance" and engine(after.structured_content) == "vllm"
