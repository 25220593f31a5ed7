"""ledger_file reads the newest boot from the file's end (issue 15): exact provenance, growing,
rotated and pathological files, and the same figures over MCP as the text reader gives.

Line numbers and byte offsets are checked against the file with plain Python (bytes.split and
bytes.count), never with the reader's own helpers.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from radiance_mcp.app.server import build_server
from radiance_mcp.core.boot import Boot
from radiance_mcp.core.errors import LedgerError
from radiance_mcp.core.ledger import MAX_LINE_BYTES, read_text
from radiance_mcp.sources import ledger_file
from radiance_mcp.sources import ledgers as sources
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet, ServerSettings
from radiance_mcp.sources.ledger_file import read_file
from radiance_mcp.sources.runtime import Runtime

EXAMPLE = (EXAMPLES_DIR / "frank-archon.log").read_text(encoding="utf-8")
FILLER = "".join(f"2026-12-01T10:{n // 60:02d}:{n % 60:02d}Z GET /health 200 rid={n:06x} took {n % 97} ms\n"
                 for n in range(400))


@pytest.fixture(autouse=True)
def fresh_files(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with nothing remembered; a boot after 1 KiB already counts from its marker."""
    ledger_file.forget_files()
    monkeypatch.setattr(ledger_file.reading, "COUNT_BEFORE_BYTES", 1024)
    yield
    ledger_file.forget_files()


@pytest.fixture(params=["grep", "python"])
def search(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both needle searches, on every span: grep -F in a child process, and the search in Python."""
    if request.param == "grep":
        if ledger_file.blocks.GREP is None:
            pytest.skip("no grep on this machine")
        monkeypatch.setattr(ledger_file.blocks, "GREP_FROM_BYTES", 0)
    else:
        monkeypatch.setattr(ledger_file.blocks, "GREP", None)
    return str(request.param)


def settle(path: Path) -> None:
    """Date the file's mtime 10 s back: a file modified just before a read may change again within its
    mtime's granularity, so the reader trusts an unchanged size and mtime only after RACY_NS."""
    old = path.stat().st_mtime_ns - 10**10
    os.utime(path, ns=(old, old))


def boots(*names: str, filler: str = FILLER) -> str:
    return "".join(filler + EXAMPLE.replace("frank-archon", name) for name in names)


def in_file_numbers(boot: Boot, data: bytes) -> list[tuple[str, int, str]]:
    """Every hit as (phrase, the file's own line number, text), checked against the file's bytes.

    A boot counted from a byte offset must cite lines that are `tail -c +<offset+1> | sed -n <n>p`.
    """
    shift = 0
    if boot.lines_from_byte is not None:
        offset = boot.lines_from_byte
        assert offset == 0 or data[offset - 1 : offset] == b"\n"  # the offset starts a line
        tail_lines = data[offset:].split(b"\n")
        for hit in boot.hits:
            raw = tail_lines[hit.line.number - 1].decode("utf-8", "replace").rstrip("\r")
            assert raw == hit.line.text
        shift = data.count(b"\n", 0, offset)
    file_lines = data.split(b"\n")
    out = []
    for hit in boot.hits:
        number = hit.line.number + shift
        assert file_lines[number - 1].decode("utf-8", "replace").rstrip("\r") == hit.line.text
        out.append((hit.key, number, hit.line.text))
    return out


def expected(text: str, boot: int = -1) -> list[tuple[str, int, str]]:
    return [(hit.key, hit.line.number, hit.line.text) for hit in read_text(text, source="t", boot=boot).hits]


# ---------------------------------------------------------------------------------------
# Provenance


def test_newest_boot_of_a_large_file_cites_its_byte_offset(tmp_path: Path) -> None:
    text = boots("alpha", "beta", "gamma")
    path = tmp_path / "big.log"
    path.write_text(text, encoding="utf-8")
    boot = read_file(path, source="big.log")
    data = path.read_bytes()
    assert boot.lines_from_byte == data.rindex(b"I radiance boot: gamma")
    assert (boot.index, boot.boots_seen, boot.first_line) == (-1, None, 1)
    assert boot.last_line == data[boot.lines_from_byte :].count(b"\n")
    assert in_file_numbers(boot, data) == expected(text)
    assert "counted from byte" in boot.where()


@pytest.mark.slow
@pytest.mark.parametrize("boot", [-1, -2, -3, 1, 2, 3])
def test_every_boot_reads_as_the_text_reader_reads_it(boot: int, search: str, tmp_path: Path) -> None:
    text = boots("alpha", "beta", "gamma")
    path = tmp_path / "big.log"
    path.write_text(text, encoding="utf-8")
    got = read_file(path, source="big.log", boot=boot)
    assert in_file_numbers(got, path.read_bytes()) == expected(text, boot)
    if boot > 0:  # counted from the oldest: the whole file was counted, so its line numbers are the file's
        assert (got.lines_from_byte, got.index, got.boots_seen) == (None, boot, 3)
    else:
        assert (got.index, got.boots_seen) == (boot, None)


def test_boot_out_of_range_counted_from_the_end(tmp_path: Path) -> None:
    path = tmp_path / "two.log"
    path.write_text(boots("alpha", "beta"), encoding="utf-8")
    with pytest.raises(LedgerError, match=r"boot=-3 but the log holds 2 boot\(s\)"):
        read_file(path, source="two.log", boot=-3)


def test_the_index_gives_the_file_s_line_numbers(tmp_path: Path) -> None:
    text = boots("alpha", "beta", "gamma")
    path = tmp_path / "big.log"
    path.write_text(text, encoding="utf-8")
    settle(path)
    assert read_file(path, source="big.log").lines_from_byte is not None
    ledger_file.index_file(path)
    boot = read_file(path, source="big.log")
    assert (boot.lines_from_byte, boot.index, boot.boots_seen) == (None, 3, 3)
    assert [(h.key, h.line.number, h.line.text) for h in boot.hits] == expected(text)
    assert in_file_numbers(boot, path.read_bytes()) == expected(text)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["one boot at offset 0", "one boot, no newline", "CRLF", "marker twice"])
