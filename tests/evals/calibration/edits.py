"""The calibration set's edits: a recorded run's answer said another way, and its record edited or forged.

``generate.py`` applies them to recorded runs (``Recorded``): an answer edit returns the answer, a record
edit or a forge the record's lines (a string is a line written as is: a cut line). A forger holds no nonce, so
its lines do not chain (record.chain_problem); an edit ``resigned`` (or a ``sign``ed one) is bound to the
harness's nonce again, as a server that returns what the tools would not writes it: only the replay, the
request log or the record's completeness can tell.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from radiance_mcp.evals.record import sign

Line = dict[str, Any]
CUT = '{"version":3,"session":"cut","seq":9,"time":"2026-12-01T10:00:09.000+00:00","kind":"tool_ca'
"""A line cut mid-line, as a server killed while writing leaves it."""

@dataclass
class Recorded:
    lines: list[Line]
    answer: str
    requests: list[Line] | None = None
    """The requests the fleet's endpoints served, as the harness keeps them beside the record."""
    nonce: str = ""
    """The nonce the harness gave the run's server."""


# ---------------------------------------------------------------------------------------
# Answer edits: the recorded answer, said another way (or wrongly)


def dump(run: Recorded) -> str:
    """The raw JSON of every tool result, as the answer."""
    return "\n".join(json.dumps(line.get("result"), ensure_ascii=False) for line in run.lines
                     if line.get("kind") == "tool_call" and "result" in line)


def replaced(*pairs: tuple[str, str]) -> Callable[[Recorded], str]:
    def edit(run: Recorded) -> str:
        text = run.answer
        for old, new in pairs:
            if old not in text:
                raise SystemExit(f"answer edit: {old!r} is not in the answer:\n{text}")
            text = text.replace(old, new)
        return text
    return edit


def appended(extra: str) -> Callable[[Recorded], str]:
    return lambda run: run.answer + "\n" + extra


def fixed(text: str) -> Callable[[Recorded], str]:
    return lambda run: text


# ---------------------------------------------------------------------------------------
# Record edits: records anyone can write


def hand_written(run: Recorded) -> list[Line]:
    """One line by hand: no session line, time 'x', no arguments, no result."""
    return [{"version": 2, "session": run.lines[0]["session"], "seq": 1, "time": "x", "kind": "tool_call",
             "tool": "compute_ceiling", "ok": True}]


def reversed_same_seq(run: Recorded) -> list[Line]:
    """The lines in reverse order, every seq equal."""
    return [{**line, "seq": 1} for line in reversed(run.lines)]


def _borrowed(reference: Recorded, tool: str, run: Recorded, seq: int) -> Line:
    """A copy of the reference's line of the tool, as if the run's session had made it at seq."""
    line = copy.deepcopy(next(x for x in reference.lines if x.get("tool") == tool))
    line["session"], line["seq"] = run.lines[0]["session"], seq
    return line


def forged_contract(run: Recorded, reference: Recorded) -> list[Line]:
    """The run's own lines, and the reference's check_pool_contract line inserted as if this session made it."""
    line = _borrowed(reference, "check_pool_contract", run, 1)
    return [run.lines[0], line, *[{**x, "seq": x["seq"] + 1} for x in run.lines[1:]]]


def ok_from_reference(run: Recorded, reference: Recorded) -> list[Line]:
    """The run's refused compute_ceiling call made an answer, the reference's result, bound to the harness's nonce:
    a result the tool does not return for those arguments."""
    lines = copy.deepcopy(run.lines)
    done = next(x for x in reference.lines if x.get("tool") == "compute_ceiling" and x.get("ok"))
    line = next(x for x in lines if x.get("tool") == "compute_ceiling" and not x.get("ok"))
    for key in ("error", "rule"):
        line.pop(key, None)
    line |= {"ok": True, "result": copy.deepcopy(done["result"])}
    return sign(lines, run.nonce)


def probe_inserted(run: Recorded, reference: Recorded) -> list[Line]:
    """The reference's token_count_probe line inserted into a run that sent no request, bound to the nonce."""
    return sign([*run.lines, _borrowed(reference, "token_count_probe", run, len(run.lines))], run.nonce)


def forged_cold(run: Recorded, reference: Recorded) -> list[Line]:
    """The run's lines, then a decode_probe line copied from the reference with its figures set to the quoted rate."""
    line = _borrowed(reference, "decode_probe", run, len(run.lines))
    line["result"]["decode_tokens_per_s"] = 92.7
    line["result"]["generated_tokens"] = 8
    line["arguments"]["gen_tokens"] = 512
    return [*run.lines, line]


def unbound(run: Recorded) -> list[Line]:
    """The run's lines as a forger writes them without the nonce: no mac, the session line unbound."""
    return [{k: v for k, v in line.items() if k not in ("mac", "nonce")} | (
        {"bound": False} if line["kind"] == "session" else {}) for line in run.lines]


def wrong_nonce(run: Recorded) -> list[Line]:
    """The run's lines bound to a nonce of the forger's own, not the harness's."""
    return sign(unbound(run), "0" * 32)


def resigned(edit: Callable[[list[Line]], list[Line]]) -> Callable[[Recorded], list[Line]]:
    """The run's lines edited, then bound again to the harness's nonce: what only a replay or the request log
    can tell (a server that holds the nonce and returns what the tools would not)."""
    return lambda run: sign(edit(copy.deepcopy(run.lines)), run.nonce)


def ceiling_raised(lines: list[Line]) -> list[Line]:
    line = next(x for x in lines if x.get("tool") == "compute_ceiling" and x.get("ok"))
    line["result"]["headroom_mib"] = line["result"]["headroom_mib"] + 500
    return lines


def lost_line(run: Recorded) -> list[Line]:
    """A tool call's line the server could not write (a full disk): the next line says so (lost: 1)."""
    lines = copy.deepcopy(run.lines)
    at = next(i for i, x in enumerate(lines) if x.get("kind") == "tool_call" and i > 1)
    del lines[at]
    lines[at]["lost"] = 1
    return sign(lines, run.nonce)


def version(number: int) -> Callable[[Recorded], list[Line]]:
    """The run's lines as a server of record format 1 or 2 wrote them (no binding; version 1: no session)."""
    dropped = {"fleet", "bound", "nonce", "mac", *(("session", "lost") if number == 1 else ())}
    return lambda run: [{k: v for k, v in line.items() if k not in dropped} | {"version": number}
                        for line in run.lines]
