"""Issue 22, item 6: a ledger file, or a directory on its path, changed while a tool reads it.

A directory under the log roots flipping between a real directory and a symlink (in the roots, and out
of them), and the log renamed away and back, while an agent reads the log through the SDK's MCP client
(in memory). Before the fix, of 600 reads here (4 runs), 2-7 ended in "Error executing tool
read_budget_table" (a FileNotFoundError or OSError(EINVAL) from os.path.realpath, which lstat()s a link
and readlink()s it a moment later), and 4-10 read the file out of the roots: the path was resolved and
checked, then opened by name, through the directory that had meanwhile become a symlink out of them.

Each read must now be the file under the roots read whole, or a clear error naming the path: no such
file, outside the roots, or renamed or removed while it was read (call again).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from mcp import Client
from mcp_call import call

from radiance_mcp.app.server import build_server
from radiance_mcp.core.errors import SourceError
from radiance_mcp.sources.config import EXAMPLES_DIR, Fleet, ServerSettings
from radiance_mcp.sources.ledger_file import open_ledger
from radiance_mcp.sources.ledgers import LocalFileSource
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.sources.scripts import read_small

READS = 600
DEADLINE_S = 60.0
"""The loop stops at READS reads or this long, whichever comes first (a bound, not a measurement)."""
PAUSE_S = 0.0
"""Between two changes (sleep(0) hands the GIL over): reads land in every state, and between the steps of one read."""
REST_S = 0.001
"""After a change that leaves the log readable: a read that lands there reads it (so some reads succeed)."""
CLEAR_ERRORS = ("no such file", "outside the allowed log roots", "was renamed or removed while it was read")


def _flip(roots: Path, stop: threading.Event, failures: list[BaseException]) -> None:
    """Until stop, cycle roots/d: a real directory, a symlink out of the roots, a symlink to roots/real (the
    log renamed away and back in it), and a real directory again; an error of its own goes to failures."""
    d, real, outside = roots / "d", roots / "real", roots.parent / "outside"
    steps = (lambda: os.rename(d, real), lambda: os.symlink(outside, d), lambda: os.unlink(d),
             lambda: os.symlink(real, d), lambda: os.rename(real / "radiance.log", real / "away.log"),
             lambda: os.rename(real / "away.log", real / "radiance.log"), lambda: os.unlink(d),
             lambda: os.rename(real, d))
    rests = {3, 5, 7}  # after each, the log is there to be read (through the symlink, or in the directory)
    try:
        while not stop.is_set():
            for number, step in enumerate(steps):
                step()
                time.sleep(REST_S if number in rests else PAUSE_S)
    except BaseException as exc:
        failures.append(exc)


@pytest.mark.slow
async def test_a_directory_flipped_to_a_symlink_and_a_log_renamed_mid_read_give_a_read_or_a_clear_error(
        tmp_path: Path) -> None:
    roots, outside = tmp_path / "roots", tmp_path / "outside"
    (roots / "d").mkdir(parents=True)
    outside.mkdir()
    text = (EXAMPLES_DIR / "frank-archon.log").read_text(encoding="utf-8")
    assert "settled at 2.01 GiB" in text
    (roots / "d" / "radiance.log").write_text(text, encoding="utf-8")
    # Out of the roots: a ledger that reads as well, with another figure (2.01 GiB free at settle: 1.01 here).
    (outside / "radiance.log").write_text(text.replace("settled at 2.01 GiB", "settled at 1.01 GiB"),
                                          encoding="utf-8")
    log = str(roots / "d" / "radiance.log")
    async with Client(build_server(Runtime(Fleet(server=ServerSettings(log_roots=(str(roots),)))))) as client:
        error, expected = await call(client, "read_budget_table", log=log)
        assert not error, expected
        stop = threading.Event()
        failures: list[BaseException] = []
        flipper = threading.Thread(target=_flip, args=(roots, stop, failures), daemon=True)
        flipper.start()
        answers: list[tuple[bool, object]] = []
        try:
            deadline = time.monotonic() + DEADLINE_S
            while len(answers) < READS and time.monotonic() < deadline:
                answers.append(await call(client, "read_budget_table", log=log))
        finally:
            stop.set()
            flipper.join(timeout=10)
    assert not flipper.is_alive() and not failures  # the flips went on to the last read
    errors = [str(answer) for error, answer in answers if error]
    reads = [answer for error, answer in answers if not error]
    assert not [e for e in errors if "Error executing tool" in e or not any(c in e for c in CLEAR_ERRORS)]
    assert all(str(roots / "d" / "radiance.log") in e or str(roots / "real" / "radiance.log") in e for e in errors)
    # A read is the file under the roots (its label is the path as resolved: through d or real).
    same = json.dumps(expected).replace("/real/", "/d/")
    assert all(json.dumps(read).replace("/real/", "/d/") == same for read in reads), "read out of the roots"
    assert reads, "no read succeeded at all"


async def test_a_checked_path_is_opened_with_no_symlink_followed_and_a_fifo_is_never_waited_on(tmp_path: Path) -> None:
    """What the flips above meet, one at a time: a directory of a checked (resolved) path that is now a
    symlink, and a FIFO where the check saw a regular file (opened plainly, it waits for a writer)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "radiance.log").write_text((EXAMPLES_DIR / "frank-archon.log").read_text())
    (tmp_path / "d").symlink_to(tmp_path / "real")
    through = tmp_path / "d" / "radiance.log"
    assert (await LocalFileSource(through).read()).source == str(through)  # the operator's path: followed
    with pytest.raises(SourceError, match=f"^{through}: was renamed or removed while it was read.*; call again$"):
        await LocalFileSource(through, follow_symlinks=False).read()
    fifo = tmp_path / "radiance.fifo"
    os.mkfifo(fifo)
    for follow_symlinks in (True, False):
        with pytest.raises(OSError, match="not a regular file"):
            open_ledger(fifo, follow_symlinks=follow_symlinks)


def test_a_serve_script_an_agent_named_is_opened_as_a_ledger_is(tmp_path: Path) -> None:
    """The same race for a serve script or env file: checked against the roots, then opened by name, it was read
    through a directory flipped to a symlink out of them meanwhile. An agent's path is now opened part by part
    with no symlink followed; the fleet file's own path still follows its symlinks."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "serve.sh").write_text("#!/bin/bash\necho out of the roots\n")
    (tmp_path / "d").symlink_to(tmp_path / "outside")
    flipped = tmp_path / "d" / "serve.sh"
    assert "out of the roots" in read_small(flipped, "script")  # a configured path: followed
    with pytest.raises(SourceError, match=r"^script='.*/d/serve\.sh': was renamed or removed while it was read"):
        read_small(flipped, "script", follow_symlinks=False)
    os.mkfifo(tmp_path / "env.fifo")
    with pytest.raises(SourceError, match="env_file=.*env.fifo"):  # never waited on
        read_small(tmp_path / "env.fifo", "env_file", follow_symlinks=False)
