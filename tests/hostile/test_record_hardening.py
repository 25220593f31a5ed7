"""serve --record against a file that stops growing, a cut line, a FIFO, /dev/full and two sessions in one file.

The file size limit is a real one: the server runs under RLIMIT_FSIZE (set by a wrapper that then
execs ``python -m radiance_mcp serve``, SIGXFSZ ignored so a write past it fails with EFBIG), driven
by the SDK's stdio client; the test raises the limit with prlimit(2) while the session goes on.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cli_run import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from radiance_mcp.app.server import build_server
from radiance_mcp.core.errors import EvalError
from radiance_mcp.evals.fleet import scenario_fleet
from radiance_mcp.evals.record import RECORD_VERSION, Recorder, read_record
from radiance_mcp.evals.run import run_agent
from radiance_mcp.evals.scenario import load_scenarios
from radiance_mcp.sources.config import load
from radiance_mcp.sources.runtime import Runtime

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = {s.name: s for s in load_scenarios()}["untraceable-reserve"]
CEILING = ("compute_ceiling", {"service": "frank-archon"})

LIMITED = """
import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
with open(sys.argv[1], "w") as pid:
    pid.write(str(os.getpid()))
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))
os.execv(sys.executable, [sys.executable, "-m", "radiance_mcp", *sys.argv[3:]])
"""
"""python -c LIMITED PIDFILE BYTES ARGS...: radiance-mcp ARGS with a file size limit of BYTES (soft, raisable)."""


class _Drain:
    """The read end of a pipe, read to its end by a thread: the server's stderr, which no file limit cuts."""

    def __init__(self) -> None:
        read, write = os.pipe()
        self.writer = os.fdopen(write, "wb")
        self._reader = os.fdopen(read, "rb")
        self._chunks: list[bytes] = []
        self._thread = threading.Thread(target=lambda: self._chunks.extend(iter(self._reader.readline, b"")))
        self._thread.start()

    def text(self) -> str:
        self.writer.close()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "the server's stderr never closed"
        self._reader.close()
        return b"".join(self._chunks).decode()


@pytest.mark.slow
async def test_a_record_that_stops_growing_costs_no_call_and_says_what_it_lost(tmp_path: Path) -> None:
    record, pidfile = tmp_path / "run.jsonl", tmp_path / "server.pid"
    stderr = _Drain()
    results = []
    async with scenario_fleet(SCENARIO, tmp_path / "fleet") as config:
        server = StdioServerParameters(
            command=sys.executable,
            args=["-c", LIMITED, str(pidfile), "1024", "serve", "--config", str(config), "--record", str(record)],
            env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
        try:
            async with Client(stdio_client(server, errlog=stderr.writer)) as client:
                for _ in range(3):  # each line is longer than what the 1 KiB limit leaves after the session line
                    results.append(await client.call_tool(*CEILING))
                resource.prlimit(int(pidfile.read_text()), resource.RLIMIT_FSIZE,
                                 (resource.RLIM_INFINITY, resource.RLIM_INFINITY))  # space again
                results.append(await client.call_tool(*CEILING))
        finally:
            said = stderr.text()
    # Every call was answered in full, as without --record.
    assert [r.is_error for r in results] == [False] * 4
    assert all(r.structured_content == results[0].structured_content for r in results)
    # The failure is said once: on stderr, and as one more text block of the next result alone.
    notices = [[c.text for c in r.content if getattr(c, "text", "").startswith("radiance-mcp: the session record")]
               for r in results]
    assert [len(n) for n in notices] == [1, 0, 0, 0]
    assert f"the session record {record} cannot be written (File too large)" in notices[0][0]
    assert said.count("cannot be written") == 1, said
    assert f"the session record {record} is written again; 3 event(s) lost" in said
    assert "Traceback" not in said and "Internal" not in said
    # Every line written is whole (a write cut by the limit was cut back off), and the next one counts the lost.
    assert record.read_bytes().endswith(b"\n")
    notes: list[str] = []
    events = read_record(record, notes)
    assert [(e.kind, e.seq, e.lost) for e in events] == [("session", 0, None), ("tool_call", 4, 3)]
    assert len(notes) == 1 and "could not write 3 event(s) of this session before this one" in notes[0]


@pytest.mark.slow
def test_a_record_that_cannot_be_written_at_all_is_one_line_and_exit_1(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    done = subprocess.run([sys.executable, "-c", LIMITED, str(tmp_path / "pid"), "16", "serve", "--record",
                           str(record)], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "RADIANCE_MCP_CONFIG": ""})
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"radiance-mcp: --record {record}: cannot be written (File too large); free space on its disk, raise the "
        "file size limit (ulimit -f), or name a regular file in a directory that exists and you can write, e.g. "
        "run.jsonl"]