def test_small_layouts(layout: str, search: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_file.reading, "COUNT_BEFORE_BYTES", 0)  # only a boot at offset 0 gets the file's numbers
    text = {
        "one boot at offset 0": EXAMPLE,
        "one boot, no newline": EXAMPLE.rstrip("\n"),
        "CRLF": boots("a", "b").replace("\n", "\r\n"),
        "marker twice": boots("a", "radiance boot radiance boot"),
    }[layout]
    path = tmp_path / "x.log"
    path.write_bytes(text.encode())
    boot = read_file(path, source="x.log")
    assert in_file_numbers(boot, path.read_bytes()) == expected(text)
    assert boot.require("settled").line.text.startswith("W card 0 settled at")  # no '\r' left on it
    if layout.startswith("one boot"):
        assert (boot.lines_from_byte, boot.index, boot.boots_seen, boot.first_line) == (None, 1, 1, 1)
        assert boot.last_line == len(text.rstrip("\n").split("\n"))


@pytest.mark.slow
@pytest.mark.parametrize("chunk", [1, 2, 5, 12, 13, 14, 27, 4096])
def test_a_marker_split_across_blocks(
    chunk: int, search: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks of every size put the block boundary at every place inside some marker, searching back and forward."""
    monkeypatch.setattr(ledger_file.blocks, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(ledger_file.file_index, "INDEX_STEP_BYTES", max(chunk, 64))
    text = boots("a", "b", "c", filler="x\n" * 3 + "noise radiance boo\n")
    path = tmp_path / "x.log"
    path.write_text(text, encoding="utf-8")
    settle(path)
    for boot in (-1, -2, -3, 1, 2, 3):
        assert in_file_numbers(read_file(path, source="x", boot=boot), path.read_bytes()) == expected(text, boot)
    ledger_file.index_file(path)
    got = read_file(path, source="x")
    assert (got.lines_from_byte, got.index, got.boots_seen) == (None, 3, 3)


# ---------------------------------------------------------------------------------------
# Files that change


def spy_scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The byte offset each scan of a file started at."""
    starts: list[int] = []
    scan = ledger_file.reading._scan

    def recording(stream: Any, start: Any, *args: Any, **kwargs: Any) -> Any:
        starts.append(start.offset)
        return scan(stream, start, *args, **kwargs)

    monkeypatch.setattr(ledger_file.reading, "_scan", recording)
    return starts


@pytest.mark.parametrize("count_before", [1024, 16 << 20])
def test_an_unchanged_file_is_not_read_again(
    count_before: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither scanned nor counted again: lines counted from the marker, or the file's own (counted once)."""
    monkeypatch.setattr(ledger_file.reading, "COUNT_BEFORE_BYTES", count_before)
    path = tmp_path / "x.log"
    path.write_text(boots("a", "b"), encoding="utf-8")
    settle(path)
    first = read_file(path, source="x")
    assert (first.lines_from_byte is None) == (count_before > 1024)
    scans = spy_scans(monkeypatch)
    counted: list[int] = []
    count = ledger_file.file_index._count_forward

    def counting(stream: Any, start: Any, end: int, *args: Any, **kwargs: Any) -> Any:
        counted.append(end - start.offset)
        return count(stream, start, end, *args, **kwargs)

    monkeypatch.setattr(ledger_file.file_index, "_count_forward", counting)
    assert read_file(path, source="x") == first
    assert scans == []
    assert sum(counted) == 0


def test_a_fleet_of_a_thousand_ledgers_is_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """1,000 services' ledgers on this machine (issue 26 item 2): the second pass scans none of them (64 files were
    kept before, so a whole-fleet call re-read every one, each call)."""
    paths = [tmp_path / f"s{n:04d}.log" for n in range(1000)]
    for n, path in enumerate(paths):
        path.write_text(boots("old", f"s{n:04d}", filler=""), encoding="utf-8")
        settle(path)
    first = [read_file(path, source=path.name) for path in paths]
    scans = spy_scans(monkeypatch)
    assert [read_file(path, source=path.name) for path in paths] == first
    assert scans == []


def test_past_the_memory_bound_the_least_recently_read_file_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [tmp_path / f"{name}.log" for name in ("a", "b", "c")]
    for path in paths:
        path.write_text(boots("old", path.stem, filler=""), encoding="utf-8")
        settle(path)
    read_file(paths[0], source="a")
    one = ledger_file.file_state._kept_bytes
    assert one > ledger_file.file_state.STATE_BYTES  # the last read's lines are counted
    monkeypatch.setattr(ledger_file.file_state, "MAX_KEPT_BYTES", 2 * one)  # room for two such files
    for path in paths[1:]:
        read_file(path, source=path.stem)
    scans = spy_scans(monkeypatch)
    read_file(paths[2], source="c")
    assert scans == []  # kept
    read_file(paths[0], source="a")
    assert scans != []  # the least recent, dropped: read again
    assert ledger_file.file_state._kept_bytes <= 2 * one


def test_an_appended_file_is_read_from_where_the_last_read_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = boots("a", "b")
    cut = text.rindex("W card 0 settled at") + 7  # the last line ends mid-line
    path = tmp_path / "x.log"
    path.write_text(text[:cut], encoding="utf-8")
    with pytest.raises(LedgerError):  # nothing settled yet
        read_file(path, source="x").require("settled")
    size = path.stat().st_size
    scans = spy_scans(monkeypatch)
    with path.open("a", encoding="utf-8") as out:
        out.write(text[cut:] + FILLER)
    boot = read_file(path, source="x")
    assert scans == [text.encode()[:size].rindex(b"\n") + 1]  # the unfinished line, then what was added
    assert in_file_numbers(boot, path.read_bytes()) == expected(text + FILLER)
    # A new boot appended: the read goes on from there.
    with path.open("a", encoding="utf-8") as out:
        out.write(boots("c"))
    boot = read_file(path, source="x")
    assert in_file_numbers(boot, path.read_bytes()) == expected(text + FILLER + boots("c"))
    assert boot.require("boot_start").line.text == "I radiance boot: c"


@pytest.mark.parametrize(("how", "new", "newest"), [
    ("rotated", boots("c", "d", "e"), "e"), ("truncated", boots("c"), "c"),
    ("rewritten in place, same size", boots("a", "x"), "x"),
])
def test_a_replaced_file_is_read_afresh(how: str, new: str, newest: str, tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text(boots("a", "b"), encoding="utf-8")
    settle(path)
    ledger_file.index_file(path)
    assert read_file(path, source="x").boots_seen == 2
    if how == "rotated":
        (tmp_path / "new.log").write_text(new, encoding="utf-8")
        os.replace(tmp_path / "new.log", path)
    else:
        path.write_text(new, encoding="utf-8")  # same inode
    boot = read_file(path, source="x")
    assert in_file_numbers(boot, path.read_bytes()) == expected(new)
    assert boot.require("boot_start").line.text == f"I radiance boot: {newest}"


@pytest.mark.slow
@pytest.mark.parametrize(("filler_copies", "new_figure"), [(4, "7.01 GiB"), (200, "12.01 GiB")])
def test_a_file_rewritten_in_place_that_grew_is_read_afresh(filler_copies: int, new_figure: str,
                                                             tmp_path: Path) -> None:
    """Not an append: the same inode, longer than at the last read, its first bytes, its boot's first and
    its last bytes as they were, and one figure changed between them (by a rewrite, or a new start of the
    engine printing the same lines): read afresh, the new figure. A file of up to 4 MiB is compared
    whole; a larger one at 1,024 places, which a rewrite that moves the bytes after it changes."""
    settled = EXAMPLE.index("W card 0 settled at")
    spread = EXAMPLE[:settled] + FILLER * filler_copies + EXAMPLE[settled:]  # the settled line far from the marker
    old = FILLER + spread + FILLER
    path = tmp_path / "x.log"
    path.write_text(old, encoding="utf-8")
    assert read_file(path, source="x").require("settled").line.text.startswith("W card 0 settled at 2.01 GiB")
    new = old.replace("settled at 2.01 GiB", f"settled at {new_figure}") + FILLER
    path.write_text(new, encoding="utf-8")  # same inode
    boot = read_file(path, source="x")
    assert boot.require("settled").line.text.startswith(f"W card 0 settled at {new_figure}")
    assert in_file_numbers(boot, path.read_bytes()) == expected(new)


PIECES = {"boot": EXAMPLE, "filler": FILLER, "head": EXAMPLE[:333], "rest": EXAMPLE[333:], "newline": "\n",
          "long": "x" * (MAX_LINE_BYTES + 9), "radiance": "radiance", "boot: z": " boot: z\n", "crlf": "\r\n"}


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(sorted(PIECES)), min_size=1, max_size=8))
def test_a_file_growing_piece_by_piece_reads_as_a_fresh_read(pieces: list[str], search: str, tmp_path: Path) -> None:
    """Each append (a line cut anywhere, a marker cut in two, a long line) reads as the whole text does."""
    ledger_file.forget_files()
    path = tmp_path / "grow.log"
    path.write_bytes(b"")
    text = ""
    for name in pieces:
        piece = PIECES[name]
        text += piece
        with path.open("a", encoding="utf-8") as out:
            out.write(piece)
        try:
            grown: Any = in_file_numbers(read_file(path, source="g"), path.read_bytes())
        except LedgerError as exc:
            grown = str(exc)
        try:
            fresh: Any = expected(text)
        except LedgerError as exc:
            fresh = str(exc)
        if isinstance(fresh, str) or isinstance(grown, str):  # both fail, with the file's words or the text's
            assert isinstance(fresh, str) and isinstance(grown, str)
        else:
            assert grown == fresh


# ---------------------------------------------------------------------------------------
# Memory: a huge line with no newline, sparse (no disk used)

HUGE_LINE_BYTES = 256 << 20
"""256 MiB: a reader that held the line would hold 32 times the 8 MiB the reads below may
allocate, and 4 times the 64 MiB of RSS the child below may add: the same verdict as a 1 GiB
line, for a quarter of its reading (about 1 s of CPU a read). bench/bench_ledger.py reads the
1 GiB line of README's claim."""


@pytest.fixture
def huge_line(tmp_path: Path) -> Path:
    path = tmp_path / "line.log"
    with path.open("wb") as out:
        out.write(EXAMPLE.encode())
        out.truncate(HUGE_LINE_BYTES)  # the boot, then NULs to 256 MiB and no newline
    return path


def traced_peak(read: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_a_huge_line_after_a_boot_costs_a_few_mib(huge_line: Path) -> None:
    found: list[Boot] = []
    assert traced_peak(lambda: found.append(read_file(huge_line, source="line.log"))) < 8 << 20
    assert (found[0].require("settled").line.number, found[0].skipped_long_lines) == (26, 1)
    grown: list[Boot] = []
    with huge_line.open("ab") as out:
        out.write(b"\nI serving on 0.0.0.0:9\n")
    assert traced_peak(lambda: grown.append(read_file(huge_line, source="line.log"))) < 8 << 20
    assert [hit.line.number for hit in grown[0].all("serving")] == [27, 29]  # the NUL line is 28
    assert (grown[0].last_line, grown[0].skipped_long_lines) == (29, 1)


@pytest.mark.slow
def test_a_huge_line_and_no_boot_marker(tmp_path: Path) -> None:
    path = tmp_path / "zeros.log"
    with path.open("wb") as out:
        out.truncate(HUGE_LINE_BYTES)

    def read() -> None:
        with pytest.raises(LedgerError, match=r"no radiance ledger phrase in the file \(1 line\(s\) over 65536"):
            read_file(path, source="zeros.log")

    assert traced_peak(read) < 8 << 20


@pytest.mark.slow
def test_peak_rss_of_a_huge_line_read_stays_within_64_mib_of_an_idle_server(huge_line: Path) -> None:
    """The whole process's peak RSS, in a child: one that builds the server, one that also reads."""
    idle = "from radiance_mcp.app.server import build_server; from radiance_mcp.sources.runtime import Runtime; " \
           "from radiance_mcp.sources.config import Fleet; build_server(Runtime(Fleet()))"
    read = idle + f"; from radiance_mcp.sources.ledger_file import read_file; from pathlib import Path; " \
                  f"read_file(Path({str(huge_line)!r}), source='x')"

    def peak_kib(proc: subprocess.Popen[bytes]) -> int:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        assert proc.returncode == 0
        return usage.ru_maxrss

    # Both children at once (each one's peak is its own): the two starts cost one.
    reader, idler = (subprocess.Popen([sys.executable, "-c", code]) for code in (read, idle))
    assert peak_kib(reader) - peak_kib(idler) < 64 * 1024


# ---------------------------------------------------------------------------------------
# Over MCP: the same figures and lines as the text reader


async def tool(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def lines_cited(out: Any) -> list[int]:
    """Every 'line' number in a tool's output, in order."""
    if isinstance(out, dict):
        found = [out["line"]] if isinstance(out.get("line"), int) else []
        return found + [n for key, value in out.items() if key != "ledger" for n in lines_cited(value)]
    if isinstance(out, list):
        return [n for item in out for n in lines_cited(item)]
    return []


async def test_tools_report_the_text_reader_s_figures_and_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "INDEX_DELAY_S", 3600)  # not yet: both tools read before the file is indexed
    text = boots("alpha", "beta")
    path = tmp_path / "svc.log"
    path.write_text(text, encoding="utf-8")
    settle(path)
    data = path.read_bytes()
    fleet = Fleet(server=ServerSettings(log_roots=(str(tmp_path),)))
    async with Client(build_server(Runtime(fleet))) as client:
        inline = {name: await tool(client, name, log_text=text) for name in ("read_budget_table", "compute_ceiling")}
        from_file = {name: await tool(client, name, log=str(path)) for name in inline}
        offset = data.rindex(b"I radiance boot: beta")
        shift = data.count(b"\n", 0, offset)
        for name, out in from_file.items():
            assert out["ledger"]["lines_from_byte"] == offset
            assert out["ledger"]["origin"] == "local file"
            assert [n + shift for n in lines_cited(out)] == lines_cited(inline[name])
        # The server indexes the file after such a read: then the lines are the file's, as inline.
        waiting = sources._indexing[path]
        waiting.cancel()
        monkeypatch.setattr(sources, "INDEX_DELAY_S", 0)
        await asyncio.gather(waiting, return_exceptions=True)
        await tool(client, "read_budget_table", log=str(path))
        await sources._indexing[path]
        for name in inline:
            out = await tool(client, name, log=str(path))
            assert out["ledger"]["lines_from_byte"] is None
            assert (out["ledger"]["boot"], out["ledger"]["boots_seen"]) == (2, 2)
            # Everything but where it came from: caller text gets a note that it is unverified.
            assert {k: v for k, v in out.items() if k not in ("ledger", "notes")} == {
                k: v for k, v in inline[name].items() if k not in ("ledger", "notes")}
        # A reserve cited by the file's line number is traced, as it is on the inline text.
        candidate = inline["read_budget_table"]["reserve_candidates"][0]
        cited = {"mib": candidate["mib"], "label": "spare", "line": candidate["line"]["line"]}
        ceiling = await tool(client, "compute_ceiling", log=str(path), reserves=[cited])
        assert ceiling["reserves"][0]["kind"] == "traced"
        assert ceiling["reserves"][0]["line"] == candidate["line"]


async def test_parallel_reads_of_one_growing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "INDEX_DELAY_S", 3600)  # the file is not indexed between the reads
    path = tmp_path / "svc.log"
    path.write_text(boots("a", "b"), encoding="utf-8")
    source = sources.LocalFileSource(path)
    results = await asyncio.gather(*(source.read() for _ in range(8)))
    assert len({tuple((h.key, h.line) for h in r.hits) for r in results}) == 1
    with path.open("a", encoding="utf-8") as out:
        out.write(FILLER + EXAMPLE.replace("frank-archon", "c"))
    results = await asyncio.gather(*(source.read() for _ in range(8)))
    assert {r.require("boot_start").line.text for r in results} == {"I radiance boot: c"}
    assert len({r.lines_from_byte for r in results}) == 1
    task = sources._indexing.get(path)
    if task is not None:
        task.cancel()


@pytest.mark.slow
def test_grep_gone_since_start_is_searched_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_file.blocks, "GREP", str(tmp_path / "no-such-grep"))
    monkeypatch.setattr(ledger_file.blocks, "GREP_FROM_BYTES", 0)
    text = boots("a", "b")
    path = tmp_path / "x.log"
    path.write_text(text, encoding="utf-8")
    assert in_file_numbers(read_file(path, source="x"), path.read_bytes()) == expected(text)
