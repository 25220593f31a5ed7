"""Hostile records give clear errors naming the line and the remedy; the writer keeps its lines readable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from radiance_mcp.core.errors import REFUSAL_META, EvalError
from radiance_mcp.evals.record import MAX_LINE_BYTES, RECORD_VERSION, Recorder, read_record

CALL = {"version": RECORD_VERSION, "session": "5e55" * 8, "seq": 1, "time": "2026-12-01T10:00:00+00:00",
        "kind": "tool_call", "tool": "compute_ceiling", "arguments": {"service": "svc-a"}, "ok": True,
        "result": {"ceiling_mib": 1}}


def _write(path: Path, *lines: str | bytes) -> Path:
    path.write_bytes(b"".join(line if isinstance(line, bytes) else line.encode() for line in lines))
    return path


@pytest.mark.parametrize(("lines", "message"), [
    ((json.dumps({**CALL, "version": 4}) + "\n",), r"line 1: record version 4, this scorer reads versions 1, 2, 3"),
    ((json.dumps({k: v for k, v in CALL.items() if k != "session"}) + "\n",), r"line 1: no session id"),
    ((json.dumps({k: v for k, v in CALL.items() if k != "version"}) + "\n",), r"line 1: record version None"),
    (("[1, 2, 3]\n",), r"line 1: a JSON list, not an event object"),
    ((json.dumps({**CALL, "kind": "telepathy"}) + "\n",), r"line 1: kind: "),
    ((json.dumps({**CALL, "surprise": 1}) + "\n",), r"line 1: surprise: "),
    (("\n\n",), r"holds no events"),
    ((b"\xff\xfe not utf-8\n",), r"line 1: not JSON"),
    (("[" * 100_000 + "\n",), r"line 1: not JSON"),
    ((json.dumps(CALL)[:40],), r"holds no events but 1 cut line\(s\)"),
])
def test_a_bad_record_is_refused_with_its_line(tmp_path: Path, lines: tuple[str, ...], message: str) -> None:
    with pytest.raises(EvalError, match=message):
        read_record(_write(tmp_path / "r.jsonl", *lines))


def test_a_huge_line_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    huge = json.dumps({**CALL, "result": {"blob": "x" * (MAX_LINE_BYTES + 10)}}) + "\n"
    with pytest.raises(EvalError, match=r"line 2 is longer than 4,194,304 bytes"):
        read_record(_write(tmp_path / "r.jsonl", json.dumps(CALL) + "\n", huge))


def test_a_missing_record_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match=r"nowhere.jsonl: cannot be read"):
        read_record(tmp_path / "nowhere.jsonl")


def test_the_recorder_refuses_a_path_it_cannot_write(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match=r"--record .*: cannot be opened for appending"):
        Recorder(tmp_path / "no-such-dir" / "r.jsonl")


async def test_the_recorder_leaves_out_a_result_too_large_and_appends_sessions(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"

    class Ctx:
        method, request_id = "tools/call", 7
        params = {"name": "plan_free_vram", "arguments": {"note": "y" * 10}}

    async def huge(_: object) -> dict[str, object]:
        return {"isError": False, "structuredContent": {"blob": "z" * (2 * 1024 * 1024)}, "content": []}

    for _ in range(2):  # two sessions append to one file
        recorder = Recorder(path, "test")
        await recorder(Ctx(), huge)
        recorder.close()
    events = read_record(path)
    assert [e.kind for e in events] == ["session", "tool_call", "session", "tool_call"]
    assert events[1].result is None and events[1].result_bytes and events[1].result_bytes > 2 * 1024 * 1024


async def test_the_recorder_keeps_a_huge_call_readable(tmp_path: Path) -> None:
    """A client's 5 MiB argument (stdio has no body limit) leaves out the arguments, not the event."""
    path = tmp_path / "r.jsonl"

    class Ctx:
        method, request_id = "tools/call", 1
        params = {"name": "audit_step_shape", "arguments": {"proven_log_text": "\ud800" + "l" * (5 * 1024 * 1024)}}

    async def refused(_: object) -> dict[str, object]:
        return {"isError": True, "content": [{"type": "text", "text": "too long"}],
                "_meta": {REFUSAL_META: {"rule": "argument_names"}}}

    recorder = Recorder(path)
    await recorder(Ctx(), refused)
    recorder.close()
    call = read_record(path)[1]
    assert call.arguments is None and call.arguments_bytes and call.arguments_bytes > 5 * 1024 * 1024
    assert (call.ok, call.rule) == (False, "argument_names")