@pytest.mark.parametrize("kind", ["fifo", "/dev/full"])
def test_serve_record_on_a_fifo_or_a_device_is_one_line_and_exit_1(tmp_path: Path, cli: CliRunner,
                                                                     kind: str) -> None:
    path = tmp_path / "pipe" if kind == "fifo" else Path(kind)
    if kind == "fifo":
        os.mkfifo(path)
    done = cli("serve", "--record", path, env={"RADIANCE_MCP_CONFIG": ""}, deadline_s=30)
    what = "a FIFO" if kind == "fifo" else "a character device"
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"radiance-mcp: --record {path}: is {what}, not a regular file; name a regular file in a directory that "
        "exists and you can write, e.g. run.jsonl"]


async def test_a_cut_line_is_skipped_and_said_and_the_next_session_is_scored(tmp_path: Path, cli: CliRunner) -> None:
    """A record whose last line was cut (the server killed mid-write, or an older writer's short
    write), then the next session appended: the reader skips the cut line, and eval scores the rest."""
    record, answer = tmp_path / "run.jsonl", tmp_path / "answer.txt"
    first = await run_agent(SCENARIO, "reference", record=record)
    whole = record.read_bytes()
    record.write_bytes(whole + whole.splitlines(keepends=True)[1][:57])  # a call cut after 57 bytes
    cut_at = len(whole.splitlines()) + 1
    answer.write_text((await run_agent(SCENARIO, "untraced-reserve", record=record)).answer)
    notes: list[str] = []
    events = read_record(record, notes)
    assert notes == [f"record {record}: line {cut_at}: skipped, an event cut mid-line (a write that stopped "
                     "part-way: a full disk, a killed server); the lines after it are read",
                     f"record {record}: holds 2 sessions, scored as one run; to score one run alone, serve --record "
                     "a new file for each"]
    sessions = [e.session for e in events if e.kind == "session"]  # the next session's first line is not glued on
    assert len(sessions) == 2 and tuple(e for e in events if e.session == sessions[0]) == first.events
    assert len([e for e in events if e.session == sessions[1]]) == len(record.read_bytes().splitlines()) - cut_at
    # eval scores one run's record: two sessions in it would credit one agent with the other's calls (issue 27
    # item 2), so it is refused, naming both.
    done = cli("eval", "--scenario", SCENARIO.name, "--record", record, "--answer", answer, "--json", cwd=ROOT)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert f"refused: two sessions ({sessions[0]} and {sessions[1]})" in done.stderr


async def test_two_sessions_in_one_record_each_line_names_its_session(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    async with scenario_fleet(SCENARIO, tmp_path / "fleet") as config:
        runtime = Runtime(load(config))
        recorders = [Recorder(record, "test"), Recorder(record, "test")]
        try:
            async with (Client(build_server(runtime, middleware=[recorders[0]])) as one,
                        Client(build_server(runtime, middleware=[recorders[1]])) as two):
                for _ in range(2):  # interleaved: one, two, one, two
                    await one.call_tool(*CEILING)
                    await two.call_tool("decode_probe", {"service": "frank-archon", "gen_tokens": 9})
        finally:
            for recorder in recorders:
                recorder.close()
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert all(line["version"] == RECORD_VERSION for line in lines)
    sessions = {r.session: [(e["seq"], e.get("tool")) for e in lines if e["session"] == r.session]
                for r in recorders}
    assert len(sessions) == 2 and all(len(s) == 32 for s in sessions)
    assert list(sessions.values()) == [[(0, None), (1, "compute_ceiling"), (2, "compute_ceiling")],
                                       [(0, None), (1, "decode_probe"), (2, "decode_probe")]]
    assert [e.session for e in read_record(record)] == [line["session"] for line in lines]


def test_a_record_of_version_1_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text('{"version":1,"seq":0,"time":"2026-12-01T10:00:00.000+00:00","kind":"session",'
                    '"server_version":"0.9.0"}\n{"version":1,"seq":1,"time":"2026-12-01T10:00:01.000+00:00",'
                    '"kind":"tool_call","tool":"compute_ceiling","arguments":{},"ok":true,"duration_s":0.01}\n')
    assert [(e.version, e.session, e.tool) for e in read_record(path)] == [(1, None, None),
                                                                           (1, None, "compute_ceiling")]


@pytest.mark.parametrize("through", ["file", "pipe"])
def test_a_record_past_its_size_limit_is_refused_naming_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  through: str) -> None:
    """A file is refused by its size, before it is read; a pipe (eval --record <(...)) once it has given too much."""
    from radiance_mcp.evals import record as module

    monkeypatch.setattr(module, "MAX_RECORD_BYTES", 4096)
    line = json.dumps({"version": 1, "seq": 1, "time": "t", "kind": "tool_call", "tool": "x", "ok": True}) + "\n"
    body = (line * (4096 // len(line) + 1)).encode()
    if through == "file":
        path = tmp_path / "big.jsonl"
        path.write_bytes(body)
    else:
        read, write = os.pipe()
        path = Path(f"/dev/fd/{read}")
        feeder = threading.Thread(target=lambda: (os.write(write, body), os.close(write)))
        feeder.start()
    try:
        with pytest.raises(EvalError, match=rf"record {path}: larger than 4,096 bytes; .*serve --record a new file"):
            read_record(path)
    finally:
        if through == "pipe":
            feeder.join(timeout=30)
            os.close(read)


def test_an_answer_past_its_size_limit_is_refused_naming_the_limit(tmp_path: Path, cli: CliRunner) -> None:
    from radiance_mcp.evals.score import MAX_ANSWER_BYTES

    record, answer = tmp_path / "run.jsonl", tmp_path / "answer.txt"
    record.write_text('{"version":1,"seq":0,"time":"t","kind":"session"}\n')
    with answer.open("wb") as file:
        file.truncate(MAX_ANSWER_BYTES + 1)
    done = cli("eval", "--scenario", SCENARIO.name, "--record", record, "--answer", answer, cwd=ROOT)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"radiance-mcp: --answer {answer}: larger than {MAX_ANSWER_BYTES:,} bytes; an agent's final answer is a "
        "few KiB of text: pass the answer alone, not a transcript or a log"]


def test_a_bound_record_that_lost_lines_still_chains_and_is_judged_incomplete(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines the disk refused are lost, not forged: the next line written chains to the last one written,
    and says how many were lost; the record is then judged incomplete (never passed), its chain intact."""
    from radiance_mcp.evals import record as record_module
    from radiance_mcp.evals.binding import completeness, nonce_check

    path = tmp_path / "run.jsonl"
    recorder = Recorder(path, "test", fleet="f" * 32, nonce="n" * 32)
    call = {"kind": "tool_call", "tool": "compute_ceiling", "arguments": {"service": "x"}, "ok": True}
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(record_module.os, "write", full)
    recorder.write(call, 1)
    recorder.write(call, 2)
    monkeypatch.setattr(record_module.os, "write", real_write)
    recorder.write(call, 3)
    recorder.close()
    events = read_record(path)
    assert [(e.seq, e.lost) for e in events] == [(0, None), (3, 2)]
    assert nonce_check(events, "n" * 32).status == "passed"
    check = completeness(events)
    assert check.status == "failed" and check.text.startswith(
        "incomplete: 2 event(s) the server could not write (lost); seq 1, 2 missing")
